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
use linkshare_core::qdisc::codel::{Codel, CodelParams};
use linkshare_core::qdisc::drr::{Drr, DrrParams};
use linkshare_core::qdisc::fifo::{Fifo, FifoLimit, DEFAULT_BFIFO_LIMIT, DEFAULT_PFIFO_LIMIT};
use linkshare_core::qdisc::prio::{Prio, PrioParams};
use linkshare_core::qdisc::red::{Red, RedParams};
use linkshare_core::qdisc::sfq::{Sfq, SfqParams};
use linkshare_core::qdisc::tbf::{Tbf, TbfParams};
use linkshare_core::qdisc::ParamError;
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
    /// Stochastic fairness queueing (McKenney).
    Sfq(SfqParams),
    /// Deficit round robin over flow buckets (Shreedhar & Varghese).
    Drr(DrrParams),
    /// Strict priority bands chosen by the TOS priomap.
    Prio(PrioParams),
    /// Token bucket filter.
    Tbf(TbfParams),
    /// Random early detection (Floyd & Jacobson 1993).
    Red(RedParams),
    /// Controlled delay (RFC 8289).
    Codel(CodelParams),
}

impl LeafKind {
    /// Leaf kinds by name.
    pub const KNOWN: &'static [&'static str] = &[
        "pfifo", "bfifo", "sfq", "drr", "prio", "tbf", "red", "codel",
    ];

    pub fn name(&self) -> &'static str {
        match self {
            LeafKind::Pfifo { .. } => "pfifo",
            LeafKind::Bfifo { .. } => "bfifo",
            LeafKind::Sfq(_) => "sfq",
            LeafKind::Drr(_) => "drr",
            LeafKind::Prio(_) => "prio",
            LeafKind::Tbf(_) => "tbf",
            LeafKind::Red(_) => "red",
            LeafKind::Codel(_) => "codel",
        }
    }

    /// The queue of an HTB/CBQ/DRR leaf class.
    pub fn spec<P: Packet + 'static>(&self) -> Result<LeafSpec<P>, ParamError> {
        Ok(match self {
            LeafKind::Pfifo { limit } => LeafSpec::Fifo(FifoLimit::Packets(*limit)),
            LeafKind::Bfifo { limit } => LeafSpec::Fifo(FifoLimit::Bytes(*limit)),
            other => LeafSpec::Qdisc(other.build()?),
        })
    }

    /// The discipline on its own, as a root qdisc.
    pub fn build<P: Packet + 'static>(&self) -> Result<Box<dyn Qdisc<P>>, ParamError> {
        Ok(match self {
            LeafKind::Pfifo { limit } => Box::new(Fifo::pfifo(*limit)),
            LeafKind::Bfifo { limit } => Box::new(Fifo::bfifo(*limit)),
            LeafKind::Sfq(p) => Box::new(Sfq::new(p.clone())?),
            LeafKind::Drr(p) => Box::new(Drr::new(p.clone())?),
            LeafKind::Prio(p) => Box::new(Prio::new(p.clone())?),
            LeafKind::Tbf(p) => Box::new(Tbf::new(p.clone())?),
            LeafKind::Red(p) => Box::new(Red::new(p.clone())?),
            LeafKind::Codel(p) => Box::new(Codel::new(p.clone())?),
        })
    }
}

impl fmt::Display for LeafKind {
    /// `pfifo(limit 1000)`, `bfifo(limit 1.5m)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeafKind::Pfifo { limit } => write!(f, "pfifo(limit {limit})"),
            LeafKind::Bfifo { limit } => write!(f, "bfifo(limit {})", Size(*limit as u64)),
            LeafKind::Sfq(p) => write!(
                f,
                "sfq(limit {} depth {} quantum {} divisor {})",
                p.limit, p.depth, p.quantum, p.divisor
            ),
            LeafKind::Drr(p) => write!(f, "drr(quantum {} flows {})", p.quantum, p.flows),
            LeafKind::Prio(p) => write!(f, "prio(bands {})", p.bands),
            LeafKind::Tbf(p) => write!(f, "tbf(rate {} burst {})", p.rate, Size(p.burst as u64)),
            LeafKind::Red(p) => write!(f, "red(min {} max {} max_p {})", p.min, p.max, p.max_p),
            LeafKind::Codel(p) => write!(f, "codel(target {} interval {})", p.target, p.interval),
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
            let help = if ctx == "`qdisc`" {
                "write `qdisc = \"htb\"`, `qdisc = \"cbq\"`, a discipline without classes such as `qdisc = \"sfq\"`, or a table `qdisc = { type = \"sfq\", … }`"
            } else {
                "write `leaf = \"pfifo\"` or a `[class.leaf]` table with `type` and its parameters"
            };
            sink.error(
                &v.span(),
                format!(
                    "{ctx}: expected a qdisc name or table, found {}",
                    v.get_ref().kind()
                ),
                help,
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
        "sfq" => {
            let mut q = SfqParams::default();
            p.size("quantum", &mut q.quantum, 1, u32::MAX as u64);
            p.int("limit", &mut q.limit, 1, u32::MAX as i64);
            p.int("depth", &mut q.depth, 1, u32::MAX as i64);
            p.int("divisor", &mut q.divisor, 1, u32::MAX as i64);
            p.int("flows", &mut q.flows, 1, u32::MAX as i64);
            p.time("perturb", &mut q.perturb);
            p.int("seed", &mut q.seed, 0, i64::MAX);
            let check = q.validate();
            p.finish(LeafKind::Sfq(q), check)
        }
        "drr" => {
            let mut q = DrrParams::default();
            p.size("quantum", &mut q.quantum, 1, u32::MAX as u64);
            p.int("flows", &mut q.flows, 1, u32::MAX as i64);
            p.int("limit", &mut q.limit, 1, u32::MAX as i64);
            let check = q.validate();
            p.finish(LeafKind::Drr(q), check)
        }
        "prio" => {
            let mut q = PrioParams::default();
            p.int("bands", &mut q.bands, 2, 16);
            p.int_list("priomap", &mut q.priomap, 0, 15);
            p.int("limit", &mut q.limit, 1, u32::MAX as i64);
            let check = q.validate();
            p.finish(LeafKind::Prio(q), check)
        }
        "tbf" => {
            let mut q = TbfParams::default();
            p.rate("rate", &mut q.rate);
            p.size("burst", &mut q.burst, 1, u32::MAX as u64);
            p.size("limit", &mut q.limit, 0, u32::MAX as u64);
            p.opt_time("latency", &mut q.latency);
            p.opt_rate("peakrate", &mut q.peakrate);
            p.size("mtu", &mut q.mtu, 64, u32::MAX as u64);
            let check = q.validate();
            p.finish(LeafKind::Tbf(q), check)
        }
        "red" => {
            let mut q = RedParams::default();
            p.size("limit", &mut q.limit, 1, u32::MAX as u64);
            p.size("min", &mut q.min, 1, u32::MAX as u64);
            p.size("max", &mut q.max, 1, u32::MAX as u64);
            p.size("avpkt", &mut q.avpkt, 1, u32::MAX as u64);
            p.int("burst", &mut q.burst, 0, u32::MAX as i64);
            let mut wq = -1.0;
            p.float("wq", &mut wq, 0.0, 1.0);
            if wq >= 0.0 {
                q.wq = Some(wq);
            }
            p.float("max_p", &mut q.max_p, 0.0, 1.0);
            p.rate("bandwidth", &mut q.bandwidth);
            p.bool("ecn", &mut q.ecn);
            p.bool("gentle", &mut q.gentle);
            p.bool("harddrop", &mut q.harddrop);
            p.int("seed", &mut q.seed, 0, i64::MAX);
            let check = q.validate();
            p.finish(LeafKind::Red(q), check)
        }
        "codel" => {
            let mut q = CodelParams::default();
            p.time("target", &mut q.target);
            p.time("interval", &mut q.interval);
            p.int("limit", &mut q.limit, 1, u32::MAX as i64);
            p.bool("ecn", &mut q.ecn);
            p.opt_time("ce_threshold", &mut q.ce_threshold);
            let check = q.validate();
            p.finish(LeafKind::Codel(q), check)
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
