//! Walks a [`PolicyDoc`] and turns it into a checked [`Policy`], reporting every problem.
//!
//! The walk is in two passes. First every key is read on its own (type, unit, range), so a typo
//! anywhere is reported even when other parts are broken ([`read`], and [`cbq`] for CBQ's own
//! keys). Then the tree is checked as a whole (names, parents, cycles, depth, capacity, leaves,
//! default, filters: [`tree`], and [`drr`] for the flat classful DRR), skipping only the checks
//! that depend on a value that was already reported as broken, so that one mistake gives one
//! error rather than a cascade.
//!
//! This module holds the entry point: the top-level keys every policy shares (`qdisc`, `r2q`,
//! `mtu`, the link) and the choice of root (HTB, CBQ, classful DRR, or a single classless
//! discipline). Diagnostics keep the order in which the file is walked, which is the order
//! users (and the tests) see them in.

mod cbq;
mod drr;
mod hfsc;
mod rates;
mod read;
mod routing;
pub(crate) mod subs;
mod tree;
mod upload;

pub use subs::ReadTable;

use linkshare_core::htb::{DEFAULT_MTU, DEFAULT_R2Q};
use toml::Spanned;

use crate::diag::{suggest, ConfigError};
use crate::leaf::read_leaf;
use crate::raw::{PolicyDoc, Raw};
use crate::source::Sink;
use crate::values;
use crate::{ClassInfo, LeafKind, Policy, QdiscKind};

use drr::drr_tree;
use read::{check_keys, get};
use tree::tree;

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
    "plan",
    "subscribers",
    "hfsc_compat",
    "non_ip",
    "trust_dscp",
    "wash",
    "upload_trust_dscp",
    "upload_wash",
];

/// Entry point: check `doc` (whose spans point into `text`) and build a [`Policy`].
pub(crate) fn validate(
    doc: &PolicyDoc,
    text: &str,
    origin: &str,
    files: ReadTable,
) -> Result<Policy, ConfigError> {
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
    let non_ip = crate::non_ip::read(&mut sink, entries);
    let trust = crate::trust::read(&mut sink, entries);

    let policy = match root {
        Some(Root::Htb) => tree(&mut sink, doc, QdiscKind::Htb, r2q, mtu, files),
        Some(Root::Cbq) => tree(&mut sink, doc, QdiscKind::Cbq, r2q, mtu, files),
        Some(Root::Hfsc) => tree(&mut sink, doc, QdiscKind::Hfsc, r2q, mtu, files),
        Some(Root::Drr) => {
            only_htb(&mut sink, doc, "drr");
            drr_tree(&mut sink, doc, mtu)
        }
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
                let _ = tree(&mut sink, doc, QdiscKind::Htb, r2q, mtu, files);
            }
            None
        }
    };
    match policy {
        Some(mut p) if !sink.has_errors() => {
            p.origin = origin.to_string();
            p.link = link.unwrap_or_default();
            p.non_ip = non_ip.unwrap_or_default();
            let (down, up) = trust.unwrap_or_default();
            p.dscp = down;
            if let Some(u) = p.upload.as_mut() {
                u.origin = p.origin.clone();
                u.link = p.link;
                u.non_ip = p.non_ip;
                u.dscp = up;
            }
            p.warnings = sink.finish();
            Ok(p)
        }
        _ => Err(ConfigError {
            diagnostics: sink.finish(),
        }),
    }
}

/// A subscriber table and plans need HTB.
fn only_htb(sink: &mut Sink, doc: &PolicyDoc, kind: &str) {
    for key in ["plan", "subscribers"] {
        if let Some((k, _)) = doc.entries.iter().find(|(k, _)| k.get_ref() == key) {
            sink.error(
                &k.span(),
                format!("`{key}` needs `qdisc = \"htb\"`; this policy's qdisc is {kind}"),
                "write the policy with qdisc = \"htb\", or its subscribers as `[[class]]` tables",
            );
        }
    }
}

/// What `qdisc = …` names.
enum Root {
    Htb,
    Cbq,
    Hfsc,
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
    if let Some(k @ (QdiscKind::Htb | QdiscKind::Cbq | QdiscKind::Hfsc)) =
        QdiscKind::from_name(&name)
    {
        if let Raw::Table(_) = v.get_ref() {
            sink.error(
                &v.span(),
                format!("`qdisc`: {name} takes its options at the top level, not in a table"),
                format!("write `qdisc = \"{name}\"` and put its options (e.g. `mtu = 1500`) on lines of their own"),
            );
            return None;
        }
        return Some(match k {
            QdiscKind::Htb => Root::Htb,
            QdiscKind::Hfsc => Root::Hfsc,
            _ => Root::Cbq,
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
    for key in ["class", "filter", "default", "plan", "subscribers"] {
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
        hfsc: None,
        r2q: r2q.unwrap_or(DEFAULT_R2Q),
        mtu: mtu.unwrap_or(DEFAULT_MTU),
        default: String::new(),
        default_id: 0,
        classes: Vec::new(),
        filters: Vec::new(),
        warnings: Vec::new(),
        link: Default::default(),
        dscp: Default::default(),
        subscribers: None,
        upload: None,
        non_ip: Default::default(),
    })
}

/// [`Policy::root_rate`] of these classes, for the checks that need it before the policy is
/// whole (under CBQ, whose classes have no `ceil`, it is the sum of the roots' allocations).
pub(crate) fn root_rate_of(classes: &[ClassInfo]) -> linkshare_core::Rate {
    linkshare_core::Rate(
        classes
            .iter()
            .filter(|c| c.parent_id.is_none())
            .fold(0u64, |s, c| s.saturating_add(c.ceil.0)),
    )
}
