//! Cutting a class tree into shards: find the root and the top-level subtrees, place each
//! subtree, give every shard its classes (renumbered, under a local copy of the root), compute the
//! shares `ρ_s`, and keep the map between the whole tree's class ids and `(shard, local id)`.
//!
//! Principles: the cut is below the root (see [`super`]); a subtree is never split; the map is two
//! flat arrays, so the classifier step costs one array read per packet.

use std::sync::Arc;

use super::pool::{Gate, SharedPool};
use super::worker::Shard;
use super::{Placement, ShardConfig, ShardError, MAX_SHARDS};
use crate::classify::{ClassId, Classifier};
use crate::htb::{Htb, HtbClassSpec, HtbParams};
use crate::packet::Packet;
use crate::qdisc::fifo::{FifoLimit, DEFAULT_PFIFO_LIMIT};
use crate::qdisc::leaf::LeafSpec;
use crate::units::Rate;

/// From a class of the whole tree to its shard and its id there, and back.
#[derive(Clone, Debug, Default)]
pub struct ShardMap {
    /// Per class of the whole tree: `(shard, local id)`. The shared root maps to shard 0's copy.
    to_local: Vec<(u32, u32)>,
    /// Per shard, per local id: the class of the whole tree.
    to_global: Vec<Vec<u32>>,
}

impl ShardMap {
    /// The classifier step: where a class of the whole tree lives.
    #[inline]
    pub fn locate(&self, class: ClassId) -> Option<(usize, ClassId)> {
        self.to_local
            .get(class as usize)
            .map(|&(s, l)| (s as usize, l))
    }
    /// The class of the whole tree that local class `local` of `shard` stands for.
    pub fn global(&self, shard: usize, local: ClassId) -> Option<ClassId> {
        self.to_global.get(shard)?.get(local as usize).copied()
    }
    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.to_global.len()
    }
    /// Number of classes in the whole tree.
    pub fn classes(&self) -> usize {
        self.to_local.len()
    }
}

/// A tree cut into shards, ready to hand to threads (or to [`super::ShardedHtb`]).
pub struct ShardPlan<P: Packet> {
    pub shards: Vec<Shard<P>>,
    pub map: ShardMap,
    /// The root's pool, when there is one root to share.
    pub pool: Option<Arc<SharedPool>>,
    /// The shared root: its id, rate and ceil in the whole tree.
    pub root: Option<(ClassId, Rate, Rate)>,
    /// Names and parents of the whole tree.
    pub names: Vec<String>,
    pub parents: Vec<Option<ClassId>>,
}

/// FNV-1a, 64-bit: a fixed, documented hash for [`Placement::Hash`].
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The shares `ρ_s` of `r` for guarantees `g` (see [`super`]): they add up to `r` exactly.
pub(super) fn shares(r: u64, g: &[u64]) -> Vec<u64> {
    let n = g.len().max(1) as u128;
    let sum: u128 = g.iter().map(|&x| x as u128).sum();
    let r128 = r as u128;
    let mut out: Vec<u64> = if sum <= r128 {
        let each = (r128 - sum) / n;
        g.iter().map(|&x| (x as u128 + each) as u64).collect()
    } else {
        g.iter().map(|&x| (r128 * x as u128 / sum) as u64).collect()
    };
    let given: u128 = out.iter().map(|&x| x as u128).sum();
    if let Some(first) = out.first_mut() {
        *first = (*first as u128 + r128.saturating_sub(given)) as u64;
    }
    out
}

/// Cut `specs` (a whole HTB tree, as for [`Htb::new`]) into `cfg.shards` shards.
pub fn split<P: Packet>(
    params: HtbParams,
    specs: Vec<HtbClassSpec<P>>,
    cfg: &ShardConfig,
) -> Result<ShardPlan<P>, ShardError> {
    let n = cfg.shards;
    if n == 0 || n > MAX_SHARDS {
        return Err(ShardError::BadCount(n));
    }
    if cfg.lease_bytes == 0 {
        return Err(ShardError::ZeroLease);
    }
    let len = specs.len();
    let parents: Vec<Option<ClassId>> = specs.iter().map(|s| s.parent).collect();
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let mut children = vec![0u32; len];
    for (i, p) in parents.iter().enumerate() {
        if let Some(p) = p {
            match children.get_mut(*p as usize) {
                Some(c) => *c += 1,
                None => return Err(ShardError::BadParent(i)),
            }
        }
    }
    let roots: Vec<usize> = (0..len).filter(|&i| parents[i].is_none()).collect();
    let shared = match roots.as_slice() {
        [r] if children[*r] > 0 => Some(*r),
        _ => None,
    };
    // The top-level subtree of every class (walking up at most `len` steps).
    let mut unit = vec![0usize; len];
    for (i, u) in unit.iter_mut().enumerate() {
        let mut c = i;
        let mut steps = 0;
        loop {
            let p = parents[c].map(|p| p as usize);
            if p.is_none() || p == shared {
                break;
            }
            c = p.unwrap_or(c);
            steps += 1;
            if steps > len {
                return Err(ShardError::BadParent(i));
            }
        }
        *u = c;
    }
    // Place the top-level subtrees.
    let tops: Vec<usize> = (0..len)
        .filter(|&i| Some(i) != shared && unit[i] == i)
        .collect();
    let mut shard_of = vec![usize::MAX; len];
    for (k, &t) in tops.iter().enumerate() {
        shard_of[t] = match &cfg.placement {
            Placement::Hash => (fnv1a(&names[t]) % n as u64) as usize,
            Placement::RoundRobin => k % n,
            Placement::PerClass(v) => match v.get(t) {
                Some(&s) if (s as usize) < n => s as usize,
                None | Some(&u16::MAX) => (fnv1a(&names[t]) % n as u64) as usize,
                Some(&s) => {
                    return Err(ShardError::NoSuchShard {
                        name: names[t].clone(),
                        shard: s as usize,
                        shards: n,
                    })
                }
            },
            Placement::Explicit(list) => {
                let s = list
                    .iter()
                    .find(|(name, _)| *name == names[t])
                    .map(|&(_, s)| s)
                    .ok_or_else(|| ShardError::Unplaced(names[t].clone()))?;
                if s >= n {
                    return Err(ShardError::NoSuchShard {
                        name: names[t].clone(),
                        shard: s,
                        shards: n,
                    });
                }
                s
            }
        };
    }
    if let Placement::Explicit(list) = &cfg.placement {
        if let Some((name, _)) = list
            .iter()
            .find(|(name, _)| !tops.iter().any(|&t| names[t] == *name))
        {
            return Err(ShardError::UnknownClass(name.clone()));
        }
    }
    // Local ids: the root's copy first, then the shard's classes in the whole tree's order.
    let base = usize::from(shared.is_some());
    let mut to_local = vec![(0u32, 0u32); len];
    let mut to_global: Vec<Vec<u32>> = (0..n)
        .map(|_| shared.map(|r| vec![r as u32]).unwrap_or_default())
        .collect();
    for i in 0..len {
        if Some(i) == shared {
            continue;
        }
        let s = shard_of[unit[i]];
        to_local[i] = (s as u32, to_global[s].len() as u32);
        to_global[s].push(i as u32);
    }
    let mut guarantees = vec![0u64; n];
    for &t in &tops {
        guarantees[shard_of[t]] = guarantees[shard_of[t]].saturating_add(specs[t].rate.0);
    }
    let root = shared.map(|r| (r as ClassId, specs[r].rate, specs[r].ceil));
    let pool = shared.map(|r| {
        let cap = cfg.pool_bytes.unwrap_or(specs[r].cburst);
        Arc::new(SharedPool::new(cap as u64))
    });
    let rho = root.map(|(_, rate, _)| shares(rate.0, &guarantees));
    // Move the specs into their shards.
    let mut per: Vec<Vec<HtbClassSpec<P>>> = (0..n).map(|_| Vec::new()).collect();
    let mut root_spec = None;
    for (i, mut s) in specs.into_iter().enumerate() {
        if Some(i) == shared {
            root_spec = Some(s);
            continue;
        }
        let sh = shard_of[unit[i]];
        s.parent = match s.parent {
            Some(p) if Some(p as usize) == shared => Some(0),
            Some(p) => Some(to_local[p as usize].1),
            None => None,
        };
        per[sh].push(s);
    }
    let mut shards = Vec::with_capacity(n);
    for (si, mut local) in per.into_iter().enumerate() {
        if let Some(r) = &root_spec {
            // The root's copy: it never limits below the root's rate; the gate does the rest.
            let mut copy = HtbClassSpec::new(&r.name, None, r.rate, r.rate, &params);
            copy.burst = r.burst;
            copy.cburst = r.cburst;
            copy.prio = r.prio;
            copy.quantum = r.quantum;
            copy.leaf = LeafSpec::Fifo(FifoLimit::Packets(DEFAULT_PFIFO_LIMIT));
            local.insert(0, copy);
        }
        if local.is_empty() {
            return Err(ShardError::EmptyShard(si));
        }
        let mut has_kids = vec![false; local.len()];
        for s in &local {
            if let Some(p) = s.parent {
                if let Some(k) = has_kids.get_mut(p as usize) {
                    *k = true;
                }
            }
        }
        let default = (base..local.len()).find(|&c| !has_kids[c]).unwrap_or(0) as ClassId;
        let htb = Htb::new(params, local, Classifier::new(vec![], default))
            .map_err(|err| ShardError::Htb { shard: si, err })?;
        let gate = match (&pool, &rho) {
            (Some(p), Some(rho)) => Some(Gate::new(p.clone(), Rate(rho[si]), cfg.lease_bytes)),
            _ => None,
        };
        shards.push(Shard::new(si, htb, gate, root.map(|(_, r, _)| r)));
    }
    Ok(ShardPlan {
        shards,
        map: ShardMap {
            to_local,
            to_global,
        },
        pool,
        root,
        names,
        parents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_exactly_and_keep_guarantees() {
        for (r, g) in [
            (10_000_000u64, vec![2_000_000u64, 3_000_000]),
            (10_000_001, vec![1, 1, 1]),
            (7, vec![0, 0, 0, 0]),
            (10, vec![8, 8]),
        ] {
            let s = shares(r, &g);
            assert_eq!(s.iter().sum::<u64>(), r, "{r} {g:?} -> {s:?}");
            if g.iter().sum::<u64>() <= r {
                assert!(s.iter().zip(&g).all(|(a, b)| a >= b), "{s:?} below {g:?}");
            }
        }
        assert_eq!(
            shares(10_000_000, &[2_000_000, 3_000_000]),
            vec![4_500_000, 5_500_000]
        );
    }

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        // From the FNV reference (Fowler, Noll, Vo; draft-eastlake-fnv): "" and "a".
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
