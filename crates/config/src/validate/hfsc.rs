//! HFSC's keys (`qdisc = "hfsc"`): each class's service curves and the checks of tc-hfsc(7)
//! and Linux's `hfsc_change_class`.
//!
//! A curve is written as a rate (`ls = "5mbit"`: linear), as its two segments
//! (`rt = { m1 = "400kbit", d = "30ms", m2 = "100kbit" }`) or as tc's delay form
//! (`rt = { umax = "1500b", dmax = "30ms", rate = "100kbit" }`); `sc` sets `rt` and `ls` alike.
//! Errors are what Linux refuses: a class without any curve, `ul` without `ls`, and a class with
//! children but no `ls` (CVE-2023-4623). Warnings are what tc-hfsc(7) explains works but
//! surprises: `rt` on a class with children (ignored: real-time service goes to leaves), the
//! children's link-sharing rates above their parent's (shares stay proportional, no curve is
//! met), and real-time curves whose sum is above the link (the top-level upper limits): their
//! guarantees cannot all be kept.

use linkshare_core::hfsc::ServiceCurve;
use linkshare_core::units::Rate;
use toml::Spanned;

use crate::raw::Raw;
use crate::source::Sink;
use crate::values;
use crate::{ClassInfo, HfscClass};

use super::read::{at, check_keys, get, At, ClassDraft, Entries};
use super::tree::Shape;

/// Class keys under `qdisc = "hfsc"`.
pub(super) const HFSC_CLASS_KEYS: &[&str] = &["name", "parent", "rt", "ls", "sc", "ul", "leaf"];
/// Top-level keys of HFSC only.
pub(super) const HFSC_TOP_KEYS: &[&str] = &["hfsc_compat"];

const CURVE_HELP: &str =
    "write a rate (\"5mbit\"), `{ m1 = \"400kbit\", d = \"30ms\", m2 = \"100kbit\" }` \
     or `{ umax = \"1500b\", dmax = \"30ms\", rate = \"100kbit\" }`";

/// A class's curves as written.
#[derive(Debug, Default)]
pub(super) struct HfscDraft {
    pub(super) rt: Option<At<ServiceCurve>>,
    pub(super) ls: Option<At<ServiceCurve>>,
    pub(super) ul: Option<At<ServiceCurve>>,
}

/// Reads `rt`, `ls`, `sc` and `ul`; the class's `rate` (shown by `stat`, used for defaults)
/// becomes its long-term guarantee, `m2` of `ls` (else of `rt`).
pub(super) fn read_hfsc_class(sink: &mut Sink, ctx: &str, e: &Entries, d: &mut ClassDraft) {
    let mut curve = |key: &str| {
        get(e, key).and_then(|v| at(read_curve(sink, &format!("{ctx}: `{key}`"), v), v.span()))
    };
    let (rt, ls, sc, ul) = (curve("rt"), curve("ls"), curve("sc"), curve("ul"));
    let h = &mut d.hfsc;
    if let Some(s) = sc {
        for (key, other) in [("rt", &rt), ("ls", &ls)] {
            if let Some(o) = other {
                sink.error(
                    &o.span,
                    format!("{ctx}: both `sc` and `{key}` are given"),
                    "`sc` sets `rt` and `ls` to the same curve: keep `sc`, or write `rt` and `ls` apart",
                );
            }
        }
        h.rt = Some(At {
            v: s.v,
            span: s.span.clone(),
        });
        h.ls = Some(s);
    } else {
        h.rt = rt;
        h.ls = ls;
    }
    h.ul = ul;
    let long_term = h.ls.as_ref().or(h.rt.as_ref()).map(|c| c.v.m2);
    if let (Some(m), Some(c)) = (long_term, h.ls.as_ref().or(h.rt.as_ref())) {
        if m > 0 {
            d.rate = Some(At {
                v: Rate(m),
                span: c.span.clone(),
            });
        }
    }
}

/// One curve: a rate, `{ m1, d, m2 }` or `{ umax, dmax, rate }`.
fn read_curve(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<ServiceCurve> {
    let e = match v.get_ref() {
        Raw::Table(e) => e,
        Raw::Str(_) | Raw::Int(_) => {
            return values::rate(sink, ctx, v).map(|r| ServiceCurve::rate(r.0))
        }
        _ => {
            sink.error(
                &v.span(),
                format!("{ctx} is not a service curve"),
                CURVE_HELP,
            );
            return None;
        }
    };
    check_keys(
        sink,
        &format!("{ctx}: "),
        e,
        &["m1", "d", "m2", "umax", "dmax", "rate"],
    );
    let rate = |sink: &mut Sink, k: &str| {
        get(e, k).map(|x| values::rate(sink, &format!("{ctx}: `{k}`"), x))
    };
    let time = |sink: &mut Sink, k: &str| {
        get(e, k).map(|x| values::time(sink, &format!("{ctx}: `{k}`"), x))
    };
    let two_piece = ["m1", "d", "m2"].iter().any(|k| get(e, k).is_some());
    let delay = ["umax", "dmax", "rate"].iter().any(|k| get(e, k).is_some());
    if two_piece && delay {
        sink.error(
            &v.span(),
            format!("{ctx} mixes the two forms of a curve"),
            CURVE_HELP,
        );
        return None;
    }
    if delay {
        let umax = get(e, "umax").map(|x| values::size(sink, &format!("{ctx}: `umax`"), x));
        let (dmax, r) = (time(sink, "dmax"), rate(sink, "rate"));
        let (Some(r), Some(umax), Some(dmax)) = (r, umax, dmax) else {
            sink.error(
                &v.span(),
                format!("{ctx} needs `umax`, `dmax` and `rate` together"),
                CURVE_HELP,
            );
            return None;
        };
        let (r, umax, dmax) = (r?, umax?, dmax?);
        return match ServiceCurve::from_umax(umax, dmax.0, r.0) {
            Some(c) => Some(c),
            None => {
                sink.error(
                    &v.span(),
                    format!("{ctx}: `dmax` is zero"),
                    "give the delay within which `umax` bytes must be sent, e.g. \"30ms\"",
                );
                None
            }
        };
    }
    let Some(m2) = rate(sink, "m2") else {
        sink.error(
            &v.span(),
            format!("{ctx} has no `m2`"),
            format!("`m2` is the long-term rate; {CURVE_HELP}"),
        );
        return None;
    };
    let (m1, d) = (rate(sink, "m1"), time(sink, "d"));
    if m1.is_some() != d.is_some() {
        sink.error(
            &v.span(),
            format!("{ctx}: `m1` and `d` go together"),
            "`m1` is the slope for the first `d`: give both, or neither for a linear curve",
        );
        return None;
    }
    let m2 = m2?;
    match (m1, d) {
        (Some(m1), Some(d)) => Some(ServiceCurve {
            m1: m1?.0,
            d: d?.0,
            m2: m2.0,
        }),
        _ => Some(ServiceCurve::rate(m2.0)),
    }
}

/// A curve that was given and is not zero.
fn live(x: &Option<At<ServiceCurve>>) -> Option<&At<ServiceCurve>> {
    x.as_ref().filter(|c| !c.v.is_zero())
}

/// The whole-tree checks of HFSC (errors and warnings, see the module docs); fills each class's
/// curves and shows the upper limit as its `ceil`.
pub(super) fn check_hfsc(sink: &mut Sink, shape: &Shape, infos: &mut [ClassInfo]) {
    let (classes, children, is_leaf) = (shape.classes, &shape.children, &shape.is_leaf);
    for (i, c) in classes.iter().enumerate() {
        let Some(info) = infos.get_mut(i) else {
            continue;
        };
        let name = shape.name_of(i);
        let h = &c.hfsc;
        if c.broken {
            continue;
        }
        if live(&h.rt).is_none() && live(&h.ls).is_none() {
            sink.error(
                &c.header,
                format!("class `{name}` has no service curve"),
                "give it `sc = \"1mbit\"` (real time and link sharing alike), or `rt` and/or `ls`",
            );
        }
        if let (Some(ul), None) = (&h.ul, live(&h.ls)) {
            sink.error(
                &ul.span,
                format!("class `{name}`: `ul` without `ls`"),
                "an upper limit bounds link-sharing only: add `ls` (or `sc`), or remove `ul`",
            );
        }
        if !is_leaf[i] && live(&h.ls).is_none() {
            sink.error(&c.header, format!("class `{name}` has children but no `ls`"), "a parent shares its link by `ls`; Linux refuses a parent without one (CVE-2023-4623): add `ls` (or `sc`)");
        }
        if let (Some(rt), false) = (live(&h.rt), is_leaf[i]) {
            sink.warn(&rt.span, format!("class `{name}`: `rt` on a class with children is ignored"), "real-time service goes to leaves only: move `rt` to its leaves (`sc` sets `ls` too, which stays in effect)");
        }
        if let Some(ls) = live(&h.ls) {
            let sum: u64 = children[i]
                .iter()
                .filter_map(|&k| classes[k].hfsc.ls.as_ref())
                .map(|c| c.v.m2)
                .fold(0, u64::saturating_add);
            if !children[i].is_empty() && sum > ls.v.m2 {
                sink.warn(&ls.span, format!("class `{name}`: the children's `ls` rates add up to {}, above its own {}", Rate(sum), Rate(ls.v.m2)), "they still share in proportion, but none gets its curve when all are busy: lower the children's `ls`, or raise this one");
            }
        }
        info.hfsc = Some(HfscClass {
            rt: live(&h.rt).filter(|_| is_leaf[i]).map(|c| c.v),
            ls: live(&h.ls).map(|c| c.v),
            ul: h.ul.as_ref().map(|c| c.v),
        });
        if let Some(ul) = &h.ul {
            info.ceil = Rate(ul.v.m2);
        }
    }
    // The link is the top-level classes' upper limits, when each has one.
    let tops: Vec<usize> = (0..classes.len())
        .filter(|&i| shape.parent_of[i].is_none())
        .collect();
    let link: Option<u64> = tops
        .iter()
        .map(|&i| classes[i].hfsc.ul.as_ref().map(|u| u.v.m2))
        .sum();
    let rts: Vec<&At<ServiceCurve>> = (0..classes.len())
        .filter(|&i| is_leaf[i])
        .filter_map(|i| classes[i].hfsc.rt.as_ref())
        .collect();
    let sum = rts
        .iter()
        .map(|c| c.v.peak())
        .fold(0u64, u64::saturating_add);
    if let (Some(link), Some(last)) = (link, rts.last()) {
        if sum > link {
            sink.warn(&last.span, format!("the leaves' real-time curves add up to {} at their peak, above the link {} (the top-level `ul`)", Rate(sum), Rate(link)), "real time is served before link sharing whatever the link can do: their delays and rates cannot all be kept; lower `rt` (its `m1` or `m2`)");
        }
    }
}

/// `hfsc_compat = "linux" | "openbsd"`.
pub(super) fn read_hfsc_compat(sink: &mut Sink, entries: &Entries) -> crate::HfscCompat {
    let Some(v) = get(entries, "hfsc_compat") else {
        return crate::HfscCompat::Linux;
    };
    match values::string(sink, "`hfsc_compat`", v, "\"linux\"")
        .map(|s| s.trim().to_ascii_lowercase())
    {
        Some(s) if s == "linux" => crate::HfscCompat::Linux,
        Some(s) if s == "openbsd" || s == "altq" => crate::HfscCompat::OpenBsd,
        Some(s) => {
            sink.error(&v.span(), format!("`hfsc_compat`: unknown \"{s}\""), "write \"linux\" (the default) or \"openbsd\" (ALTQ's upper-limit catch-up and virtual-time periods)");
            crate::HfscCompat::Linux
        }
        None => crate::HfscCompat::Linux,
    }
}
