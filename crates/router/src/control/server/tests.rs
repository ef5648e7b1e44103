//! The control server against misbehaving clients, driven by a fake datapath loop that measures
//! how long each turn of control work takes.

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use super::*;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lsctl-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// A `stat`-sized reply: about what 1000 classes produce (~600 KB).
fn big_reply() -> String {
    let row = format!("{{\"name\":\"c\",\"pad\":\"{}\"}}", "x".repeat(560));
    format!("{{\"ok\":true,\"rows\":[{}]}}", vec![row; 1000].join(","))
}

#[test]
fn a_client_that_never_reads_and_one_that_never_ends_its_line_cannot_stall_the_loop() {
    let dir = scratch("stall");
    let path = dir.join("ctl.sock");
    let mut srv = Server::bind(&path).expect("bind");
    let reply = big_reply();
    let p = path.clone();
    let clients = std::thread::spawn(move || {
        let mut silent = UnixStream::connect(&p).expect("connect");
        silent.write_all(b"{\"cmd\":\"stat\"}\n").expect("send");
        let mut endless = UnixStream::connect(&p).expect("connect");
        endless
            .set_write_timeout(Some(Duration::from_millis(50)))
            .ok();
        let t0 = Instant::now();
        let chunk = [b'x'; 8192];
        let mut sent = 0usize;
        while t0.elapsed() < Duration::from_millis(2500) {
            if let Ok(n) = endless.write(&chunk) {
                sent += n;
            }
        }
        // A well-behaved client is still answered.
        let mut good = UnixStream::connect(&p).expect("connect");
        good.write_all(b"{\"cmd\":\"stat\"}\n").expect("send");
        good.set_read_timeout(Some(Duration::from_secs(5))).ok();
        let mut line = String::new();
        let got = BufReader::new(&good)
            .read_line(&mut line)
            .map(|_| line.len());
        (silent, endless, sent, got)
    });
    // The fake datapath: turns of control work between "forwarding"; the longest turn is what a
    // misbehaving client could add to a packet's wait.
    let t0 = Instant::now();
    let mut worst = Duration::ZERO;
    let mut turns = 0u64;
    while t0.elapsed() < Duration::from_millis(3500) {
        let now = sys::monotonic_ns();
        let t = Instant::now();
        for (id, _line) in srv.poll(now) {
            srv.reply(id, &reply, now);
        }
        worst = worst.max(t.elapsed());
        turns += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    let (_silent, _endless, sent, got) = clients.join().expect("clients");
    for _ in 0..50 {
        let now = sys::monotonic_ns();
        for (id, _) in srv.poll(now) {
            srv.reply(id, &reply, now);
        }
    }
    eprintln!(
        "{turns} turns, longest {worst:?}; endless client wrote {sent} bytes; {:?}",
        srv.stats
    );
    assert!(worst < Duration::from_millis(50), "a turn took {worst:?}");
    assert_eq!(
        got.ok(),
        Some(reply.len() + 1),
        "the good client got its whole reply"
    );
    assert_eq!(srv.stats.slow_dropped, 1, "{:?}", srv.stats);
    assert_eq!(srv.stats.oversize_refused, 1, "{:?}", srv.stats);
    assert!(
        sent > MAX_REQUEST,
        "the endless client wrote past the bound"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clients_beyond_the_limit_are_refused_and_counted() {
    let dir = scratch("busy");
    let path = dir.join("ctl.sock");
    let mut srv = Server::bind(&path).expect("bind");
    let conns: Vec<UnixStream> = (0..MAX_CLIENTS + 3)
        .map(|_| UnixStream::connect(&path).expect("connect"))
        .collect();
    srv.poll(sys::monotonic_ns());
    assert_eq!(srv.stats.clients, MAX_CLIENTS);
    assert_eq!(srv.stats.refused_busy, 3);
    drop(conns);
    srv.poll(sys::monotonic_ns());
    assert_eq!(srv.stats.clients, 0, "closed clients are dropped");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--control` naming a file that is not a socket (a typo, a policy file) leaves it alone;
/// a stale socket of a dead shaper is replaced.
#[test]
fn only_a_stale_socket_is_replaced() {
    let dir = std::env::temp_dir().join(format!("lsctl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("policy.toml");
    std::fs::write(&file, "precious").expect("write");
    let e = match Server::bind(&file) {
        Ok(_) => panic!("a regular file was replaced by the control socket"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains("not a socket"), "{e}");
    assert_eq!(
        std::fs::read_to_string(&file).ok().as_deref(),
        Some("precious")
    );
    let sock = dir.join("ctl.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("stale socket"));
    assert!(Server::bind(&sock).is_ok(), "a stale socket is replaced");
    let _ = std::fs::remove_dir_all(&dir);
}
