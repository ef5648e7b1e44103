//! Packet classification. (Being written: see helper task.)

use std::net::IpAddr;

use crate::packet::PacketMeta;

/// Index of a class in the scheduler's class table.
pub type ClassId = u32;

/// An IP prefix such as `10.0.0.0/8` or `2001:db8::/32`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    pub addr: IpAddr,
    pub len: u8,
}

/// One filter: every field that is `Some` must match. Filters are tried in the order given
/// (like tc's `prio`); the first that matches wins.
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

/// Filters compiled for lookup.
#[derive(Clone, Debug)]
pub struct Classifier {
    filters: Vec<FilterSpec>,
    default: ClassId,
}

impl Classifier {
    pub fn new(filters: Vec<FilterSpec>, default: ClassId) -> Self {
        Classifier { filters, default }
    }
    pub fn default_class(&self) -> ClassId {
        self.default
    }
    pub fn classify(&self, meta: &PacketMeta) -> ClassId {
        let _ = &self.filters;
        let _ = meta;
        self.default
    }
}
