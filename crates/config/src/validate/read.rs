//! The first pass: each `[[class]]` and `[[filter]]` read key by key into a draft.
//!
//! Every key is checked on its own (known name, type, unit, range), with no look at the rest of
//! the tree, so that a typo anywhere is reported even when other parts are broken. A key that
//! cannot be read is reported here, once, and left as `None` in the draft; the second pass
//! ([`super::tree`]) then skips the checks that would depend on it. Unknown keys get a
//! suggestion: a near miss by edit distance, or the name tc, iptables or nftables users carry
//! over (`dport`, `flowid`, `classid`…).

use std::ops::Range;

use linkshare_core::classify::{FilterIssue, FilterSpec};
use linkshare_core::htb::NUM_PRIO;
use linkshare_core::units::Rate;
use toml::Spanned;

use crate::diag::suggest;
use crate::leaf::read_leaf;
use crate::raw::{PolicyDoc, Raw};
use crate::source::Sink;
use crate::values;
use crate::{CbqClassOptions, LeafKind, QdiscKind};

use super::cbq::{read_cbq_class, CBQ_CLASS_KEYS};
use super::hfsc::{read_hfsc_class, HfscDraft, HFSC_CLASS_KEYS};

pub(super) type Entries = [(Spanned<String>, Spanned<Raw>)];

const CLASS_KEYS: &[&str] = &[
    "name",
    "parent",
    "rate",
    "ceil",
    "burst",
    "cburst",
    "prio",
    "quantum",
    "leaf",
    "upload_rate",
    "upload_ceil",
    "upload_leaf",
];
/// A `[[plan]]`'s keys: a class's, without `parent` (each subscriber's row gives it).
pub(super) const PLAN_KEYS: &[&str] = &[
    "name",
    "rate",
    "ceil",
    "burst",
    "cburst",
    "prio",
    "quantum",
    "leaf",
    "upload_rate",
    "upload_ceil",
    "upload_leaf",
];
const FILTER_KEYS: &[&str] = &[
    "class", "dscp", "tos", "protocol", "src", "dst", "src_port", "dst_port",
];
/// Names people carry over from tc, iptables or nftables.
const ALIASES: &[(&str, &str)] = &[
    ("classes", "class"),
    ("filters", "filter"),
    ("sport", "src_port"),
    ("dport", "dst_port"),
    ("srcport", "src_port"),
    ("dstport", "dst_port"),
    ("source", "src"),
    ("destination", "dst"),
    ("saddr", "src"),
    ("daddr", "dst"),
    ("proto", "protocol"),
    ("ip_proto", "protocol"),
    ("priority", "prio"),
    ("qdisc", "type"),
    ("kind", "type"),
    ("target", "class"),
    ("classid", "class"),
    ("flowid", "class"),
];

/// Reports keys not in `known`, with a suggestion for near misses.
pub(super) fn check_keys(sink: &mut Sink, ctx: &str, entries: &Entries, known: &[&str]) {
    for (k, _) in entries {
        let key = k.get_ref().as_str();
        if known.contains(&key) {
            continue;
        }
        let alias = ALIASES
            .iter()
            .find(|(a, to)| *a == key && known.contains(to))
            .map(|(_, to)| *to);
        let help = match alias.or_else(|| suggest(key, known.iter().copied())) {
            Some(s) => format!("did you mean `{s}`? known keys here: {}", known.join(", ")),
            None => format!("known keys here: {}", known.join(", ")),
        };
        sink.error(&k.span(), format!("{ctx}unknown key `{key}`"), help);
    }
}

/// The value of `key` among `entries`, if written.
pub(super) fn get<'e>(entries: &'e Entries, key: &str) -> Option<&'e Spanned<Raw>> {
    entries
        .iter()
        .find(|(k, _)| k.get_ref() == key)
        .map(|(_, v)| v)
}

/// A value read from the file, with where it was written.
#[derive(Clone, Debug)]
pub(super) struct At<T> {
    pub(super) v: T,
    pub(super) span: Range<usize>,
}

/// Pairs a value that could be read with its span.
pub(super) fn at<T>(v: Option<T>, span: Range<usize>) -> Option<At<T>> {
    v.map(|v| At { v, span })
}

/// One `[[class]]` after its keys have been read. `None` fields are absent or broken (already
/// reported); `broken` says whether any was broken.
#[derive(Debug)]
pub(super) struct ClassDraft {
    pub(super) header: Range<usize>,
    pub(super) name: Option<At<String>>,
    pub(super) parent: Option<At<String>>,
    /// `parent` was written but could not be read.
    pub(super) parent_broken: bool,
    pub(super) rate: Option<At<Rate>>,
    pub(super) ceil: Option<At<Rate>>,
    pub(super) burst: Option<At<u64>>,
    pub(super) cburst: Option<At<u64>>,
    pub(super) prio: Option<At<u8>>,
    pub(super) quantum: Option<At<u64>>,
    pub(super) leaf: Option<At<LeafKind>>,
    /// The upload direction's guaranteed rate and ceil (a policy that shapes both directions).
    pub(super) upload_rate: Option<At<Rate>>,
    pub(super) upload_ceil: Option<At<Rate>>,
    /// The upload side's leaf (defaults to `leaf`).
    pub(super) upload_leaf: Option<At<LeafKind>>,
    /// CBQ: the allocation as a fraction of the parent's.
    pub(super) share: Option<At<f64>>,
    /// CBQ's per-class keys.
    pub(super) cbq: CbqClassOptions,
    /// HFSC's curves.
    pub(super) hfsc: HfscDraft,
    /// Where CBQ's `avgpkt` was written (checked against the mtu).
    pub(super) avgpkt_span: Option<Range<usize>>,
    /// A written key could not be read.
    pub(super) broken: bool,
}

/// One `[[filter]]` after its keys have been read.
#[derive(Debug)]
pub(super) struct FilterDraft {
    pub(super) header: Range<usize>,
    pub(super) class: Option<At<String>>,
    pub(super) spec: FilterSpec,
    /// Where the port keys were written (for the protocol check).
    pub(super) port_span: Option<Range<usize>>,
    pub(super) proto_span: Option<Range<usize>>,
    pub(super) matches_all: bool,
}

/// Reads an array of tables (`[[class]]`), reporting a plain table or other value.
pub(super) fn tables<'d>(
    sink: &mut Sink,
    doc: &'d PolicyDoc,
    key: &str,
) -> Vec<(Range<usize>, &'d Entries)> {
    let Some(v) = get(&doc.entries, key) else {
        return Vec::new();
    };
    match v.get_ref() {
        Raw::Array(items) => {
            let mut out = Vec::new();
            for it in items {
                match it.get_ref() {
                    Raw::Table(e) => out.push((it.span(), e.as_slice())),
                    other => sink.error(
                        &it.span(),
                        format!("each `{key}` must be a table, found {}", other.kind()),
                        format!("write each one as a `[[{key}]]` section"),
                    ),
                }
            }
            out
        }
        Raw::Table(_) => {
            sink.error(
                &v.span(),
                format!("`[{key}]` defines a single table, but `{key}` is a list"),
                format!("write `[[{key}]]` (double brackets) before each {key}"),
            );
            Vec::new()
        }
        other => {
            sink.error(
                &v.span(),
                format!("`{key}` must be a list of tables, found {}", other.kind()),
                format!("write each one as a `[[{key}]]` section"),
            );
            Vec::new()
        }
    }
}

/// Reads one `[[class]]`'s keys (CBQ's own too under `qdisc = "cbq"`), its name first since
/// every other message names the class. `broken` records whether any error was reported.
pub(super) fn read_class(
    sink: &mut Sink,
    kind: QdiscKind,
    index: usize,
    header: Range<usize>,
    e: &Entries,
) -> ClassDraft {
    read_entry(sink, kind, "class", index, header, e)
}

/// Reads a `[[class]]` or a `[[plan]]` (`noun`), which share their keys but `parent`.
pub(super) fn read_entry(
    sink: &mut Sink,
    kind: QdiscKind,
    noun: &str,
    index: usize,
    header: Range<usize>,
    e: &Entries,
) -> ClassDraft {
    let errors_before = sink.diags.iter().filter(|d| d.is_error()).count();
    let mut d = ClassDraft {
        header: header.clone(),
        name: None,
        parent: None,
        parent_broken: false,
        rate: None,
        ceil: None,
        burst: None,
        cburst: None,
        prio: None,
        quantum: None,
        leaf: None,
        upload_rate: None,
        upload_ceil: None,
        upload_leaf: None,
        share: None,
        cbq: crate::cbq::class_defaults(),
        hfsc: HfscDraft::default(),
        avgpkt_span: None,
        broken: false,
    };
    // Name first: every other message names the class.
    d.name = read_class_name(sink, noun, index, &header, e);
    let ctx = match &d.name {
        Some(n) => format!("{noun} `{}`", n.v),
        None => format!("{noun} #{}", index + 1),
    };
    let cbq = kind == QdiscKind::Cbq;
    let keys = match (cbq, noun) {
        (true, _) => CBQ_CLASS_KEYS,
        (false, "plan") => PLAN_KEYS,
        _ if kind == QdiscKind::Hfsc => HFSC_CLASS_KEYS,
        _ => CLASS_KEYS,
    };
    check_keys(sink, &format!("{ctx}: "), e, keys);
    if let Some(v) = get(e, "parent") {
        let p = values::string(sink, &format!("{ctx}: `parent`"), v, "\"root\"");
        d.parent_broken = p.is_none();
        d.parent = at(p.map(|s| s.trim().to_string()), v.span());
    }
    let share = if cbq { get(e, "share") } else { None };
    if kind == QdiscKind::Hfsc {
        read_hfsc_class(sink, &ctx, e, &mut d);
    }
    match (get(e, "rate"), share) {
        _ if kind == QdiscKind::Hfsc => {}
        (Some(v), Some(s)) => sink.error(
            &s.span(),
            format!("{ctx}: both `rate` and `share` are given"),
            format!("keep one: `rate` is absolute, `share` a fraction of the parent's (rate at line {})", sink_line(sink, &v.span())),
        ),
        (Some(v), None) => d.rate = at(values::rate(sink, &format!("{ctx}: `rate`"), v), v.span()),
        (None, Some(s)) => {
            let f = values::fraction(sink, &format!("{ctx}: `share`"), s, 0.0, 1.0);
            if f == Some(0.0) {
                sink.error(&s.span(), format!("{ctx}: `share` is zero"), "give a share above zero, e.g. \"1%\"");
            }
            d.share = at(f.filter(|f| *f > 0.0), s.span());
        }
        (None, None) => sink.error(
            &header,
            format!("{ctx} has no `rate`"),
            if cbq {
                "add the allocation, e.g. `rate = \"1mbit\"` or `share = \"30%\"` (of the parent)"
            } else {
                "add the guaranteed rate, e.g. `rate = \"1mbit\"`"
            },
        ),
    }
    if cbq {
        read_cbq_class(sink, &ctx, e, &mut d.cbq);
        d.avgpkt_span = get(e, "avgpkt").map(|v| v.span());
    }
    if let Some(v) = get(e, "ceil") {
        d.ceil = at(values::rate(sink, &format!("{ctx}: `ceil`"), v), v.span());
    }
    if let Some(v) = get(e, "burst") {
        d.burst = at(values::size(sink, &format!("{ctx}: `burst`"), v), v.span());
    }
    if let Some(v) = get(e, "cburst") {
        d.cburst = at(values::size(sink, &format!("{ctx}: `cburst`"), v), v.span());
    }
    if let Some(v) = get(e, "prio") {
        let p = values::int(sink, &format!("{ctx}: `prio`"), v, 0, NUM_PRIO as i64 - 1);
        d.prio = at(p.map(|p| p as u8), v.span());
    }
    if let Some(v) = get(e, "quantum") {
        let q = values::size(sink, &format!("{ctx}: `quantum`"), v);
        if q == Some(0) {
            sink.error(&v.span(), format!("{ctx}: `quantum` is zero"), "leave `quantum` out for the default (rate/r2q), or give at least one MTU, e.g. 1500");
        }
        d.quantum = at(q.filter(|q| *q > 0), v.span());
    }
    if let Some(v) = get(e, "leaf") {
        d.leaf = at(read_leaf(sink, &format!("{ctx}: `leaf`"), v), v.span());
    }
    if let Some(v) = get(e, "upload_rate") {
        d.upload_rate = at(
            values::rate(sink, &format!("{ctx}: `upload_rate`"), v),
            v.span(),
        );
    }
    if let Some(v) = get(e, "upload_ceil") {
        d.upload_ceil = at(
            values::rate(sink, &format!("{ctx}: `upload_ceil`"), v),
            v.span(),
        );
    }
    if let Some(v) = get(e, "upload_leaf") {
        d.upload_leaf = at(
            read_leaf(sink, &format!("{ctx}: `upload_leaf`"), v),
            v.span(),
        );
    }
    d.broken = sink.diags.iter().filter(|d| d.is_error()).count() > errors_before;
    d
}

/// A class's `name`: present, a string, not empty, no stray spaces.
pub(super) fn read_class_name(
    sink: &mut Sink,
    noun: &str,
    index: usize,
    header: &Range<usize>,
    e: &Entries,
) -> Option<At<String>> {
    let Some(v) = get(e, "name") else {
        sink.error(
            header,
            format!("{noun} #{} has no `name`", index + 1),
            "add `name = \"...\"`: filters, `parent` and `default` refer to classes by name",
        );
        return None;
    };
    let s = values::string(sink, &format!("{noun} `name`"), v, "\"bulk\"")?;
    let t = s.trim();
    if t.is_empty() {
        sink.error(
            &v.span(),
            format!("{noun} name is empty"),
            "give the class a name, e.g. `name = \"bulk\"`",
        );
        None
    } else if t != s {
        sink.error(
            &v.span(),
            format!("{noun} name \"{s}\" has leading or trailing spaces"),
            format!("write `name = \"{t}\"`"),
        );
        None
    } else {
        at(Some(s.to_string()), v.span())
    }
}

/// Reads one `[[filter]]`'s keys, warning about matches that can never hit (a `tos` that
/// contradicts `dscp`, ports with a protocol that has none).
pub(super) fn read_filter(
    sink: &mut Sink,
    index: usize,
    header: Range<usize>,
    e: &Entries,
) -> FilterDraft {
    let ctx = format!("filter #{}", index + 1);
    check_keys(sink, &format!("{ctx}: "), e, FILTER_KEYS);
    let mut f = FilterDraft {
        header: header.clone(),
        class: None,
        spec: FilterSpec::default(),
        port_span: None,
        proto_span: None,
        matches_all: true,
    };
    match get(e, "class") {
        Some(v) => {
            f.class = at(
                values::string(sink, &format!("{ctx}: `class`"), v, "\"bulk\"")
                    .map(|s| s.trim().to_string()),
                v.span(),
            )
        }
        None => sink.error(
            &header,
            format!("{ctx} has no `class`"),
            "add `class = \"...\"`: the leaf class matching packets go to",
        ),
    }
    for (k, _) in e {
        if k.get_ref() != "class" && FILTER_KEYS.contains(&k.get_ref().as_str()) {
            f.matches_all = false;
        }
    }
    if let Some(v) = get(e, "dscp") {
        f.spec.dscp = values::dscp(sink, &format!("{ctx}: `dscp`"), v);
    }
    if let Some(v) = get(e, "tos") {
        f.spec.tos = values::tos(sink, &format!("{ctx}: `tos`"), v);
        if let (Some(list), Some((val, mask))) = (&f.spec.dscp, f.spec.tos) {
            if f.spec.issues().contains(&FilterIssue::TosDscpConflict) {
                let d = list.first().copied().unwrap_or(0);
                sink.warn(
                    &v.span(),
                    format!("{ctx}: `tos` {val:#04x}/{mask:#04x} contradicts `dscp`, so this filter never matches"),
                    format!(
                        "the DSCP is the top six bits of the TOS byte (dscp {d} is tos {:#04x}/0xfc): remove `tos` or `dscp`",
                        d << 2
                    ),
                );
            }
        }
    }
    if let Some(v) = get(e, "protocol") {
        f.spec.protocol = values::protocol(sink, &format!("{ctx}: `protocol`"), v);
        f.proto_span = Some(v.span());
    }
    if let Some(v) = get(e, "src") {
        f.spec.src = values::prefix(sink, &format!("{ctx}: `src`"), v);
    }
    if let Some(v) = get(e, "dst") {
        f.spec.dst = values::prefix(sink, &format!("{ctx}: `dst`"), v);
        if let (Some(s), Some(d)) = (&f.spec.src, &f.spec.dst) {
            if s.addr.is_ipv4() != d.addr.is_ipv4() {
                sink.error(
                    &v.span(),
                    format!(
                        "{ctx}: `src` and `dst` are of different IP versions; no packet can match"
                    ),
                    "use two filters, one for IPv4 and one for IPv6",
                );
            }
        }
    }
    if let Some(v) = get(e, "src_port") {
        f.spec.src_port = values::port_range(sink, &format!("{ctx}: `src_port`"), v);
        f.port_span = Some(v.span());
    }
    if let Some(v) = get(e, "dst_port") {
        f.spec.dst_port = values::port_range(sink, &format!("{ctx}: `dst_port`"), v);
        f.port_span = f.port_span.or(Some(v.span()));
    }
    if let (Some(p), Some(ps), Some(pr)) = (f.spec.protocol, &f.port_span, &f.proto_span) {
        if !values::has_ports(p) {
            let name = values::protocol_name(p)
                .map(str::to_string)
                .unwrap_or_else(|| p.to_string());
            sink.warn(
                ps,
                format!("{ctx}: ports are matched only for tcp and udp, so with protocol {name} this filter never matches"),
                format!(
                    "remove the port match or use tcp or udp (protocol at line {})",
                    sink_line(sink, pr)
                ),
            );
        }
    }
    f
}

/// The line where `span` starts, for messages that point at another place in the file.
pub(super) fn sink_line(sink: &Sink, span: &Range<usize>) -> usize {
    sink.line_col(span.start).0
}
