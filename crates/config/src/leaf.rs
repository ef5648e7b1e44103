//! Leaf disciplines: the queue at a leaf class (`leaf = "sfq"`, `[class.leaf] type = "sfq" …`),
//! or the whole scheduler when a policy's root is not classful (`qdisc = "fq_codel"`).
//!
//! Each kind is one [`LeafKind`] variant holding its core parameter struct, one reader function
//! below that lists its keys, and one arm in [`LeafKind::build`]. The keys are the fields of the
//! core parameter struct, with the same names; the struct's own `validate` gives the range checks,
//! reported at the offending value.

use std::fmt;
use std::ops::Range;

use linkshare_core::htb::LeafSpec;
use linkshare_core::qdisc::fifo::{Fifo, FifoLimit, DEFAULT_BFIFO_LIMIT, DEFAULT_PFIFO_LIMIT};
use linkshare_core::units::Size;
use linkshare_core::{Packet, Qdisc};
use toml::Spanned;

use crate::diag::{suggest, Sink};
use crate::params::Params;
use crate::raw::Raw;
use crate::values;

/// A leaf discipline and its parameters.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LeafKind {
    /// FIFO limited in packets.
    Pfifo { limit: u32 },
    /// FIFO limited in bytes.
    Bfifo { limit: u32 },
}

impl LeafKind {
    /// Leaf kinds by name.
    pub const KNOWN: &'static [&'static str] = &["pfifo", "bfifo"];

    pub fn name(&self) -> &'static str {
        match self {
            LeafKind::Pfifo { .. } => "pfifo",
            LeafKind::Bfifo { .. } => "bfifo",
        }
    }

    /// The queue of an HTB/CBQ/DRR leaf class.
    pub fn spec<P: Packet + 'static>(&self) -> LeafSpec<P> {
        match self {
            LeafKind::Pfifo { limit } => LeafSpec::Fifo(FifoLimit::Packets(*limit)),
            LeafKind::Bfifo { limit } => LeafSpec::Fifo(FifoLimit::Bytes(*limit)),
        }
    }

    /// The discipline on its own, as a root qdisc.
    pub fn build<P: Packet + 'static>(&self) -> Box<dyn Qdisc<P>> {
        match self {
            LeafKind::Pfifo { limit } => Box::new(Fifo::pfifo(*limit)),
            LeafKind::Bfifo { limit } => Box::new(Fifo::bfifo(*limit)),
        }
    }
}

impl fmt::Display for LeafKind {
    /// `pfifo(limit 1000)`, `bfifo(limit 1.5m)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeafKind::Pfifo { limit } => write!(f, "pfifo(limit {limit})"),
            LeafKind::Bfifo { limit } => write!(f, "bfifo(limit {})", Size(*limit as u64)),
        }
    }
}

/// Read `leaf = "name"` or a `{ type = "name", … }` table. `ctx` names the place in messages.
pub(crate) fn read_leaf(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<LeafKind> {
    let kinds = LeafKind::KNOWN.join(", ");
    let empty: Vec<(Spanned<String>, Spanned<Raw>)> = Vec::new();
    let (name_v, entries) = match v.get_ref() {
        Raw::Str(_) => (v, empty.as_slice()),
        Raw::Table(e) => match e.iter().find(|(k, _)| k.get_ref() == "type") {
            Some((_, t)) => (t, e.as_slice()),
            None => {
                sink.error(
                    &v.span(),
                    format!("{ctx}: the table has no `type`"),
                    format!("add `type = \"pfifo\"` (known: {kinds})"),
                );
                return None;
            }
        },
        _ => {
            sink.error(
                &v.span(),
                format!(
                    "{ctx}: expected a qdisc name or table, found {}",
                    v.get_ref().kind()
                ),
                "write `leaf = \"pfifo\"` or a `[class.leaf]` table with `type` and its parameters",
            );
            return None;
        }
    };
    let name = values::string(sink, ctx, name_v, "\"pfifo\"")?;
    let kind = name.trim().to_ascii_lowercase();
    let anchor: Range<usize> = v.span();
    let mut p = Params::new(sink, format!("{ctx}: {kind}"), entries, anchor);
    match kind.as_str() {
        "pfifo" => {
            let mut limit = DEFAULT_PFIFO_LIMIT;
            p.int("limit", &mut limit, 1, (1 << 30) - 1);
            p.finish(LeafKind::Pfifo { limit }, Ok(()))
        }
        "bfifo" => {
            let mut limit = DEFAULT_BFIFO_LIMIT;
            p.size("limit", &mut limit, 1, (1 << 30) - 1);
            p.finish(LeafKind::Bfifo { limit }, Ok(()))
        }
        _ => {
            let help = match suggest(&kind, LeafKind::KNOWN.iter().copied()) {
                Some(s) => format!("did you mean \"{s}\"? known leaf qdiscs: {kinds}"),
                None => format!("known leaf qdiscs: {kinds}"),
            };
            p.sink.error(
                &name_v.span(),
                format!("{ctx}: unknown leaf qdisc \"{name}\""),
                help,
            );
            None
        }
    }
}
