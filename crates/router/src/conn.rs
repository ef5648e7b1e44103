//! What the event loop's socket servers share (the control socket, control/server.rs; the HTTP
//! endpoints, http/mod.rs): a connection's pending output, written without blocking, and its
//! epoll interest — `EPOLLOUT` only while output is pending, else `EPOLLIN` (level-triggered,
//! epoll(7)), so a peer that reads nothing never spins the loop.

use std::io::{ErrorKind, Write};

use crate::sys;

/// Bytes queued for a non-blocking socket, and how far they are written.
#[derive(Debug, Default)]
pub struct OutBuf {
    buf: Vec<u8>,
    pos: usize,
}

/// The peer is gone (closed, reset, or a write of 0 bytes).
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

impl OutBuf {
    /// Bytes not yet written.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Replace the contents with `bytes`.
    pub fn set(&mut self, bytes: Vec<u8>) {
        self.buf = bytes;
        self.pos = 0;
    }

    /// Append `bytes` (the written prefix is dropped first when everything was written).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Write as much as `w` takes now; true if any byte was written. Memory is released once
    /// all is written.
    pub fn write_to(&mut self, w: &mut impl Write) -> Result<bool, Closed> {
        let mut progressed = false;
        while self.pos < self.buf.len() {
            match w.write(&self.buf[self.pos..]) {
                Ok(0) => return Err(Closed),
                Ok(n) => {
                    self.pos += n;
                    progressed = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(Closed),
            }
        }
        if self.pos == self.buf.len() {
            self.buf = Vec::new();
            self.pos = 0;
        }
        Ok(progressed)
    }
}

/// Set `fd`'s interest in `epoll` (instance, token) to writability when `want_write`, else
/// input; `watching` remembers the current one so that only changes cost a syscall.
pub fn watch(epoll: Option<(i32, u64)>, fd: i32, want_write: bool, watching: &mut bool) {
    if want_write == *watching {
        return;
    }
    if let Some((ep, tok)) = epoll {
        if sys::epoll_mod(ep, fd, tok, want_write).is_ok() {
            *watching = want_write;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `room` bytes, then would block.
    struct Tight {
        got: Vec<u8>,
        room: usize,
    }

    impl Write for Tight {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(self.room);
            self.room -= n;
            self.got.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn partial_writes_resume_where_they_stopped() {
        let mut o = OutBuf::default();
        o.set(b"hello ".to_vec());
        o.push(b"world");
        let mut w = Tight {
            got: Vec::new(),
            room: 4,
        };
        assert_eq!(o.write_to(&mut w), Ok(true));
        assert_eq!(o.pending(), 7);
        assert_eq!(o.write_to(&mut w), Ok(false), "would block: no progress");
        w.room = 100;
        assert_eq!(o.write_to(&mut w), Ok(true));
        assert_eq!((o.pending(), w.got.as_slice()), (0, &b"hello world"[..]));
        o.push(b"!");
        assert_eq!(o.pending(), 1);
    }

    #[test]
    fn zero_byte_write_is_a_closed_peer() {
        struct Zero;
        impl Write for Zero {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Ok(0)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut o = OutBuf::default();
        o.set(b"x".to_vec());
        assert_eq!(o.write_to(&mut Zero), Err(Closed));
    }
}
