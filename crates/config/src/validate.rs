//! Walks a [`PolicyDoc`] and turns it into a checked [`Policy`], reporting every problem.
//!
//! The walk is in two passes. First every key is read on its own (type, unit, range), so a typo
//! anywhere is reported even when other parts are broken. Then the tree is checked as a whole
//! (names, parents, cycles, depth, capacity, leaves, default, filters), skipping only the checks
//! that depend on a value that was already reported as broken, so that one mistake gives one
//! error rather than a cascade.

use std::collections::HashMap;
use std::ops::Range;

use linkshare_core::classify::{ClassId, FilterIssue, FilterSpec};
use linkshare_core::htb::{
    default_burst, default_quantum, QuantumWarning, BURST_LIMIT, DEFAULT_MTU, DEFAULT_R2Q,
    MAX_DEPTH, MAX_QUANTUM, MIN_QUANTUM, NUM_PRIO, QUANTUM_LIMIT,
};
use linkshare_core::qdisc::fifo::DEFAULT_PFIFO_LIMIT;
use linkshare_core::units::{Rate, Size};
use toml::Spanned;

use crate::diag::{suggest, ConfigError};
use crate::leaf::read_leaf;
use crate::params::Params;
use crate::raw::{PolicyDoc, Raw};
use crate::source::Sink;
use crate::values;
use crate::{
    CbqClass, CbqGuideline, CbqOptions, CbqScheduler, ClassInfo, FilterInfo, LeafKind, OfftimeUnit,
    Policy, QdiscKind, UndertimeClock,
};

type Entries = [(Spanned<String>, Spanned<Raw>)];

const TOP_KEYS: &[&str] = &[
    "qdisc",
    "default",
    "r2q",
    "mtu",
    "class",
    "filter",
    "scheduler",
    "guideline",
    "efficient",
    "altq_compat",
    "undertime_clock",
    "offtime_unit",
    "overhead",
    "mpu",
    "linklayer",
];
/// Top-level keys that only CBQ reads.
const CBQ_TOP_KEYS: &[&str] = &[
    "scheduler",
    "guideline",
    "efficient",
    "altq_compat",
    "undertime_clock",
    "offtime_unit",
];
const CLASS_KEYS: &[&str] = &[
    "name", "parent", "rate", "ceil", "burst", "cburst", "prio", "quantum", "leaf",
];
/// Class keys under `qdisc = "cbq"`.
const CBQ_CLASS_KEYS: &[&str] = &[
    "name",
    "parent",
    "rate",
    "share",
    "prio",
    "borrow",
    "maxburst",
    "minburst",
    "avgpkt",
    "maxidle",
    "minidle",
    "offtime",
    "extradelay",
    "leaf",
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
fn check_keys(sink: &mut Sink, ctx: &str, entries: &Entries, known: &[&str]) {
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

fn get<'e>(entries: &'e Entries, key: &str) -> Option<&'e Spanned<Raw>> {
    entries
        .iter()
        .find(|(k, _)| k.get_ref() == key)
        .map(|(_, v)| v)
}

/// A value read from the file, with where it was written.
#[derive(Clone, Debug)]
struct At<T> {
    v: T,
    span: Range<usize>,
}

fn at<T>(v: Option<T>, span: Range<usize>) -> Option<At<T>> {
    v.map(|v| At { v, span })
}

/// One `[[class]]` after its keys have been read. `None` fields are absent or broken (already
/// reported); `broken` says whether any was broken.
#[derive(Debug)]
struct ClassDraft {
    header: Range<usize>,
    name: Option<At<String>>,
    parent: Option<At<String>>,
    /// `parent` was written but could not be read.
    parent_broken: bool,
    rate: Option<At<Rate>>,
    ceil: Option<At<Rate>>,
    burst: Option<At<u64>>,
    cburst: Option<At<u64>>,
    prio: Option<At<u8>>,
    quantum: Option<At<u64>>,
    leaf: Option<At<LeafKind>>,
    /// CBQ: the allocation as a fraction of the parent's.
    share: Option<At<f64>>,
    /// CBQ's per-class keys.
    cbq: CbqClass,
    /// Where CBQ's `avgpkt` was written (checked against the mtu).
    avgpkt_span: Option<Range<usize>>,
    /// A written key could not be read.
    broken: bool,
}

/// One `[[filter]]` after its keys have been read.
#[derive(Debug)]
struct FilterDraft {
    header: Range<usize>,
    class: Option<At<String>>,
    spec: FilterSpec,
    /// Where the port keys were written (for the protocol check).
    port_span: Option<Range<usize>>,
    proto_span: Option<Range<usize>>,
    matches_all: bool,
}

/// Entry point: check `doc` (whose spans point into `text`) and build a [`Policy`].
pub(crate) fn validate(doc: &PolicyDoc, text: &str, origin: &str) -> Result<Policy, ConfigError> {
    let mut sink = Sink::new(text, origin);
    let entries = &doc.entries;
    check_keys(&mut sink, "", entries, TOP_KEYS);

    let root = match get(entries, "qdisc") {
        None => {
            sink.error(
                &doc.anchor(),
                "the policy has no `qdisc`",
                format!(
                    "add `qdisc = \"htb\"` at the top (known: {})",
                    QdiscKind::known_list()
                ),
            );
            None
        }
        Some(v) => read_root(&mut sink, v, get(entries, "class").is_some()),
    };
    let r2q = match get(entries, "r2q") {
        Some(v) => values::int(&mut sink, "`r2q`", v, 1, u32::MAX as i64).map(|n| n as u32),
        None => Some(DEFAULT_R2Q),
    };
    let mtu = match get(entries, "mtu") {
        Some(v) => match values::size(&mut sink, "`mtu`", v) {
            Some(m) if (68..=65535).contains(&m) => Some(m as u32),
            Some(m) => {
                sink.error(
                    &v.span(),
                    format!("`mtu` {m} bytes is out of range"),
                    "use the largest packet size on the link, from 68 to 65535 bytes (1500 on Ethernet)",
                );
                None
            }
            None => None,
        },
        None => Some(DEFAULT_MTU),
    };
    let link = crate::link::read(&mut sink, entries);

    let policy = match root {
        Some(Root::Htb) => tree(&mut sink, doc, QdiscKind::Htb, r2q, mtu),
        Some(Root::Cbq) => tree(&mut sink, doc, QdiscKind::Cbq, r2q, mtu),
        Some(Root::Drr) => drr_tree(&mut sink, doc, mtu),
        Some(Root::Leaf(leaf)) => leaf_root(&mut sink, doc, leaf, r2q, mtu),
        None => {
            // Still read the classes and filters so their problems are reported too, unless
            // the root was meant to be a classless discipline.
            let names_leaf = get(entries, "qdisc").is_some_and(|v| {
                let t = match v.get_ref() {
                    Raw::Table(e) => e.iter().find(|(k, _)| k.get_ref() == "type").map(|(_, t)| t.get_ref()),
                    other => Some(other),
                };
                matches!(t, Some(Raw::Str(s)) if LeafKind::KNOWN.contains(&s.trim().to_ascii_lowercase().as_str()))
            });
            if get(entries, "class").is_some() && !names_leaf {
                let _ = tree(&mut sink, doc, QdiscKind::Htb, r2q, mtu);
            }
            None
        }
    };
    match policy {
        Some(mut p) if !sink.has_errors() => {
            p.origin = origin.to_string();
            p.link = link.unwrap_or_default();
            p.warnings = sink.finish();
            Ok(p)
        }
        _ => Err(ConfigError {
            diagnostics: sink.finish(),
        }),
    }
}

/// What `qdisc = …` names.
enum Root {
    Htb,
    Cbq,
    /// `qdisc = "drr"` with `[[class]]` sections: the classful DRR.
    Drr,
    Leaf(LeafKind),
}

/// `qdisc = "htb"`, `qdisc = "sfq"` or `qdisc = { type = "sfq", … }`. `"drr"` with classes is
/// the classful DRR, without classes the flow-hash leaf.
fn read_root(sink: &mut Sink, v: &Spanned<Raw>, has_classes: bool) -> Option<Root> {
    let name = match v.get_ref() {
        Raw::Str(s) => s.trim().to_ascii_lowercase(),
        Raw::Table(e) => match e.iter().find(|(k, _)| k.get_ref() == "type") {
            Some((_, t)) => match t.get_ref() {
                Raw::Str(s) => s.trim().to_ascii_lowercase(),
                _ => String::new(),
            },
            None => String::new(),
        },
        _ => String::new(),
    };
    if let Some(k @ (QdiscKind::Htb | QdiscKind::Cbq)) = QdiscKind::from_name(&name) {
        if let Raw::Table(_) = v.get_ref() {
            sink.error(
                &v.span(),
                format!("`qdisc`: {name} takes its options at the top level, not in a table"),
                format!("write `qdisc = \"{name}\"` and put its options (e.g. `mtu = 1500`) on lines of their own"),
            );
            return None;
        }
        return Some(if k == QdiscKind::Htb {
            Root::Htb
        } else {
            Root::Cbq
        });
    }
    if name == "drr" && has_classes {
        if let Raw::Table(_) = v.get_ref() {
            sink.error(
                &v.span(),
                "`qdisc`: a classful drr takes no options in a table",
                "write `qdisc = \"drr\"` and give each `[[class]]` its `quantum` and `leaf`; a table \
                 (`{ type = \"drr\", flows = 1024 }`) is the classless flow-hash drr, without `[[class]]`",
            );
            return None;
        }
        return Some(Root::Drr);
    }
    if LeafKind::KNOWN.contains(&name.as_str()) {
        return read_leaf(sink, "`qdisc`", v).map(Root::Leaf);
    }
    match v.get_ref() {
        Raw::Str(s) => {
            let help = match suggest(s, QdiscKind::all_names()) {
                Some(n) => format!(
                    "did you mean \"{n}\"? known qdiscs: {}",
                    QdiscKind::known_list()
                ),
                None => format!("known qdiscs: {}", QdiscKind::known_list()),
            };
            sink.error(&v.span(), format!("unknown qdisc \"{s}\""), help);
        }
        // A table without a usable `type`, or another value: read_leaf says what is wrong.
        _ => {
            read_leaf(sink, "`qdisc`", v);
        }
    }
    None
}

/// A policy whose root is a single discipline: no classes, no filters.
fn leaf_root(
    sink: &mut Sink,
    doc: &PolicyDoc,
    leaf: LeafKind,
    r2q: Option<u32>,
    mtu: Option<u32>,
) -> Option<Policy> {
    let kind = leaf.name();
    for key in ["class", "filter", "default"] {
        if let Some((k, _)) = doc.entries.iter().find(|(k, _)| k.get_ref() == key) {
            sink.error(
                &k.span(),
                format!("qdisc `{kind}` has no classes, so `{key}` does not apply"),
                format!("remove `{key}`, or use `qdisc = \"htb\"` with `[[class]]` sections and put `{kind}` in a class's `leaf`"),
            );
        }
    }
    Some(Policy {
        origin: String::new(),
        kind: QdiscKind::Leaf,
        root_leaf: Some(leaf),
        cbq: None,
        r2q: r2q.unwrap_or(DEFAULT_R2Q),
        mtu: mtu.unwrap_or(DEFAULT_MTU),
        default: String::new(),
        default_id: 0,
        classes: Vec::new(),
        filters: Vec::new(),
        warnings: Vec::new(),
        link: Default::default(),
    })
}

/// Reads an array of tables (`[[class]]`), reporting a plain table or other value.
fn tables<'d>(sink: &mut Sink, doc: &'d PolicyDoc, key: &str) -> Vec<(Range<usize>, &'d Entries)> {
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

fn read_class(
    sink: &mut Sink,
    kind: QdiscKind,
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
        share: None,
        cbq: CbqClass::default(),
        avgpkt_span: None,
        broken: false,
    };
    // Name first: every other message names the class.
    d.name = read_class_name(sink, index, &header, e);
    let ctx = match &d.name {
        Some(n) => format!("class `{}`", n.v),
        None => format!("class #{}", index + 1),
    };
    let cbq = kind == QdiscKind::Cbq;
    check_keys(
        sink,
        &format!("{ctx}: "),
        e,
        if cbq { CBQ_CLASS_KEYS } else { CLASS_KEYS },
    );
    if let Some(v) = get(e, "parent") {
        let p = values::string(sink, &format!("{ctx}: `parent`"), v, "\"root\"");
        d.parent_broken = p.is_none();
        d.parent = at(p.map(|s| s.trim().to_string()), v.span());
    }
    let share = if cbq { get(e, "share") } else { None };
    match (get(e, "rate"), share) {
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
    d.broken = sink.diags.iter().filter(|d| d.is_error()).count() > errors_before;
    d
}

/// A class's `name`: present, a string, not empty, no stray spaces.
fn read_class_name(
    sink: &mut Sink,
    index: usize,
    header: &Range<usize>,
    e: &Entries,
) -> Option<At<String>> {
    let Some(v) = get(e, "name") else {
        sink.error(
            header,
            format!("class #{} has no `name`", index + 1),
            "add `name = \"...\"`: filters, `parent` and `default` refer to classes by name",
        );
        return None;
    };
    let s = values::string(sink, "class `name`", v, "\"bulk\"")?;
    let t = s.trim();
    if t.is_empty() {
        sink.error(
            &v.span(),
            "class name is empty",
            "give the class a name, e.g. `name = \"bulk\"`",
        );
        None
    } else if t != s {
        sink.error(
            &v.span(),
            format!("class name \"{s}\" has leading or trailing spaces"),
            format!("write `name = \"{t}\"`"),
        );
        None
    } else {
        at(Some(s.to_string()), v.span())
    }
}

fn read_filter(sink: &mut Sink, index: usize, header: Range<usize>, e: &Entries) -> FilterDraft {
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

fn sink_line(sink: &Sink, span: &Range<usize>) -> usize {
    sink.line_col(span.start).0
}

/// The HTB tree: classes, filters, default.
fn tree(
    sink: &mut Sink,
    doc: &PolicyDoc,
    kind: QdiscKind,
    r2q: Option<u32>,
    mtu: Option<u32>,
) -> Option<Policy> {
    let cbq_opts = if kind == QdiscKind::Cbq {
        read_cbq_options(sink, &doc.entries)
    } else {
        for key in CBQ_TOP_KEYS {
            if let Some((k, _)) = doc.entries.iter().find(|(k, _)| k.get_ref() == key) {
                sink.error(
                    &k.span(),
                    format!(
                        "`{key}` is a CBQ option; this policy's qdisc is {}",
                        kind.name()
                    ),
                    format!("remove `{key}`, or use `qdisc = \"cbq\"`"),
                );
            }
        }
        None
    };
    let class_tables = tables(sink, doc, "class");
    let filter_tables = tables(sink, doc, "filter");
    let mut classes: Vec<ClassDraft> = class_tables
        .into_iter()
        .enumerate()
        .map(|(i, (span, e))| read_class(sink, kind, i, span, e))
        .collect();
    let filters: Vec<FilterDraft> = filter_tables
        .into_iter()
        .enumerate()
        .map(|(i, (span, e))| read_filter(sink, i, span, e))
        .collect();
    let default = get(&doc.entries, "default");
    let default_name = match default {
        Some(v) => values::string(sink, "`default`", v, "\"bulk\"").map(|s| s.trim().to_string()),
        None => None,
    };

    resolve_shares(sink, &mut classes);
    if classes.is_empty() {
        if get(&doc.entries, "class").is_none() {
            sink.error(
                &doc.anchor(),
                "the policy has no classes",
                "add at least one `[[class]]` with `name` and `rate`",
            );
        }
        return None;
    }
    let n = classes.len();

    // Names.
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, c) in classes.iter().enumerate() {
        let Some(name) = &c.name else { continue };
        if let Some(&first) = by_name.get(name.v.as_str()) {
            let line = classes[first]
                .name
                .as_ref()
                .map(|n| sink_line(sink, &n.span))
                .unwrap_or(0);
            sink.error(
                &name.span,
                format!("class `{}` is defined twice", name.v),
                format!(
                    "class names must be unique; the first `{}` is at line {line}: rename one",
                    name.v
                ),
            );
        } else {
            by_name.insert(name.v.as_str(), i);
        }
    }
    // Each name once (a duplicate is reported above), in file order.
    let names: Vec<&str> = classes
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.name.as_ref().map(|x| (i, x.v.as_str())))
        .filter(|(i, name)| by_name.get(name) == Some(i))
        .map(|(_, name)| name)
        .collect();
    let name_of = |i: usize| {
        classes[i]
            .name
            .as_ref()
            .map(|n| n.v.clone())
            .unwrap_or_else(|| format!("#{}", i + 1))
    };
    let unknown_help = |what: &str, names: &[&str]| -> String {
        match suggest(what, names.iter().copied()) {
            Some(s) => format!(
                "did you mean \"{s}\"? defined classes: {}",
                names.join(", ")
            ),
            None => format!("defined classes: {}", names.join(", ")),
        }
    };

    // Parents. `parent_of[i]`: Some(index) when known; `unresolved[i]`: the parent is broken,
    // unknown or the class itself.
    let mut parent_of: Vec<Option<usize>> = vec![None; n];
    let mut unresolved = vec![false; n];
    for (i, c) in classes.iter().enumerate() {
        if c.parent_broken {
            unresolved[i] = true;
        }
        let Some(p) = &c.parent else { continue };
        match by_name.get(p.v.as_str()) {
            Some(&j) if j == i => {
                unresolved[i] = true;
                sink.error(
                    &p.span,
                    format!("class `{}` is its own parent (a cycle)", p.v),
                    "remove `parent` to make it a root, or name the class it belongs under",
                );
            }
            Some(&j) => parent_of[i] = Some(j),
            None => {
                unresolved[i] = true;
                sink.error(
                    &p.span,
                    format!("class `{}`: unknown parent `{}`", name_of(i), p.v),
                    format!(
                        "{}; or remove `parent` to make this class a root",
                        unknown_help(&p.v, &names)
                    ),
                );
            }
        }
    }

    // Cycles and depth. `depth[i]`: number of ancestors, None if the chain loops or is unresolved.
    let mut depth: Vec<Option<usize>> = vec![None; n];
    let mut in_cycle = vec![false; n];
    #[allow(clippy::needless_range_loop)] // `start` indexes several parallel vectors
    for start in 0..n {
        let mut path = vec![start];
        let mut c = start;
        let mut ok = true;
        loop {
            if unresolved[c] {
                ok = false;
                break;
            }
            match parent_of[c] {
                None => break,
                Some(p) => {
                    if let Some(pos) = path.iter().position(|&x| x == p) {
                        // A loop: path[pos..] are its members.
                        let members: Vec<usize> = path[pos..].to_vec();
                        if !members.iter().any(|&m| in_cycle[m]) {
                            for &m in &members {
                                in_cycle[m] = true;
                            }
                            let first = *members.iter().min().unwrap_or(&p);
                            let mut chain = vec![name_of(first)];
                            let mut x = first;
                            while let Some(px) = parent_of[x] {
                                chain.push(name_of(px));
                                if px == first {
                                    break;
                                }
                                x = px;
                            }
                            if let Some(ps) = &classes[first].parent {
                                sink.error(
                                    &ps.span,
                                    format!("class `{}`: parent chain loops back to itself: {}", name_of(first), chain.join(" -> ")),
                                    "a class cannot be its own ancestor: give one class in the loop another parent, or none to make it a root",
                                );
                            }
                        }
                        ok = false;
                        break;
                    }
                    path.push(p);
                    c = p;
                }
            }
        }
        if ok {
            depth[start] = Some(path.len() - 1);
        }
    }
    // HTB keeps 8 levels as Linux does; CBQ 16.
    let (max_depth, kind_upper) = match kind {
        QdiscKind::Cbq => (linkshare_core::cbq::MAX_DEPTH, "CBQ"),
        _ => (MAX_DEPTH, "HTB"),
    };
    for i in 0..n {
        if depth[i] == Some(max_depth) {
            let span = classes[i]
                .parent
                .as_ref()
                .map(|p| p.span.clone())
                .unwrap_or(classes[i].header.clone());
            sink.error(
                &span,
                format!("class `{}` is at level {} of the tree; {kind_upper} supports at most {max_depth} levels from root to leaf", name_of(i), max_depth + 1),
                "attach it higher up, or merge intermediate classes",
            );
        }
    }

    // Children.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in 0..n {
        // Edges inside a loop are already reported; they do not make anyone a parent.
        if let (Some(p), false) = (parent_of[i], in_cycle[i]) {
            children[p].push(i);
        }
    }
    let is_leaf: Vec<bool> = children.iter().map(|c| c.is_empty()).collect();

    // Per-class values and defaults.
    let mtu_v = mtu.unwrap_or(DEFAULT_MTU);
    let r2q_v = r2q.unwrap_or(DEFAULT_R2Q);
    let mut infos: Vec<ClassInfo> = Vec::with_capacity(n);
    for (i, c) in classes.iter().enumerate() {
        let name = name_of(i);
        let rate = c.rate.as_ref().map(|r| r.v);
        if let (Some(r), true) = (&c.rate, rate == Some(Rate(0))) {
            sink.error(&r.span, format!("class `{name}`: rate is zero"), "give a guaranteed rate above zero, e.g. \"8kbit\"; a class that should only borrow still needs a small rate");
        }
        let ceil = c.ceil.as_ref().map(|x| x.v).or(rate);
        if let (Some(r), Some(cl)) = (&c.rate, &c.ceil) {
            if cl.v < r.v {
                sink.error(
                    &cl.span,
                    format!("class `{name}`: ceil {} is below rate {}", cl.v, r.v),
                    format!("raise ceil to at least {} or lower rate", r.v),
                );
            }
        }
        if let Some(l) = &c.leaf {
            if !is_leaf[i] {
                let kids: Vec<String> = children[i].iter().map(|&k| name_of(k)).collect();
                sink.error(
                    &l.span,
                    format!("class `{name}` has children ({}), so it is not a leaf and cannot have a leaf qdisc", kids.join(", ")),
                    format!("remove `leaf` from `{name}`; packets wait only in leaf classes, so set it on those"),
                );
            }
        }
        let burst = match &c.burst {
            Some(b) => check_burst(sink, &name, "burst", b, mtu, rate),
            None => rate.map(|r| default_burst(r, mtu_v)),
        };
        let cburst = match &c.cburst {
            Some(b) => check_burst(sink, &name, "cburst", b, mtu, ceil),
            None => ceil.map(|r| default_burst(r, mtu_v)),
        };
        let quantum = match &c.quantum {
            Some(q) if q.v > QUANTUM_LIMIT as u64 => {
                sink.error(
                    &q.span,
                    format!("class `{name}`: quantum {} is too large", Size(q.v)),
                    format!(
                        "use at most {}; tc advises {MIN_QUANTUM} to {MAX_QUANTUM} bytes",
                        Size(QUANTUM_LIMIT as u64)
                    ),
                );
                None
            }
            Some(q) => Some(q.v as u32),
            None => rate.map(|r| {
                let (q, w) = default_quantum(r, r2q_v);
                // Only leaves use their quantum (DRR among leaves of equal prio).
                // A zero rate is already an error: no quantum warning on top. CBQ has no
                // quantum (its WRR allotment comes from the rates and the mtu).
                let htb = kind == QdiscKind::Htb;
                if let (Some(w), true, Some(rs), false, true) =
                    (w, is_leaf[i], &c.rate, r.0 == 0, htb)
                {
                    quantum_warning(sink, &name, &rs.span, w);
                }
                q
            }),
        };
        let d = depth[i].unwrap_or(0);
        let cbq = (kind == QdiscKind::Cbq).then(|| cbq_class(sink, &name, c, mtu));
        infos.push(ClassInfo {
            id: i as ClassId,
            name,
            parent: c.parent.as_ref().map(|p| p.v.clone()),
            parent_id: parent_of[i].map(|p| p as ClassId),
            rate: rate.unwrap_or_default(),
            ceil: ceil.unwrap_or_default(),
            burst: burst.unwrap_or(0),
            cburst: cburst.unwrap_or(0),
            prio: c.prio.as_ref().map(|p| p.v).unwrap_or(0),
            quantum: quantum.unwrap_or(MIN_QUANTUM),
            leaf: c
                .leaf
                .as_ref()
                .map(|l| l.v.clone())
                .unwrap_or(LeafKind::Pfifo {
                    limit: DEFAULT_PFIFO_LIMIT,
                }),
            is_leaf: is_leaf[i],
            depth: d as u8,
            level: if is_leaf[i] {
                0
            } else {
                (MAX_DEPTH - 1).saturating_sub(d) as u8
            },
            children: children[i].iter().map(|&k| k as ClassId).collect(),
            line: sink_line(sink, &c.header),
            cbq,
        });
    }

    // Capacity: the children's guarantees must fit in the parent's.
    for i in 0..n {
        if children[i].is_empty() || in_cycle[i] {
            continue;
        }
        let Some(pr) = &classes[i].rate else { continue };
        let kids: Vec<(String, Rate)> = children[i]
            .iter()
            .filter_map(|&k| classes[k].rate.as_ref().map(|r| (name_of(k), r.v)))
            .collect();
        if kids.len() != children[i].len() {
            continue;
        }
        let sum = Rate(
            kids.iter()
                .map(|(_, r)| r.0)
                .fold(0u64, u64::saturating_add),
        );
        if sum > pr.v {
            let list: Vec<String> = kids.iter().map(|(n, r)| format!("{n} {r}")).collect();
            sink.error(
                &pr.span,
                format!(
                    "class `{}`: impossible capacity: the children's guaranteed rates add up to {sum} ({}), above its rate {}",
                    name_of(i),
                    list.join(" + "),
                    pr.v
                ),
                format!("lower the children's rates by {} in total, or raise `{}`'s rate to at least {sum}", Rate(sum.0 - pr.v.0), name_of(i)),
            );
        }
    }

    // A child's ceil above its parent's ceil is capped in effect.
    for i in 0..n {
        let Some(p) = parent_of[i] else { continue };
        if in_cycle[i] || classes[i].rate.is_none() || classes[p].rate.is_none() {
            continue;
        }
        let (cc, pc) = (infos[i].ceil, infos[p].ceil);
        if cc > pc {
            let span = classes[i]
                .ceil
                .as_ref()
                .map(|x| x.span.clone())
                .or(classes[i].rate.as_ref().map(|x| x.span.clone()))
                .unwrap_or(classes[i].header.clone());
            sink.warn(
                &span,
                format!("class `{}`: ceil {cc} is above its parent `{}`'s ceil {pc}; it can never send faster than {pc}", name_of(i), name_of(p)),
                format!("lower ceil to {pc} (or raise `{}`'s ceil)", name_of(p)),
            );
        }
    }

    // Several roots do not share bandwidth.
    let roots: Vec<usize> = (0..n)
        .filter(|&i| {
            classes[i].name.is_some() && classes[i].parent.is_none() && !classes[i].parent_broken
        })
        .collect();
    if roots.len() > 1 {
        let r = roots[1];
        let list: Vec<String> = roots.iter().map(|&r| format!("`{}`", name_of(r))).collect();
        let span = classes[r]
            .name
            .as_ref()
            .map(|x| x.span.clone())
            .unwrap_or(classes[r].header.clone());
        sink.warn(
            &span,
            format!(
                "{} classes have no parent ({}); separate roots never lend to each other",
                roots.len(),
                list.join(", ")
            ),
            format!(
                "if they share one link, give them a common root class, e.g. `parent = \"{}\"`",
                name_of(roots[0])
            ),
        );
    }

    let leaf_names = |i: usize| -> Vec<String> {
        // Leaf descendants of class i.
        let mut out = Vec::new();
        let mut stack = vec![i];
        let mut seen = vec![false; n];
        while let Some(c) = stack.pop() {
            if std::mem::replace(&mut seen[c], true) {
                continue;
            }
            if children[c].is_empty() {
                out.push(name_of(c));
            } else {
                stack.extend(children[c].iter().rev());
            }
        }
        out
    };
    let all_leaves: Vec<String> = (0..n).filter(|&i| is_leaf[i]).map(name_of).collect();

    // Default class.
    let mut default_id = None;
    match (default, &default_name) {
        (None, _) => sink.error(
            &doc.anchor(),
            "the policy has no `default` class",
            format!("add `default = \"...\"` naming the leaf class for packets no filter matches (leaves: {})", all_leaves.join(", ")),
        ),
        (Some(v), Some(name)) => match by_name.get(name.as_str()) {
            None => sink.error(
                &v.span(),
                format!("default class `{name}` does not exist"),
                format!("name a leaf class: {}", unknown_help(name, &names)),
            ),
            Some(&j) if !is_leaf[j] => sink.error(
                &v.span(),
                format!("default class `{name}` has children, so it is not a leaf; packets can only wait in leaf classes"),
                format!("name one of its leaves instead: {}", leaf_names(j).join(", ")),
            ),
            Some(&j) => default_id = Some(j),
        },
        (Some(_), None) => {}
    }

    // Filters.
    let mut filter_infos = Vec::with_capacity(filters.len());
    let nf = filters.len();
    for (fi, f) in filters.into_iter().enumerate() {
        let ctx = format!("filter #{}", fi + 1);
        let Some(cl) = &f.class else { continue };
        let class = match by_name.get(cl.v.as_str()) {
            None => {
                sink.error(
                    &cl.span,
                    format!("{ctx}: class `{}` does not exist", cl.v),
                    format!("send it to a leaf class: {}", unknown_help(&cl.v, &names)),
                );
                continue;
            }
            Some(&j) if !is_leaf[j] => {
                sink.error(
                    &cl.span,
                    format!("{ctx}: class `{}` has children, so it is not a leaf; packets can only wait in leaf classes", cl.v),
                    format!("send the filter to one of its leaves instead: {}", leaf_names(j).join(", ")),
                );
                continue;
            }
            Some(&j) => j,
        };
        if f.matches_all {
            let help = if fi + 1 < nf {
                format!("add a match (dscp, protocol, src, dst, ports) or move it last; filters #{} and later are never reached", fi + 2)
            } else {
                format!(
                    "add a match, or remove it and write `default = \"{}\"`",
                    cl.v
                )
            };
            sink.warn(
                &f.header,
                format!("{ctx} has no match, so it matches every packet"),
                help,
            );
        }
        let mut spec = f.spec;
        spec.class = class as ClassId;
        filter_infos.push(FilterInfo {
            class: cl.v.clone(),
            spec,
            line: sink_line(sink, &f.header),
        });
    }

    let (Some(r2q), Some(mtu), Some(default_id)) = (r2q, mtu, default_id) else {
        return None;
    };
    Some(Policy {
        origin: String::new(),
        kind,
        root_leaf: None,
        cbq: cbq_opts,
        r2q,
        mtu,
        default: name_of(default_id),
        default_id: default_id as ClassId,
        classes: infos,
        filters: filter_infos,
        warnings: Vec::new(),
        link: Default::default(),
    })
}

/// CBQ: a `share` becomes a rate, a fraction of the parent's, parents first. Parents that do not
/// resolve (unknown, cyclic) are reported by the tree checks; their children keep no rate.
fn resolve_shares(sink: &mut Sink, classes: &mut [ClassDraft]) {
    let idx: HashMap<String, usize> = classes
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.name.as_ref().map(|n| (n.v.clone(), i)))
        .collect();
    let n = classes.len();
    for _ in 0..n {
        let mut changed = false;
        for i in 0..n {
            if classes[i].rate.is_some() {
                continue;
            }
            let Some((share, span)) = classes[i].share.as_ref().map(|s| (s.v, s.span.clone()))
            else {
                continue;
            };
            let parent = classes[i]
                .parent
                .as_ref()
                .and_then(|p| idx.get(&p.v))
                .copied();
            if let Some(p) = parent.filter(|&p| p != i) {
                if let Some(pr) = classes[p].rate.as_ref().map(|r| r.v) {
                    let r = Rate((pr.0 as f64 * share).round() as u64);
                    classes[i].rate = Some(At { v: r, span });
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    for c in classes.iter() {
        if let (Some(s), None, false) = (&c.share, &c.parent, c.parent_broken) {
            let name = c.name.as_ref().map(|n| n.v.as_str()).unwrap_or("?");
            sink.error(
                &s.span,
                format!("class `{name}`: a root class cannot have a `share` (a share of what?)"),
                "give the root the link's rate, e.g. `rate = \"10mbit\"`",
            );
        }
    }
}

/// A CBQ class's keys with the mtu applied: `avgpkt` cannot exceed the mtu (it is an average
/// packet size); left out, it is 1000 bytes or the mtu if smaller.
fn cbq_class(sink: &mut Sink, name: &str, c: &ClassDraft, mtu: Option<u32>) -> CbqClass {
    let mut k = c.cbq.clone();
    let Some(mtu) = mtu else { return k };
    match &c.avgpkt_span {
        Some(span) if k.avgpkt > mtu => sink.error(
            span,
            format!(
                "class `{name}`: avgpkt {} bytes is above the mtu ({mtu} bytes)",
                k.avgpkt
            ),
            format!("avgpkt is the average packet size: use at most {mtu}, or raise `mtu`"),
        ),
        Some(_) => {}
        None => k.avgpkt = k.avgpkt.min(mtu),
    }
    k
}

/// CBQ's per-class keys (rate/share and prio are read with the common keys).
fn read_cbq_class(sink: &mut Sink, ctx: &str, e: &Entries, c: &mut CbqClass) {
    let mut p = Params::borrowed(sink, ctx.to_string(), e);
    p.bool("borrow", &mut c.borrow);
    p.int("maxburst", &mut c.maxburst, 1, 1024);
    p.int("minburst", &mut c.minburst, 1, 1024);
    p.size("avgpkt", &mut c.avgpkt, 16, 65536);
    p.opt_time("maxidle", &mut c.maxidle);
    p.opt_time("minidle", &mut c.minidle);
    p.opt_time("offtime", &mut c.offtime);
    p.time("extradelay", &mut c.extradelay);
    if c.minburst > c.maxburst {
        let span = get(e, "minburst").map(|v| v.span());
        if let Some(span) = span {
            p.sink.error(
                &span,
                format!(
                    "{ctx}: minburst {} is above maxburst {}",
                    c.minburst, c.maxburst
                ),
                "minburst is the smaller of the two: lower it or raise maxburst",
            );
        }
    }
}

/// CBQ's top-level options. `altq_compat = true` sets every ALTQ behaviour; an explicit key
/// still overrides it.
fn read_cbq_options(sink: &mut Sink, e: &Entries) -> Option<CbqOptions> {
    let mut compat = false;
    let mut o = CbqOptions::default();
    let mut p = Params::borrowed(sink, "cbq".to_string(), e);
    p.bool("altq_compat", &mut compat);
    if compat {
        o = CbqOptions::altq();
    }
    p.word(
        "scheduler",
        &mut o.scheduler,
        &[("prr", CbqScheduler::Prr), ("wrr", CbqScheduler::Wrr)],
    );
    p.word(
        "guideline",
        &mut o.guideline,
        &[
            ("formal", CbqGuideline::Formal),
            ("ancestor-only", CbqGuideline::AncestorOnly),
            ("top-level", CbqGuideline::TopLevel),
        ],
    );
    p.bool("efficient", &mut o.efficient);
    p.word(
        "undertime_clock",
        &mut o.undertime_clock,
        &[
            ("actual", UndertimeClock::Actual),
            ("expected", UndertimeClock::Expected),
        ],
    );
    p.word(
        "offtime_unit",
        &mut o.offtime_unit,
        &[
            ("bytes", OfftimeUnit::Bytes),
            ("packets", OfftimeUnit::Packets),
        ],
    );
    o.altq_compat = compat;
    Some(o)
}

fn check_burst(
    sink: &mut Sink,
    class: &str,
    key: &str,
    b: &At<u64>,
    mtu: Option<u32>,
    rate: Option<Rate>,
) -> Option<u32> {
    if b.v > BURST_LIMIT as u64 {
        sink.error(
            &b.span,
            format!("class `{class}`: {key} {} is too large", Size(b.v)),
            format!(
                "use at most {} (the largest bucket kept exactly)",
                Size(BURST_LIMIT as u64)
            ),
        );
        return None;
    }
    if let Some(mtu) = mtu {
        if b.v < mtu as u64 {
            let default = rate
                .map(|r| format!(" (here {})", Size(default_burst(r, mtu) as u64)))
                .unwrap_or_default();
            sink.error(
                &b.span,
                format!("class `{class}`: {key} {} is smaller than one MTU ({mtu} bytes); a full-size packet could never be sent at once", Size(b.v)),
                format!("set {key} to at least \"{}\" (the mtu), or leave it out for the default: rate x 1ms + mtu{default}", Size(mtu as u64)),
            );
            return None;
        }
    }
    Some(b.v as u32)
}

fn quantum_warning(sink: &mut Sink, class: &str, span: &Range<usize>, w: QuantumWarning) {
    match w {
        QuantumWarning::Small { computed } => sink.warn(
            span,
            format!("class `{class}`: quantum {computed} bytes (rate/r2q) is below {MIN_QUANTUM}; using {MIN_QUANTUM}"),
            "set `quantum` or lower `r2q`",
        ),
        QuantumWarning::Big { computed } => sink.warn(
            span,
            format!("class `{class}`: quantum {computed} bytes (rate/r2q) is above {MAX_QUANTUM}; using {MAX_QUANTUM}"),
            "set `quantum` or raise `r2q`",
        ),
    }
}

/// Class keys under `qdisc = "drr"`.
const DRR_CLASS_KEYS: &[&str] = &["name", "quantum", "leaf"];
/// Keys of HTB/CBQ classes that have no meaning in a flat DRR.
const NOT_DRR_CLASS_KEYS: &[&str] = &[
    "parent", "rate", "ceil", "burst", "cburst", "prio", "share", "borrow",
];

/// The classful DRR (`qdisc = "drr"` with `[[class]]`): flat classes, each with a `quantum`
/// (bytes per round, default one MTU-sized frame: `mtu` + 14) and a `leaf`; filters and
/// `default` as for HTB.
fn drr_tree(sink: &mut Sink, doc: &PolicyDoc, mtu: Option<u32>) -> Option<Policy> {
    use linkshare_core::qdisc::drr::{
        MAX_QUANTUM as DRR_MAX_QUANTUM, MIN_QUANTUM as DRR_MIN_QUANTUM,
    };
    for key in CBQ_TOP_KEYS.iter().chain(&["r2q"]) {
        if let Some((k, _)) = doc.entries.iter().find(|(k, _)| k.get_ref() == key) {
            sink.error(
                &k.span(),
                format!("`{key}` does not apply to qdisc drr"),
                format!("remove `{key}`; DRR shares the link by each class's `quantum`"),
            );
        }
    }
    let mtu_v = mtu.unwrap_or(DEFAULT_MTU);
    let default_quantum = mtu_v + 14;
    let class_tables = tables(sink, doc, "class");
    let filter_tables = tables(sink, doc, "filter");
    let mut infos: Vec<ClassInfo> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut ok = true;
    for (i, (header, e)) in class_tables.into_iter().enumerate() {
        let errors_before = sink.diags.iter().filter(|d| d.is_error()).count();
        let name = read_class_name(sink, i, &header, e);
        let ctx = match &name {
            Some(n) => format!("class `{}`", n.v),
            None => format!("class #{}", i + 1),
        };
        for (k, _) in e {
            let key = k.get_ref().as_str();
            if NOT_DRR_CLASS_KEYS.contains(&key) {
                sink.error(
                    &k.span(),
                    format!("{ctx}: `{key}` does not apply under qdisc = \"drr\""),
                    "DRR classes are flat and share the link in proportion to their `quantum` \
                     (bytes per round): remove it and set `quantum`, or use qdisc = \"htb\" for \
                     rates and a hierarchy",
                );
            }
        }
        let others: Vec<_> = e
            .iter()
            .filter(|(k, _)| !NOT_DRR_CLASS_KEYS.contains(&k.get_ref().as_str()))
            .cloned()
            .collect();
        check_keys(sink, &format!("{ctx}: "), &others, DRR_CLASS_KEYS);
        let mut quantum = default_quantum;
        if let Some(v) = get(e, "quantum") {
            match values::size(sink, &format!("{ctx}: `quantum`"), v) {
                Some(q) if (DRR_MIN_QUANTUM as u64..=DRR_MAX_QUANTUM as u64).contains(&q) => {
                    quantum = q as u32
                }
                Some(q) => sink.error(
                    &v.span(),
                    format!(
                        "{ctx}: `quantum` {q} bytes is out of range {DRR_MIN_QUANTUM}..={DRR_MAX_QUANTUM}"
                    ),
                    format!(
                        "give at least one MTU-sized frame ({default_quantum}); shares follow the ratio of quanta"
                    ),
                ),
                None => {}
            }
        }
        let leaf = match get(e, "leaf") {
            Some(v) => read_leaf(sink, &format!("{ctx}: `leaf`"), v),
            None => Some(LeafKind::Pfifo {
                limit: DEFAULT_PFIFO_LIMIT,
            }),
        };
        let broken = sink.diags.iter().filter(|d| d.is_error()).count() > errors_before;
        let (Some(name), Some(leaf), false) = (name, leaf, broken) else {
            ok = false;
            continue;
        };
        if let Some(&first) = by_name.get(&name.v) {
            sink.error(
                &name.span,
                format!("class `{}` is defined twice", name.v),
                format!(
                    "class names must be unique; the first `{}` is at line {}: rename one",
                    name.v, infos[first].line
                ),
            );
            ok = false;
            continue;
        }
        by_name.insert(name.v.clone(), infos.len());
        infos.push(ClassInfo {
            id: infos.len() as ClassId,
            name: name.v,
            parent: None,
            parent_id: None,
            rate: Rate(0),
            ceil: Rate(0),
            burst: 0,
            cburst: 0,
            prio: 0,
            quantum,
            leaf,
            is_leaf: true,
            depth: 0,
            level: 0,
            children: Vec::new(),
            line: sink_line(sink, &header),
            cbq: None,
        });
    }
    if infos.is_empty() && ok {
        sink.error(
            &doc.anchor(),
            "qdisc drr has no classes",
            "add `[[class]]` sections with `name`, `quantum` and `leaf`",
        );
        return None;
    }
    let names: Vec<&str> = infos.iter().map(|c| c.name.as_str()).collect();
    let unknown_help = |what: &str| -> String {
        match suggest(what, names.iter().copied()) {
            Some(s) => format!(
                "did you mean \"{s}\"? defined classes: {}",
                names.join(", ")
            ),
            None => format!("defined classes: {}", names.join(", ")),
        }
    };
    let mut default_id = None;
    match get(&doc.entries, "default") {
        None => sink.error(
            &doc.anchor(),
            "the policy has no `default` class",
            format!(
                "add `default = \"...\"` naming the class for packets no filter matches (classes: {})",
                names.join(", ")
            ),
        ),
        Some(v) => {
            if let Some(d) = values::string(sink, "`default`", v, "\"bulk\"") {
                let d = d.trim();
                match by_name.get(d) {
                    Some(&j) => default_id = Some(j),
                    // A class that failed to read was reported already.
                    None if !ok => {}
                    None => sink.error(
                        &v.span(),
                        format!("default class `{d}` does not exist"),
                        format!("name a class: {}", unknown_help(d)),
                    ),
                }
            }
        }
    }
    let mut filters = Vec::new();
    for (fi, (header, e)) in filter_tables.into_iter().enumerate() {
        let f = read_filter(sink, fi, header, e);
        let Some(cl) = &f.class else { continue };
        let Some(&j) = by_name.get(cl.v.as_str()) else {
            if ok {
                sink.error(
                    &cl.span,
                    format!("filter #{}: class `{}` does not exist", fi + 1, cl.v),
                    format!("send it to a class: {}", unknown_help(&cl.v)),
                );
            }
            continue;
        };
        if f.matches_all {
            sink.warn(
                &f.header,
                format!(
                    "filter #{} has no match, so it matches every packet",
                    fi + 1
                ),
                "add a match (dscp, protocol, src, dst, ports), or remove it and set `default`",
            );
        }
        let mut spec = f.spec;
        spec.class = j as ClassId;
        filters.push(FilterInfo {
            class: cl.v.clone(),
            spec,
            line: sink_line(sink, &f.header),
        });
    }
    let (Some(mtu), Some(default_id), true) = (mtu, default_id, ok) else {
        return None;
    };
    Some(Policy {
        origin: String::new(),
        kind: QdiscKind::Drr,
        root_leaf: None,
        cbq: None,
        r2q: DEFAULT_R2Q,
        mtu,
        default: infos[default_id].name.clone(),
        default_id: default_id as ClassId,
        classes: infos,
        filters,
        warnings: Vec::new(),
        link: Default::default(),
    })
}
