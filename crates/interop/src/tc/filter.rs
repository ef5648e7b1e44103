//! tc filters → linkshare filters: u32 matches (tc-u32(8)), basic flower matches
//! (tc-flower(8)) and matchall, decoded into one [`Match`] per rule, then merged back into as
//! few linkshare filters as say the same thing.
//!
//! Principles:
//! * **Bytes, not syntax.** Every u32 match — `match ip dst 10.0.0.0/8`, `match u16 … at 6`, or
//!   the raw `value/mask at off` keys of `tc filter show` — is laid on one value/mask image of
//!   the first 44 bytes of the IPv4 or IPv6 header (ports assumed right after a 20-byte IPv4 or
//!   the fixed 40-byte IPv6 header, as u32 reads them). The image is then read field by field:
//!   TOS/traffic class, protocol, source and destination prefixes, ports. Script and live forms
//!   decode the same way, and a match on anything else (TTL, flow label, a non-prefix address
//!   mask, `nexthdr+` offsets) is refused with the line, not guessed.
//! * **Undo what `export tc` had to expand.** tc has no port ranges, DSCP lists or "any family":
//!   the exporter writes aligned value/mask blocks, one rule per code point, TCP and UDP copies
//!   and an IPv4 and an IPv6 filter. Adjacent rules of one `prio` with the same `flowid` that
//!   differ in only one of these are merged back (blocks only when they tile one range
//!   exactly), so export → import gives the policy's own filters. Only adjacent rules are
//!   merged: first-match order is never changed.
//! * What u32 sees differently from linkshare is said in notes: ports read at a fixed offset
//!   (IP options, IPv6 extension headers), ports without a protocol (linkshare matches ports
//!   only on TCP and UDP), a filter for one family that linkshare will apply to both.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::diag::Diag;
use crate::policy_writer::{Field, Val};

/// Where a filter sends packets: a tc class id `major:minor`.
pub type ClassRef = (u32, u32);

/// One rule's conditions, as linkshare can say them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Match {
    /// `Some(false)` IPv4 only, `Some(true)` IPv6 only, `None` any frame.
    pub v6: Option<bool>,
    pub dscp: Vec<u8>,
    pub tos: Option<(u8, u8)>,
    pub proto: Option<u8>,
    pub src: Option<(IpAddr, u8)>,
    pub dst: Option<(IpAddr, u8)>,
    pub sport: Option<(u16, u16)>,
    pub dport: Option<(u16, u16)>,
}

/// A decoded rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub line: usize,
    pub prio: u32,
    pub flowid: ClassRef,
    pub m: Match,
    pub notes: Vec<String>,
}

const IMG: usize = 44;

/// The value/mask image of a header under construction.
#[derive(Clone, Debug)]
pub struct Image {
    val: [u8; IMG],
    mask: [u8; IMG],
    /// Two matches want different values of one bit: the rule matches nothing.
    conflict: bool,
}

impl Default for Image {
    fn default() -> Self {
        Image {
            val: [0; IMG],
            mask: [0; IMG],
            conflict: false,
        }
    }
}

impl Image {
    /// Lay `value/mask` (big-endian, `width` bytes) at byte `off`.
    pub fn put(&mut self, value: u64, mask: u64, width: usize, off: i64) -> Result<(), String> {
        for k in 0..width {
            let shift = 8 * (width - 1 - k);
            let m = ((mask >> shift) & 0xff) as u8;
            let v = ((value >> shift) & 0xff) as u8 & m;
            if m == 0 {
                continue;
            }
            let at = off + k as i64;
            if !(0..IMG as i64).contains(&at) {
                return Err(format!(
                    "a match at byte {at} of the header: linkshare matches only the IP header's \
                     TOS, protocol and addresses and the TCP/UDP ports"
                ));
            }
            let i = at as usize;
            if (self.val[i] ^ v) & self.mask[i] & m != 0 {
                self.conflict = true;
            }
            self.val[i] |= v;
            self.mask[i] |= m;
        }
        Ok(())
    }

    /// Lay every match of `other` on this image too (a link's matches on its table's rules).
    pub fn and(&mut self, other: &Image) {
        for i in 0..IMG {
            if (self.val[i] ^ other.val[i]) & self.mask[i] & other.mask[i] != 0 {
                self.conflict = true;
            }
            self.val[i] |= other.val[i] & other.mask[i];
            self.mask[i] |= other.mask[i];
        }
        self.conflict |= other.conflict;
    }

    /// The value of the big-endian word at `off` under `mask`, when the image fixes every bit
    /// of the mask there (what a hash key reads); `None` when some bit is free or out of range.
    pub fn pinned(&self, mask: u32, off: i64) -> Option<u32> {
        let at = usize::try_from(off).ok().filter(|a| a + 4 <= IMG)?;
        let v = u32::from_be_bytes([
            self.val[at],
            self.val[at + 1],
            self.val[at + 2],
            self.val[at + 3],
        ]);
        let m = u32::from_be_bytes([
            self.mask[at],
            self.mask[at + 1],
            self.mask[at + 2],
            self.mask[at + 3],
        ]);
        (m & mask == mask).then_some(v & mask)
    }

    fn any(&self, r: std::ops::Range<usize>) -> bool {
        self.mask[r].iter().any(|&m| m != 0)
    }

    fn u16(&self, at: usize) -> (u16, u16) {
        (
            u16::from_be_bytes([self.val[at], self.val[at + 1]]),
            u16::from_be_bytes([self.mask[at], self.mask[at + 1]]),
        )
    }

    /// Read the image as linkshare's conditions; notes for what differs.
    pub fn decode(&self, v6: bool, notes: &mut Vec<String>) -> Result<Option<Match>, String> {
        if self.conflict {
            return Ok(None);
        }
        let mut m = Match {
            v6: Some(v6),
            ..Match::default()
        };
        let (tos_v, tos_m, proto_at, src_at, alen, sport_at) = if v6 {
            let first = u32::from_be_bytes([self.val[0], self.val[1], self.val[2], self.val[3]]);
            let fmask =
                u32::from_be_bytes([self.mask[0], self.mask[1], self.mask[2], self.mask[3]]);
            if fmask & 0x000f_ffff != 0 {
                return Err("a match on the IPv6 flow label: linkshare does not match it".into());
            }
            if fmask & 0xf000_0000 != 0 && first >> 28 != 6 {
                return Ok(None);
            }
            if self.any(4..6) || self.any(7..8) {
                return Err("a match on the IPv6 payload length or hop limit: linkshare does not match them".into());
            }
            (
                ((first >> 20) & 0xff) as u8,
                ((fmask >> 20) & 0xff) as u8,
                6,
                8,
                16,
                40,
            )
        } else {
            if self.mask[0] != 0 {
                if self.mask[0] == 0x0f && self.val[0] == 0x05 {
                    // export tc's guard: no IP options, so that ports sit at offset 20.
                } else {
                    return Err("a match on the IPv4 version or header length: linkshare does not match them".into());
                }
            }
            if self.any(2..6) || self.any(8..9) || self.any(10..12) {
                return Err("a match on the IPv4 length, id, TTL or checksum: linkshare does not match them".into());
            }
            let (fv, fm) = self.u16(6);
            if fm != 0 && !(fv & fm == 0 && fm & 0x1fff == 0x1fff) {
                return Err("a match on the IPv4 fragment fields other than \"first fragment\": linkshare does not match them".into());
            }
            (self.val[1], self.mask[1], 9, 12, 4, 20)
        };
        if tos_m == 0xfc {
            m.dscp = vec![tos_v >> 2];
        } else if tos_m != 0 {
            m.tos = Some((tos_v & tos_m, tos_m));
        }
        match self.mask[proto_at] {
            0 => {}
            0xff => m.proto = Some(self.val[proto_at]),
            other => {
                return Err(format!(
                    "a protocol match with mask {other:#04x}: linkshare matches one protocol (mask 0xff)"
                ))
            }
        }
        m.src = self.prefix(src_at, alen, v6)?;
        m.dst = self.prefix(src_at + alen, alen, v6)?;
        m.sport = port_block(self.u16(sport_at))?;
        m.dport = port_block(self.u16(sport_at + 2))?;
        if m.sport.is_some() || m.dport.is_some() {
            if m.proto.is_none() {
                notes.push(
                    "u32 reads ports of any protocol; linkshare matches ports only on TCP and UDP"
                        .into(),
                );
            }
            notes.push(if v6 {
                "u32 reads IPv6 ports right after the fixed header; linkshare walks extension headers first".into()
            } else {
                "u32 reads IPv4 ports at offset 20; linkshare reads them after any IP options".into()
            });
        }
        Ok(Some(m))
    }

    fn prefix(&self, at: usize, len: usize, v6: bool) -> Result<Option<(IpAddr, u8)>, String> {
        let mask = &self.mask[at..at + len];
        let bits: u32 = mask.iter().map(|b| b.count_ones()).sum();
        if bits == 0 {
            return Ok(None);
        }
        let contiguous = mask
            .iter()
            .flat_map(|b| (0..8).rev().map(move |k| b >> k & 1))
            .skip(bits as usize)
            .all(|b| b == 0);
        if !contiguous {
            return Err(
                "an address mask that is not a prefix: linkshare matches address prefixes".into(),
            );
        }
        let v = &self.val[at..at + len];
        let addr = if v6 {
            let mut a = [0u8; 16];
            a.copy_from_slice(v);
            IpAddr::V6(Ipv6Addr::from(a))
        } else {
            IpAddr::V4(Ipv4Addr::new(v[0], v[1], v[2], v[3]))
        };
        Ok(Some((addr, bits as u8)))
    }
}

/// An aligned value/mask port block as an inclusive range.
fn port_block((v, m): (u16, u16)) -> Result<Option<(u16, u16)>, String> {
    if m == 0 {
        return Ok(None);
    }
    if m.leading_ones() + m.trailing_zeros() != 16 {
        return Err(format!(
            "port mask {m:#06x} is not a range (its ones are not the high bits)"
        ));
    }
    let lo = v & m;
    Ok(Some((lo, lo | !m)))
}

/// A number as tc reads it (strtoul base 0: `0x` hex, leading `0` octal, else decimal).
pub fn tc_number(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// A class id as tc writes it: `1:10` (hex minor), `1:` (the qdisc), `root`, `none`.
pub fn class_ref(s: &str) -> Option<ClassRef> {
    let (a, b) = s.split_once(':')?;
    let maj = if a.is_empty() {
        0
    } else {
        u32::from_str_radix(a, 16).ok()?
    };
    let min = if b.is_empty() {
        0
    } else {
        u32::from_str_radix(b, 16).ok()?
    };
    (maj <= 0xffff && min <= 0xffff).then_some((maj, min))
}

fn prefix_arg(s: &str, v6: bool) -> Result<(u64, u64, IpAddr, u32), String> {
    let (a, l) = s.split_once('/').unwrap_or((s, ""));
    let addr: IpAddr = a
        .parse()
        .map_err(|_| format!("`{s}` is not an address or prefix"))?;
    let max = if addr.is_ipv6() { 128 } else { 32 };
    if addr.is_ipv6() != v6 {
        return Err(format!(
            "`{s}` is not an IPv{} prefix",
            if v6 { 6 } else { 4 }
        ));
    }
    let len: u32 = if l.is_empty() {
        max
    } else {
        l.parse()
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| format!("`{s}`: bad prefix length"))?
    };
    Ok((0, 0, addr, len))
}

fn put_prefix(img: &mut Image, s: &str, v6: bool, at: i64) -> Result<(), String> {
    let (_, _, addr, len) = prefix_arg(s, v6)?;
    let bytes: Vec<u8> = match addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    for (k, b) in bytes.iter().enumerate() {
        let bits = (len as i64 - 8 * k as i64).clamp(0, 8) as u32;
        let m = if bits == 0 { 0 } else { 0xffu8 << (8 - bits) };
        img.put(u64::from(*b), u64::from(m), 1, at + k as i64)?;
    }
    Ok(())
}

/// A u32 filter's words, parsed: the header image its matches make, and the hash-table words
/// (tc-u32(8) "hashing filters") when it has them.
#[derive(Clone, Debug, Default)]
pub struct U32 {
    pub img: Image,
    pub flowid: Option<ClassRef>,
    /// `ht T:B:`: the table and bucket the rule goes in.
    pub ht: Option<(u32, u32)>,
    /// `link T:`: the table the rule sends its packets on to.
    pub link: Option<u32>,
    /// `hashkey mask M at O`.
    pub hashkey: Option<(u32, i64)>,
    /// `divisor N`: the command creates table `handle` with N buckets.
    pub divisor: Option<u32>,
}

/// A u32 table id as tc writes it in `ht`/`link`: `T:`, `T:B:` or `T:B:N` (hex): (table, bucket).
fn table_ref(s: &str) -> Option<(u32, u32)> {
    let mut parts = s.split(':');
    let t = u32::from_str_radix(parts.next()?, 16).ok()?;
    let b = match parts.next() {
        None | Some("") => 0,
        Some(b) => u32::from_str_radix(b, 16).ok()?,
    };
    (t <= 0xfff && b <= 0xff).then_some((t, b))
}

/// Words of a u32 filter after `u32`, up to the end.
pub fn parse_u32(words: &[String], v6: bool) -> Result<U32, String> {
    let mut out = U32::default();
    let mut img = Image::default();
    let mut flowid = None;
    let mut i = 0;
    let arg = |i: usize| -> Result<&str, String> {
        words
            .get(i)
            .map(|s| s.as_str())
            .ok_or_else(|| format!("`{}` needs a value", words[i - 1]))
    };
    let num = |i: usize| -> Result<u64, String> {
        let s = arg(i)?;
        tc_number(s).ok_or_else(|| format!("`{s}` is not a number"))
    };
    while i < words.len() {
        match words[i].as_str() {
            "match" => {
                let sel = arg(i + 1)?;
                match sel {
                    "ip" | "ip6" => {
                        let six = sel == "ip6";
                        if six != v6 {
                            return Err(format!(
                                "`match {sel}` in a `protocol {}` filter",
                                if v6 { "ipv6" } else { "ip" }
                            ));
                        }
                        let field = arg(i + 2)?;
                        let (a_src, a_dst, alen) = if six { (8, 24, 16) } else { (12, 16, 4) };
                        let _ = alen;
                        let (sp, dp) = if six { (40, 42) } else { (20, 22) };
                        match field {
                            "src" => {
                                put_prefix(&mut img, arg(i + 3)?, six, a_src)?;
                                i += 4;
                            }
                            "dst" => {
                                put_prefix(&mut img, arg(i + 3)?, six, a_dst)?;
                                i += 4;
                            }
                            "sport" | "dport" | "protocol" | "tos" | "dsfield" | "priority" => {
                                let (v, m) = (num(i + 3)?, num(i + 4)?);
                                match (field, six) {
                                    ("sport", _) => img.put(v, m, 2, sp)?,
                                    ("dport", _) => img.put(v, m, 2, dp)?,
                                    ("protocol", false) => img.put(v, m, 1, 9)?,
                                    ("protocol", true) => img.put(v, m, 1, 6)?,
                                    ("tos" | "dsfield", false) => img.put(v, m, 1, 1)?,
                                    ("priority", true) => {
                                        img.put((v & 0xff) << 20, (m & 0xff) << 20, 4, 0)?
                                    }
                                    _ => {
                                        return Err(format!(
                                            "`match {sel} {field}` is not a tc-u32 selector"
                                        ))
                                    }
                                }
                                i += 5;
                            }
                            other => {
                                return Err(format!(
                                    "`match {sel} {other}`: linkshare imports {sel} src, dst, sport, dport, protocol and {}",
                                    if six { "priority" } else { "tos/dsfield" }
                                ))
                            }
                        }
                    }
                    "u32" | "u16" | "u8" => {
                        let width = match sel {
                            "u32" => 4,
                            "u16" => 2,
                            _ => 1,
                        };
                        let (v, m) = (num(i + 2)?, num(i + 3)?);
                        // `at OFFSET` is optional (tc-u32(8)): 0 by default.
                        if words.get(i + 4).map(String::as_str) != Some("at") {
                            img.put(v, m, width, 0)?;
                            i += 4;
                            continue;
                        }
                        let off = arg(i + 5)?;
                        if off.starts_with("nexthdr") {
                            return Err("`at nexthdr+…` needs u32 hash tables, which linkshare does not import".into());
                        }
                        let off: i64 = off
                            .parse()
                            .map_err(|_| format!("`{off}` is not an offset"))?;
                        img.put(v, m, width, off)?;
                        i += 6;
                    }
                    other => {
                        return Err(format!(
                            "`match {other}`: linkshare imports `match ip …`, `match ip6 …` and `match u32/u16/u8 … at N`"
                        ))
                    }
                }
            }
            "flowid" | "classid" => {
                let s = arg(i + 1)?;
                flowid = Some(class_ref(s).ok_or_else(|| format!("`{s}` is not a class id"))?);
                i += 2;
            }
            "skip_hw" | "skip_sw" => i += 1,
            "ht" | "link" => {
                let s = arg(i + 1)?;
                let t = table_ref(s).ok_or_else(|| format!("`{s}` is not a u32 table id"))?;
                if words[i] == "ht" {
                    out.ht = Some(t);
                } else {
                    out.link = Some(t.0);
                }
                i += 2;
            }
            "hashkey" => {
                if arg(i + 1)? != "mask" || arg(i + 3)? != "at" {
                    return Err("write the hash key as `hashkey mask 0x000000ff at 16`".into());
                }
                let m = num(i + 2)?;
                let off = arg(i + 4)?;
                let off: i64 = off
                    .parse()
                    .map_err(|_| format!("`{off}` is not an offset"))?;
                out.hashkey = Some((m as u32, off));
                i += 5;
            }
            "divisor" => {
                let d = num(i + 1)?;
                if !(1..=256).contains(&d) || !d.is_power_of_two() {
                    return Err(format!("divisor {d}: tc-u32 tables have 1 to 256 buckets, a power of two"));
                }
                out.divisor = Some(d as u32);
                i += 2;
            }
            "sample" | "offset" | "order" => {
                return Err(format!(
                    "`{}`: u32 sampling, offsets and node order are not imported; write one rule per match",
                    words[i]
                ))
            }
            "police" | "action" | "actions" => {
                return Err(format!(
                    "`{}`: linkshare has no policers or actions; shape with a class instead",
                    words[i]
                ))
            }
            other => return Err(format!("unknown tc-u32 keyword `{other}`")),
        }
    }
    out.img = img;
    out.flowid = flowid;
    Ok(out)
}

fn port_range(s: &str) -> Result<(u16, u16), String> {
    let p = |t: &str| {
        t.parse::<u16>()
            .map_err(|_| format!("`{s}` is not a port or range"))
    };
    match s.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (p(a)?, p(b)?);
            if a > b {
                return Err(format!("port range `{s}` is empty"));
            }
            Ok((a, b))
        }
        None => p(s).map(|x| (x, x)),
    }
}

/// Protocol names tc and pf accept.
pub fn proto_number(s: &str) -> Option<u8> {
    match s.to_ascii_lowercase().as_str() {
        "icmp" => Some(1),
        "igmp" => Some(2),
        "tcp" => Some(6),
        "udp" => Some(17),
        "gre" => Some(47),
        "esp" => Some(50),
        "ah" => Some(51),
        "icmpv6" | "ipv6-icmp" | "icmp6" => Some(58),
        "sctp" => Some(132),
        n => tc_number(n).filter(|v| *v <= 255).map(|v| v as u8),
    }
}

/// Words of a flower filter after `flower` (tc-flower(8): the keys linkshare can match).
pub fn parse_flower(words: &[String], v6: bool) -> Result<(Match, Option<ClassRef>), String> {
    let mut m = Match {
        v6: Some(v6),
        ..Match::default()
    };
    let mut flowid = None;
    let mut i = 0;
    while i < words.len() {
        let key = words[i].as_str();
        if matches!(key, "skip_hw" | "skip_sw") {
            i += 1;
            continue;
        }
        let val = words
            .get(i + 1)
            .ok_or_else(|| format!("`{key}` needs a value"))?
            .as_str();
        match key {
            "classid" | "flowid" => {
                flowid = Some(class_ref(val).ok_or_else(|| format!("`{val}` is not a class id"))?)
            }
            "ip_proto" => {
                m.proto = Some(proto_number(val).ok_or_else(|| format!("unknown protocol `{val}`"))?)
            }
            "src_ip" | "dst_ip" => {
                let (_, _, a, l) = prefix_arg(val, v6)?;
                let p = Some((a, l as u8));
                if key == "src_ip" {
                    m.src = p
                } else {
                    m.dst = p
                }
            }
            "src_port" => m.sport = Some(port_range(val)?),
            "dst_port" => m.dport = Some(port_range(val)?),
            "ip_tos" => {
                let (v, mk) = val.split_once('/').unwrap_or((val, "0xff"));
                let v = tc_number(v).filter(|x| *x <= 255).ok_or_else(|| format!("`{val}` is not a TOS"))? as u8;
                let mk = tc_number(mk).filter(|x| *x <= 255).ok_or_else(|| format!("`{val}` is not a TOS"))? as u8;
                if mk == 0xfc {
                    m.dscp = vec![v >> 2];
                } else {
                    m.tos = Some((v & mk, mk));
                }
            }
            other => {
                return Err(format!(
                    "unknown or unsupported tc-flower key `{other}`: linkshare imports ip_proto, src_ip, dst_ip, src_port, dst_port, ip_tos, classid"
                ))
            }
        }
        i += 2;
    }
    if (m.sport.is_some() || m.dport.is_some()) && !matches!(m.proto, Some(6 | 17 | 132)) {
        return Err("flower matches ports only with ip_proto tcp, udp or sctp".into());
    }
    Ok((m, flowid))
}

pub use super::merge::merge;

/// The filter keys of a decoded match, with notes where linkshare reads it differently.
pub fn fields(m: &Match) -> (Vec<Field>, Vec<String>) {
    let mut f = Vec::new();
    let mut notes = Vec::new();
    if !m.dscp.is_empty() {
        f.push(if m.dscp.len() == 1 {
            Field::int("dscp", i64::from(m.dscp[0]))
        } else {
            Field::new(
                "dscp",
                Val::Ints(m.dscp.iter().map(|d| i64::from(*d)).collect()),
            )
        });
    }
    if let Some((v, mk)) = m.tos {
        f.push(Field::str("tos", format!("{v:#04x}/{mk:#04x}")));
    }
    if let Some(p) = m.proto {
        f.push(Field::int("protocol", i64::from(p)));
    }
    for (k, p) in [("src", m.src), ("dst", m.dst)] {
        if let Some((a, l)) = p {
            f.push(Field::str(k, format!("{a}/{l}")));
        }
    }
    for (k, p) in [("src_port", m.sport), ("dst_port", m.dport)] {
        match p {
            Some((a, b)) if a == b => f.push(Field::int(k, i64::from(a))),
            Some((a, b)) => f.push(Field::str(k, format!("{a}-{b}"))),
            None => {}
        }
    }
    if m.src.is_none() && m.dst.is_none() {
        if let Some(v6) = m.v6 {
            notes.push(format!(
                "tc applied this rule to IPv{} only; without an address linkshare applies it to IPv4 and IPv6",
                if v6 { 6 } else { 4 }
            ));
        }
    }
    (f, notes)
}

/// Decode a u32 rule, or explain why not.
pub fn decode_u32(
    words: &[String],
    v6: bool,
    line: usize,
    file: &str,
    prio: u32,
) -> Result<Option<Rule>, Diag> {
    let err = |m: String| Diag::new(file, line, m);
    let u = parse_u32(words, v6).map_err(err)?;
    rule_of(&u.img, u.flowid, v6, line, file, prio)
}

/// A parsed u32 rule as a [`Rule`] (`None`: its matches contradict each other).
pub fn rule_of(
    img: &Image,
    flowid: Option<ClassRef>,
    v6: bool,
    line: usize,
    file: &str,
    prio: u32,
) -> Result<Option<Rule>, Diag> {
    let err = |m: String| Diag::new(file, line, m);
    let Some(flowid) = flowid else {
        return Err(
            Diag::new(file, line, "the u32 filter has no `flowid`/`classid`")
                .help("linkshare filters send packets to a class: add `flowid 1:N`"),
        );
    };
    let mut notes = Vec::new();
    let m = img.decode(v6, &mut notes).map_err(err)?;
    Ok(m.map(|m| Rule {
        line,
        prio,
        flowid,
        m,
        notes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn selectors_and_raw_matches_decode_alike() {
        let a = decode_u32(&w("match ip dst 10.1.0.0/16 match ip protocol 17 0xff match ip dport 5000 0xfffc flowid 1:2"), false, 1, "t", 1).unwrap().unwrap();
        let b = decode_u32(&w("match u32 0a010000 ffff0000 at 16 match u8 17 0xff at 9 match u32 0x1388 0xfffc at 20 flowid 1:2"), false, 1, "t", 1);
        // `0a010000` without 0x is octal-invalid: tc would refuse it too.
        assert!(b.is_err());
        let b = decode_u32(&w("match u32 0x0a010000 0xffff0000 at 16 match u8 17 0xff at 9 match u32 0x1388 0xfffc at 20 flowid 1:2"), false, 1, "t", 1).unwrap().unwrap();
        assert_eq!(a.m, b.m);
        assert_eq!(a.m.dport, Some((5000, 5003)));
        assert_eq!(a.m.dst, Some(("10.1.0.0".parse().unwrap(), 16)));
        let e = decode_u32(&w("match ip ttl 1 0xff flowid 1:2"), false, 7, "t", 1).unwrap_err();
        assert!(e.message.contains("ttl"), "{e}");
        let e = decode_u32(&w("match u8 1 0xff at 8 flowid 1:2"), false, 7, "t", 1).unwrap_err();
        assert!(e.message.contains("TTL"), "{e}");
        let v6 = decode_u32(
            &w("match u16 0x0b80 0x0fc0 at 0 flowid 1:3"),
            true,
            1,
            "t",
            2,
        )
        .unwrap()
        .unwrap();
        assert_eq!(v6.m.dscp, vec![46]);
    }

    #[test]
    fn merging_undoes_the_exporters_expansion() {
        let rule = |prio, m: Match| Rule {
            line: 1,
            prio,
            flowid: (1, 2),
            m,
            notes: vec![],
        };
        let base = Match {
            v6: Some(false),
            proto: Some(6),
            ..Match::default()
        };
        let mut rules = Vec::new();
        for (lo, hi) in [
            (8000u16, 8063u16),
            (8064, 8191),
            (8192, 8703),
            (8704, 8959),
            (8960, 8991),
            (8992, 8999),
        ] {
            rules.push(rule(
                1,
                Match {
                    dport: Some((lo, hi)),
                    ..base.clone()
                },
            ));
        }
        for (lo, hi) in [
            (8000u16, 8063u16),
            (8064, 8191),
            (8192, 8703),
            (8704, 8959),
            (8960, 8991),
            (8992, 8999),
        ] {
            rules.push(rule(
                1,
                Match {
                    dport: Some((lo, hi)),
                    proto: Some(17),
                    ..base.clone()
                },
            ));
        }
        let v6: Vec<Rule> = rules
            .iter()
            .map(|r| Rule {
                prio: 2,
                m: Match {
                    v6: Some(true),
                    ..r.m.clone()
                },
                ..r.clone()
            })
            .collect();
        rules.extend(v6);
        let out = merge(rules);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].m.dport, Some((8000, 8999)));
        assert_eq!(out[0].m.proto, None);
        assert_eq!(out[0].m.v6, None);
        // Blocks that leave a gap are not merged.
        let gap = merge(vec![
            rule(
                1,
                Match {
                    dport: Some((1, 1)),
                    ..base.clone()
                },
            ),
            rule(
                1,
                Match {
                    dport: Some((3, 3)),
                    ..base.clone()
                },
            ),
        ]);
        assert_eq!(gap.len(), 2);
    }
}
