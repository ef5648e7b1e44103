//! pf queues → HFSC: OpenBSD's `queue` tree (which OpenBSD runs on HFSC) and ALTQ's `hfsc`
//! queues.
//!
//! Principles: each queue keeps what it guaranteed under pf. OpenBSD (pf.conf(5), QUEUEING;
//! `pfctl_queue`/`hfsc.c`): `bandwidth` is the link-sharing curve, `min` the real-time curve,
//! `max` the upper limit, and a `burst B for T ms` after any of them that curve's first segment
//! (`m1 = B` for `d = T`). ALTQ (FreeBSD pf.conf(5), `pfctl_altq.c`): `hfsc(realtime SC,
//! linkshare SC, upperlimit SC)` with SC a bandwidth or `(m1, d, m2)`, `d` in ms; without
//! `linkshare` the queue's `bandwidth` is its link share. A real-time curve on a queue with
//! children is left out with a note (only leaves are served by real time, in pf as here).

use linkshare_core::hfsc::ServiceCurve;

use super::build::leaf_of;
use super::parse::bandwidth;
use super::{Altq, Bw, Queue};
use crate::diag::{Diag, ImportError};
use crate::policy_writer::{rate_text, ClassDraft, Draft, Field, Root};

/// The curve of a rate with an optional `burst B for T ms`.
fn curve(m2: u64, burst: Option<(u64, u64)>) -> ServiceCurve {
    match burst {
        Some((b, ms)) if ms > 0 => ServiceCurve {
            m1: b,
            d: ms.saturating_mul(1_000_000),
            m2,
        },
        _ => ServiceCurve::rate(m2),
    }
}

/// A bandwidth in bits, a percentage taken of `of`.
fn absolute(bw: &Bw, of: Option<u64>) -> Option<u64> {
    match bw {
        Bw::Bits(b) => Some(*b),
        Bw::Percent(p) => of.map(|o| (o as f64 * p / 100.0) as u64),
    }
}

/// OpenBSD's queue tree on `on` → an HFSC draft.
pub(crate) fn openbsd(queues: &[Queue], on: &str, file: &str) -> Result<Draft, ImportError> {
    let mut d = Draft::new(Root::Hfsc);
    d.top.push(Field::str("hfsc_compat", "openbsd").note(
        "OpenBSD's queues run its HFSC: upper-limit catch-up and per-period virtual times (docs/hfsc.md)",
    ));
    let mut errors = Vec::new();
    // Tree order: the roots on `on`, then each queue's children (bounded).
    let mut tree: Vec<&Queue> = queues
        .iter()
        .filter(|q| q.iface.as_deref() == Some(on) && q.parent.is_none())
        .collect();
    let mut k = 0;
    while k < tree.len() && tree.len() <= 10_000 {
        let name = tree[k].name.clone();
        tree.extend(
            queues
                .iter()
                .filter(|q| q.parent.as_deref() == Some(name.as_str())),
        );
        k += 1;
    }
    for q in queues {
        if let Some(p) = &q.parent {
            if !queues.iter().any(|x| x.name == *p) {
                errors.push(Diag::new(
                    file,
                    q.line,
                    format!("queue `{}`: its parent `{p}` is not defined", q.name),
                ));
            }
        }
    }
    let is_parent = |n: &str| queues.iter().any(|x| x.parent.as_deref() == Some(n));
    let mut bw_of: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    let mut default = None;
    for q in &tree {
        let parent_bw = q.parent.as_deref().and_then(|p| bw_of.get(p).copied());
        let Some(bw) = q.bw.as_ref().and_then(|b| absolute(b, parent_bw)) else {
            errors.push(
                Diag::new(file, q.line, format!("queue `{}` has no bandwidth", q.name))
                    .help("write `bandwidth 10M` (or a percentage of the parent's)"),
            );
            continue;
        };
        bw_of.insert(q.name.as_str(), bw);
        let inner = is_parent(&q.name);
        let mut c = ClassDraft::new(&q.name, Some(format!("{file}:{}", q.line)));
        if let Some(p) = &q.parent {
            c.fields.push(Field::str("parent", p.clone()));
        }
        if let Some(m) = q.min {
            if inner {
                c.notes.push(format!(
                    "min {}: a real-time curve on a queue with children is not used (only leaves are served by real time): left out",
                    rate_text(m)
                ));
            } else {
                c.fields.push(Field::curve("rt", &curve(m, q.min_burst)));
            }
        }
        c.fields.push(Field::curve("ls", &curve(bw, q.burst)));
        if let Some(m) = q.max {
            c.fields.push(Field::curve("ul", &curve(m, q.max_burst)));
        }
        if let Some(qn) = q.quantum {
            c.notes.push(format!(
                "quantum {qn}: HFSC has no quantum (it shares by service curves): left out"
            ));
        }
        if !inner {
            c.leaf = leaf_of(q);
            if q.default {
                default = Some(q.name.clone());
            }
        }
        d.classes.push(c);
    }
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    match default.or_else(|| d.classes.last().map(|c| c.name.clone())) {
        Some(n) => d.top.insert(0, Field::str("default", n)),
        None => return Err(Diag::new(file, 0, format!("no queues on {on}")).into()),
    }
    Ok(d)
}

/// One ALTQ service curve at `opts[*i]`: a bandwidth, or `( m1 d m2 )` with `d` in ms.
fn altq_curve(opts: &[String], i: &mut usize, of: Option<u64>) -> Result<ServiceCurve, String> {
    let bits = |s: &str| {
        bandwidth(s)
            .and_then(|b| absolute(&b, of))
            .ok_or_else(|| format!("`{s}` is not a bandwidth (write 10Mb, 512Kb or 20%)"))
    };
    match opts.get(*i).map(String::as_str) {
        Some("(") => {
            let w: Vec<&str> = opts[*i + 1..]
                .iter()
                .take_while(|t| *t != ")")
                .map(String::as_str)
                .collect();
            *i += w.len() + 2;
            let [m1, dl, m2] = w[..] else {
                return Err(format!(
                    "a curve is `(m1, d, m2)` with d in ms, not `({})`",
                    w.join(", ")
                ));
            };
            let ms: u64 = dl
                .parse()
                .map_err(|_| format!("`{dl}` is not a time in ms"))?;
            Ok(ServiceCurve {
                m1: bits(m1)?,
                d: ms.saturating_mul(1_000_000),
                m2: bits(m2)?,
            })
        }
        Some(b) => {
            *i += 1;
            Ok(ServiceCurve::rate(bits(b)?))
        }
        None => Err("a curve needs a bandwidth or `(m1, d, m2)`".into()),
    }
}

/// ALTQ `altq on IF hfsc bandwidth X queue { … }` and its queues (`tree`: queue and parent, in
/// tree order) → an HFSC draft under a root class at the interface's bandwidth.
pub(crate) fn altq(
    a: &Altq,
    tree: &[(&Queue, Option<String>)],
    link: u64,
    default: String,
    file: &str,
) -> Result<Draft, ImportError> {
    let mut d = Draft::new(Root::Hfsc);
    d.top.push(Field::str("default", default));
    d.top.push(Field::str("hfsc_compat", "openbsd").note(
        "imported from ALTQ: its upper-limit catch-up and per-period virtual times (docs/hfsc.md)",
    ));
    let mut root = ClassDraft::new(
        "root",
        Some(format!("{file}:{} (altq on {} hfsc)", a.line, a.iface)),
    );
    root.fields.push(Field::rate("ls", link));
    root.fields.push(Field::rate("ul", link));
    d.classes.push(root);
    let mut errors = Vec::new();
    let mut bw_of: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for (q, parent) in tree {
        let err = |m: String| Diag::new(file, q.line, format!("queue `{}`: {m}", q.name));
        let parent_bw = match parent {
            Some(p) => bw_of.get(p.as_str()).copied(),
            None => Some(link),
        };
        let bw = q.bw.as_ref().and_then(|b| absolute(b, parent_bw));
        if let Some(b) = bw {
            bw_of.insert(q.name.as_str(), b);
        }
        let mut c = ClassDraft::new(&q.name, Some(format!("{file}:{}", q.line)));
        c.fields.push(Field::str(
            "parent",
            parent.clone().unwrap_or_else(|| "root".into()),
        ));
        let (mut rt, mut ls, mut ul) = (None, None, None);
        let o = &q.opts;
        let mut i = 0;
        while i < o.len() {
            let key = o[i].clone();
            i += 1;
            let slot = match key.as_str() {
                "realtime" => &mut rt,
                "linkshare" => &mut ls,
                "upperlimit" => &mut ul,
                "default" | "red" | "ecn" | "rio" | "cleardscp" => continue,
                other => {
                    errors.push(err(format!(
                        "unknown hfsc option `{other}` (realtime, linkshare, upperlimit, default, red, ecn, rio)"
                    )));
                    break;
                }
            };
            match altq_curve(o, &mut i, parent_bw) {
                Ok(sc) => *slot = Some(sc),
                Err(m) => {
                    errors.push(err(m));
                    break;
                }
            }
        }
        let ls = ls.or(bw.map(ServiceCurve::rate));
        if let Some(r) = rt {
            if q.children.is_empty() {
                c.fields.push(Field::curve("rt", &r));
            } else {
                c.notes.push("realtime on a queue with children is not used (only leaves are served by real time): left out".into());
            }
        }
        match ls {
            Some(l) => c.fields.push(Field::curve("ls", &l)),
            None if rt.is_none() || !q.children.is_empty() => {
                errors.push(err("no bandwidth and no linkshare curve".into()));
                continue;
            }
            None => {}
        }
        if let Some(u) = ul {
            c.fields.push(Field::curve("ul", &u));
        }
        if q.children.is_empty() {
            c.leaf = leaf_of(q);
        }
        d.classes.push(c);
    }
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn altq_curves_read_both_forms_and_percentages_of_the_parent() {
        let o = toks("( 400Kb 30 100Kb ) 25%");
        let mut i = 0;
        let c = altq_curve(&o, &mut i, Some(1_000_000)).unwrap();
        assert_eq!(
            c,
            ServiceCurve {
                m1: 400_000,
                d: 30_000_000,
                m2: 100_000
            }
        );
        assert_eq!(i, 5);
        let c = altq_curve(&o, &mut i, Some(1_000_000)).unwrap();
        assert_eq!(c, ServiceCurve::rate(250_000));
        assert!(altq_curve(&toks("( 1Mb 30 )"), &mut 0, None).is_err());
        assert!(altq_curve(&toks("( 1Mb x 2Mb )"), &mut 0, None).is_err());
    }
}
