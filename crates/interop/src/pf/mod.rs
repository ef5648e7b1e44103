//! Import pf.conf queues: OpenBSD's `queue` lines (pf.conf(5), OpenBSD 5.5 and later) and
//! FreeBSD/ALTQ's `altq on …` + `queue` lines (pf.conf(5) of FreeBSD, altq(4)), with the
//! `pass`/`match … queue` rules that put traffic in them as filters.
//!
//! What maps and how:
//! - OpenBSD: `queue NAME on IF bandwidth X [max Z]` is the root, `queue NAME parent P
//!   bandwidth X [min Y] [max Z] [qlimit N] [flows N] [quantum N] [default]` its descendants →
//!   an HFSC tree, as OpenBSD runs them (`pf/hfsc.rs`): `bandwidth` = `ls`, `min` = `rt`, `max`
//!   = `ul`, and a `burst B for T ms` after any of them is that curve's `m1 = B`, `d = T`;
//!   `qlimit` → a pfifo leaf limit, `flows N` → an fq_codel leaf (OpenBSD's flow queueing is
//!   FQ-CoDel); `quantum` is noted (HFSC has none).
//! - ALTQ `cbq` → `qdisc = "cbq"` with ALTQ's behaviours (`altq_compat = true`): `bandwidth X%`
//!   → `share`, absolute → `rate`; `priority N` (0-7, higher first) → `prio = 7 - N`;
//!   `cbq(borrow)` → `borrow = true` (ALTQ's default is no borrowing: `borrow = false` is
//!   written); `red`/`ecn`/`rio` → red/rio leaves; `default` → `default`.
//! - ALTQ `priq` → linkshare's strict priority between classes: HTB classes with a token
//!   guarantee (1 ‰ of the link) and the whole link as ceil, `prio` ranked from PRIQ's priority,
//!   so what is borrowed — nearly everything — goes to the highest priority first. (The `prio`
//!   leaf picks bands by TOS, not by rules, so it cannot carry pf's rules.)
//! - ALTQ `hfsc` → `qdisc = "hfsc"` under a root class at the interface's bandwidth:
//!   `hfsc(realtime SC, linkshare SC, upperlimit SC)` → `rt`, `ls`, `ul`, an SC being a
//!   bandwidth or `(m1, d, m2)` with `d` in ms, percentages of the parent's bandwidth; without
//!   `linkshare` the queue's `bandwidth` is its `ls` (pfctl's rule).
//! - `pass`/`match` rules with `queue NAME` or `set queue NAME` → filters on proto, from/to
//!   addresses (lists expanded) and ports (`=`, lists, `A:B`, `A >< B`, `>`, `>=`, `<`, `<=`,
//!   service names). pf's last matching rule wins unless `quick`: the filters are written
//!   quick rules first (file order), then the others from last to first, which is the same
//!   decision under linkshare's first match. `in` rules queue the replies that leave: their
//!   addresses and ports are swapped. Tables, negations, interface addresses and the second
//!   (ACK/low-delay) queue are noted and left out.
//!
//! Macros (`name = "value"`, `$name`) and `\` continuations are expanded; everything else in
//! pf.conf (options, NAT, scrub, tables, block rules) is ignored with one note.

use crate::diag::{Diag, ImportError};
use crate::policy_writer::Field;
use crate::Imported;

mod build;
mod hfsc;
mod parse;

use build::{altq, filters};
use hfsc::openbsd;
use parse::{bandwidth, list, parse_queue, parse_rule, statements};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Bw {
    Bits(u64),
    Percent(f64),
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Queue {
    pub(crate) name: String,
    pub(crate) line: usize,
    pub(crate) iface: Option<String>,
    pub(crate) parent: Option<String>,
    pub(crate) bw: Option<Bw>,
    pub(crate) min: Option<u64>,
    pub(crate) max: Option<u64>,
    /// `burst B for T ms` after `bandwidth`, `min` and `max`: (bits/s, ms).
    pub(crate) burst: Option<(u64, u64)>,
    pub(crate) min_burst: Option<(u64, u64)>,
    pub(crate) max_burst: Option<(u64, u64)>,
    pub(crate) qlimit: Option<u32>,
    pub(crate) flows: Option<u32>,
    pub(crate) quantum: Option<u32>,
    pub(crate) default: bool,
    pub(crate) priority: Option<u8>,
    pub(crate) sched: Option<String>,
    pub(crate) opts: Vec<String>,
    pub(crate) children: Vec<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct Altq {
    pub(crate) line: usize,
    pub(crate) iface: String,
    pub(crate) sched: String,
    pub(crate) bw: Bw,
    pub(crate) queues: Vec<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct PfRule {
    pub(crate) line: usize,
    pub(crate) quick: bool,
    pub(crate) inbound: bool,
    pub(crate) iface: Option<String>,
    pub(crate) protos: Vec<Option<u8>>,
    pub(crate) from: Vec<Option<String>>,
    pub(crate) from_ports: Vec<Option<(u16, u16)>>,
    pub(crate) to: Vec<Option<String>>,
    pub(crate) to_ports: Vec<Option<(u16, u16)>>,
    pub(crate) queue: String,
    pub(crate) notes: Vec<String>,
    /// Why the whole rule is left out (every address of a side was unusable).
    pub(crate) skip: Option<String>,
}

/// Import the queues of `iface` (the first interface with queues when `None`).
pub fn import(text: &str, file: &str, iface: Option<&str>) -> Result<Imported, ImportError> {
    let stmts = statements(text, file)?;
    let mut errors = Vec::new();
    let mut queues: Vec<Queue> = Vec::new();
    let mut altqs: Vec<Altq> = Vec::new();
    let mut rules = Vec::new();
    let mut ignored = 0;
    for (line, w) in &stmts {
        let err = |m: String| Diag::new(file, *line, m);
        match w.first().map(String::as_str) {
            Some("queue") => match parse_queue(w, *line, file) {
                Ok(q) => queues.push(q),
                Err(e) => errors.push(e),
            },
            Some("altq") => {
                let mut a = Altq {
                    line: *line,
                    iface: String::new(),
                    sched: String::new(),
                    bw: Bw::Bits(0),
                    queues: Vec::new(),
                };
                let mut i = 1;
                while i < w.len() {
                    match w[i].as_str() {
                        "on" => a.iface = w.get(i + 1).cloned().unwrap_or_default(),
                        s @ ("cbq" | "priq" | "hfsc" | "fairq" | "codel") => {
                            a.sched = s.to_string();
                            i += 1;
                            continue;
                        }
                        "bandwidth" => match w.get(i + 1).and_then(|b| bandwidth(b)) {
                            Some(b) => a.bw = b,
                            None => {
                                errors.push(err("`bandwidth` needs a rate such as 10Mb".into()))
                            }
                        },
                        "queue" => {
                            i += 1;
                            a.queues = list(w, &mut i);
                            continue;
                        }
                        "qlimit" | "tbrsize" => {}
                        other => errors.push(err(format!("unknown altq keyword `{other}`"))),
                    }
                    i += 2;
                }
                if !matches!(a.sched.as_str(), "cbq" | "priq" | "hfsc") {
                    errors.push(err(format!(
                        "altq scheduler `{}` is not imported: linkshare imports cbq, priq and hfsc",
                        a.sched
                    )));
                } else if a.iface.is_empty() || matches!(a.bw, Bw::Bits(0)) {
                    errors.push(err("`altq` needs `on IF` and `bandwidth`".into()));
                }
                altqs.push(a);
            }
            Some("pass" | "match") => match parse_rule(w, *line) {
                Ok(Some(r)) => rules.push(r),
                Ok(None) => {}
                Err(e) => errors.push(err(e)),
            },
            _ => ignored += 1,
        }
    }
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    let ifaces: Vec<String> = altqs
        .iter()
        .map(|a| a.iface.clone())
        .chain(queues.iter().filter_map(|q| q.iface.clone()))
        .collect();
    let Some(on) = iface.map(String::from).or_else(|| ifaces.first().cloned()) else {
        return Err(Diag::new(
            file,
            0,
            "no `queue … on IF` or `altq on IF` line: nothing to import",
        )
        .into());
    };
    let mut d = if altqs.is_empty() {
        openbsd(&queues, &on, file)?
    } else {
        altq(&altqs, &queues, &on, file)?
    };
    d.title
        .insert(0, format!("linkshare import pf {file} (interface {on})"));
    if ifaces.iter().any(|x| *x != on) {
        d.notes.push(format!(
            "queues of other interfaces left out (import them with --on IF): {}",
            ifaces
                .iter()
                .filter(|x| **x != on)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if ignored > 0 {
        d.notes.push(format!("{ignored} pf.conf statements that are not queues or queue-assigning rules were ignored"));
    }
    filters(&mut d, &rules, &on, file)?;
    // A catch-all rule that ends the list (pf's first `match … set queue`, reversed) is what
    // the default class means.
    while d.filters.last().is_some_and(|f| f.fields.is_empty()) {
        if let Some(f) = d.filters.pop() {
            d.top.retain(|t| t.key != "default");
            d.top.insert(
                0,
                Field::str("default", f.class.clone()).note(format!(
                    "from the catch-all rule at {}",
                    f.source.unwrap_or_default()
                )),
            );
        }
    }
    Ok(Imported {
        toml: d.to_toml(),
        warnings: Vec::new(),
    })
}
