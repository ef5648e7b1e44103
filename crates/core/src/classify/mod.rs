//! Packet classification: an ordered list of filters, first match wins, else the default class.
//!
//! # Semantics
//!
//! A [`FilterSpec`] matches a packet when every field it sets matches (fields left `None` are
//! wildcards). Filters are tried in the order given — index 0 first, like `tc filter … prio` —
//! and the first that matches decides the class; if none does, the policy's default class.
//!
//! * `dscp`: any listed code point (0–63; see [`crate::dscp`] for names) equals the packet's
//!   DSCP. An empty list, or one with no value below 64, matches nothing.
//! * `tos = (value, mask)`: `packet.tos & mask == value & mask` on the raw TOS / traffic-class
//!   byte. With `dscp` as well, both must hold.
//! * `protocol`: the IP protocol / IPv6 next header. A packet whose IPv6 extension chain could
//!   not be walked ([`ParseIssue::ExtensionChain`]) has no known protocol and matches no
//!   `protocol` filter.
//! * `src`, `dst`: the address lies in the prefix; host bits of the prefix are ignored. An IPv4
//!   prefix never matches an IPv6 address (IPv4-mapped included) and vice versa; a prefix longer
//!   than its family allows matches nothing.
//! * `src_port`, `dst_port`: inclusive ranges. They only match packets that *have* ports (see
//!   [`transport_ports`]): TCP or UDP, not a later fragment, transport header not truncated.
//! * Frames that are not IP ([`L3::Other`]) match only filters that set no field at all.
//!
//! [`FilterSpec::matches`] states these rules directly, one filter at a time; the compiled
//! [`Classifier`] returns exactly what a first-match scan with it would (a property test checks
//! this on random policies), without scanning.
//!
//! # How a packet is classified, and what it costs
//!
//! Let `n` be the number of filters. The compiled form has two parts:
//!
//! 1. **TOS table.** Filters that constrain only the TOS byte (`dscp` and/or `tos`, or nothing at
//!    all) are folded into a 256-entry array indexed by the packet's TOS byte, holding the lowest
//!    matching filter index. Building it costs `O(256 · n)`; a lookup is one array read.
//!    A DSCP-only policy is *only* this table: **`O(1)` per packet, whatever `n`**.
//!
//! 2. **Tuple space** (Srinivasan, Suri & Varghese, "Packet classification using tuple space
//!    search", SIGCOMM 1999) for every other filter. A filter's *tuple* (shape) is: the TOS mask
//!    it implies, whether it sets a protocol, whether it sets ports, and for `src` and `dst` the
//!    address family and prefix length. Filters of one tuple are exact-match on the same bits,
//!    so each tuple is a hash table from the masked key (TOS bits, protocol, masked source,
//!    masked destination) to a *bucket*. A `dscp` list expands into one key per code point.
//!    A bucket holds the filters with that key in index order:
//!    * without ports only the first can ever win: one index, `O(1)`;
//!    * with ports, each filter is a rectangle in (source port × destination port), a missing
//!      range being the full one. Up to 8 rectangles are scanned (a constant); beyond that a
//!      persistent segment tree swept along the source axis answers "lowest index whose
//!      rectangle contains the point" in `O(log k)` for a bucket of `k` filters, with
//!      `O(k log k)` memory (details in `ports.rs`).
//!
//!    Tuples are visited in order of the lowest filter index they hold, and the walk stops as
//!    soon as that index cannot beat the best match found so far (the TOS table's answer
//!    included), so a tuple whose filters all come after the winning one is never looked at.
//!
//! **Cost per packet** = `O(1)` (table) + for each tuple visited, one hash of a fixed-size key
//! (expected `O(1)`) and one bucket lookup (`O(1)`, or `O(log k)` with `k ≤ n` for port
//! buckets): **`O(T · log n)` worst case, where `T` is the number of distinct tuples**. `T` does
//! not grow with `n`: it is bounded by the number of possible shapes, (TOS masks) × 2 × 2 ×
//! (1 + 33 + 129)², and real policies use a handful (a per-subscriber `/32` policy, as LibreQoS
//! builds, is one tuple: one hash probe per packet whatever the number of subscribers; mixing
//! "dst /32 + dst port range" with "dscp" and "proto + dport" rules is three or four).
//! The constant is the weak spot of tuple space search: a policy that deliberately uses many
//! different prefix-length pairs pays one probe per pair. [`Classifier::stats`] reports `T` so
//! that a configuration checker can warn about it. Expected-`O(1)` hashing assumes the policy's
//! own keys hash well; packets only probe the tables and cannot lengthen probe sequences.
//!
//! Nothing is allocated per packet, and the hasher is fixed (no random seed), so classification
//! is deterministic across runs and machines.

mod hash;
mod ports;
mod prefix;
#[cfg(test)]
mod tests;

pub use prefix::{IpPrefix, ParsedPrefix, PrefixError};

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use crate::packet::{Fragment, PacketMeta, ParseIssue, L3};
use hash::TupleBuildHasher;
use ports::{PortIndex, PortRule, FEW, NONE};

/// Index of a class in the scheduler's class table.
pub type ClassId = u32;

/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// One filter: every field that is `Some` must match. Filters are tried in the order given
/// (like tc's `prio`); the first that matches wins. See the [module documentation](self).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilterSpec {
    pub class: ClassId,
    /// DSCP values, any of which matches.
    pub dscp: Option<Vec<u8>>,
    /// Raw TOS byte: `(value, mask)`, matches when `tos & mask == value & mask`.
    pub tos: Option<(u8, u8)>,
    pub protocol: Option<u8>,
    pub src: Option<IpPrefix>,
    pub dst: Option<IpPrefix>,
    /// Inclusive port ranges.
    pub src_port: Option<(u16, u16)>,
    pub dst_port: Option<(u16, u16)>,
}

/// The packet's transport protocol, if known: `None` for frames that are not IP and for IPv6
/// packets whose extension header chain could not be walked.
#[inline]
pub fn known_protocol(meta: &PacketMeta) -> Option<u8> {
    let ip = !matches!(meta.l3, L3::Other(_));
    (ip && meta.issue != Some(ParseIssue::ExtensionChain)).then_some(meta.proto)
}

/// The packet's `(source, destination)` ports, if it has any that filters may match on: TCP or
/// UDP, not a later fragment, and a transport header that was not cut short.
#[inline]
pub fn transport_ports(meta: &PacketMeta) -> Option<(u16, u16)> {
    let transport = matches!(known_protocol(meta), Some(PROTO_TCP | PROTO_UDP));
    let ok =
        transport && meta.frag != Fragment::Later && meta.issue != Some(ParseIssue::TruncatedL4);
    ok.then_some((meta.src_port, meta.dst_port))
}

/// Something about a filter that a configuration checker should report. Those for which
/// [`FilterIssue::matches_nothing`] is true make the filter dead; the others are warnings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterIssue {
    #[error("the dscp list has no value in 0-63: the filter matches nothing")]
    NoDscp,
    #[error("dscp {value} is out of range (0-63) and is ignored")]
    DscpOutOfRange { value: u8 },
    #[error("the tos and dscp conditions contradict each other: the filter matches nothing")]
    TosDscpConflict,
    #[error("{field} prefix {prefix} is longer than its address family allows: the filter matches nothing")]
    PrefixTooLong {
        field: &'static str,
        prefix: IpPrefix,
    },
    #[error("{field} prefix {prefix} has host bits set; it is used as {network}")]
    HostBits {
        field: &'static str,
        prefix: IpPrefix,
        network: IpPrefix,
    },
    #[error("src is {src} but dst is {dst}: no packet has both, the filter matches nothing")]
    MixedFamilies {
        src: &'static str,
        dst: &'static str,
    },
    #[error(
        "{field} range {lo}-{hi} is empty (first port above last): the filter matches nothing"
    )]
    EmptyPortRange {
        field: &'static str,
        lo: u16,
        hi: u16,
    },
    #[error("port ranges only match TCP (6) and UDP (17), but the filter asks for protocol {protocol}: it matches nothing")]
    PortsWithoutTransport { protocol: u8 },
}

impl FilterIssue {
    /// Whether the issue makes the filter unable to match any well-formed packet.
    pub fn matches_nothing(&self) -> bool {
        !matches!(
            self,
            FilterIssue::DscpOutOfRange { .. } | FilterIssue::HostBits { .. }
        )
    }
}

fn family(p: &IpPrefix) -> &'static str {
    match p.addr {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    }
}

impl FilterSpec {
    /// A filter that sends everything to `class` (sets no field).
    pub fn any(class: ClassId) -> Self {
        FilterSpec {
            class,
            ..Default::default()
        }
    }

    /// Whether the filter sets no field (it matches every frame, IP or not).
    pub fn is_match_all(&self) -> bool {
        let FilterSpec {
            class: _,
            dscp,
            tos,
            protocol,
            src,
            dst,
            src_port,
            dst_port,
        } = self;
        dscp.is_none()
            && tos.is_none()
            && protocol.is_none()
            && src.is_none()
            && dst.is_none()
            && src_port.is_none()
            && dst_port.is_none()
    }

    /// Everything a configuration checker should say about this filter.
    pub fn issues(&self) -> Vec<FilterIssue> {
        let mut out = Vec::new();
        if let Some(list) = &self.dscp {
            for &value in list.iter().filter(|v| **v >= 64) {
                out.push(FilterIssue::DscpOutOfRange { value });
            }
            if !list.iter().any(|v| *v < 64) {
                out.push(FilterIssue::NoDscp);
            } else if let Some((v, m)) = self.tos {
                if !list
                    .iter()
                    .any(|d| *d < 64 && ((d << 2) ^ v) & m & 0xfc == 0)
                {
                    out.push(FilterIssue::TosDscpConflict);
                }
            }
        }
        for (field, p) in [("src", &self.src), ("dst", &self.dst)] {
            if let Some(p) = p {
                if !p.is_valid() {
                    out.push(FilterIssue::PrefixTooLong { field, prefix: *p });
                } else if p.has_host_bits() {
                    out.push(FilterIssue::HostBits {
                        field,
                        prefix: *p,
                        network: p.network(),
                    });
                }
            }
        }
        if let (Some(s), Some(d)) = (&self.src, &self.dst) {
            if family(s) != family(d) {
                out.push(FilterIssue::MixedFamilies {
                    src: family(s),
                    dst: family(d),
                });
            }
        }
        for (field, r) in [("src_port", self.src_port), ("dst_port", self.dst_port)] {
            if let Some((lo, hi)) = r {
                if lo > hi {
                    out.push(FilterIssue::EmptyPortRange { field, lo, hi });
                }
            }
        }
        if self.src_port.is_some() || self.dst_port.is_some() {
            if let Some(protocol) = self.protocol.filter(|p| *p != PROTO_TCP && *p != PROTO_UDP) {
                out.push(FilterIssue::PortsWithoutTransport { protocol });
            }
        }
        out
    }

    /// Whether some well-formed packet can match this filter.
    pub fn can_match(&self) -> bool {
        self.issues().iter().all(|i| !i.matches_nothing())
    }

    /// Whether this one filter matches the packet: the rules of the module documentation, field
    /// by field. `O(|dscp list|)`; the [`Classifier`] does not call it.
    pub fn matches(&self, meta: &PacketMeta) -> bool {
        if matches!(meta.l3, L3::Other(_)) {
            return self.is_match_all();
        }
        if let Some(list) = &self.dscp {
            if !list.contains(&meta.dscp()) {
                return false;
            }
        }
        if let Some((value, mask)) = self.tos {
            if (meta.tos ^ value) & mask != 0 {
                return false;
            }
        }
        if let Some(p) = self.protocol {
            if known_protocol(meta) != Some(p) {
                return false;
            }
        }
        if let Some(prefix) = &self.src {
            if !prefix.contains(meta.src) {
                return false;
            }
        }
        if let Some(prefix) = &self.dst {
            if !prefix.contains(meta.dst) {
                return false;
            }
        }
        if self.src_port.is_some() || self.dst_port.is_some() {
            let Some((sp, dp)) = transport_ports(meta) else {
                return false;
            };
            let inside = |r: Option<(u16, u16)>, p: u16| match r {
                None => true,
                Some((lo, hi)) => lo <= p && p <= hi,
            };
            if !inside(self.src_port, sp) || !inside(self.dst_port, dp) {
                return false;
            }
        }
        true
    }
}

/// A filter reduced to what the lookup structures need. `None` from [`compile`] = matches nothing.
struct Compiled {
    tos_mask: u8,
    /// Distinct values of `tos & tos_mask` that match.
    tos_values: Vec<u8>,
    proto: Option<u8>,
    /// Valid prefixes with host bits cleared.
    src: Option<IpPrefix>,
    dst: Option<IpPrefix>,
    /// `(src range, dst range)`, full ranges for the one not set.
    ports: Option<((u16, u16), (u16, u16))>,
}

fn compile(f: &FilterSpec) -> Option<Compiled> {
    let (tos_mask, tos_values) = match (&f.dscp, f.tos) {
        (None, None) => (0, vec![0]),
        (None, Some((v, m))) => (m, vec![v & m]),
        (Some(list), tos) => {
            let (v, m) = tos.unwrap_or((0, 0));
            let mask = m | 0xfc;
            let mut values: Vec<u8> = list
                .iter()
                .filter(|d| **d < 64)
                .map(|d| d << 2)
                .filter(|d| (d ^ v) & m & 0xfc == 0)
                .map(|d| d | (v & m & 0x03))
                .collect();
            values.sort_unstable();
            values.dedup();
            (mask, values)
        }
    };
    if tos_values.is_empty() {
        return None;
    }
    let prefix = |p: &Option<IpPrefix>| -> Result<Option<IpPrefix>, ()> {
        match p {
            None => Ok(None),
            Some(p) if p.is_valid() => Ok(Some(p.network())),
            Some(_) => Err(()),
        }
    };
    let src = prefix(&f.src).ok()?;
    let dst = prefix(&f.dst).ok()?;
    let ports = if f.src_port.is_some() || f.dst_port.is_some() {
        let sp = f.src_port.unwrap_or((0, u16::MAX));
        let dp = f.dst_port.unwrap_or((0, u16::MAX));
        if sp.0 > sp.1 || dp.0 > dp.1 {
            return None;
        }
        if f.protocol.is_some_and(|p| p != PROTO_TCP && p != PROTO_UDP) {
            return None;
        }
        Some((sp, dp))
    } else {
        None
    };
    Some(Compiled {
        tos_mask,
        tos_values,
        proto: f.protocol,
        src,
        dst,
        ports,
    })
}

/// How one address field takes part in a tuple's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum AddrPart {
    Any,
    V4 { len: u8 },
    V6 { len: u8 },
}

impl AddrPart {
    fn of(p: &Option<IpPrefix>) -> Self {
        match p {
            None => AddrPart::Any,
            Some(IpPrefix {
                addr: IpAddr::V4(_),
                len,
            }) => AddrPart::V4 { len: *len },
            Some(IpPrefix {
                addr: IpAddr::V6(_),
                len,
            }) => AddrPart::V6 { len: *len },
        }
    }

    fn mask(self) -> u128 {
        match self {
            AddrPart::Any => 0,
            AddrPart::V4 { len } => prefix::mask(32, len),
            AddrPart::V6 { len } => prefix::mask(128, len),
        }
    }
}

/// A tuple's shape (see the module documentation). `Ord` only to give tuples a fixed build order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Shape {
    tos_mask: u8,
    proto: bool,
    ports: bool,
    src: AddrPart,
    dst: AddrPart,
}

/// The exact-match key of a tuple: masked TOS and protocol, masked addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    /// `(tos & mask) << 8 | protocol` (protocol 0 when the tuple has none).
    tos_proto: u16,
    src: u128,
    dst: u128,
}

impl Hash for Key {
    /// Folds the key into one word with four independent multiplications (a short dependency
    /// chain, unlike feeding five words in turn); the hasher's finaliser then mixes that word.
    /// Keys that differ in one field never collide here (odd multipliers are bijections).
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        const K1: u64 = 0x9E37_79B9_7F4A_7C15;
        const K2: u64 = 0xC2B2_AE3D_27D4_EB4F;
        const K3: u64 = 0x1656_67B1_9E37_79F9;
        const K4: u64 = 0xD6E8_FEB8_6659_FD93;
        let fold = |x: u128, a: u64, b: u64| {
            (x as u64).wrapping_mul(a) ^ ((x >> 64) as u64).wrapping_mul(b)
        };
        let word = fold(self.src, K1, K2)
            ^ fold(self.dst, K3, K4).rotate_left(32)
            ^ u64::from(self.tos_proto);
        h.write_u64(word);
    }
}

/// Filters sharing one key, see the module documentation.
#[derive(Clone, Debug)]
enum Bucket {
    /// No ports in this tuple: the first filter shadows the rest.
    First(u32),
    /// At most [`FEW`] port rules, in index order.
    Few(Box<[PortRule]>),
    /// More port rules.
    Indexed(Box<PortIndex>),
}

impl Bucket {
    fn build(mut rules: Vec<PortRule>, ports: bool) -> Self {
        // `rules` arrive in index order. A rule without port limits shadows all later ones.
        if let Some(cut) = rules.iter().position(|r| !ports || r.contains_all()) {
            rules.truncate(cut + 1);
        }
        match rules.as_slice() {
            [only] if !ports || only.contains_all() => Bucket::First(only.index),
            r if r.len() <= FEW => Bucket::Few(r.into()),
            r => Bucket::Indexed(Box::new(PortIndex::build(r))),
        }
    }

    #[inline]
    fn lookup(&self, sp: u16, dp: u16) -> u32 {
        match self {
            Bucket::First(i) => *i,
            Bucket::Few(rules) => rules
                .iter()
                .find(|r| r.contains(sp, dp))
                .map_or(NONE, |r| r.index),
            Bucket::Indexed(ix) => ix.lookup(sp, dp),
        }
    }
}

impl PortRule {
    fn contains_all(&self) -> bool {
        self.sp == (0, u16::MAX) && self.dp == (0, u16::MAX)
    }
}

#[derive(Clone, Debug)]
struct Tuple {
    /// Lowest filter index in this tuple: if the best match so far is lower, skip the tuple.
    first: u32,
    shape: Shape,
    src_mask: u128,
    dst_mask: u128,
    buckets: HashMap<Key, Bucket, TupleBuildHasher>,
}

/// The part of an address a tuple keys on, or `None` if the family does not match.
#[inline]
fn addr_key(part: AddrPart, mask: u128, addr: IpAddr) -> Option<u128> {
    match (part, addr) {
        (AddrPart::Any, _) => Some(0),
        (AddrPart::V4 { .. }, IpAddr::V4(a)) => Some(u128::from(u32::from(a)) & mask),
        (AddrPart::V6 { .. }, IpAddr::V6(a)) => Some(u128::from(a) & mask),
        _ => None,
    }
}

/// Sizes of the compiled structures, for diagnostics and configuration warnings.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClassifierStats {
    /// Filters folded into the 256-entry TOS table (DSCP/TOS-only and match-all filters).
    pub table_filters: usize,
    /// Distinct tuples (shapes): the per-packet worst case is one hash probe per tuple.
    pub tuples: usize,
    /// Hash-table entries over all tuples.
    pub buckets: usize,
    /// Most filters sharing one key (port rules searched in `O(log k)`).
    pub largest_bucket: usize,
    /// Filters that can match no packet (see [`FilterSpec::issues`]).
    pub dead_filters: usize,
}

/// Filters compiled for lookup; see the [module documentation](self) for the structures and
/// their cost.
#[derive(Clone, Debug)]
pub struct Classifier {
    filters: Vec<FilterSpec>,
    default: ClassId,
    /// `classes[i] == filters[i].class`, packed for the lookup path.
    classes: Vec<ClassId>,
    /// Lowest index of a TOS-only filter matching each TOS byte, or `NONE`.
    tos_first: Box<[u32; 256]>,
    /// Lowest index of a match-all filter: the answer for frames that are not IP.
    non_ip_first: u32,
    /// In increasing order of `first`.
    tuples: Vec<Tuple>,
    stats: ClassifierStats,
}

impl Classifier {
    /// Compile `filters` (index 0 tried first). Filters that can match nothing are kept (see
    /// [`Classifier::filters`]) but cost nothing at lookup. Build time is `O(n log n)` plus
    /// `O(256)` per TOS-only filter and `O(k log² k)` per port bucket of `k` filters.
    pub fn new(filters: Vec<FilterSpec>, default: ClassId) -> Self {
        let classes: Vec<ClassId> = filters.iter().map(|f| f.class).collect();
        let mut tos_first = Box::new([NONE; 256]);
        let mut non_ip_first = NONE;
        let mut stats = ClassifierStats::default();
        let mut shapes: BTreeMap<Shape, HashMap<Key, Vec<PortRule>, TupleBuildHasher>> =
            BTreeMap::new();

        // Indices must fit in u32 below NONE; a policy that large (4 billion filters) is cut.
        for (i, f) in filters.iter().enumerate().take(NONE as usize) {
            let index = i as u32;
            let Some(c) = compile(f) else {
                stats.dead_filters += 1;
                continue;
            };
            if c.proto.is_none() && c.src.is_none() && c.dst.is_none() && c.ports.is_none() {
                stats.table_filters += 1;
                if f.is_match_all() && non_ip_first == NONE {
                    non_ip_first = index;
                }
                let mut hit = [false; 256];
                for &v in &c.tos_values {
                    hit[usize::from(v)] = true;
                }
                for (tos, slot) in tos_first.iter_mut().enumerate() {
                    if *slot == NONE && hit[tos & usize::from(c.tos_mask)] {
                        *slot = index;
                    }
                }
                continue;
            }
            let shape = Shape {
                tos_mask: c.tos_mask,
                proto: c.proto.is_some(),
                ports: c.ports.is_some(),
                src: AddrPart::of(&c.src),
                dst: AddrPart::of(&c.dst),
            };
            let src = c.src.map_or(0, |p| prefix::bits(p.addr));
            let dst = c.dst.map_or(0, |p| prefix::bits(p.addr));
            let (sp, dp) = c.ports.unwrap_or(((0, u16::MAX), (0, u16::MAX)));
            let table = shapes.entry(shape).or_default();
            for &v in &c.tos_values {
                let key = Key {
                    tos_proto: u16::from(v) << 8 | u16::from(c.proto.unwrap_or(0)),
                    src,
                    dst,
                };
                table
                    .entry(key)
                    .or_default()
                    .push(PortRule { index, sp, dp });
            }
        }

        let mut tuples: Vec<Tuple> = shapes
            .into_iter()
            .map(|(shape, table)| {
                let mut first = NONE;
                let mut buckets =
                    HashMap::with_capacity_and_hasher(table.len(), TupleBuildHasher::default());
                for (key, rules) in table {
                    stats.largest_bucket = stats.largest_bucket.max(rules.len());
                    first = first.min(rules[0].index);
                    buckets.insert(key, Bucket::build(rules, shape.ports));
                }
                stats.buckets += buckets.len();
                Tuple {
                    first,
                    shape,
                    src_mask: shape.src.mask(),
                    dst_mask: shape.dst.mask(),
                    buckets,
                }
            })
            .collect();
        tuples.sort_by_key(|t| t.first);
        stats.tuples = tuples.len();

        Classifier {
            filters,
            default,
            classes,
            tos_first,
            non_ip_first,
            tuples,
            stats,
        }
    }

    /// Where packets that match no filter go.
    pub fn default_class(&self) -> ClassId {
        self.default
    }

    /// The filters, in the order they are tried.
    pub fn filters(&self) -> &[FilterSpec] {
        &self.filters
    }

    /// Number of filters.
    pub fn len(&self) -> usize {
        self.filters.len()
    }

    /// Whether there are no filters (everything goes to the default class).
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// Sizes of the compiled structures.
    pub fn stats(&self) -> ClassifierStats {
        self.stats
    }

    /// The class of the first filter that matches, else the default class.
    #[inline]
    pub fn classify(&self, meta: &PacketMeta) -> ClassId {
        let i = self.first_match(meta);
        self.classes
            .get(i as usize)
            .copied()
            .unwrap_or(self.default)
    }

    /// Index (into [`Classifier::filters`]) of the first filter that matches, if any.
    pub fn explain(&self, meta: &PacketMeta) -> Option<usize> {
        let i = self.first_match(meta);
        (i != NONE).then_some(i as usize)
    }

    #[inline]
    fn first_match(&self, meta: &PacketMeta) -> u32 {
        if matches!(meta.l3, L3::Other(_)) {
            return self.non_ip_first;
        }
        let mut best = self.tos_first[usize::from(meta.tos)];
        if self.tuples.is_empty() {
            return best;
        }
        let proto = known_protocol(meta);
        let ports = transport_ports(meta);
        for t in &self.tuples {
            if t.first >= best {
                break;
            }
            let s = &t.shape;
            let proto_part = match (s.proto, proto) {
                (false, _) => 0,
                (true, Some(p)) => p,
                (true, None) => continue,
            };
            let (sp, dp) = match (s.ports, ports) {
                (false, _) => (0, 0),
                (true, Some(p)) => p,
                (true, None) => continue,
            };
            let Some(src) = addr_key(s.src, t.src_mask, meta.src) else {
                continue;
            };
            let Some(dst) = addr_key(s.dst, t.dst_mask, meta.dst) else {
                continue;
            };
            let key = Key {
                tos_proto: u16::from(meta.tos & s.tos_mask) << 8 | u16::from(proto_part),
                src,
                dst,
            };
            if let Some(bucket) = t.buckets.get(&key) {
                best = best.min(bucket.lookup(sp, dp));
            }
        }
        best
    }
}
