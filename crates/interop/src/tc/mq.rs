//! A tree too large for one kernel HTB: `mq` at the root and one HTB per transmit queue, the
//! layout LibreQoS runs (one HTB per CPU, tc-mq(8)).
//!
//! ```text
//! qdisc replace dev D root handle 1: mq
//! qdisc add dev D parent 1:1 handle 2: htb default …     # queue 1: top-level classes a, b
//! qdisc add dev D parent 1:2 handle 3: htb …             # queue 2: top-level class c
//! class add dev D parent 2: classid 2:1 htb …            # minors numbered per HTB
//! qdisc add dev D parent 2:1 handle 4: fq_codel …         # leaf handles after the HTBs
//! filter add dev D parent 2: …                           # each HTB: the filters of its classes
//! ```
//!
//! Principles:
//! * The unit is a top-level class with everything beneath it: an HTB class cannot lend to or
//!   borrow from a class in another HTB, so a subtree is never split. Subtrees go to queues in
//!   file order, a new queue when the next one no longer fits in 65,533 classes. A top-level
//!   class with more beneath it than one HTB can number is an error that says so and what to do.
//! * One device numbers all its qdiscs in one 16-bit handle space (the mq, the HTBs and every
//!   leaf): when the leaves do not fit, `pfifo` leaves are left to HTB's own default leaf (a
//!   pfifo of `txqueuelen` packets, which needs no handle; net/sched/sch_htb.c), said in a note;
//!   if the others still do not fit, the export fails with the count.
//! * Which queue a packet takes is the kernel's choice (XPS, or the transmit hash), not the
//!   classifier's: the script says in a note that subscribers must be steered to their queue
//!   (LibreQoS does it in XDP; `tc … clsact egress … action skbedit queue_mapping N` can).

use std::fmt::Write as _;

use anyhow::{bail, Context};
use linkshare_config::{FilterInfo, LeafKind, Policy};

use super::export::{class_line, leaf_context, leaf_qdisc, ExportOptions};
use super::u32_out::{filters, Target};

/// The highest qdisc major a script may give (`ffff:` is the ingress/clsact qdisc's).
const MAJOR_MAX: usize = 0xfffe;

/// The queue (0-based) and the per-HTB minor of every class, and the number of queues.
pub(super) fn layout(
    policy: &Policy,
    limit: usize,
) -> anyhow::Result<(Vec<(usize, usize)>, usize)> {
    let classes = policy.classes();
    // The top-level ancestor of every class (parents come before their children in the file,
    // but do not rely on it: walk up with memoisation).
    let mut top: Vec<Option<usize>> = vec![None; classes.len()];
    for i in 0..classes.len() {
        let mut path = vec![i];
        let mut at = i;
        let t = loop {
            if let Some(t) = top[at] {
                break t;
            }
            match classes[at].parent_id {
                Some(p) if path.len() <= classes.len() => {
                    at = p as usize;
                    path.push(at);
                }
                _ => break at,
            }
        };
        for k in path {
            top[k] = Some(t);
        }
    }
    let top: Vec<usize> = top.into_iter().map(|t| t.unwrap_or(0)).collect();
    let mut size = vec![0usize; classes.len()];
    for t in &top {
        size[*t] += 1;
    }
    // Top-level classes to queues in file order.
    let mut queue_of_top = vec![0usize; classes.len()];
    let (mut queue, mut used) = (0usize, 0usize);
    for (i, c) in classes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.parent_id.is_none())
    {
        if size[i] > limit {
            bail!(
                "{}:{}: class `{}` has {} classes in its subtree, more than the {limit} one kernel \
                 HTB can number (16-bit class ids), and an HTB class cannot share its rate across \
                 the HTBs of `mq`: split it into top-level classes of at most {limit} classes each \
                 (one HTB per transmit queue, as LibreQoS runs one per CPU), or shape with \
                 linkshare, whose class ids are not limited",
                policy.origin(),
                c.line,
                c.name,
                size[i]
            );
        }
        if used + size[i] > limit {
            queue += 1;
            used = 0;
        }
        used += size[i];
        queue_of_top[i] = queue;
    }
    let mut next_minor = vec![0usize; queue + 1];
    let place = top
        .iter()
        .map(|t| {
            let q = queue_of_top[*t];
            next_minor[q] += 1;
            (q, next_minor[q])
        })
        .collect();
    Ok((place, queue + 1))
}

/// The HTB handle major of queue `q` (0-based): `q + 2`, after the mq's `1:`.
fn htb_major(q: usize) -> usize {
    q + 2
}

/// Write the mq form (see the module comment).
pub(super) fn htb_per_queue(
    policy: &Policy,
    dev: &str,
    stab: &str,
    opts: &ExportOptions,
    out: &mut String,
) -> anyhow::Result<()> {
    let classes = policy.classes();
    let (place, queues) = layout(policy, opts.htb_class_limit)?;
    let id = |i: usize| format!("{:x}:{:x}", htb_major(place[i].0), place[i].1);
    let leaves: Vec<usize> = (0..classes.len()).filter(|i| classes[*i].is_leaf).collect();
    let first_leaf_major = htb_major(queues);
    let room = MAJOR_MAX + 1 - first_leaf_major;
    let pfifo = |i: &usize| matches!(classes[*i].leaf, LeafKind::Pfifo { .. });
    let skip_pfifo = leaves.len() > room;
    let written: Vec<usize> = leaves
        .iter()
        .copied()
        .filter(|i| !(skip_pfifo && pfifo(i)))
        .collect();
    if written.len() > room {
        bail!(
            "{}: {} leaf qdiscs do not fit in one device's 16-bit qdisc handles ({room} are left \
             after the mq and its {queues} HTBs): give most classes pfifo leaves (HTB's default \
             leaf needs no handle), or shape the subscribers on several devices",
            policy.origin(),
            written.len()
        );
    }
    let default = policy.default_class_id() as usize;
    let r2q = policy.htb_params().r2q;
    let _ = writeln!(
        out,
        "# {} classes: more than one HTB can number ({}), so mq with one HTB per transmit queue",
        classes.len(),
        opts.htb_class_limit
    );
    let _ = writeln!(
        out,
        "# note: needs {queues} transmit queues on {dev} (ethtool -L, or numtxqueues for veth), and \
         each subscriber's packets steered to its HTB's queue (XDP as LibreQoS does, or clsact \
         egress with `action skbedit queue_mapping`): the kernel picks the queue, not the filters"
    );
    let _ = writeln!(out, "qdisc replace dev {dev} root handle 1: {stab}mq");
    for q in 0..queues {
        let d = if place[default].0 == q {
            format!(" default {:x}", place[default].1)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "qdisc add dev {dev} parent 1:{:x} handle {:x}: htb{d} r2q {r2q}",
            q + 1,
            htb_major(q)
        );
    }
    for (i, c) in classes.iter().enumerate() {
        let parent = match c.parent_id {
            Some(p) => id(p as usize),
            None => format!("{:x}:", htb_major(place[i].0)),
        };
        class_line(dev, &parent, &id(i), c, out);
    }
    if skip_pfifo {
        let _ = writeln!(
            out,
            "# note: {} pfifo leaves are left to HTB's default leaf (pfifo of txqueuelen packets): \
             one device has too few qdisc handles for {} leaves",
            leaves.len() - written.len(),
            leaves.len()
        );
    }
    for (k, i) in written.iter().enumerate() {
        let q = leaf_qdisc(&classes[*i].leaf, out)
            .with_context(|| leaf_context(policy, &classes[*i]))?;
        let _ = writeln!(
            out,
            "qdisc add dev {dev} parent {} handle {:x}: {q}",
            id(*i),
            first_leaf_major + k
        );
    }
    for q in 0..queues {
        let list: Vec<(usize, &FilterInfo)> = policy
            .filters()
            .iter()
            .enumerate()
            .filter(|(_, f)| place[f.spec.class as usize].0 == q)
            .collect();
        let target = Target {
            dev,
            parent: format!("{:x}:", htb_major(q)),
            classid: &id,
            hash: opts.hash_filters,
        };
        filters(policy, &list, &target, out)?;
    }
    Ok(())
}
