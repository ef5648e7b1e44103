//! Addresses of two subscribers that are the same or overlap.
//!
//! Each prefix becomes a key (family, network bits, length). Sorted by network bits and then by
//! length, a prefix's enclosing prefixes come before it, nested like brackets, so one sweep with
//! a stack of "open" prefixes finds, for every prefix, the prefixes that contain it: the top of
//! the stack after popping those that do not. `O(n log n)` for the sort, `O(n)` for the sweep.
//! Two subscribers sharing an address is an error (a packet could go to either); a subscriber
//! listing one address twice, or a prefix inside its own, is only a warning.

use std::net::IpAddr;

use crate::diag::Severity;
use crate::source::Sink;

use super::{row_diag, Table};

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    v6: bool,
    bits: u128,
    len: u8,
}

impl Key {
    fn width(&self) -> u32 {
        if self.v6 {
            128
        } else {
            32
        }
    }

    /// Whether `self` contains `other` (or equals it).
    fn contains(&self, other: &Key) -> bool {
        if self.v6 != other.v6 || self.len > other.len {
            return false;
        }
        if self.len == 0 {
            return true;
        }
        let shift = self.width() - u32::from(self.len);
        (self.bits ^ other.bits) >> shift == 0
    }
}

fn key(addr: IpAddr, len: u8) -> Key {
    match addr {
        IpAddr::V4(a) => Key {
            v6: false,
            bits: u128::from(u32::from(a)),
            len,
        },
        IpAddr::V6(a) => Key {
            v6: true,
            bits: u128::from(a),
            len,
        },
    }
}

/// Reports every address that lies in an address of another row (both lines named).
pub(super) fn check(sink: &mut Sink, t: &Table) {
    let mut keys: Vec<(Key, u32)> = t
        .prefixes
        .iter()
        .map(|(p, s)| (key(p.addr, p.len), *s))
        .collect();
    keys.sort_unstable();
    let mut open: Vec<(Key, u32)> = Vec::new();
    for &(k, s) in &keys {
        while open.last().is_some_and(|(o, _)| !o.contains(&k)) {
            open.pop();
        }
        if let Some(&(o, os)) = open.last() {
            report(sink, t, (o, os), (k, s));
        }
        open.push((k, s));
    }
}

fn show(k: &Key) -> String {
    let addr = if k.v6 {
        IpAddr::from(k.bits.to_be_bytes())
    } else {
        IpAddr::from((k.bits as u32).to_be_bytes())
    };
    format!("{addr}/{}", k.len)
}

/// `outer` contains `inner`.
fn report(sink: &mut Sink, t: &Table, outer: (Key, u32), inner: (Key, u32)) {
    let (oi, ii) = (outer.1 as usize, inner.1 as usize);
    let (ol, il) = (t.line[oi] as usize, t.line[ii] as usize);
    let (first, second) = if ol <= il { (ol, il) } else { (il, ol) };
    let what = if outer.0 == inner.0 {
        format!("address {}", show(&inner.0))
    } else {
        format!("{} lies inside {}", show(&inner.0), show(&outer.0))
    };
    if oi == ii {
        sink.diags.push(row_diag(
            &t.file,
            il,
            Severity::Warning,
            format!(
                "subscriber `{}` lists an address twice: {what}",
                t.names[ii]
            ),
            "list each address once".into(),
        ));
        return;
    }
    let message = if outer.0 == inner.0 {
        format!(
            "duplicate {what}: subscribers `{}` (line {}) and `{}` (line {})",
            t.names[oi], ol, t.names[ii], il
        )
    } else {
        format!(
            "overlapping prefixes: {what}, of subscribers `{}` (line {il}) and `{}` (line {ol})",
            t.names[ii], t.names[oi]
        )
    };
    sink.diags.push(row_diag(
        &t.file,
        second,
        Severity::Error,
        message,
        format!(
            "an address belongs to one subscriber: remove it from line {first} or line {second}"
        ),
    ));
}
