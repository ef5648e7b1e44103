//! HFSC's read side: per-class views (`tc -s class show`), the scheduler state of a class as
//! `tc -s class show dev … ` prints it for hfsc (`period`, `level`, `vt`, `ft`, `et`, `dt`…), and
//! the internal invariants the tests check.
//!
//! Principles: reading never changes state; views are built in tree order with each inner
//! class's backlog the sum of its subtree's; the invariants state what the ordered sets promise
//! (each active class filed once, under its current keys) and that the books balance.
use super::heap::{CF, EL, FIT, VT};
use super::*;
use crate::qdisc::{Backlog, ClassMode, ClassStats, DropCounts, DropReason};
use crate::units::Rate;

pub use crate::service_curve::{HfscClassState, HfscClassView};

impl<P: Packet> Hfsc<P> {
    /// The scheduler state of a class.
    pub fn class_state(&self, id: ClassId) -> Option<HfscClassState> {
        (id < self.root).then(|| {
            let c = &self.classes[id as usize];
            HfscClassState {
                period: c.vtperiod,
                level: self.cold[id as usize].level,
                vt: c.vt,
                f: c.f,
                e: c.e,
                d: c.d,
                cumul: c.cumul,
                total: c.total,
                nactive: c.nactive,
            }
        })
    }

    /// Heap bytes of the scheduler's own structures: the class records, names, the heaps'
    /// slabs and positions (all sized when the tree is built) and the packet pool's slots. A
    /// boxed leaf's own memory is not counted.
    pub fn memory_bytes(&self) -> usize {
        let mut b = self.classes.capacity() * std::mem::size_of::<Class>();
        b += self.pool.heap_bytes();
        b += self.cold.capacity() * std::mem::size_of::<Cold>();
        b += self.leaves.capacity() * std::mem::size_of::<Leaf<P>>();
        b += self.order.capacity() * 4;
        for c in &self.cold {
            b += c.name.capacity();
        }
        b += (self.slab.capacity() + self.glob.capacity()) * std::mem::size_of::<Row>();
        b + self.pos.capacity() * std::mem::size_of::<[u32; SLOTS]>()
    }

    /// The curves of a class as in effect (`rt` of an inner class is dropped).
    pub fn class_curves(
        &self,
        id: ClassId,
    ) -> Option<(
        Option<ServiceCurve>,
        Option<ServiceCurve>,
        Option<ServiceCurve>,
    )> {
        (id < self.root).then(|| {
            let c = &self.classes[id as usize];
            (c.rsc, c.fsc, self.cold[id as usize].usc)
        })
    }

    /// Check the internal invariants (tests): active flags match backlog, every set holds
    /// exactly the active classes under their current keys, `nactive` counts active children,
    /// `cfmin` is the least child `f`, conservation. O(n log n).
    pub fn check_invariants(&self) -> Result<(), String> {
        let n = self.root as usize;
        let mut sum = Backlog::default();
        let mut nactive = vec![0u32; n + 1];
        for c in 0..n {
            let cl = &self.classes[c];
            let b = self.leaf_backlog(c as u32);
            sum.packets += b.packets;
            sum.bytes += b.bytes;
            let backlogged = b.packets > 0;
            if cl.nkids == 0 {
                let rt_on = cl.rsc.is_some() && backlogged;
                if cl.el_on != rt_on {
                    return Err(format!(
                        "{}: el_on {} backlogged {backlogged}",
                        self.cold[c].name, cl.el_on
                    ));
                }
                let ls_on = cl.fsc.is_some() && backlogged;
                if (cl.nactive == 1) != ls_on || cl.nactive > 1 {
                    return Err(format!(
                        "{}: nactive {} backlogged {backlogged}",
                        self.cold[c].name, cl.nactive
                    ));
                }
            }
            if cl.el_on {
                let ok = if cl.el_ready {
                    self.glob_holds(READY, c as u32, cl.key_d) && cl.key_e <= self.clock
                } else {
                    self.glob_holds(WAIT, c as u32, cl.key_e)
                };
                if !ok || cl.key_e != cl.e || cl.key_d != cl.d {
                    return Err(format!("{}: real-time sets out of step", self.cold[c].name));
                }
            }
            if cl.nactive > 0 {
                let p = cl.parent as usize;
                nactive[p] += 1;
                if self.classes[p].nkids == 0 {
                    return Err(format!("{}: parent has no sets", self.cold[c].name));
                }
                let id = c as u32;
                let limited = self.classes[p].cf_used;
                let cf_ok = if limited {
                    self.kid_holds(p, CF, id, cl.key_f)
                } else {
                    cl.key_f == 0 && self.classes[p].cfmin == 0 && cl.fit
                };
                let filed = self.kid_holds(p, VT, id, cl.key_vt)
                    && cf_ok
                    && (if !limited {
                        self.classes[p].klen[FIT] == 0
                    } else if cl.fit {
                        self.kid_holds(p, FIT, id, cl.key_vt) && cl.key_f <= self.clock
                    } else {
                        self.glob_holds(UNFIT, id, cl.key_f)
                    });
                if !filed || cl.key_vt != cl.vt || cl.key_f != cl.f {
                    return Err(format!(
                        "{}: link-sharing sets out of step",
                        self.cold[c].name
                    ));
                }
                if cl.f != cl.myf.max(cl.cfmin) {
                    return Err(format!(
                        "{}: f {} != max(myf, cfmin)",
                        self.cold[c].name, cl.f
                    ));
                }
            }
        }
        for (c, cl) in self.classes[..n].iter().enumerate() {
            if cl.nkids > 0 && cl.nactive != nactive[c] {
                return Err(format!(
                    "{}: nactive {} != {}",
                    self.cold[c].name, cl.nactive, nactive[c]
                ));
            }
            if cl.nkids > 0 {
                let m = self.kid_first(c, CF).map(|e| e.key).unwrap_or(0);
                if m != cl.cfmin && cl.nactive > 0 {
                    return Err(format!("{}: cfmin {} != {m}", self.cold[c].name, cl.cfmin));
                }
            }
        }
        for c in 0..self.classes.len() {
            if !self.kid_is_minmax(c) {
                return Err(format!("{}: vt heap out of order", self.cold[c].name));
            }
            for which in [CF, FIT] {
                if !self.kid_is_heap(c, which) {
                    return Err(format!("{}: heap {which} out of order", self.cold[c].name));
                }
            }
        }
        let filed: usize = self.classes.iter().map(|c| c.klen[VT] as usize).sum();
        let active = self.classes[..n].iter().filter(|c| c.nactive > 0).count();
        if filed != active {
            return Err(format!(
                "{filed} classes filed for link-sharing, {active} active"
            ));
        }
        let el = self.classes.iter().filter(|c| c.el_on).count();
        if el != (self.glen[READY] + self.glen[WAIT]) as usize {
            return Err("real-time sets hold other classes".into());
        }
        let mut in_fifos = 0usize;
        for (c, cl) in self.classes.iter().enumerate() {
            if matches!(cl.kind, Kind::Pfifo | Kind::Bfifo) {
                let held = self
                    .pool
                    .check_fifo(&cl.q)
                    .map_err(|e| format!("{}: {e}", self.cold[c].name))?;
                in_fifos += held as usize;
            } else if cl.q != LeafQ::EMPTY {
                return Err(format!("{}: a FIFO without FIFO leaf", self.cold[c].name));
            }
        }
        self.pool.check(in_fifos)?;
        if sum != self.books.backlog() {
            return Err(format!(
                "backlog {:?} != sum of leaves {:?}",
                self.books.backlog(),
                sum
            ));
        }
        self.books.stats().check_conservation()
    }

    /// Whether qdisc-wide heap `g` holds `id` under `key`.
    fn glob_holds(&self, g: usize, id: u32, key: u64) -> bool {
        let slot = if g == UNFIT { FIT } else { EL };
        let i = self.pos[id as usize][slot];
        i != OUT && i < self.glen[g] && self.glob[i as usize][g] == Entry { key, id }
    }

    /// Parent `p`'s heap `which`, its members in heap order.
    fn kid_members(&self, p: usize, which: usize) -> Vec<Entry> {
        let cl = &self.classes[p];
        let base = cl.base as usize;
        self.slab[base..base + cl.klen[which] as usize]
            .iter()
            .map(|r| r[which])
            .collect()
    }

    fn kid_first(&self, p: usize, which: usize) -> Option<Entry> {
        self.kid_members(p, which).first().copied()
    }

    fn kid_holds(&self, p: usize, which: usize, id: u32, key: u64) -> bool {
        let i = self.pos[id as usize][which];
        i != OUT && self.kid_members(p, which).get(i as usize) == Some(&Entry { key, id })
    }

    fn kid_is_heap(&self, p: usize, which: usize) -> bool {
        let h = self.kid_members(p, which);
        (1..h.len()).all(|i| h[(i - 1) / 2] <= h[i])
    }

    /// Whether parent `p`'s `VT` heap is a min-max heap: each entry on an even level at most,
    /// on an odd level at least, every entry below it.
    fn kid_is_minmax(&self, p: usize) -> bool {
        let h = self.kid_members(p, VT);
        (1..h.len()).all(|i| {
            let mut a = i;
            while a > 0 {
                a = (a - 1) / 2;
                let min = super::minmax::min_level(a);
                if (min && h[a] > h[i]) || (!min && h[a] < h[i]) {
                    return false;
                }
            }
            true
        })
    }

    /// The `ceil` a view shows: the nearest upper limit on the way to the root, else the sum of
    /// the top-level classes' link-sharing rates (what the tree can get at most).
    fn ceil_of(&self, c: u32) -> u64 {
        let mut x = c;
        while x != self.root {
            if let Some(u) = self.cold[x as usize].usc {
                return u.m2;
            }
            x = self.classes[x as usize].parent;
        }
        self.classes[..self.root as usize]
            .iter()
            .filter(|k| k.parent == self.root)
            .filter_map(|k| k.fsc.or(k.rsc))
            .map(|s| s.m2)
            .fold(0u64, u64::saturating_add)
    }

    pub(super) fn visit(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        let n = self.root as usize;
        let mut backlogs = vec![Backlog::default(); n];
        for i in 0..n {
            let b = self.leaf_backlog(i as u32);
            if b.packets == 0 {
                continue;
            }
            let mut x = i as u32;
            while x != self.root {
                backlogs[x as usize].packets += b.packets;
                backlogs[x as usize].bytes += b.bytes;
                x = self.classes[x as usize].parent;
            }
        }
        for &c in &self.order {
            let cl = &self.classes[c as usize];
            let cold = &self.cold[c as usize];
            let leaf = &self.leaves[c as usize];
            let mut leaf_drops = DropCounts::default();
            match leaf {
                Leaf::Boxed { q, .. } => {
                    let s = q.stats();
                    leaf_drops = s.refused.clone();
                    for (r, cnt) in s.dropped.iter() {
                        leaf_drops.add_counter(r, cnt);
                    }
                }
                Leaf::Fifo(limit) => {
                    let reason = match limit {
                        crate::qdisc::fifo::FifoLimit::Packets(_) => DropReason::QueueLimit,
                        crate::qdisc::fifo::FifoLimit::Bytes(_) => DropReason::ByteLimit,
                    };
                    leaf_drops.add_counter(
                        reason,
                        Counter {
                            packets: cold.drops,
                            bytes: 0,
                        },
                    );
                }
                Leaf::Inner => {}
            }
            // rate: the long-term guarantee (rt's m2, else ls's); ceil: the upper limit's m2.
            let rate = cl.rsc.or(cl.fsc).map(|s| s.m2).unwrap_or(0);
            let ceil = self.ceil_of(c);
            let limited = cl.ul && cl.myf > self.clock;
            f(&ClassView {
                name: &cold.name,
                parent: (cl.parent != self.root).then_some(cl.parent),
                id: c,
                level: cold.level,
                is_leaf: !matches!(leaf, Leaf::Inner),
                rate: Rate(rate),
                ceil: Rate(ceil),
                prio: 0,
                mode: if limited {
                    ClassMode::CantSend
                } else {
                    ClassMode::CanSend
                },
                tokens: 0,
                ctokens: 0,
                stats: ClassStats {
                    sent: cl.sent,
                    drops: cold.drops,
                    overlimits: 0,
                    lends: 0,
                    borrows: 0,
                    giants: 0,
                    marked: match leaf {
                        Leaf::Boxed { q, .. } => q.stats().marked,
                        _ => 0,
                    },
                },
                backlog: backlogs[c as usize],
                leaf_drops,
                avgidle_ns: None,
                hfsc: Some(HfscClassView {
                    rt: cl.rsc,
                    ls: cl.fsc,
                    ul: cold.usc,
                    state: self.class_state(c).unwrap_or_default(),
                }),
            });
        }
    }
}
