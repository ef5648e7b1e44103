//! A minimal HTTP/1.1 server for the metrics endpoint (`--metrics`), served from the shaper's
//! event loop without ever blocking it — the discipline of the control socket
//! (control/server.rs): non-blocking sockets, one small state machine per client, bounded input
//! and output, slow and idle clients dropped.
//!
//! What it speaks (RFC 9112, HTTP/1.1 message syntax; RFC 9110 for the status codes): a request
//! is read up to the blank line that ends its header section (at most [`MAX_HEAD`] bytes, else
//! 431); only `GET` (and `HEAD`) are served (405 with `Allow` otherwise); each response carries
//! `Content-Length` and `Connection: close`, and the connection is closed once it is written (no
//! keep-alive, no request body). Paths are routed by the caller ([`Route`]). A client that
//! half-closes right after its request (`nc -N`) is answered: end of input after a complete head
//! is not a disconnect. A head whose blank line lies beyond [`MAX_HEAD`] gets 431 however it
//! arrived. Closing is lingering (as Apache's): once a response is written the server shuts its
//! side and reads and discards what the client still sends, for at most [`LINGER_NS`], so that
//! unread request bytes do not make the kernel reset the connection and destroy the response.
//! A body too large to hold (every class's series of 100,000 subscribers) is made piece by
//! piece instead ([`Body`]): no length, the close ends it, the next piece made only once the
//! client took the last.
//!
//! A route may instead open a stream (server-sent events, for the dashboard): the headers go out
//! without a length, the connection stays open, and [`Http::broadcast`] appends each event to
//! every stream; a stream with more than [`MAX_STREAM_PENDING`] bytes not yet taken is dropped
//! (a slow reader never holds memory or the loop).
//!
//! Bounds: at most [`MAX_CLIENTS`] connections (more are closed at accept), [`MAX_BODY`] bytes of
//! response, a client that sends no complete head within [`IDLE_NS`] or takes no byte of its
//! response for [`SLOW_NS`] is dropped. Epoll is level-triggered: `EPOLLIN` while reading,
//! `EPOLLOUT` only while a response is pending (epoll(7)).

pub mod classes;
pub mod metrics;
pub mod replay;
pub mod web;

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use anyhow::Context;

use crate::conn::{self, OutBuf};
use crate::sys;

/// Longest request head (request line and headers), bytes.
pub const MAX_HEAD: usize = 8 << 10;
/// How long a lingering close waits for the client to close after its response, ns.
pub const LINGER_NS: u64 = 1_000_000_000;
/// Longest response body, bytes (a larger one is answered with 500).
pub const MAX_BODY: usize = 16 << 20;
/// Connections served at once.
pub const MAX_CLIENTS: usize = 16;
/// A client that takes no byte of its response for this long is dropped.
pub const SLOW_NS: u64 = 1_000_000_000;
/// A client that sends no complete request head for this long is dropped.
pub const IDLE_NS: u64 = 5_000_000_000;
/// While clients are connected, the loop serves them at least this often without an event
/// (to drop stalled ones and feed streams), and no more often than that on timeouts.
pub const TICK_NS: u64 = 100_000_000;
/// A stream whose unsent bytes exceed this when an event is added is dropped.
pub const MAX_STREAM_PENDING: usize = 1 << 20;

/// A parsed request head: what routing needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The `Accept` header, lower-cased (empty when absent).
    pub accept: String,
    /// The query string after `?` (empty when absent), as sent.
    pub query: String,
}

impl Request {
    /// The value of query parameter `key` (`a=1&b=2`; `+` and `%XX` decoded), if present.
    pub fn param(&self, key: &str) -> Option<String> {
        self.query
            .split('&')
            .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| decode(v))
    }
}

/// `+` as a space and `%XX` as its byte (application/x-www-form-urlencoded); a bad escape is
/// kept as it is.
fn decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if hex(i + 1).is_some() && hex(i + 2).is_some() => {
                out.push((hex(i + 1).unwrap_or(0) * 16 + hex(i + 2).unwrap_or(0)) as u8);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A response to queue: status, content type and body.
pub struct Route {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// Keep the connection open after `body` for [`Http::broadcast`]'s events.
    pub stream: bool,
    /// The rest of the body, written piece by piece after `body` as the client takes it (a
    /// scrape of every class); the response then has no length and ends with the connection.
    pub more: Option<Box<dyn Body>>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("status", &self.status)
            .field("content_type", &self.content_type)
            .field("body_len", &self.body.len())
            .field("stream", &self.stream)
            .field("more", &self.more.is_some())
            .finish()
    }
}

/// A body made piece by piece: the server asks for the next piece only once the client has
/// taken everything before it (at most [`MAX_PIECES_PER_TURN`] a turn), so a slow client holds
/// one piece and a stalled one is dropped after [`SLOW_NS`] like any other.
pub trait Body: Send {
    /// Append the next piece to `out`; false once the body is complete (that piece included).
    fn fill(&mut self, out: &mut Vec<u8>) -> bool;
}

/// Pieces of a [`Body`] written to one client in one turn at most (the other clients' turn).
pub const MAX_PIECES_PER_TURN: usize = 8;

impl Route {
    pub fn text(status: u16, body: &str) -> Route {
        Route {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
            stream: false,
            more: None,
        }
    }

    pub fn ok(content_type: &'static str, body: Vec<u8>) -> Route {
        Route {
            status: 200,
            content_type,
            body,
            stream: false,
            more: None,
        }
    }

    /// A 200 whose body is made piece by piece ([`Body`]).
    pub fn streamed(content_type: &'static str, more: Box<dyn Body>) -> Route {
        Route {
            more: Some(more),
            ..Route::ok(content_type, Vec::new())
        }
    }

    /// The whole body, `more` included (tests, in-process readers).
    pub fn into_body(mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.body);
        if let Some(m) = self.more.as_mut() {
            while m.fill(&mut out) {}
        }
        out
    }
}

/// What the server did to its clients.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HttpStats {
    pub accepted: u64,
    pub requests: u64,
    pub refused_busy: u64,
    pub slow_dropped: u64,
    pub idle_dropped: u64,
    pub bad_requests: u64,
}

struct Client {
    stream: TcpStream,
    inbuf: Vec<u8>,
    /// The client shut its sending side (read returned 0).
    eof: bool,
    /// The response is written and our side shut: reading and discarding until the client
    /// closes or [`LINGER_NS`] has passed (since this instant).
    lingering_since: Option<u64>,
    out: OutBuf,
    /// A request was taken: nothing more is read; close once the response is written.
    answered: bool,
    /// An event stream: stays open, fed by `broadcast`.
    streaming: bool,
    /// The rest of a body made piece by piece ([`Body`]).
    more: Option<Box<dyn Body>>,
    progress_ns: u64,
    watching_write: bool,
}

/// The listening socket and its clients.
pub struct Http {
    listener: TcpListener,
    epoll: Option<(i32, u64)>,
    clients: Vec<Client>,
    pub stats: HttpStats,
    /// When the streams were last fed (for the caller's pacing of events).
    pub last_event_ns: u64,
    /// When [`Http::serve`] last ran.
    last_turn_ns: u64,
}

/// True when `addr` is a loopback address (only local users can scrape it).
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

impl Http {
    /// Bind `addr`, non-blocking.
    pub fn bind(addr: SocketAddr) -> anyhow::Result<Http> {
        let l = TcpListener::bind(addr).with_context(|| format!("cannot bind {addr}"))?;
        l.set_nonblocking(true)?;
        Ok(Http {
            listener: l,
            epoll: None,
            clients: Vec::new(),
            stats: HttpStats::default(),
            last_event_ns: 0,
            last_turn_ns: 0,
        })
    }

    /// The address bound (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The listening socket (watch it for `EPOLLIN`).
    pub fn listen_fd(&self) -> i32 {
        self.listener.as_raw_fd()
    }

    /// Register clients with epoll instance `ep` under `token` from now on.
    pub fn attach(&mut self, ep: i32, token: u64) {
        self.epoll = Some((ep, token));
    }

    /// True while any client is connected (the loop then serves on its timeouts too, so a
    /// stalled client is dropped even if no event comes).
    pub fn busy(&self) -> bool {
        !self.clients.is_empty()
    }

    /// True when clients are connected and [`TICK_NS`] has passed since the last turn: the
    /// loop's cue to serve without an event (an idle stream then costs the forwarding loop
    /// nothing between ticks).
    pub fn due(&self, now_ns: u64) -> bool {
        self.busy() && now_ns.saturating_sub(self.last_turn_ns) >= TICK_NS
    }

    /// Open event streams.
    pub fn streams(&self) -> usize {
        self.clients.iter().filter(|c| c.streaming).count()
    }

    /// Append `event` to every stream and start writing it; a stream already holding more than
    /// [`MAX_STREAM_PENDING`] unsent bytes is dropped instead (`slow_dropped`).
    pub fn broadcast(&mut self, event: &[u8], now_ns: u64) {
        self.last_event_ns = now_ns;
        let mut i = 0;
        while i < self.clients.len() {
            let c = &mut self.clients[i];
            if !c.streaming {
                i += 1;
                continue;
            }
            if c.out.pending() > MAX_STREAM_PENDING {
                self.stats.slow_dropped += 1;
                self.remove(i);
                continue;
            }
            if c.out.pending() == 0 {
                c.progress_ns = now_ns;
            }
            c.out.push(event);
            if write_some(c, now_ns).is_err() {
                self.remove(i);
                continue;
            }
            self.watch(i);
            i += 1;
        }
    }

    fn remove(&mut self, i: usize) {
        let c = self.clients.swap_remove(i);
        if let Some((ep, _)) = self.epoll {
            let _ = sys::epoll_del(ep, c.stream.as_raw_fd());
        }
    }

    /// Watch client `i` for writability while it has bytes to send, else for input.
    fn watch(&mut self, i: usize) {
        let c = &mut self.clients[i];
        let want = c.answered && (c.out.pending() > 0 || c.more.is_some());
        conn::watch(
            self.epoll,
            c.stream.as_raw_fd(),
            want,
            &mut c.watching_write,
        );
    }

    /// One turn: accept, read, write, drop clients past their bounds. Complete requests are
    /// handed to `route`, whose answer is queued at once. Never blocks.
    pub fn serve(&mut self, now_ns: u64, route: &mut dyn FnMut(&Request) -> Route) {
        self.last_turn_ns = now_ns;
        self.accept(now_ns);
        let mut i = 0;
        while i < self.clients.len() {
            match self.turn(i, now_ns, route) {
                Ok(()) => i += 1,
                Err(why) => {
                    match why {
                        Gone::Slow => self.stats.slow_dropped += 1,
                        Gone::Idle => self.stats.idle_dropped += 1,
                        Gone::Done => {}
                    }
                    self.remove(i);
                }
            }
        }
    }

    fn accept(&mut self, now_ns: u64) {
        loop {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            if self.clients.len() >= MAX_CLIENTS || stream.set_nonblocking(true).is_err() {
                self.stats.refused_busy += 1;
                continue;
            }
            if let Some((ep, tok)) = self.epoll {
                if sys::epoll_add(ep, stream.as_raw_fd(), tok).is_err() {
                    self.stats.refused_busy += 1;
                    continue;
                }
            }
            self.stats.accepted += 1;
            self.clients.push(Client {
                stream,
                inbuf: Vec::new(),
                eof: false,
                lingering_since: None,
                out: OutBuf::default(),
                answered: false,
                streaming: false,
                more: None,
                progress_ns: now_ns,
                watching_write: false,
            });
        }
    }

    fn turn(
        &mut self,
        i: usize,
        now_ns: u64,
        route: &mut dyn FnMut(&Request) -> Route,
    ) -> Result<(), Gone> {
        let c = &mut self.clients[i];
        if let Some(since) = c.lingering_since {
            return linger(c, since, now_ns);
        }
        if !c.answered {
            read_some(c)?;
            let head = if head_end(&c.inbuf).is_some_and(|end| end > MAX_HEAD) {
                Head::Partial
            } else {
                parse_head(&c.inbuf)
            };
            match head {
                Head::Partial if c.inbuf.len() > MAX_HEAD => {
                    self.stats.bad_requests += 1;
                    respond(c, &Route::text(431, "request head too large\n"), false);
                }
                // The client said all it will say, and it is not a whole head.
                Head::Partial if c.eof => return Err(Gone::Done),
                Head::Partial => {
                    if now_ns.saturating_sub(c.progress_ns) > IDLE_NS {
                        return Err(Gone::Idle);
                    }
                }
                Head::Bad => {
                    self.stats.bad_requests += 1;
                    respond(c, &Route::text(400, "bad request\n"), false);
                }
                Head::Done(req) => {
                    self.stats.requests += 1;
                    let mut r = match req.method.as_str() {
                        "GET" | "HEAD" => route(&req),
                        _ => Route::text(405, "only GET is served\n"),
                    };
                    let head_only = req.method == "HEAD";
                    respond(c, &r, head_only);
                    c.more = r.more.take().filter(|_| !head_only);
                }
            }
            if c.answered {
                c.progress_ns = now_ns;
            }
        }
        if c.answered {
            write_some(c, now_ns)?;
            let mut pieces = 0;
            while c.out.pending() == 0 && pieces < MAX_PIECES_PER_TURN {
                let Some(m) = c.more.as_mut() else { break };
                let mut piece = Vec::new();
                if !m.fill(&mut piece) {
                    c.more = None;
                }
                c.out.push(&piece);
                write_some(c, now_ns)?;
                pieces += 1;
            }
            if c.out.pending() == 0 && c.more.is_none() {
                if !c.streaming {
                    // Lingering close: our side is shut; what the client still sends is read
                    // and discarded so that the kernel does not reset the connection.
                    let _ = c.stream.shutdown(std::net::Shutdown::Write);
                    c.lingering_since = Some(now_ns);
                    return linger(c, now_ns, now_ns);
                }
                // A stream whose peer closed: reading returns 0 (it sends nothing else).
                let mut b = [0u8; 512];
                if c.stream_peek(&mut b) == Some(0) {
                    return Err(Gone::Done);
                }
            } else if now_ns.saturating_sub(c.progress_ns) > SLOW_NS {
                return Err(Gone::Slow);
            }
        }
        self.watch(i);
        Ok(())
    }
}

enum Gone {
    Slow,
    Idle,
    Done,
}

enum Head {
    Partial,
    Bad,
    Done(Request),
}

/// Parse a request head once its blank line has arrived (CRLF, or bare LF as RFC 9112 §2.2
/// allows a recipient to accept).
fn parse_head(buf: &[u8]) -> Head {
    let Some(end) = head_end(buf) else {
        return Head::Partial;
    };
    let Ok(head) = std::str::from_utf8(&buf[..end]) else {
        return Head::Bad;
    };
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or("").split(' ');
    let (Some(method), Some(target), Some(version)) = (first.next(), first.next(), first.next())
    else {
        return Head::Bad;
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Head::Bad;
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (path, query) = (path.to_string(), query.to_string());
    let accept = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("accept"))
        .map(|(_, v)| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    Head::Done(Request {
        method: method.to_string(),
        path,
        accept,
        query,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    }
}

/// The bytes of a whole response: status line, headers, body (left out for HEAD).
pub fn response_bytes(r: &Route, head_only: bool) -> Vec<u8> {
    let (status, ctype, body): (u16, &str, &[u8]) = if r.body.len() > MAX_BODY {
        (500, "text/plain; charset=utf-8", b"response too large\n")
    } else {
        (r.status, r.content_type, &r.body)
    };
    // A stream's body, and one made piece by piece, is delimited by the connection's close
    // (RFC 9112 §6.3).
    let length = if r.stream {
        "Cache-Control: no-cache\r\n".to_string()
    } else if r.more.is_some() {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {ctype}\r\n{length}{}Connection: close\r\n\r\n",
        reason(status),
        if status == 405 {
            "Allow: GET, HEAD\r\n"
        } else {
            ""
        },
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    out
}

impl Client {
    /// Read and discard what a stream's peer sends; `Some(0)` when it has closed.
    fn stream_peek(&mut self, b: &mut [u8]) -> Option<usize> {
        self.stream.read(b).ok()
    }
}

fn respond(c: &mut Client, r: &Route, head_only: bool) {
    c.streaming = r.stream && !head_only;
    c.out.set(response_bytes(r, head_only));
    c.answered = true;
    c.inbuf = Vec::new();
}

/// Where the request head ends (its blank line), if it has arrived.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| buf.windows(2).position(|w| w == b"\n\n"))
}

/// A lingering close: discard input until the client closes (read returns 0), fails, or
/// [`LINGER_NS`] has passed since `since`; `Ok` while it goes on.
fn linger(c: &mut Client, since: u64, now_ns: u64) -> Result<(), Gone> {
    let mut buf = [0u8; 4096];
    for _ in 0..16 {
        match c.stream.read(&mut buf) {
            Ok(0) => return Err(Gone::Done),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(Gone::Done),
        }
    }
    if now_ns.saturating_sub(since) > LINGER_NS {
        return Err(Gone::Done);
    }
    Ok(())
}

fn read_some(c: &mut Client) -> Result<(), Gone> {
    let mut buf = [0u8; 4096];
    while c.inbuf.len() <= MAX_HEAD && !c.eof {
        match c.stream.read(&mut buf) {
            // End of input: a half-close after a complete head is still answered (turn).
            Ok(0) => c.eof = true,
            Ok(n) => c.inbuf.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(Gone::Done),
        }
    }
    Ok(())
}

fn write_some(c: &mut Client, now_ns: u64) -> Result<(), Gone> {
    if c.out.write_to(&mut c.stream).map_err(|_| Gone::Done)? {
        c.progress_ns = now_ns;
    }
    Ok(())
}

/// Say where `what` is served, with a warning when others than local users can reach it.
pub fn announce(h: &Http, what: &str, path: &str) {
    let Ok(addr) = h.local_addr() else { return };
    eprintln!("linkshare: {what} at http://{addr}{path}");
    if !is_loopback(&addr) {
        eprintln!(
            "linkshare: warning: {what} bound to {addr}, not loopback: anyone who reaches it \
             sees the class names and counters"
        );
    }
}

#[cfg(test)]
mod tests;
