//! The HTTP head parser and response framing.

use super::*;

fn done(buf: &[u8]) -> Request {
    match parse_head(buf) {
        Head::Done(r) => r,
        Head::Partial => panic!("partial: {:?}", String::from_utf8_lossy(buf)),
        Head::Bad => panic!("bad: {:?}", String::from_utf8_lossy(buf)),
    }
}

#[test]
fn head_needs_its_blank_line() {
    assert!(matches!(
        parse_head(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"),
        Head::Partial
    ));
    let r = done(
        b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nAccept: Application/OpenMetrics-Text\r\n\r\n",
    );
    assert_eq!(r.method, "GET");
    assert_eq!(r.path, "/metrics");
    assert_eq!(r.accept, "application/openmetrics-text");
    // Bare LF accepted.
    assert_eq!(done(b"HEAD / HTTP/1.0\n\n").path, "/");
}

#[test]
fn malformed_heads_are_bad() {
    for h in [
        &b"GET\r\n\r\n"[..],
        b"GET metrics HTTP/1.1\r\n\r\n",
        b"GET / SPDY\r\n\r\n",
        b"\xff / HTTP/1.1\r\n\r\n",
    ] {
        assert!(
            matches!(parse_head(h), Head::Bad),
            "{:?}",
            String::from_utf8_lossy(h)
        );
    }
}

#[test]
fn responses_are_framed_and_closed() {
    let r = Route::text(404, "nope\n");
    let b = String::from_utf8(response_bytes(&r, false)).expect("utf-8");
    assert!(b.starts_with("HTTP/1.1 404 Not Found\r\n"), "{b}");
    assert!(b.contains("Content-Length: 5\r\n"), "{b}");
    assert!(b.contains("Connection: close\r\n"), "{b}");
    assert!(b.ends_with("\r\n\r\nnope\n"), "{b}");
    let h = String::from_utf8(response_bytes(&Route::text(405, "x"), true)).expect("utf-8");
    assert!(
        h.contains("Allow: GET, HEAD\r\n") && h.ends_with("\r\n\r\n"),
        "{h}"
    );
}

/// A real socket, served turn by turn without epoll: a GET is answered and closed, another
/// method gets 405, and an oversize head 431.
#[test]
fn serves_over_tcp() {
    use std::io::{Read, Write};
    let Ok(mut h) = Http::bind("127.0.0.1:0".parse().expect("addr")) else {
        panic!("cannot bind loopback")
    };
    let addr = h.local_addr().expect("addr");
    let ask = |h: &mut Http, req: &[u8]| -> String {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.write_all(req).expect("write");
        s.set_nonblocking(true).expect("nb");
        let mut got = Vec::new();
        for _ in 0..200 {
            h.serve(0, &mut |r| Route::text(200, &format!("path {}", r.path)));
            let mut b = [0u8; 4096];
            match s.read(&mut b) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&b[..n]),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    };
    let ok = ask(&mut h, b"GET /a HTTP/1.1\r\n\r\n");
    assert!(
        ok.starts_with("HTTP/1.1 200 OK") && ok.ends_with("path /a"),
        "{ok}"
    );
    let post = ask(&mut h, b"POST /a HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    let big = vec![b'a'; MAX_HEAD + 100];
    let mut req = b"GET /".to_vec();
    req.extend_from_slice(&big);
    let long = ask(&mut h, &req);
    assert!(long.starts_with("HTTP/1.1 431"), "{long}");
    assert_eq!(h.stats.requests, 2);
    // The lingering closes end when the clients (dropped by `ask`) close.
    for _ in 0..200 {
        h.serve(0, &mut |r| Route::text(200, &format!("path {}", r.path)));
        if !h.busy() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(!h.busy(), "every client closed");
}

/// Serve `h` from a thread until `stop`; the test's client side blocks as real clients do.
fn serve_in_background(
    mut h: Http,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Http> {
    std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let now = t0.elapsed().as_nanos() as u64;
            h.serve(now, &mut |r| Route::text(200, &format!("path {}", r.path)));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        h
    })
}

/// `printf 'GET / …' | nc -N`: the client shuts its sending side right after the request, and
/// must still get its response (it got nothing 12 times in 20).
#[test]
fn a_request_followed_by_a_half_close_is_answered() {
    use std::io::{Read, Write};
    let h = Http::bind("127.0.0.1:0".parse().expect("addr")).expect("bind loopback");
    let addr = h.local_addr().expect("addr");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = serve_in_background(h, stop.clone());
    for i in 0..20 {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.write_all(format!("GET /q{i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .expect("write");
        s.shutdown(std::net::Shutdown::Write).expect("half-close");
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .expect("timeout");
        let mut got = String::new();
        s.read_to_string(&mut got).expect("read the response");
        assert!(
            got.starts_with("HTTP/1.1 200 OK") && got.ends_with(&format!("path /q{i}")),
            "request {i}: {got:?}"
        );
    }
    // A half-close before the head is complete is a disconnect, not a request.
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET /partial HTTP/1.1\r\n").expect("write");
    s.shutdown(std::net::Shutdown::Write).expect("half-close");
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("timeout");
    let mut got = String::new();
    let _ = s.read_to_string(&mut got);
    assert_eq!(got, "", "no answer to an incomplete head");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let h = server.join().expect("server thread");
    assert_eq!(h.stats.requests, 20);
}

/// Heads past MAX_HEAD get 431 whatever their size and however they arrive (a 10 KiB head read
/// in one go was answered 200), and a client that sends 64 KiB more than it should still
/// reads its whole 431: the server reads and discards instead of resetting the connection.
#[test]
fn oversize_heads_get_a_whole_431() {
    use std::io::{Read, Write};
    let h = Http::bind("127.0.0.1:0".parse().expect("addr")).expect("bind loopback");
    let addr = h.local_addr().expect("addr");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = serve_in_background(h, stop.clone());
    for size in [MAX_HEAD + 1_000, 12 << 10, 64 << 10] {
        let mut req = b"GET / HTTP/1.1\r\nX-Pad: ".to_vec();
        req.extend(std::iter::repeat_n(b'a', size));
        req.extend_from_slice(b"\r\n\r\n");
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .expect("timeout");
        // Written from another thread: the server may answer before it has all of it.
        let mut w = s.try_clone().expect("clone");
        let writer = std::thread::spawn(move || {
            let _ = w.write_all(&req);
        });
        let mut got = Vec::new();
        let r = s.read_to_end(&mut got);
        let _ = writer.join();
        let text = String::from_utf8_lossy(&got);
        assert!(
            r.is_ok()
                && text.starts_with("HTTP/1.1 431")
                && text.ends_with("request head too large\n"),
            "{size}-byte header: {r:?} {text:?}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let h = server.join().expect("server thread");
    assert_eq!(h.stats.requests, 0);
    assert_eq!(h.stats.bad_requests, 3);
}

/// An event stream stays open and receives each broadcast; a reader that takes nothing is
/// dropped once it is more than MAX_STREAM_PENDING behind, without blocking the server.
#[test]
fn streams_get_broadcasts_and_slow_readers_are_dropped() {
    use std::io::{Read, Write};
    let mut h = Http::bind("127.0.0.1:0".parse().expect("addr")).expect("bind loopback");
    let addr = h.local_addr().expect("addr");
    let stream_route = |_: &Request| Route {
        stream: true,
        ..Route::ok("text/event-stream", b"data: first\n\n".to_vec())
    };
    let mut fast = std::net::TcpStream::connect(addr).expect("connect");
    fast.write_all(b"GET /events HTTP/1.1\r\n\r\n")
        .expect("write");
    let mut slow = std::net::TcpStream::connect(addr).expect("connect");
    slow.write_all(b"GET /events HTTP/1.1\r\n\r\n")
        .expect("write");
    for _ in 0..50 {
        h.serve(0, &mut { stream_route });
        if h.streams() == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert_eq!(h.streams(), 2);
    h.broadcast(b"data: second\n\n", 1);
    fast.set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .expect("timeout");
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("second") {
        let n = fast.read(&mut b).expect("read the stream");
        assert!(n > 0, "stream closed early");
        got.extend_from_slice(&b[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 200") && !text.contains("Content-Length"),
        "{text}"
    );
    assert!(
        text.contains("data: first\n\n") && text.contains("data: second\n\n"),
        "{text}"
    );
    // Feed big events; only `fast`'s side is drained.
    fast.set_nonblocking(true).expect("nb");
    let big = vec![b'x'; 256 << 10];
    for t in 0..64 {
        h.broadcast(&big, 2 + t);
        while let Ok(n) = fast.read(&mut b) {
            if n == 0 {
                break;
            }
        }
        if h.streams() < 2 {
            break;
        }
    }
    assert_eq!(h.streams(), 1, "the slow reader is dropped");
    assert_eq!(h.stats.slow_dropped, 1);
    drop(slow);
}

#[test]
fn loopback_is_told_apart() {
    for (a, want) in [
        ("127.0.0.1:9469", true),
        ("[::1]:9469", true),
        ("0.0.0.0:9469", false),
        ("192.0.2.7:9469", false),
        ("[::]:9469", false),
    ] {
        let addr: SocketAddr = a.parse().expect("addr");
        assert_eq!(is_loopback(&addr), want, "{a}");
    }
}

/// A body of `pieces` pieces of 64 KiB, each filled with its number, counting what was made.
struct Counted {
    made: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pieces: usize,
}

impl Body for Counted {
    fn fill(&mut self, out: &mut Vec<u8>) -> bool {
        let k = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        out.extend(std::iter::repeat_n(b'a' + (k % 26) as u8, 64 << 10));
        k + 1 < self.pieces
    }
}

/// A body made piece by piece: a reader gets all of it, in order, without a length; a client
/// that reads nothing makes the server build only what the socket took, and is dropped once it
/// has taken nothing for SLOW_NS.
#[test]
fn piecewise_bodies_follow_the_reader() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let mut h = Http::bind("127.0.0.1:0".parse().expect("addr")).expect("bind loopback");
    let addr = h.local_addr().expect("addr");
    let made = Arc::new(AtomicUsize::new(0));
    let m = made.clone();
    let route_of = move |pieces: usize| {
        let m = m.clone();
        move |_: &Request| {
            Route::streamed(
                "text/plain",
                Box::new(Counted {
                    made: m.clone(),
                    pieces,
                }),
            )
        }
    };
    // 125 MiB: far more than the socket buffers hold (a few MiB on loopback).
    let huge = 2000;
    let mut route = route_of(huge);
    // The client that never reads.
    let mut stalled = std::net::TcpStream::connect(addr).expect("connect");
    stalled
        .write_all(b"GET /metrics HTTP/1.1\r\n\r\n")
        .expect("write");
    for t in 0..200u64 {
        h.serve(t * 1000, &mut route);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let held = made.load(Ordering::Relaxed);
    assert!(
        held > 0 && held < huge / 5,
        "{held} pieces made for a client that reads nothing"
    );
    h.serve(SLOW_NS + 1_000_000, &mut route);
    assert_eq!((h.stats.slow_dropped, h.busy()), (1, false));
    assert_eq!(
        made.load(Ordering::Relaxed),
        held,
        "nothing more made once dropped"
    );
    drop(stalled);

    // The client that reads everything.
    made.store(0, Ordering::Relaxed);
    let pieces = 100;
    let mut route = route_of(pieces);
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n")
        .expect("write");
    s.set_nonblocking(true).expect("nb");
    let mut got = Vec::new();
    let mut b = vec![0u8; 1 << 16];
    let mut t = 0;
    loop {
        t += 1;
        h.serve(SLOW_NS * 2 + t, &mut route);
        match s.read(&mut b) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
    }
    let head_end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&got[..head_end]);
    assert!(
        head.starts_with("HTTP/1.1 200") && !head.contains("Content-Length"),
        "{head}"
    );
    let body = &got[head_end + 4..];
    assert_eq!(body.len(), pieces * (64 << 10));
    for (k, piece) in body.chunks(64 << 10).enumerate() {
        assert!(
            piece.iter().all(|&c| c == b'a' + (k % 26) as u8),
            "piece {k}"
        );
    }
    // The server lingers until the client closes (http/mod.rs: lingering close).
    drop(s);
    for _ in 0..200 {
        t += 1;
        h.serve(SLOW_NS * 2 + t, &mut route);
        if !h.busy() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(!h.busy());
}
