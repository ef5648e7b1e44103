//! Building a CBQ from its description: the checks of each class, the class tree, the derived
//! estimator parameters and the WRR allotments.
//!
//! Principles: a tree is checked once, completely, before anything is allocated (shape by
//! [`crate::tree::ClassTree`], parameters here, filters and the default class against the
//! tree); every per-class quantity the scheduler needs per packet (`maxidle`, `minidle`,
//! `offtime`, packet times, allotments) is derived here, once, from the allocation and the link
//! rate as ALTQ's `rmc_newclass` and Floyd & Jacobson 1995 (appendix A) derive them; the
//! allotments of weighted round robin follow ALTQ's `rmc_wrr_set_weights`, computed exactly.
use super::*;

/// ALTQ's WRR allotment (`rmc_wrr_set_weights`): per priority, `M = Σ allotment / (num · mtu)`
/// and each class gets `allotment / M` bytes per round, where `allotment` is the class's rate in
/// bytes per second; so a round of one priority carries `num · mtu` bytes, split in proportion to
/// the allocations. Computed exactly here (`allotment · num · mtu / Σ allotment`, at least 1).
/// Input: `(prio, rate)` of each leaf; output: allotment per leaf in the same order.
pub fn wrr_allotments(leaves: &[(u8, Rate)], mtu: u32) -> Vec<u64> {
    let mut sum = [0u128; NUM_PRIO];
    let mut num = [0u128; NUM_PRIO];
    for &(p, r) in leaves {
        let p = (p as usize).min(NUM_PRIO - 1);
        sum[p] += (r.0 / 8) as u128;
        num[p] += 1;
    }
    leaves
        .iter()
        .map(|&(p, r)| {
            let p = (p as usize).min(NUM_PRIO - 1);
            if sum[p] == 0 {
                return mtu as u64;
            }
            let w = (r.0 / 8) as u128 * num[p] * mtu as u128 / sum[p];
            w.clamp(1, u64::MAX as u128 / 4) as u64
        })
        .collect()
}

impl<P: Packet> Cbq<P> {
    /// Build a tree. The classifier's default class is where unmatched packets go.
    pub fn new(
        params: CbqParams,
        specs: Vec<CbqClassSpec<P>>,
        classifier: Classifier,
    ) -> Result<Self, CbqError> {
        let n = specs.len();
        if n == 0 {
            return Err(CbqError::Empty);
        }
        if params.link.0 == 0 {
            return Err(CbqError::ZeroLink);
        }
        if !(64..=65535).contains(&params.mtu) {
            return Err(CbqError::BadMtu(params.mtu));
        }
        if n >= NIL as usize / 2 {
            return Err(CbqError::TooDeep {
                class: "too many classes".into(),
            });
        }
        let parents: Vec<Option<ClassId>> = specs.iter().map(|s| s.parent).collect();
        let limits = DepthLimits {
            leaf: MAX_DEPTH as u32 - 1,
            inner: MAX_DEPTH as u32 - 1,
        };
        let name = |i: usize| specs[i].name.clone();
        let tree = ClassTree::new(&parents, limits).map_err(|e| CbqError::from_tree(e, name))?;
        let mut child_sum = vec![0u128; n];
        for s in &specs {
            let o = &s.options;
            if let Some(p) = s.parent {
                child_sum[p as usize] += s.rate.0 as u128;
            }
            if s.prio as usize >= NUM_PRIO {
                return Err(CbqError::BadPrio {
                    class: s.name.clone(),
                    prio: s.prio,
                });
            }
            if s.rate.0 == 0 {
                return Err(CbqError::ZeroRate {
                    class: s.name.clone(),
                });
            }
            if s.rate > params.link {
                return Err(CbqError::AboveLink {
                    class: s.name.clone(),
                    rate: s.rate,
                    link: params.link,
                });
            }
            if o.avgpkt == 0 || o.avgpkt > params.mtu {
                return Err(CbqError::BadAvgpkt {
                    class: s.name.clone(),
                    avgpkt: o.avgpkt,
                    mtu: params.mtu,
                });
            }
            if o.maxburst > MAX_BURST {
                return Err(CbqError::BadMaxburst {
                    class: s.name.clone(),
                    maxburst: o.maxburst,
                });
            }
            if o.minburst == 0 {
                return Err(CbqError::BadMinburst {
                    class: s.name.clone(),
                });
            }
        }
        for (i, s) in specs.iter().enumerate() {
            if child_sum[i] > s.rate.0 as u128 {
                return Err(CbqError::ChildrenAboveParent {
                    class: s.name.clone(),
                    sum: Rate(child_sum[i].min(u64::MAX as u128) as u64),
                    rate: s.rate,
                });
            }
        }
        let default = tree
            .check_classifier(&classifier)
            .map_err(|e| CbqError::from_tree(e, name))?;
        let height = tree.heights();
        let leaves: Vec<(u8, Rate)> = specs
            .iter()
            .enumerate()
            .filter(|(i, _)| !tree.is_inner(*i))
            .map(|(_, s)| (s.prio, s.rate))
            .collect();
        let mut allots = wrr_allotments(&leaves, params.mtu).into_iter();
        let mut classes = Vec::with_capacity(n);
        for (i, s) in specs.into_iter().enumerate() {
            let o = s.options;
            let d = derive(
                params.link.0,
                s.rate.0,
                o.avgpkt,
                params.mtu,
                o.maxburst,
                o.minburst,
            );
            let est = Estimator::new(
                &d,
                o.maxidle.map(|x| x.0),
                o.minidle.map(|x| x.0),
                Some(o.offtime.map_or(d.offtime(params.bound_offtime), |x| x.0)),
            );
            let leaf = if tree.is_inner(i) {
                Leaf::Inner
            } else {
                match s.leaf {
                    LeafSpec::Fifo(l) => Leaf::Fifo(FifoQueue::new(l)),
                    LeafSpec::Qdisc(b) => Leaf::Boxed(b),
                }
            };
            let allot = if tree.is_inner(i) {
                0
            } else {
                allots.next().unwrap_or(params.mtu as u64) as i64
            };
            classes.push(Class {
                name: s.name,
                parent: s.parent.unwrap_or(NIL),
                rate: s.rate.0,
                prio: s.prio,
                borrow: o.borrow,
                height: height[i],
                avgpkt: o.avgpkt,
                extradelay: o.extradelay.0,
                derived: d,
                est,
                undertime: None,
                leaf,
                in_ring: false,
                blocked: false,
                fblocked: None,
                fgen: 0,
                fkey: 0,
                asleep: false,
                sleep_u: 0,
                sleep_t: 0,
                alloc: 0,
                allot,
                active: 0,
                sent: Counter::default(),
                drops: 0,
                overlimits: 0,
                borrows: 0,
                lends: 0,
                delays: 0,
                marks_seen: 0,
            });
        }
        let max_height = height.iter().copied().max().unwrap_or(0) as u32;
        // ALTQ's `maxiftime`; without the clamp `ifnow` follows the link exactly.
        let maxiftime = if params.clamp_ifnow {
            16 * tx_ns(params.mtu as u64, params.link.0)
        } else {
            u64::MAX / 4
        };
        let idle = IdleLeaves::new(classes.iter().map(|c| match &c.leaf {
            Leaf::Boxed(b) => b.release_hold(),
            _ => None,
        }));
        Ok(Cbq {
            idle,
            params,
            classes,
            order: tree.into_order(),
            rings: Default::default(),
            blocked: Default::default(),
            fblocked: (0..MAX_DEPTH * NUM_PRIO).map(|_| VecDeque::new()).collect(),
            fblock_u: BTreeSet::new(),
            sleep_u: BTreeSet::new(),
            sleep_t: BTreeSet::new(),
            sleep_borrowers: Default::default(),
            eff_cursor: [0; NUM_PRIO],
            unsat: (0..MAX_DEPTH).map(|_| unsat::Unsat::default()).collect(),
            ifnow: 0,
            maxiftime,
            cutoff: NO_CUTOFF,
            max_height,
            classifier,
            default,
            books: Books::new(),
        })
    }
}
