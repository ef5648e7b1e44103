//! The measurements of one connection at a time (seed 000): bulk TCP goodput, UDP
//! request/response rates, and the round trip of priority probes under a saturating bulk flow.

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};

use super::bed::{bed, n_classes, unlimited, Hosts, Via, PFIFO};
use super::flood::{set_tos, REPEAT};
use super::Table;
use crate::testbed::in_ns;

pub(super) fn throughput(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "router B",
            "TCP goodput (Mbit/s)",
            "relative to no shaper",
            "range (Mbit/s)",
        ],
        "One bulk TCP connection A → C (kernel sockets, default buffers), 1500-byte MTU, median \
         of `--repeat` connections (a new one each time: a new ephemeral port, so a new flow \
         hash; with `--workers 2` that hash picks the worker that receives the connection's \
         frames in each direction), with the lowest and highest; the shapers' policies never \
         limit (10 Gbit/s), so only their forwarding cost shows; the CBQ row has three classes \
         like seed 000 Table 1, which compares CBQ on and off.",
    );
    let mut base = None;
    let cbq3 = n_classes("cbq", 3, 10_000, PFIFO);
    let two = n_classes("htb", 2, 10_000, PFIFO);
    let rows: [(&str, Via, String); 12] = [
        (Via::None.name(), Via::None, String::new()),
        ("kernel HTB, 1 class", Via::Kernel, unlimited(PFIFO)),
        ("linkshare HTB, 1 class", Via::Linkshare, unlimited(PFIFO)),
        (
            "linkshare HTB, 1 class, --io xdp",
            Via::LinkshareXdp,
            unlimited(PFIFO),
        ),
        (
            "linkshare HTB, 1 class, --io xdp-generic",
            Via::LinkshareXdpGeneric,
            unlimited(PFIFO),
        ),
        ("linkshare CBQ, 3 classes", Via::Linkshare, cbq3),
        (
            "linkshare HTB, 1 class, --rx-coalesce-us 50",
            Via::LinkshareCoalesce,
            unlimited(PFIFO),
        ),
        (
            "linkshare HTB, --rx-ring v3",
            Via::LinkshareV3,
            unlimited(PFIFO),
        ),
        (
            "linkshare HTB, 2 classes, --workers 2",
            Via::LinkshareWorkers2,
            two.clone(),
        ),
        (
            "linkshare HTB, 2 classes, --io xdp --workers 2",
            Via::LinkshareXdpWorkers2,
            two.clone(),
        ),
        (
            "linkshare HTB, 2 classes, --workers 2 --rx-split direction",
            Via::LinkshareWorkers2Dir,
            two.clone(),
        ),
        (
            "linkshare HTB, 2 classes, --io xdp --workers 2 --rx-split direction",
            Via::LinkshareXdpWorkers2Dir,
            two,
        ),
    ];
    let n = REPEAT.load(std::sync::atomic::Ordering::Relaxed).max(1);
    for (label, via, policy) in rows {
        let b = bed(via, &policy)?;
        let mut gs = Vec::with_capacity(n);
        for _ in 0..n {
            gs.push(tcp_goodput(&b.hosts(), secs)? / 1e6);
        }
        gs.sort_by(f64::total_cmp);
        let g = gs[gs.len() / 2];
        let rel = base.map(|x: f64| format!("{:.0} %", 100.0 * g / x));
        base.get_or_insert(g);
        t.row(vec![
            label.into(),
            format!("{g:.0}"),
            rel.unwrap_or_else(|| "100 %".into()),
            format!("{:.0}–{:.0}", gs[0], gs[gs.len() - 1]),
        ]);
    }
    Ok(t)
}

/// Goodput of one bulk TCP stream A → C in bit/s, after a 0.5 s warm-up.
pub(super) fn tcp_goodput(bed: &Hosts, secs: f64) -> anyhow::Result<f64> {
    let c = bed.ns_c().to_string();
    let ip = bed.addr_c();
    let listener = in_ns(&c, move || TcpListener::bind(SocketAddrV4::new(ip, 5201)))??;
    let server = std::thread::spawn(move || -> f64 {
        let Ok((mut s, _)) = listener.accept() else {
            return 0.0;
        };
        let mut buf = vec![0u8; 1 << 16];
        let t0 = Instant::now();
        let (mut counted, mut start) = (0u64, None);
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            if t0.elapsed() >= Duration::from_millis(500) {
                start.get_or_insert_with(Instant::now);
                counted += n as u64;
            }
        }
        let el = start
            .map(|s: Instant| s.elapsed().as_secs_f64())
            .unwrap_or(1.0);
        counted as f64 * 8.0 / el
    });
    let a = bed.ns_a().to_string();
    in_ns(&a, move || -> std::io::Result<()> {
        let mut s = TcpStream::connect_timeout(
            &std::net::SocketAddr::V4(SocketAddrV4::new(ip, 5201)),
            Duration::from_secs(3),
        )?;
        let buf = vec![0x5au8; 1 << 16];
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < secs + 0.5 {
            s.write_all(&buf)?;
        }
        Ok(())
    })?
    .context("TCP sender A → C")?;
    server
        .join()
        .map_err(|_| anyhow!("the TCP receiver panicked"))
}

/// A UDP server in namespace C that answers every datagram: with `reply` bytes, or (`None`) by
/// echoing it. Stops when dropped.
pub(super) struct Responder {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Responder {
    fn start(ns: &str, addr: SocketAddrV4, reply: Option<usize>) -> anyhow::Result<Responder> {
        let sock = in_ns(ns, move || UdpSocket::bind(addr))??;
        sock.set_read_timeout(Some(Duration::from_millis(200)))?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            let fixed = reply.map(|n| vec![0u8; n]);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    let out = fixed.as_deref().unwrap_or(&buf[..n]);
                    let _ = sock.send_to(out, from);
                }
            }
        });
        Ok(Responder {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Transactions per second of a UDP request/response loop A ↔ C with the given sizes.
pub(super) fn udp_rr(bed: &Hosts, req: usize, resp: usize, secs: f64) -> anyhow::Result<f64> {
    let c = bed.ns_c().to_string();
    let ip = bed.addr_c();
    let _server = Responder::start(&c, SocketAddrV4::new(ip, 5202), Some(resp))?;
    let a = bed.ns_a().to_string();
    let n = in_ns(&a, move || -> std::io::Result<f64> {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        s.connect(SocketAddrV4::new(ip, 5202))?;
        s.set_read_timeout(Some(Duration::from_millis(100)))?;
        let msg = vec![0u8; req];
        let mut buf = vec![0u8; 65536];
        // Warm up (ARP, caches), then count.
        let mut run = |d: f64| -> std::io::Result<(u64, f64)> {
            let t0 = Instant::now();
            let mut n = 0;
            while t0.elapsed().as_secs_f64() < d {
                s.send(&msg)?;
                if s.recv(&mut buf).is_ok() {
                    n += 1;
                }
            }
            Ok((n, t0.elapsed().as_secs_f64()))
        };
        run(0.3)?;
        let (n, el) = run(secs)?;
        Ok(n as f64 / el)
    })?;
    n.context("UDP request/response A ↔ C")
}

pub(super) fn request_response(secs: f64) -> anyhow::Result<Table> {
    const SIZES: [(usize, usize); 4] = [(1, 1), (64, 64), (1024, 64), (8192, 64)];
    let mut t = Table::new(
        &[
            "request/response (bytes)",
            "no shaper: trans/s (RTT µs)",
            "kernel HTB: trans/s (RTT µs)",
            "linkshare HTB: trans/s (RTT µs)",
            "linkshare CBQ, 3 classes: trans/s (RTT µs)",
            "CBQ overhead per transaction (µs)",
            "linkshare HTB --rx-ring v3: trans/s (RTT µs)",
            "linkshare HTB --io xdp: trans/s (RTT µs)",
            "linkshare HTB --rx-coalesce-us 50: trans/s (RTT µs)",
        ],
        "One UDP request/response at a time A ↔ C (netperf UDP_RR style); RTT = 1 / rate. Both \
         directions cross router B: the request through the shaped direction, the response \
         through the reverse one (unshaped, but forwarded by the same bridge or linkshare \
         process). 8192-byte requests are IP fragments. Seed 000 Tables 2-3 found about 10 µs per \
         packet for CBQ in 1997.",
    );
    let mut cols: Vec<Vec<f64>> = Vec::new();
    let cbq3 = n_classes("cbq", 3, 10_000, PFIFO);
    let cols_spec: [(Via, String); 7] = [
        (Via::None, String::new()),
        (Via::Kernel, unlimited(PFIFO)),
        (Via::Linkshare, unlimited(PFIFO)),
        (Via::Linkshare, cbq3),
        (Via::LinkshareV3, unlimited(PFIFO)),
        (Via::LinkshareXdp, unlimited(PFIFO)),
        (Via::LinkshareCoalesce, unlimited(PFIFO)),
    ];
    for (via, policy) in cols_spec {
        let b = bed(via, &policy)?;
        let mut col = Vec::new();
        for (q, r) in SIZES {
            col.push(udp_rr(&b.hosts(), q, r, secs)?);
        }
        cols.push(col);
    }
    for (i, (q, r)) in SIZES.iter().enumerate() {
        let cell = |tps: f64| format!("{tps:.0} ({:.1})", 1e6 / tps);
        let over = 1e6 / cols[3][i] - 1e6 / cols[0][i];
        t.row(vec![
            format!("{q}/{r}"),
            cell(cols[0][i]),
            cell(cols[1][i]),
            cell(cols[2][i]),
            cell(cols[3][i]),
            format!("{over:.1}"),
            cell(cols[4][i]),
            cell(cols[5][i]),
            cell(cols[6][i]),
        ]);
    }
    Ok(t)
}
/// UDP echo probes with TOS `tos` from A to C every `gap` for `secs`; RTTs in µs.
pub(super) fn probe_rtts(
    bed: &Hosts,
    tos: u8,
    gap: Duration,
    secs: f64,
) -> anyhow::Result<Vec<f64>> {
    Ok(probes(bed, tos, gap, secs, Duration::from_millis(500))?.1)
}

/// [`probe_rtts`] that also counts the probes sent: `(sent, RTTs in µs of those answered)`;
/// a probe is given up after `wait`.
pub(super) fn probes(
    bed: &Hosts,
    tos: u8,
    gap: Duration,
    secs: f64,
    wait: Duration,
) -> anyhow::Result<(u64, Vec<f64>)> {
    let c = bed.ns_c().to_string();
    let ip = bed.addr_c();
    let _echo = Responder::start(&c, SocketAddrV4::new(ip, 5203), None)?;
    let a = bed.ns_a().to_string();
    let rtts = in_ns(&a, move || -> std::io::Result<(u64, Vec<f64>)> {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        set_tos(&s, tos)?;
        s.connect(SocketAddrV4::new(ip, 5203))?;
        s.set_read_timeout(Some(wait))?;
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        let t0 = Instant::now();
        let mut seq = 0u64;
        while t0.elapsed().as_secs_f64() < secs {
            seq += 1;
            let sent = Instant::now();
            s.send(&seq.to_be_bytes())?;
            // Skip late replies of earlier probes.
            while let Ok(n) = s.recv(&mut buf) {
                if n >= 8 && buf[..8] == seq.to_be_bytes() {
                    out.push(sent.elapsed().as_secs_f64() * 1e6);
                    break;
                }
            }
            std::thread::sleep(gap);
        }
        Ok((seq, out))
    })?;
    rtts.context("UDP probes A ↔ C")
}

pub(super) fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

pub(super) const PRIORITY_POLICY: &str = r#"
qdisc = "htb"
default = "bulk"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "interactive"
parent = "root"
rate = "1mbit"
ceil = "10mbit"
prio = 0
[[class]]
name = "bulk"
parent = "root"
rate = "9mbit"
ceil = "10mbit"
prio = 1
leaf = { type = "pfifo", limit = 100 }
[[filter]]
class = "interactive"
dscp = "ef"
"#;

pub(super) fn priority(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "router B",
            "EF probe RTT p50 (µs)",
            "p99 (µs)",
            "bulk TCP goodput (Mbit/s)",
            "best-effort probe RTT p50 (µs)",
        ],
        "A 10 Mbit/s HTB link: `interactive` (prio 0, EF) and `bulk` (prio 1, pfifo of 100 \
         packets) both borrowing up to the link. One bulk TCP stream saturates it while UDP \
         echo probes (EF, every 10 ms) measure the priority class's round trip; a second probe \
         series without EF shows what the bulk class's queue costs.",
    );
    for via in [Via::Kernel, Via::Linkshare] {
        let b = bed(via, PRIORITY_POLICY)?;
        let hosts = b.hosts();
        let (bed_ref, s2) = (&hosts, secs);
        let (rtts, be, goodput) = std::thread::scope(|sc| -> anyhow::Result<_> {
            let bulk = sc.spawn(move || tcp_goodput(bed_ref, s2 + 1.0));
            std::thread::sleep(Duration::from_millis(700));
            let ef = probe_rtts(bed_ref, 46 << 2, Duration::from_millis(10), s2 / 2.0);
            let be = probe_rtts(bed_ref, 0, Duration::from_millis(10), s2 / 2.0);
            let g = bulk
                .join()
                .map_err(|_| anyhow!("the bulk sender panicked"))??;
            Ok((ef?, be?, g))
        })?;
        let (mut rtts, mut be) = (rtts, be);
        t.row(vec![
            via.name().into(),
            format!("{:.0}", quantile(&mut rtts, 0.5)),
            format!("{:.0}", quantile(&mut rtts, 0.99)),
            format!("{:.2}", goodput / 1e6),
            format!("{:.0}", quantile(&mut be, 0.5)),
        ]);
    }
    Ok(t)
}
