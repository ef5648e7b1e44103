//! Building an HFSC tree from its description.
//!
//! Principles: the tree is checked once, completely, before anything is allocated (shape by
//! [`crate::tree::ClassTree`], curves here, filters and the default class against the tree), and
//! refuses what Linux's `hfsc_change_class` refuses: a class without any curve, an upper limit
//! without a link-sharing curve, and a parent without a link-sharing curve (CVE-2023-4623: an
//! rt-only parent let a child activate a class that was never in a vt tree). A real-time curve
//! on an inner class is kept but unused, as in Linux and OpenBSD, where only leaves are eligible
//! (config warns). The root of the tree is an extra class after the given ones.
use super::*;
use crate::leaf::LeafSpec;
use crate::tree::{ClassTree, DepthLimits};

impl<P: Packet> Hfsc<P> {
    /// Build a tree. The classifier's default class is where unmatched packets go.
    pub fn new(
        params: HfscParams,
        specs: Vec<HfscClassSpec<P>>,
        classifier: Classifier,
    ) -> Result<Self, HfscError> {
        let n = specs.len();
        if n == 0 {
            return Err(HfscError::Empty);
        }
        if n >= NIL as usize / 2 {
            return Err(HfscError::TooDeep {
                class: "too many classes".into(),
            });
        }
        let parents: Vec<Option<ClassId>> = specs.iter().map(|s| s.parent).collect();
        let limits = DepthLimits {
            leaf: MAX_DEPTH as u32 - 1,
            inner: MAX_DEPTH as u32 - 1,
        };
        let name = |i: usize| specs[i].name.clone();
        let tree = ClassTree::new(&parents, limits).map_err(|e| HfscError::from_tree(e, name))?;
        let nonzero = |c: Option<ServiceCurve>| c.filter(|c| !c.is_zero());
        for (i, s) in specs.iter().enumerate() {
            let (rt, ls) = (nonzero(s.rt), nonzero(s.ls));
            if tree.is_inner(i) && ls.is_none() {
                return Err(HfscError::InnerWithoutLs {
                    class: s.name.clone(),
                });
            }
            if s.ul.is_some() && ls.is_none() {
                return Err(HfscError::UlWithoutLs {
                    class: s.name.clone(),
                });
            }
            if rt.is_none() && ls.is_none() {
                return Err(HfscError::NoCurve {
                    class: s.name.clone(),
                });
            }
        }
        let default = tree
            .check_classifier(&classifier)
            .map_err(|e| HfscError::from_tree(e, name))?;
        let height = tree.heights();
        let root = n as u32;
        let mut classes = Vec::with_capacity(n + 1);
        let mut cold = Vec::with_capacity(n + 1);
        let mut leaves = Vec::with_capacity(n + 1);
        for (i, s) in specs.into_iter().enumerate() {
            let inner = tree.is_inner(i);
            let (leaf, kind, limit) = if inner {
                (Leaf::Inner, Kind::Inner, 0)
            } else {
                match s.leaf {
                    LeafSpec::Fifo(l @ FifoLimit::Packets(n)) => (Leaf::Fifo(l), Kind::Pfifo, n),
                    LeafSpec::Fifo(l @ FifoLimit::Bytes(n)) => (Leaf::Fifo(l), Kind::Bfifo, n),
                    LeafSpec::Qdisc(q) => (Leaf::Boxed { q, head: None }, Kind::Boxed, 0),
                }
            };
            let rsc = if inner { None } else { nonzero(s.rt) };
            let usc = nonzero(s.ul);
            let mut cl = Class::new(s.parent.unwrap_or(root), rsc, nonzero(s.ls), usc);
            cl.kind = kind;
            cl.limit = limit;
            classes.push(cl);
            cold.push(Cold::new(s.name, height[i], usc));
            leaves.push(leaf);
        }
        let top = height.iter().copied().max().unwrap_or(0).saturating_add(1);
        classes.push(Class::new(NIL, None, None, None));
        cold.push(Cold::new("root".into(), top, None));
        leaves.push(Leaf::Inner);
        // Each parent's heaps get a segment of the slabs as long as its children. Upper limits
        // are marked up the tree (children before parents: the tree order reversed).
        let parents: Vec<usize> = classes[..n].iter().map(|c| c.parent as usize).collect();
        for p in parents {
            classes[p].nkids += 1;
        }
        let order = tree.into_order();
        for &i in order.iter().rev() {
            let i = i as usize;
            cold[i].has_ul |= cold[i].usc.is_some();
            if cold[i].has_ul {
                let p = classes[i].parent as usize;
                cold[p].has_ul = true;
                classes[p].cf_used = true;
            }
        }
        let mut base = 0u32;
        for cl in &mut classes {
            cl.base = base;
            base += cl.nkids;
        }
        Ok(Hfsc {
            params,
            classes,
            cold,
            leaves,
            pool: Pool::default(),
            root,
            order,
            slab: vec![Row::default(); n],
            glob: vec![Row::default(); n + 1],
            glen: [0; 3],
            pos: vec![[OUT; SLOTS]; n + 1],
            clock: 0,
            classifier,
            default,
            books: Books::new(),
            rt_packets: 0,
            ls_packets: 0,
        })
    }
}

impl Class {
    fn new(
        parent: u32,
        rsc: Option<ServiceCurve>,
        fsc: Option<ServiceCurve>,
        usc: Option<ServiceCurve>,
    ) -> Self {
        let rt = |c: &Option<ServiceCurve>| c.map(|c| Runtime::new(&c, 0, 0)).unwrap_or_default();
        Class {
            parent,
            nactive: 0,
            q: LeafQ::EMPTY,
            limit: 0,
            kind: Kind::Inner,
            el_on: false,
            el_ready: false,
            fit: false,
            ul: usc.is_some(),
            cf_used: false,
            rsc,
            deadline: rt(&rsc),
            cumul: 0,
            e: 0,
            d: 0,
            key_e: 0,
            key_d: 0,
            fsc,
            virt: rt(&fsc),
            total: 0,
            vt: 0,
            vtadj: 0,
            vtperiod: 0,
            parentperiod: 0,
            f: 0,
            myf: 0,
            cfmin: 0,
            key_vt: 0,
            key_f: 0,
            base: 0,
            nkids: 0,
            klen: [0; 3],
            cvtmin: 0,
            cvtoff: 0,
            sent: Counter::default(),
            rt_sent: Counter::default(),
        }
    }
}

impl Cold {
    fn new(name: String, level: u8, usc: Option<ServiceCurve>) -> Self {
        Cold {
            name,
            level,
            usc,
            ulimit: usc.map(|c| Runtime::new(&c, 0, 0)).unwrap_or_default(),
            myfadj: 0,
            vtoff: 0,
            pcvtoff: 0,
            cvtmax: 0,
            has_ul: false,
            drops: 0,
            marks_seen: 0,
        }
    }
}
