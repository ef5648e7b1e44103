//! The control socket's connections, served from the shaper's event loop without ever blocking
//! it: every socket is non-blocking and each client is a small state machine (bytes read so far,
//! the reply still to write).
//!
//! Bounds, so that no client can stall forwarding or grow memory:
//! * a request is one line of at most [`MAX_REQUEST`] bytes; a longer one is answered with an
//!   error and the connection closed (`oversize_refused`);
//! * a client has at most one reply pending, and reads stop until it is written (the reply itself
//!   is at most [`MAX_REPLY`] bytes);
//! * a client that takes no byte of its reply for [`SLOW_CLIENT_NS`] is dropped (`slow_dropped`),
//!   one that sends no complete request for [`IDLE_CLIENT_NS`] too (`idle_dropped`);
//! * at most [`MAX_CLIENTS`] at once; more are closed at accept (`refused_busy`);
//! * one turn reads at most [`READ_PER_TURN`] bytes per client.
//!
//! Watched with epoll level-triggered: `EPOLLIN` while reading, `EPOLLOUT` only while a reply is
//! pending (see epoll(7)), so an unread peer never spins the loop.
//! The output buffer and the epoll interest are shared with the HTTP endpoints (conn.rs).

use std::io::{ErrorKind, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::proto::{ErrorKind as ReplyKind, Response};

use crate::conn::{self, OutBuf};
use crate::sys;

/// Longest request line, in bytes (a `reload` carries the whole policy text).
pub const MAX_REQUEST: usize = 1 << 20;
/// Longest reply, in bytes; a larger one is replaced by an error.
pub const MAX_REPLY: usize = 16 << 20;
/// Clients served at once.
pub const MAX_CLIENTS: usize = 32;
/// A client that takes no byte of its pending reply for this long is dropped.
pub const SLOW_CLIENT_NS: u64 = 1_000_000_000;
/// A client that sends no complete request for this long is dropped.
pub const IDLE_CLIENT_NS: u64 = 10_000_000_000;
/// Bytes read from one client in one turn of the loop.
pub const READ_PER_TURN: usize = 64 << 10;

/// What the control plane did to its clients (`stat`'s `control` object).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlStats {
    pub clients: usize,
    pub accepted: u64,
    pub requests: u64,
    pub refused_busy: u64,
    pub oversize_refused: u64,
    pub slow_dropped: u64,
    pub idle_dropped: u64,
}

struct Client {
    id: u64,
    stream: UnixStream,
    inbuf: Vec<u8>,
    out: OutBuf,
    /// Close once `out` is written (after an oversize refusal).
    close_after: bool,
    /// Last time the client completed a request or took reply bytes.
    progress_ns: u64,
    watching_write: bool,
    /// Its request is being answered later (a reload being built off the loop): nothing more
    /// is read from it until [`Server::reply`].
    awaiting: bool,
}

impl Client {
    fn pending(&self) -> bool {
        self.out.pending() > 0
    }
}

/// The listening socket and its clients.
pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    /// Epoll instance the clients are registered with, and their token.
    epoll: Option<(i32, u64)>,
    clients: Vec<Client>,
    next_id: u64,
    pub stats: ControlStats,
}

impl Server {
    /// Bind `path` with mode 0600 from the first instant (umask around bind); refused if another
    /// shaper answers there.
    pub fn bind(path: &Path) -> anyhow::Result<Server> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        if UnixStream::connect(path).is_ok() {
            anyhow::bail!(
                "{} is in use by a running shaper; stop it or give another --control",
                path.display()
            );
        }
        // Only a stale socket is replaced: never a file, a directory or a symlink that
        // `--control` names by mistake.
        if let Ok(m) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt as _;
            if !m.file_type().is_socket() {
                anyhow::bail!(
                    "{} exists and is not a socket: refusing to replace it; give another \
                     --control or remove it",
                    path.display()
                );
            }
            let _ = std::fs::remove_file(path);
        }
        let old = sys::umask(0o177);
        let l = UnixListener::bind(path);
        sys::umask(old);
        let l = l.with_context(|| format!("cannot bind {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot chmod {}", path.display()))?;
        l.set_nonblocking(true)?;
        Ok(Server {
            listener: l,
            path: path.to_path_buf(),
            epoll: None,
            clients: Vec::new(),
            next_id: 0,
            stats: ControlStats::default(),
        })
    }

    /// The listening socket (watch it for `EPOLLIN`).
    pub fn listen_fd(&self) -> i32 {
        self.listener.as_raw_fd()
    }

    /// Register clients with epoll instance `ep` under `token` from now on.
    pub fn attach(&mut self, ep: i32, token: u64) {
        self.epoll = Some((ep, token));
    }

    /// One turn: accept, read, write, drop the clients past their bounds. Returns the complete
    /// requests as (client id, line); answer each with [`Server::reply`] before the next turn.
    pub fn poll(&mut self, now_ns: u64) -> Vec<(u64, String)> {
        self.accept(now_ns);
        let mut reqs = Vec::new();
        let mut i = 0;
        while i < self.clients.len() {
            match self.turn(i, now_ns, &mut reqs) {
                Ok(()) => i += 1,
                Err(why) => {
                    match why {
                        Drop::Slow => self.stats.slow_dropped += 1,
                        Drop::Idle => self.stats.idle_dropped += 1,
                        Drop::Gone => {}
                    }
                    let c = self.clients.swap_remove(i);
                    if let Some((ep, _)) = self.epoll {
                        let _ = sys::epoll_del(ep, c.stream.as_raw_fd());
                    }
                }
            }
        }
        self.stats.clients = self.clients.len();
        reqs
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
                continue; // dropped: closed
            }
            if let Some((ep, tok)) = self.epoll {
                if sys::epoll_add(ep, stream.as_raw_fd(), tok).is_err() {
                    self.stats.refused_busy += 1;
                    continue;
                }
            }
            self.stats.accepted += 1;
            self.next_id += 1;
            self.clients.push(Client {
                id: self.next_id,
                stream,
                inbuf: Vec::new(),
                out: OutBuf::default(),
                close_after: false,
                progress_ns: now_ns,
                watching_write: false,
                awaiting: false,
            });
        }
    }

    /// Serve client `i` for one turn; `Err` when it is to be dropped.
    fn turn(&mut self, i: usize, now_ns: u64, reqs: &mut Vec<(u64, String)>) -> Result<(), Drop> {
        let c = &mut self.clients[i];
        if c.pending() {
            write_some(c, now_ns)?;
            if c.pending() {
                if now_ns.saturating_sub(c.progress_ns) > SLOW_CLIENT_NS {
                    return Err(Drop::Slow);
                }
                return Ok(());
            }
        }
        if c.close_after {
            return Err(Drop::Gone);
        }
        if c.awaiting {
            // Neither read nor timed out: its answer is on the way (see `defer`).
            return Ok(());
        }
        // Reading: complete request already buffered?
        if take_line(c, reqs, &mut self.stats, now_ns) {
            return Ok(());
        }
        read_some(c)?;
        if take_line(c, reqs, &mut self.stats, now_ns) {
            return Ok(());
        }
        if c.inbuf.len() > MAX_REQUEST {
            self.stats.oversize_refused += 1;
            c.inbuf = Vec::new();
            let msg = Response::error(
                ReplyKind::TooLarge,
                format!("request longer than {MAX_REQUEST} bytes"),
            );
            queue(c, &msg.to_line());
            c.close_after = true;
            c.progress_ns = now_ns;
            write_some(c, now_ns)?;
        } else if now_ns.saturating_sub(c.progress_ns) > IDLE_CLIENT_NS {
            return Err(Drop::Idle);
        }
        self.watch(i);
        Ok(())
    }

    /// Client `id`'s request will be answered later by [`Server::reply`]; until then it is not
    /// read from (so its replies stay in the order of its requests) nor dropped as idle.
    pub fn defer(&mut self, id: u64) {
        if let Some(c) = self.clients.iter_mut().find(|c| c.id == id) {
            c.awaiting = true;
        }
    }

    /// Queue the reply to client `id` (gone clients are ignored) and start writing it.
    pub fn reply(&mut self, id: u64, text: &str, now_ns: u64) {
        let mut line = String::with_capacity(text.len() + 1);
        line.push_str(text);
        line.push('\n');
        self.reply_line(id, line, now_ns);
    }

    /// [`Server::reply`] of a reply already ending in its line feed, taken without a copy (a
    /// page of `stat` built by the stats plane: megabytes the loop does not copy).
    pub fn reply_line(&mut self, id: u64, line: String, now_ns: u64) {
        let Some(i) = self.clients.iter().position(|c| c.id == id) else {
            return;
        };
        let c = &mut self.clients[i];
        c.awaiting = false;
        if line.len() > MAX_REPLY + 1 {
            let msg = Response::error(
                ReplyKind::TooLarge,
                format!("reply longer than {MAX_REPLY} bytes"),
            );
            queue(c, &msg.to_line());
        } else {
            c.out.set(line.into_bytes());
        }
        c.progress_ns = now_ns;
        // Errors surface on the next turn (a dead peer fails again and is dropped there).
        let _ = write_some(c, now_ns);
        self.watch(i);
    }

    /// Watch client `i` for what it waits on: writability while a reply is pending, else input.
    fn watch(&mut self, i: usize) {
        let c = &mut self.clients[i];
        let want = c.pending();
        conn::watch(
            self.epoll,
            c.stream.as_raw_fd(),
            want,
            &mut c.watching_write,
        );
    }
}

impl std::ops::Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

enum Drop {
    Slow,
    Idle,
    Gone,
}

fn queue(c: &mut Client, text: &str) {
    let mut b = Vec::with_capacity(text.len() + 1);
    b.extend_from_slice(text.as_bytes());
    b.push(b'\n');
    c.out.set(b);
}

/// Move one complete line from the client's input to `reqs`; true if there was one.
fn take_line(
    c: &mut Client,
    reqs: &mut Vec<(u64, String)>,
    stats: &mut ControlStats,
    now_ns: u64,
) -> bool {
    let Some(nl) = c.inbuf.iter().position(|&b| b == b'\n') else {
        return false;
    };
    if nl > MAX_REQUEST {
        return false; // refused as oversize by the caller
    }
    let line: Vec<u8> = c.inbuf.drain(..=nl).collect();
    let text = request_text(&line);
    stats.requests += 1;
    c.progress_ns = now_ns;
    reqs.push((c.id, text));
    true
}

/// The text of one request line as the server hands it on: invalid UTF-8 replaced (the parser
/// then refuses it as a bad request), surrounding whitespace and the newline trimmed.
pub fn request_text(line: &[u8]) -> String {
    String::from_utf8_lossy(line).trim().to_string()
}

fn read_some(c: &mut Client) -> Result<(), Drop> {
    let mut buf = [0u8; 16 << 10];
    let mut taken = 0;
    while taken < READ_PER_TURN && c.inbuf.len() <= MAX_REQUEST {
        match c.stream.read(&mut buf) {
            Ok(0) => return Err(Drop::Gone),
            Ok(n) => {
                c.inbuf.extend_from_slice(&buf[..n]);
                taken += n;
                if buf[..n].contains(&b'\n') {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(Drop::Gone),
        }
    }
    Ok(())
}

fn write_some(c: &mut Client, now_ns: u64) -> Result<(), Drop> {
    if c.out.write_to(&mut c.stream).map_err(|_| Drop::Gone)? {
        c.progress_ns = now_ns;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
