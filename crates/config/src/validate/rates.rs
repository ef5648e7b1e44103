//! The second pass, numbers: each class's rates, bursts and quantum, then the checks that
//! compare a class with its parent and children.
//!
//! Defaults are Linux's and tc's (`net/sched/sch_htb.c`, `tc/q_htb.c`): `ceil` defaults to the
//! rate, a burst to rate x 1 ms + one MTU, the quantum to rate/r2q clamped to
//! [`MIN_QUANTUM`, `MAX_QUANTUM`] with a warning as tc gives. A burst must hold one full-size
//! packet; the children's guaranteed rates must fit in the parent's (an error: the guarantee
//! could not be kept); a child's ceil above its parent's is only a warning (it is capped in
//! effect). A class whose rate could not be read takes part in none of these comparisons.

use std::ops::Range;

use linkshare_core::classify::ClassId;
use linkshare_core::htb::{
    default_burst, default_quantum, QuantumWarning, BURST_LIMIT, DEFAULT_MTU, DEFAULT_R2Q,
    MAX_DEPTH, MAX_QUANTUM, MIN_QUANTUM, QUANTUM_LIMIT,
};
use linkshare_core::qdisc::fifo::DEFAULT_PFIFO_LIMIT;
use linkshare_core::units::{Rate, Size};

use crate::source::Sink;
use crate::{ClassInfo, LeafKind, QdiscKind};

use super::cbq::cbq_class;
use super::read::{sink_line, At, ClassDraft};
use super::tree::Shape;

/// Step 6, each class's values: rate, ceil, burst, cburst, quantum and leaf with their
/// defaults, reporting a zero rate, a ceil below the rate, a `leaf` on a class with children,
/// a burst out of bounds and a quantum too large (or warning about a computed one clamped).
pub(super) fn class_infos(
    sink: &mut Sink,
    kind: QdiscKind,
    shape: &Shape,
    r2q: Option<u32>,
    mtu: Option<u32>,
) -> Vec<ClassInfo> {
    let (classes, is_leaf, children) = (shape.classes, &shape.is_leaf, &shape.children);
    let (parent_of, depth) = (&shape.parent_of, &shape.depth);
    let name_of = |i: usize| shape.name_of(i);
    let mut infos: Vec<ClassInfo> = Vec::with_capacity(shape.len());
    for (i, c) in classes.iter().enumerate() {
        let name = name_of(i);
        if let Some(l) = &c.leaf {
            if !is_leaf[i] {
                let mut kids: Vec<String> = children[i].iter().map(|&k| name_of(k)).collect();
                if shape.subs[i].count > 0 {
                    kids.push(format!("{} subscribers", shape.subs[i].count));
                }
                sink.error(
                    &l.span,
                    format!("class `{name}` has children ({}), so it is not a leaf and cannot have a leaf qdisc", kids.join(", ")),
                    format!("remove `leaf` from `{name}`; packets wait only in leaf classes, so set it on those"),
                );
            }
        }
        let Numbers {
            rate,
            ceil,
            burst,
            cburst,
            quantum,
        } = numbers(
            sink,
            kind,
            &format!("class `{name}`"),
            c,
            is_leaf[i],
            r2q,
            mtu,
        );
        let d = depth[i].unwrap_or(0);
        let cbq = (kind == QdiscKind::Cbq).then(|| cbq_class(sink, &name, c, mtu));
        infos.push(ClassInfo {
            id: i as ClassId,
            name,
            parent: c.parent.as_ref().map(|p| p.v.clone()),
            parent_id: parent_of[i].map(|p| p as ClassId),
            rate: rate.unwrap_or_default(),
            ceil: ceil.unwrap_or_default(),
            burst: burst.unwrap_or(0),
            cburst: cburst.unwrap_or(0),
            prio: c.prio.as_ref().map(|p| p.v).unwrap_or(0),
            quantum: quantum.unwrap_or(MIN_QUANTUM),
            leaf: c
                .leaf
                .as_ref()
                .map(|l| l.v.clone())
                .unwrap_or(LeafKind::Pfifo {
                    limit: DEFAULT_PFIFO_LIMIT,
                }),
            is_leaf: is_leaf[i],
            depth: d as u8,
            level: if is_leaf[i] {
                0
            } else {
                (MAX_DEPTH - 1).saturating_sub(d) as u8
            },
            children: children[i].iter().map(|&k| k as ClassId).collect(),
            line: sink_line(sink, &c.header),
            cbq,
            hfsc: None,
            written: crate::Written {
                ceil: c.ceil.is_some(),
                burst: c.burst.is_some(),
                cburst: c.cburst.is_some(),
                quantum: c.quantum.is_some(),
            },
        });
    }
    infos
}

/// A class's or a plan's numbers with their defaults filled in (`None`: broken, reported).
pub(super) struct Numbers {
    pub(super) rate: Option<Rate>,
    pub(super) ceil: Option<Rate>,
    pub(super) burst: Option<u32>,
    pub(super) cburst: Option<u32>,
    pub(super) quantum: Option<u32>,
}

/// Rate, ceil, burst, cburst and quantum of one `[[class]]` or `[[plan]]` (`what` names it in
/// messages), reporting a zero rate, a ceil below the rate, a burst out of bounds and a quantum
/// too large (or warning, for a leaf, about a computed one clamped).
pub(super) fn numbers(
    sink: &mut Sink,
    kind: QdiscKind,
    what: &str,
    c: &ClassDraft,
    is_leaf: bool,
    r2q: Option<u32>,
    mtu: Option<u32>,
) -> Numbers {
    let mtu_v = mtu.unwrap_or(DEFAULT_MTU);
    let r2q_v = r2q.unwrap_or(DEFAULT_R2Q);
    let rate = c.rate.as_ref().map(|r| r.v);
    if let (Some(r), true) = (&c.rate, rate == Some(Rate(0))) {
        sink.error(&r.span, format!("{what}: rate is zero"), "give a guaranteed rate above zero, e.g. \"8kbit\"; a class that should only borrow still needs a small rate");
    }
    let ceil = c.ceil.as_ref().map(|x| x.v).or(rate);
    if let (Some(r), Some(cl)) = (&c.rate, &c.ceil) {
        if cl.v < r.v {
            sink.error(
                &cl.span,
                format!("{what}: ceil {} is below rate {}", cl.v, r.v),
                format!("raise ceil to at least {} or lower rate", r.v),
            );
        }
    }
    let burst = match &c.burst {
        Some(b) => check_burst(sink, what, "burst", b, mtu, rate),
        None => rate.map(|r| default_burst(r, mtu_v)),
    };
    let cburst = match &c.cburst {
        Some(b) => check_burst(sink, what, "cburst", b, mtu, ceil),
        None => ceil.map(|r| default_burst(r, mtu_v)),
    };
    let quantum = match &c.quantum {
        Some(q) if q.v > QUANTUM_LIMIT as u64 => {
            sink.error(
                &q.span,
                format!("{what}: quantum {} is too large", Size(q.v)),
                format!(
                    "use at most {}; tc advises {MIN_QUANTUM} to {MAX_QUANTUM} bytes",
                    Size(QUANTUM_LIMIT as u64)
                ),
            );
            None
        }
        Some(q) => Some(q.v as u32),
        None => rate.map(|r| {
            let (q, w) = default_quantum(r, r2q_v);
            // Only leaves use their quantum (DRR among leaves of equal prio).
            // A zero rate is already an error: no quantum warning on top. CBQ has no
            // quantum (its WRR allotment comes from the rates and the mtu).
            let htb = kind == QdiscKind::Htb;
            if let (Some(w), true, Some(rs), false, true) = (w, is_leaf, &c.rate, r.0 == 0, htb) {
                quantum_warning(sink, what, &rs.span, w);
            }
            q
        }),
    };
    Numbers {
        rate,
        ceil,
        burst,
        cburst,
        quantum,
    }
}

/// Step 7a, capacity: the children's guarantees must fit in the parent's. Skipped for a class
/// in a loop, and when any rate involved could not be read.
pub(super) fn check_capacity(sink: &mut Sink, shape: &Shape) {
    let (classes, children, in_cycle) = (shape.classes, &shape.children, &shape.in_cycle);
    let name_of = |i: usize| shape.name_of(i);
    let n = shape.len();
    for i in 0..n {
        let subs = &shape.subs[i];
        if (children[i].is_empty() && subs.count == 0) || in_cycle[i] {
            continue;
        }
        let Some(pr) = &classes[i].rate else { continue };
        let kids: Vec<(String, Rate)> = children[i]
            .iter()
            .filter_map(|&k| classes[k].rate.as_ref().map(|r| (name_of(k), r.v)))
            .collect();
        if kids.len() != children[i].len() {
            continue;
        }
        let sum = Rate(
            kids.iter()
                .map(|(_, r)| r.0)
                .fold(subs.rate, u64::saturating_add),
        );
        if sum > pr.v {
            let mut terms = rate_terms(kids);
            if subs.count > 0 {
                let subs_terms = format!(
                    "{} subscribers of {} adding up to {}",
                    subs.count,
                    subs.file,
                    Rate(subs.rate)
                );
                terms = if terms.is_empty() {
                    subs_terms
                } else {
                    format!("{terms} + {subs_terms}")
                };
            }
            sink.error(
                &pr.span,
                format!(
                    "class `{}`: impossible capacity: the children's guaranteed rates add up to {sum} ({terms}), above its rate {}",
                    name_of(i),
                    pr.v
                ),
                format!("lower the children's rates by {} in total, or raise `{}`'s rate to at least {sum}", Rate(sum.0 - pr.v.0), name_of(i)),
            );
        }
    }
}

/// Children listed in a capacity error: all of them when they are few; else the largest
/// [`TERMS_SHOWN`] and what the others add up to, so that a parent of 10,000 classes gets a
/// readable line that still names the classes to lower first.
fn rate_terms(mut kids: Vec<(String, Rate)>) -> String {
    const TERMS_SHOWN: usize = 6;
    if kids.len() <= TERMS_SHOWN + 2 {
        let list: Vec<String> = kids.iter().map(|(n, r)| format!("{n} {r}")).collect();
        return list.join(" + ");
    }
    // Largest first; among equal rates, file order.
    kids.sort_by_key(|k| std::cmp::Reverse(k.1 .0));
    let shown: Vec<String> = kids[..TERMS_SHOWN]
        .iter()
        .map(|(n, r)| format!("{n} {r}"))
        .collect();
    let rest = &kids[TERMS_SHOWN..];
    let rest_sum = Rate(
        rest.iter()
            .map(|(_, r)| r.0)
            .fold(0u64, u64::saturating_add),
    );
    format!(
        "{} + {} other children adding up to {rest_sum}",
        shown.join(" + "),
        rest.len()
    )
}

/// Step 7b, ceilings: a child's ceil above its parent's ceil is capped in effect (a warning).
pub(super) fn check_child_ceils(sink: &mut Sink, shape: &Shape, infos: &[ClassInfo]) {
    let (classes, parent_of, in_cycle) = (shape.classes, &shape.parent_of, &shape.in_cycle);
    let name_of = |i: usize| shape.name_of(i);
    let n = shape.len();
    for i in 0..n {
        let Some(p) = parent_of[i] else { continue };
        if in_cycle[i] || classes[i].rate.is_none() || classes[p].rate.is_none() {
            continue;
        }
        let (cc, pc) = (infos[i].ceil, infos[p].ceil);
        if cc > pc {
            let span = classes[i]
                .ceil
                .as_ref()
                .map(|x| x.span.clone())
                .or(classes[i].rate.as_ref().map(|x| x.span.clone()))
                .unwrap_or(classes[i].header.clone());
            sink.warn(
                &span,
                format!("class `{}`: ceil {cc} is above its parent `{}`'s ceil {pc}; it can never send faster than {pc}", name_of(i), name_of(p)),
                format!("lower ceil to {pc} (or raise `{}`'s ceil)", name_of(p)),
            );
        }
    }
}

/// A written `burst` or `cburst`: at most [`BURST_LIMIT`], at least one MTU.
fn check_burst(
    sink: &mut Sink,
    what: &str,
    key: &str,
    b: &At<u64>,
    mtu: Option<u32>,
    rate: Option<Rate>,
) -> Option<u32> {
    if b.v > BURST_LIMIT as u64 {
        sink.error(
            &b.span,
            format!("{what}: {key} {} is too large", Size(b.v)),
            format!(
                "use at most {} (the largest bucket kept exactly)",
                Size(BURST_LIMIT as u64)
            ),
        );
        return None;
    }
    if let Some(mtu) = mtu {
        if b.v < mtu as u64 {
            let default = rate
                .map(|r| format!(" (here {})", Size(default_burst(r, mtu) as u64)))
                .unwrap_or_default();
            sink.error(
                &b.span,
                format!("{what}: {key} {} is smaller than one MTU ({mtu} bytes); a full-size packet could never be sent at once", Size(b.v)),
                format!("set {key} to at least \"{}\" (the mtu), or leave it out for the default: rate x 1ms + mtu{default}", Size(mtu as u64)),
            );
            return None;
        }
    }
    Some(b.v as u32)
}

fn quantum_warning(sink: &mut Sink, what: &str, span: &Range<usize>, w: QuantumWarning) {
    match w {
        QuantumWarning::Small { computed } => sink.warn(
            span,
            format!("{what}: quantum {computed} bytes (rate/r2q) is below {MIN_QUANTUM}; using {MIN_QUANTUM}"),
            "set `quantum` or lower `r2q`",
        ),
        QuantumWarning::Big { computed } => sink.warn(
            span,
            format!("{what}: quantum {computed} bytes (rate/r2q) is above {MAX_QUANTUM}; using {MAX_QUANTUM}"),
            "set `quantum` or raise `r2q`",
        ),
    }
}
