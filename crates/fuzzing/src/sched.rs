//! `sched`: a random class tree and a random sequence of operations driving HTB or CBQ.
//!
//! The input is decoded, byte by byte, into
//!
//! ```text
//! [kind] [n] n × [parent, rate %, ceil %, prio, leaf]   then ops until the input ends:
//! op % 4 = 0 | 1: enqueue a packet of (size) bytes into class (c) — filters map DSCP c to class c
//!          2    : dequeue at now
//!          3    : advance now by (dt) × 16 µs, then dequeue as a link of the root's rate would
//! ```
//!
//! and a policy file is written from the tree, so the scheduler is built exactly as users build it
//! (validation included: a tree `check` refuses is simply skipped). After every call the counters
//! must balance. For HTB, every class's bytes sent over the whole run must stay within what its
//! `ceil` allows: `ceil · T + cburst + one MTU` (Linux's guarantee, and ours).

use std::fmt::Write;

use linkshare_config::Policy;
use linkshare_core::{Dequeued, PacketMeta, Qdisc, Time};

const LEAVES: [&str; 5] = ["pfifo", "sfq", "codel", "fq_codel", "red"];
const ROOT_BPS: u64 = 10_000_000;
const MTU: u64 = 1500;
/// Operations per input: bounds the work of one execution.
const MAX_OPS: usize = 4096;

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn next(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
}

/// Decode the tree and write it as a policy file. `None` when the input is too short. Children
/// share what their parent has left (so the tree is one `check` accepts), ceils lie between the
/// rate and the parent's ceil, and only leaves get a leaf discipline.
fn policy_text(b: &mut Bytes<'_>) -> Option<(String, bool, usize)> {
    let htb = b.next()? % 2 == 0;
    let n = 2 + (b.next()? % 7) as usize;
    // (parent, rate, ceil, prio, leaf)
    let mut classes: Vec<(usize, u64, u64, u8, &str)> = vec![(0, ROOT_BPS, ROOT_BPS, 0, "")];
    let mut left = vec![ROOT_BPS];
    for i in 1..n {
        let parent = b.next()? as usize % i;
        let share = 1 + u64::from(b.next()? % 60);
        let ceil_pct = u64::from(b.next()? % 101);
        let prio = b.next()? % 8;
        let leaf = LEAVES[b.next()? as usize % LEAVES.len()];
        let rate = (left[parent] * share / 100).max(8_000);
        left[parent] = left[parent].saturating_sub(rate);
        let pceil = classes[parent].2.max(rate);
        let ceil = rate + (pceil - rate) * ceil_pct / 100;
        classes.push((parent, rate, ceil, prio, leaf));
        left.push(rate);
    }
    let mut t = String::new();
    let kind = if htb { "htb" } else { "cbq" };
    let _ = writeln!(t, "qdisc = \"{kind}\"");
    let is_parent = |i: usize| classes.iter().skip(1).any(|c| c.0 == i);
    let default = (1..n).rev().find(|&i| !is_parent(i))?;
    let _ = writeln!(t, "default = \"c{default}\"");
    let _ = writeln!(t, "[[class]]\nname = \"c0\"\nrate = \"{ROOT_BPS}bit\"");
    for (i, &(parent, rate, ceil, prio, leaf)) in classes.iter().enumerate().skip(1) {
        let _ = writeln!(
            t,
            "[[class]]\nname = \"c{i}\"\nparent = \"c{parent}\"\nrate = \"{rate}bit\"\nprio = {prio}"
        );
        if htb {
            let _ = writeln!(t, "ceil = \"{ceil}bit\"");
        }
        if !is_parent(i) {
            let _ = writeln!(t, "leaf = \"{leaf}\"");
        }
    }
    for i in (1..n).filter(|&i| !is_parent(i)) {
        let _ = writeln!(t, "[[filter]]\nclass = \"c{i}\"\ndscp = {i}");
    }
    Some((t, htb, n))
}

pub fn run(data: &[u8]) {
    let mut b = Bytes(data);
    let Some((text, htb, n)) = policy_text(&mut b) else {
        return;
    };
    let Ok(policy) = Policy::parse(&text, "sched-fuzz.toml") else {
        return;
    };
    let Ok(mut q) = policy.build::<PacketMeta>() else {
        return;
    };
    let mut now = 0u64;
    let mut sent = vec![0u64; n];
    let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    let mut link_free = 0u64;
    for _ in 0..MAX_OPS {
        let Some(op) = b.next() else { break };
        match op % 4 {
            0 | 1 => {
                let (Some(c), Some(s)) = (b.next(), b.next()) else {
                    break;
                };
                let class = 1 + c as usize % (n - 1);
                let size = 40 + u32::from(s) * 6; // 40..=1570: around the MTU too
                let meta = PacketMeta {
                    len: size,
                    tos: (class as u8) << 2,
                    ..PacketMeta::default()
                };
                let _ = q.enqueue(meta, Time(now));
            }
            2 => {
                let _ = dequeue(q.as_mut(), now, &mut sent);
            }
            _ => {
                let Some(dt) = b.next() else { break };
                now += u64::from(dt) * 16_000;
                // A link of the root's rate: send while it is free.
                while link_free <= now {
                    let Some(len) = dequeue(q.as_mut(), now, &mut sent) else {
                        break;
                    };
                    link_free = link_free.max(now) + len * 8 * 1_000_000_000 / ROOT_BPS;
                }
            }
        }
        while q.take_dropped().is_some() {}
        crate::assert_conserved(q.as_ref(), "sched");
    }
    if htb {
        check_ceil(&policy, &names, &sent, now);
    }
    let drained = q.drain(Time(now)).len() as u64;
    while q.take_dropped().is_some() {}
    crate::assert_conserved(q.as_ref(), "sched after drain");
    assert_eq!(
        q.stats().backlog.packets,
        0,
        "backlog left after drain ({drained} drained)"
    );
}

/// Dequeue one packet and count its bytes against its class. Returns its length.
fn dequeue(q: &mut dyn Qdisc<PacketMeta>, now: u64, sent: &mut [u64]) -> Option<u64> {
    match q.dequeue(Time(now)) {
        Dequeued::Packet(m) => {
            let class = (m.tos >> 2) as usize;
            if let Some(s) = sent.get_mut(class) {
                *s += u64::from(m.len);
            }
            Some(u64::from(m.len))
        }
        Dequeued::Empty | Dequeued::NotBefore(_) => None,
    }
}

fn check_ceil(p: &Policy, names: &[String], sent: &[u64], now: u64) {
    for c in p.classes() {
        let Some(i) = names.iter().position(|x| *x == c.name) else {
            continue;
        };
        if !c.is_leaf {
            continue;
        }
        let allowed = c.ceil.0 as u128 * now as u128 / 8 / 1_000_000_000
            + u128::from(c.cburst)
            + u128::from(MTU + 70);
        assert!(
            u128::from(sent[i]) <= allowed,
            "class {} sent {} bytes in {now} ns, more than ceil {} bit/s allows ({allowed})",
            c.name,
            sent[i],
            c.ceil.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoder must produce trees that `check` accepts, or the harness would test nothing.
    #[test]
    fn decoded_trees_are_valid_policies() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let (mut accepted, mut total) = (0, 0);
        for _ in 0..300 {
            let data: Vec<u8> = (0..64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let Some((text, _, _)) = policy_text(&mut Bytes(&data)) else {
                continue;
            };
            total += 1;
            match Policy::parse(&text, "t") {
                Ok(p) if p.build::<PacketMeta>().is_ok() => accepted += 1,
                Ok(_) => {}
                Err(e) => eprintln!("refused:\n{text}\n{e}"),
            }
        }
        assert!(
            total == 300 && accepted == total,
            "{accepted} of {total} trees accepted"
        );
    }
}
