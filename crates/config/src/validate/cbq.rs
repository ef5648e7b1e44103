//! CBQ's own keys (Floyd & Jacobson 1995, "Link-sharing and resource management models for
//! packet networks"; ALTQ's `altq_cbq` and Linux's `net/sched/sch_cbq.c` for the knobs).
//!
//! Read in the first pass like every other key: the top-level options (scheduler, guideline,
//! ALTQ compatibility…), the per-class estimator and burst keys, and the `share` form of an
//! allocation, which becomes an absolute rate once the parents' rates are known. The tree
//! checks themselves (names, cycles, capacity…) are shared with HTB in [`super::tree`].

use std::collections::HashMap;

use linkshare_core::cbq;
use linkshare_core::units::{Duration, Rate};

use crate::params::Params;
use crate::source::Sink;
use crate::{CbqClassOptions, CbqGuideline, CbqOptions, CbqScheduler, OfftimeUnit, UndertimeClock};

use super::read::{get, At, ClassDraft, Entries};

/// Top-level keys that only CBQ reads.
pub(super) const CBQ_TOP_KEYS: &[&str] = &[
    "scheduler",
    "guideline",
    "efficient",
    "altq_compat",
    "undertime_clock",
    "offtime_unit",
];
/// Class keys under `qdisc = "cbq"`.
pub(super) const CBQ_CLASS_KEYS: &[&str] = &[
    "name",
    "parent",
    "rate",
    "share",
    "prio",
    "borrow",
    "maxburst",
    "minburst",
    "avgpkt",
    "maxidle",
    "minidle",
    "offtime",
    "extradelay",
    "leaf",
];

/// CBQ: a `share` becomes a rate, a fraction of the parent's, parents first. Parents that do not
/// resolve (unknown, cyclic) are reported by the tree checks; their children keep no rate.
pub(super) fn resolve_shares(sink: &mut Sink, classes: &mut [ClassDraft]) {
    let idx: HashMap<String, usize> = classes
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.name.as_ref().map(|n| (n.v.clone(), i)))
        .collect();
    let n = classes.len();
    for _ in 0..n {
        let mut changed = false;
        for i in 0..n {
            if classes[i].rate.is_some() {
                continue;
            }
            let Some((share, span)) = classes[i].share.as_ref().map(|s| (s.v, s.span.clone()))
            else {
                continue;
            };
            let parent = classes[i]
                .parent
                .as_ref()
                .and_then(|p| idx.get(&p.v))
                .copied();
            if let Some(p) = parent.filter(|&p| p != i) {
                if let Some(pr) = classes[p].rate.as_ref().map(|r| r.v) {
                    let r = Rate((pr.0 as f64 * share).round() as u64);
                    classes[i].rate = Some(At { v: r, span });
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    for c in classes.iter() {
        if let (Some(s), None, false) = (&c.share, &c.parent, c.parent_broken) {
            let name = c.name.as_ref().map(|n| n.v.as_str()).unwrap_or("?");
            sink.error(
                &s.span,
                format!("class `{name}`: a root class cannot have a `share` (a share of what?)"),
                "give the root the link's rate, e.g. `rate = \"10mbit\"`",
            );
        }
    }
}

/// A CBQ class's keys with the mtu applied: `avgpkt` cannot exceed the mtu (it is an average
/// packet size); left out, it is 1000 bytes or the mtu if smaller.
pub(super) fn cbq_class(
    sink: &mut Sink,
    name: &str,
    c: &ClassDraft,
    mtu: Option<u32>,
) -> CbqClassOptions {
    let mut k = c.cbq;
    let Some(mtu) = mtu else { return k };
    match &c.avgpkt_span {
        Some(span) if k.avgpkt > mtu => sink.error(
            span,
            format!(
                "class `{name}`: avgpkt {} bytes is above the mtu ({mtu} bytes)",
                k.avgpkt
            ),
            format!("avgpkt is the average packet size: use at most {mtu}, or raise `mtu`"),
        ),
        Some(_) => {}
        None => k.avgpkt = k.avgpkt.min(mtu),
    }
    k
}

/// CBQ's per-class keys (rate/share and prio are read with the common keys).
pub(super) fn read_cbq_class(sink: &mut Sink, ctx: &str, e: &Entries, c: &mut CbqClassOptions) {
    let mut p = Params::borrowed(sink, ctx.to_string(), e);
    p.bool("borrow", &mut c.borrow);
    p.int("maxburst", &mut c.maxburst, 1, 1024);
    p.int("minburst", &mut c.minburst, 1, 1024);
    p.size("avgpkt", &mut c.avgpkt, 16, 65536);
    p.opt_time("maxidle", &mut c.maxidle);
    p.opt_time("minidle", &mut c.minidle);
    p.opt_time("offtime", &mut c.offtime);
    p.time("extradelay", &mut c.extradelay);
    if c.minburst > c.maxburst {
        let span = get(e, "minburst").map(|v| v.span());
        if let Some(span) = span {
            p.sink.error(
                &span,
                format!(
                    "{ctx}: minburst {} is above maxburst {}",
                    c.minburst, c.maxburst
                ),
                "minburst is the smaller of the two: lower it or raise maxburst",
            );
        }
    }
}

/// CBQ's top-level options. `altq_compat = true` sets every ALTQ behaviour; an explicit key
/// still overrides it.
pub(super) fn read_cbq_options(sink: &mut Sink, e: &Entries) -> Option<CbqOptions> {
    let mut compat = false;
    let mut o = CbqOptions::default();
    let mut p = Params::borrowed(sink, "cbq".to_string(), e);
    p.bool("altq_compat", &mut compat);
    if compat {
        o = CbqOptions::altq();
    }
    p.word("scheduler", &mut o.scheduler, CbqScheduler::NAMED);
    p.word("guideline", &mut o.guideline, CbqGuideline::NAMED);
    p.bool("efficient", &mut o.efficient);
    p.word(
        "undertime_clock",
        &mut o.undertime_clock,
        UndertimeClock::NAMED,
    );
    p.word("offtime_unit", &mut o.offtime_unit, OfftimeUnit::NAMED);
    o.altq_compat = compat;
    Some(o)
}

/// A `minburst` in the hundreds makes ALTQ's derived `offtime` grow as `(32/31)^minburst`: years
/// at 950, where a class that goes overlimit once is suspended for the rest of the run. By default
/// the scheduler uses its first-order term instead (`CbqParams::bound_offtime`); under
/// `altq_compat` it does not. Either
/// way the user is told, with the figure, on the class's line.
pub(super) fn warn_runaway_offtime(
    sink: &mut Sink,
    classes: &[ClassDraft],
    infos: &[crate::ClassInfo],
    opts: &CbqOptions,
    mtu: u32,
) {
    let link = super::root_rate_of(infos).0;
    for (draft, info) in classes.iter().zip(infos) {
        let Some(k) = &info.cbq else { continue };
        if k.offtime.is_some() || info.rate.0 == 0 || link == 0 {
            continue;
        }
        let d = cbq::derive(link, info.rate.0, k.avgpkt, mtu, k.maxburst, k.minburst);
        if d.offtime(true) == d.offtime_ns {
            continue;
        }
        let formula = Duration(d.offtime_ns);
        let (what, help) = if opts.altq_compat {
            (
                format!("with `altq_compat` it is used as is: once overlimit, the class is suspended for {formula}"),
                format!(
                    "lower `minburst` (at most about 40 keeps ALTQ's formula sane), set `offtime` \
                     explicitly, or drop `altq_compat` to use its first-order term, {}",
                    Duration(d.offtime_first_order_ns)
                ),
            )
        } else {
            (
                format!("its first-order term, {}, is used instead", Duration(d.offtime_first_order_ns)),
                "lower `minburst` (at most about 40 keeps ALTQ's formula sane) or set `offtime` explicitly"
                    .to_string(),
            )
        };
        sink.warn(
            &draft.header,
            format!(
                "class `{}`: minburst {} gives an ALTQ offtime of {formula}; {what}",
                info.name, k.minburst
            ),
            help,
        );
    }
}
