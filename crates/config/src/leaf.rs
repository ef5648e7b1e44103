//! Leaf disciplines: the queue at a leaf class (`leaf = "sfq"`, `[class.leaf] type = "sfq" …`),
//! or the whole scheduler when a policy's root is not classful (`qdisc = "fq_codel"`).
//!
//! Each kind is one [`LeafKind`] variant holding its core parameter struct, one reader function
//! below that lists its keys, and one arm in [`LeafKind::build`]. The keys are the fields of the
//! core parameter struct, with the same names; the struct's own `validate` gives the range checks,
//! reported at the offending value.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use linkshare_core::leaf::LeafSpec;
use linkshare_core::qdisc::cake::{Cake, CakeParams};
use linkshare_core::qdisc::codel::{Codel, CodelParams};
use linkshare_core::qdisc::drr::{Drr, DrrParams};
use linkshare_core::qdisc::fifo::{Fifo, FifoLimit, DEFAULT_BFIFO_LIMIT, DEFAULT_PFIFO_LIMIT};
use linkshare_core::qdisc::fq_codel::{FqCodel, FqCodelParams, FqCodelShared};
use linkshare_core::qdisc::prio::{Prio, PrioParams};
use linkshare_core::qdisc::red::{Red, RedParams};
use linkshare_core::qdisc::rio::{Rio, RioParams};
use linkshare_core::qdisc::sfq::{Sfq, SfqParams};
use linkshare_core::qdisc::tbf::{Tbf, TbfParams};
use linkshare_core::qdisc::ParamError;
use linkshare_core::units::Size;
use linkshare_core::{Packet, Qdisc};
use toml::Spanned;

use crate::diag::suggest;
use crate::params::Params;
use crate::raw::Raw;
use crate::source::Sink;
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
    /// RED with in/out profiles for AF drop precedences (Clark & Fang).
    Rio(RioParams),
    /// Controlled delay (RFC 8289).
    Codel(CodelParams),
    /// Flow queue CoDel (RFC 8290).
    FqCodel(FqCodelParams),
    /// CAKE (Høiland-Jørgensen, Täht & Morton 2018): shaper, tins, host isolation, COBALT.
    Cake(CakeParams),
}

impl LeafKind {
    /// Leaf kinds by name.
    pub const KNOWN: &'static [&'static str] = &[
        "pfifo", "bfifo", "sfq", "drr", "prio", "tbf", "red", "rio", "codel", "fq_codel", "cake",
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
            LeafKind::Rio(_) => "rio",
            LeafKind::Codel(_) => "codel",
            LeafKind::FqCodel(_) => "fq_codel",
            LeafKind::Cake(_) => "cake",
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
            LeafKind::Rio(p) => Box::new(Rio::new(p.clone())?),
            LeafKind::Codel(p) => Box::new(Codel::new(p.clone())?),
            LeafKind::FqCodel(p) => Box::new(FqCodel::new(p.clone())?),
            LeafKind::Cake(p) => Box::new(Cake::new(p.clone())?),
        })
    }
}

/// The leaves of one build, sharing what they can: an fq_codel leaf's parameters are one copy
/// per distinct configuration among the classes (a plan's subscribers), not one per class —
/// HTB's profiles for the leaves. Up to [`LeafShare::MAX`] configurations are remembered; a
/// class beyond them gets a copy of its own (the same behaviour, more bytes).
#[derive(Default)]
pub(crate) struct LeafShare {
    fq_codel: Vec<Arc<FqCodelShared>>,
}

impl LeafShare {
    const MAX: usize = 64;

    /// [`LeafKind::spec`], with the parameters of leaves configured alike shared.
    pub(crate) fn spec<P: Packet + 'static>(
        &mut self,
        leaf: &LeafKind,
    ) -> Result<LeafSpec<P>, ParamError> {
        let LeafKind::FqCodel(p) = leaf else {
            return leaf.spec();
        };
        let shared = self.fq_codel_shared(p)?;
        Ok(LeafSpec::Qdisc(Box::new(FqCodel::with_shared(shared))))
    }

    /// The shared parameters for `p`: one already made for equal ones, or a new one.
    fn fq_codel_shared(&mut self, p: &FqCodelParams) -> Result<Arc<FqCodelShared>, ParamError> {
        // The last one made first: classes of one plan tend to come together.
        if let Some(s) = self.fq_codel.iter().rev().find(|s| s.params() == p) {
            return Ok(s.clone());
        }
        let s = FqCodelShared::new(p.clone())?;
        if self.fq_codel.len() < Self::MAX {
            self.fq_codel.push(s.clone());
        }
        Ok(s)
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
            LeafKind::Rio(p) => write!(
                f,
                "rio(in {}/{}/{} out {}/{}/{})",
                p.in_min, p.in_max, p.in_max_p, p.out_min, p.out_max, p.out_max_p
            ),
            LeafKind::Codel(p) => write!(f, "codel(target {} interval {})", p.target, p.interval),
            LeafKind::FqCodel(p) => write!(
                f,
                "fq_codel(target {} interval {} flows {} quantum {} limit {})",
                p.target, p.interval, p.flows, p.quantum, p.limit
            ),
            LeafKind::Cake(p) => {
                match p.bandwidth {
                    Some(b) => write!(f, "cake(bandwidth {b}")?,
                    None => write!(f, "cake(unlimited")?,
                }
                write!(
                    f,
                    " {} {} rtt {}",
                    p.diffserv.name(),
                    p.isolation.name(),
                    p.rtt
                )?;
                if p.ack_filter != linkshare_core::qdisc::cake::ack_filter::AckFilter::Off {
                    write!(f, " ack_filter {}", p.ack_filter.name())?;
                }
                if p.overhead != Default::default() {
                    write!(f, " {}", p.overhead.tc_words())?;
                }
                write!(f, ")")
            }
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
        "rio" => {
            let mut q = RioParams::default();
            p.size("limit", &mut q.limit, 1, u32::MAX as u64);
            p.size("in_min", &mut q.in_min, 1, u32::MAX as u64);
            p.size("in_max", &mut q.in_max, 1, u32::MAX as u64);
            p.float("in_max_p", &mut q.in_max_p, 0.0, 1.0);
            p.size("out_min", &mut q.out_min, 1, u32::MAX as u64);
            p.size("out_max", &mut q.out_max, 1, u32::MAX as u64);
            p.float("out_max_p", &mut q.out_max_p, 0.0, 1.0);
            p.size("avpkt", &mut q.avpkt, 1, u32::MAX as u64);
            p.int("burst", &mut q.burst, 0, u32::MAX as i64);
            let mut wq = -1.0;
            p.float("wq", &mut wq, 0.0, 1.0);
            if wq >= 0.0 {
                q.wq = Some(wq);
            }
            p.rate("bandwidth", &mut q.bandwidth);
            p.bool("ecn", &mut q.ecn);
            p.bool("gentle", &mut q.gentle);
            p.bool("harddrop", &mut q.harddrop);
            p.int("in_max_precedence", &mut q.in_max_precedence, 1, 3);
            p.word("non_af", &mut q.non_af_in, &[("out", false), ("in", true)]);
            p.int("seed", &mut q.seed, 0, i64::MAX);
            let check = q.validate();
            p.finish(LeafKind::Rio(q), check)
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
        "fq_codel" => {
            let mut q = FqCodelParams::default();
            p.time("target", &mut q.target);
            p.time("interval", &mut q.interval);
            p.int("limit", &mut q.limit, 1, u32::MAX as i64);
            p.size("memory_limit", &mut q.memory_limit, 1, u32::MAX as u64);
            p.int("flows", &mut q.flows, 1, u32::MAX as i64);
            p.size("quantum", &mut q.quantum, 1, u32::MAX as u64);
            p.bool("ecn", &mut q.ecn);
            p.opt_time("ce_threshold", &mut q.ce_threshold);
            p.int(
                "drop_batch_size",
                &mut q.drop_batch_size,
                1,
                u32::MAX as i64,
            );
            let check = q.validate();
            p.finish(LeafKind::FqCodel(q), check)
        }
        "cake" => crate::cake::read(p).map(LeafKind::Cake),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;
    use linkshare_core::PacketMeta;

    fn errors(text: &str) -> Vec<(usize, usize, String)> {
        match Policy::parse(text, "p.toml") {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e
                .diagnostics
                .into_iter()
                .map(|d| (d.line, d.col, d.message))
                .collect(),
        }
    }

    #[test]
    fn fq_codel_as_root_and_leaf() {
        let p = Policy::parse("qdisc = \"fq_codel\"\n", "p.toml").unwrap();
        assert_eq!(
            p.root_leaf(),
            Some(&LeafKind::FqCodel(FqCodelParams::default()))
        );
        assert_eq!(p.build::<PacketMeta>().unwrap().kind(), "fq_codel");
        let text = "qdisc = { type = \"fq_codel\", target = \"2ms\", interval = \"50ms\", \
                    flows = 256, quantum = 300, limit = 500, memory_limit = \"4m\", ecn = false, \
                    ce_threshold = \"1ms\", drop_batch_size = 8 }\n";
        let p = Policy::parse(text, "p.toml").unwrap();
        let Some(LeafKind::FqCodel(q)) = p.root_leaf() else {
            panic!("{:?}", p.root_leaf())
        };
        assert_eq!(q.target.0, 2_000_000);
        assert_eq!(q.interval.0, 50_000_000);
        assert_eq!((q.flows, q.quantum, q.limit), (256, 300, 500));
        assert_eq!(q.memory_limit, 4 << 20);
        assert!(!q.ecn);
        assert_eq!(q.ce_threshold.map(|d| d.0), Some(1_000_000));
        assert_eq!(q.drop_batch_size, 8);
        let leaf = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n\
                    leaf = \"fq_codel\"\n";
        let p = Policy::parse(leaf, "p.toml").unwrap();
        assert_eq!(p.classes()[0].leaf.name(), "fq_codel");
        p.build::<PacketMeta>().unwrap();
    }

    #[test]
    fn rio_keys() {
        let text =
            "qdisc = { type = \"rio\", in_min = \"20k\", in_max = \"40k\", in_max_p = 0.05, \
                    out_min = \"5k\", out_max = \"10k\", out_max_p = 0.2, in_max_precedence = 2, \
                    non_af = \"in\", gentle = true }\n";
        let p = Policy::parse(text, "p.toml").unwrap();
        let Some(LeafKind::Rio(q)) = p.root_leaf() else {
            panic!("{:?}", p.root_leaf())
        };
        assert_eq!(
            (q.in_min, q.in_max, q.out_min, q.out_max),
            (20480, 40960, 5120, 10240)
        );
        assert_eq!((q.in_max_p, q.out_max_p), (0.05, 0.2));
        assert_eq!(q.in_max_precedence, 2);
        assert!(q.non_af_in && q.gentle);
        assert_eq!(p.build::<PacketMeta>().unwrap().kind(), "rio");
        let e = errors("qdisc = { type = \"rio\", out_min = \"20k\" }\n");
        assert!(
            e[0].2.contains("out_min") && e[0].2.contains("below out_max"),
            "{e:?}"
        );
        let e = errors("qdisc = { type = \"rio\", non_af = \"maybe\" }\n");
        assert!(e[0].2.contains("non_af"), "{e:?}");
        let e = errors("qdisc = { type = \"rio\", in_max_precedence = 4 }\n");
        assert!(e[0].2.contains("in_max_precedence"), "{e:?}");
    }

    #[test]
    fn fq_codel_bad_values_point_at_the_value() {
        let e = errors("qdisc = { type = \"fq_codel\", quantum = 10 }\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!((e[0].0, e[0].1), (1, 40));
        assert!(e[0].2.contains("quantum"), "{e:?}");
        let e = errors("qdisc = { type = \"fq_codel\", flows = 100000 }\n");
        assert!(e[0].2.contains("flows"), "{e:?}");
        let e = errors("qdisc = { type = \"fq_codel\", target = \"200ms\" }\n");
        assert!(e[0].2.contains("target"), "{e:?}");
        let e = errors("qdisc = { type = \"fq_codel\", drop_batch_size = 5000 }\n");
        assert!(e[0].2.contains("drop_batch_size"), "{e:?}");
    }

    /// Equal fq_codel parameters give one shared copy, different ones their own; invalid ones
    /// are refused as `LeafKind::spec` refuses them.
    #[test]
    fn leaves_configured_alike_share_their_parameters() {
        let mut share = LeafShare::default();
        let a = FqCodelParams::default();
        let b = FqCodelParams {
            target: linkshare_core::units::Duration::from_millis(10),
            ..FqCodelParams::default()
        };
        let a1 = share.fq_codel_shared(&a).unwrap();
        let b1 = share.fq_codel_shared(&b).unwrap();
        let a2 = share.fq_codel_shared(&a.clone()).unwrap();
        assert!(Arc::ptr_eq(&a1, &a2));
        assert!(!Arc::ptr_eq(&a1, &b1));
        assert_eq!(b1.params(), &b);
        let bad = FqCodelParams {
            flows: 0,
            ..FqCodelParams::default()
        };
        assert!(share.fq_codel_shared(&bad).is_err());
        let spec = share.spec::<PacketMeta>(&LeafKind::FqCodel(bad));
        assert!(spec.is_err());
        let spec = share.spec::<PacketMeta>(&LeafKind::Pfifo { limit: 5 });
        assert!(matches!(spec, Ok(LeafSpec::Fifo(FifoLimit::Packets(5)))));
    }
}
