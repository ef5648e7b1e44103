//! Building a tree from its class specifications: validation (depths, the classifier's default,
//! sizes), the per-class records laid out for the datapath (a hot record of 64 bytes a class,
//! its 32 bytes of counters apart, profiles shared by classes with the same parameters) and the
//! empty rows and feeds. O(n) in classes (plus a hash per class for the shared profiles);
//! nothing here runs per packet.

use super::*;

impl<P: Packet> Htb<P> {
    /// Build a tree. The classifier's default class is where unmatched packets go.
    pub fn new(
        params: HtbParams,
        specs: Vec<HtbClassSpec<P>>,
        classifier: Classifier,
    ) -> Result<Self, HtbError> {
        let n = specs.len();
        if n == 0 {
            return Err(HtbError::Empty);
        }
        if n > MAX_CLASSES {
            return Err(HtbError::TooDeep {
                class: "too many classes".into(),
            });
        }
        for s in &specs {
            s.validate()?;
        }
        let parents: Vec<Option<ClassId>> = specs.iter().map(|s| s.parent).collect();
        let limits = DepthLimits {
            leaf: MAX_DEPTH as u32 - 1,
            // An inner class needs a level of at least 1.
            inner: MAX_DEPTH as u32 - 2,
        };
        let name = |i: usize| specs[i].name.clone();
        let tree = ClassTree::new(&parents, limits).map_err(|e| HtbError::from_tree(e, name))?;
        let default = tree
            .check_classifier(&classifier)
            .map_err(|e| HtbError::from_tree(e, name))?;

        let mut inner = Vec::new();
        // The per-class arrays are read at random: huge pages where the system allows
        // (`crate::hugepages`).
        // Room for the first classes added in place (`reshape`) without growing the arrays on
        // the datapath: a 256th and 64 more.
        let room = n / 256 + 64;
        let mut classes = crate::hugepages::with_capacity(n + room);
        let mut profiles: Vec<Profile> = Vec::new();
        let mut profile_ids: HashMap<Profile, u32> = HashMap::new();
        let mut names = names::Names::default();
        let mut boxed: Vec<Box<dyn Qdisc<P>>> = Vec::new();
        for (i, s) in specs.into_iter().enumerate() {
            let is_inner = tree.is_inner(i);
            let level = if is_inner {
                (MAX_DEPTH - 1) as u32 - tree.depth(i)
            } else {
                0
            } as u8;
            let mut q = LeafQ::EMPTY;
            let (kind, limit) = if is_inner {
                q.tail = inner.len() as u32;
                inner.push(Inner {
                    class: i as u32,
                    first: 0,
                    count: 0,
                    big: NIL,
                });
                (LeafKind::None, 0)
            } else {
                match s.leaf {
                    LeafSpec::Fifo(FifoLimit::Packets(l)) => (LeafKind::Pfifo, l),
                    LeafSpec::Fifo(FifoLimit::Bytes(l)) => (LeafKind::Bfifo, l),
                    LeafSpec::Qdisc(b) => {
                        q.tail = boxed.len() as u32;
                        boxed.push(b);
                        (LeafKind::Boxed, 0)
                    }
                }
            };
            names.push(&s.name).map_err(|()| HtbError::TooDeep {
                class: "class names longer than 4 GiB in all".into(),
            })?;
            let profile = Profile {
                rate: s.rate.0,
                ceil: s.ceil.0,
                buffer: nbits(s.burst as u64),
                cbuffer: nbits(s.cburst as u64),
                burst: s.burst,
                cburst: s.cburst,
                quantum: s.quantum,
                limit: limit.min(LIMIT_MASK),
                prio: s.prio,
            };
            let pid = *profile_ids.entry(profile).or_insert_with(|| {
                profiles.push(profile);
                (profiles.len() - 1) as u32
            });
            classes.push(Class {
                tokens: profile.buffer,
                ctokens: profile.cbuffer,
                t_c: 0,
                parent: s.parent.unwrap_or(NIL),
                profile: pid,
                deficit: [0; 2],
                q,
                rank: 0,
                level,
                kind,
                mode: ClassMode::CanSend,
                active: 0,
            });
        }
        crate::hugepages::collapse(&classes);
        let n_inner = inner.len();
        // Families and ranks for the feeds (`feedbits`).
        let parent_inner: Vec<u32> = classes
            .iter()
            .map(|c: &Class| match classes.get(c.parent as usize) {
                Some(p) => p.inner(),
                None => NIL,
            })
            .collect();
        let fam = feedbits::Families::new(&parent_inner, n_inner);
        for (c, r) in classes.iter_mut().zip(&fam.rank) {
            c.rank = *r;
        }
        let mut n_big = 0u32;
        for (i, inn) in inner.iter_mut().enumerate() {
            inn.first = fam.first[i];
            inn.count = fam.count[i];
            if inn.count > feedbits::SMALL_FAMILY {
                inn.big = n_big;
                n_big += 1;
            }
        }
        names.shrink();
        profiles.shrink_to_fit();
        let mut profile_refs = vec![0u32; profiles.len()];
        for c in classes.iter() {
            profile_refs[c.profile as usize] += 1;
        }
        inner.shrink_to_fit();
        let mut cold = crate::hugepages::with_capacity(n + room);
        cold.resize(n, Counters::default());
        crate::hugepages::collapse(&cold);
        let boxed_room = boxed.len() / 256 + 16;
        boxed.reserve(boxed_room);
        let mut marks_seen = Vec::with_capacity(boxed.len() + boxed_room);
        marks_seen.resize(boxed.len(), 0);
        let mut idle = IdleLeaves::new(boxed.iter().map(|b| b.release_hold()));
        idle.reserve(boxed_room);
        Ok(Htb {
            classes,
            cold,
            giants: HashMap::new(),
            profiles,
            profile_refs,
            names,
            pool: pool::Pool::default(),
            marks_seen,
            idle,
            boxed,
            inner,
            lists: crate::hugepages::filled(ROWS + n_inner * NUM_PRIO, List::EMPTY),
            children: fam.children,
            feed_words: crate::hugepages::filled(n_inner * NUM_PRIO, 0u64),
            feed_big: vec![rowbits::RowBits::default(); n_big as usize * NUM_PRIO],
            row_bits: vec![rowbits::RowBits::default(); ROWS],
            row_mask: [0; MAX_DEPTH],
            wait: vec![waitq::WaitQ::default(); MAX_DEPTH],
            leaf_wait: BTreeSet::new(),
            classifier,
            default,
            params,
            books: Books::new(),
            deferred: tokens::Deferred::NONE,
            warmth: warmth::Warmth::new(n),
            adopting: None,
            free: Vec::new(),
            free_inner: Vec::new(),
            free_boxed: Vec::new(),
            family_cap: fam.cap,
            free_ranks: HashMap::new(),
        })
    }
}
