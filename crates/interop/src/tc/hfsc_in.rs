//! Import of tc-hfsc(8) classes: a class's `rt`, `ls`, `ul` and `sc` curves → the policy's
//! `rt`, `ls` and `ul` keys.
//!
//! Principles: every form tc reads or prints is accepted — `m1 BPS d SEC m2 BPS` (either of the
//! first two left out), `umax BYTES dmax SEC rate BPS` (umax may be left out), a bare `rate BPS`
//! or `m2 BPS` — and each is written in the policy's own form: a linear curve as a rate, a
//! two-piece one as `{ m1, d, m2 }`, a `umax` one as `{ umax, dmax, rate }` (so the file says
//! what the script said). `sc` is `rt` and `ls` alike. tc's curves are in bytes per second, so a
//! rate reads back exactly when it was written in bits (what `export tc` writes).

use linkshare_core::hfsc::ServiceCurve;
use linkshare_core::units::{Duration, Rate, Size};

use crate::policy_writer::{rate_text, Field, Val};

/// One curve as read: the policy's form of it, and the curve (for comparisons).
#[derive(Clone, Debug, PartialEq)]
struct Curve {
    field: Val,
    sc: ServiceCurve,
}

fn is_key(w: &str) -> bool {
    matches!(w, "rt" | "ls" | "ul" | "sc")
}

/// The curve in `words` (the words after `rt`/`ls`/`ul`/`sc` up to the next of them).
fn curve(words: &[String]) -> Result<Curve, String> {
    let mut m1 = None;
    let mut d = None;
    let mut m2 = None;
    let mut umax = None;
    let mut dmax = None;
    let mut rate = None;
    let mut i = 0;
    while i < words.len() {
        let k = words[i].as_str();
        let v = words
            .get(i + 1)
            .ok_or_else(|| format!("hfsc: `{k}` needs a value"))?;
        let bits = || {
            Rate::parse(v)
                .map(|r| r.bits_per_sec())
                .map_err(|e| format!("hfsc: `{k} {v}`: {e}"))
        };
        let time = || {
            Duration::parse(v)
                .map(|t| t.as_nanos())
                .map_err(|e| format!("hfsc: `{k} {v}`: {e}"))
        };
        match k {
            "m1" => m1 = Some(bits()?),
            "m2" => m2 = Some(bits()?),
            "rate" => rate = Some(bits()?),
            "d" => d = Some(time()?),
            "dmax" => dmax = Some(time()?),
            "umax" => {
                umax = Some(
                    Size::parse(v)
                        .map(|s| s.bytes())
                        .map_err(|e| format!("hfsc: `{k} {v}`: {e}"))?,
                )
            }
            other => {
                return Err(format!(
                    "hfsc: unknown curve word `{other}` (a curve is `m1 BPS d SEC m2 BPS` or \
                     `umax BYTES dmax SEC rate BPS`)"
                ))
            }
        }
        i += 2;
    }
    let two_piece = m1.is_some() || d.is_some() || m2.is_some();
    let umax_form = umax.is_some() || dmax.is_some();
    if two_piece && (umax_form || rate.is_some()) {
        return Err("hfsc: a curve is either `m1 d m2` or `umax dmax rate`, not both".into());
    }
    if two_piece {
        let m2 = m2.ok_or("hfsc: the curve has no `m2`")?;
        let (m1, d) = (m1.unwrap_or(0), d.unwrap_or(0));
        if d == 0 {
            return Ok(Curve {
                field: Val::Str(rate_text(m2)),
                sc: ServiceCurve::rate(m2),
            });
        }
        let sc = ServiceCurve { m1, d, m2 };
        let field = Field::curve("", &sc).val;
        return Ok(Curve { field, sc });
    }
    let rate = rate.ok_or("hfsc: the curve has no `m2` or `rate`")?;
    match (umax, dmax) {
        (_, None) | (_, Some(0)) => Ok(Curve {
            field: Val::Str(rate_text(rate)),
            sc: ServiceCurve::rate(rate),
        }),
        (u, Some(dm)) => {
            let u = u.unwrap_or(0);
            let sc = ServiceCurve::from_umax(u, dm, rate).ok_or("hfsc: dmax is 0")?;
            let field = Val::Table(vec![
                Field::size("umax", u),
                Field::time("dmax", dm),
                Field::rate("rate", rate),
            ]);
            Ok(Curve { field, sc })
        }
    }
}

/// The `rt`, `ls` and `ul` fields of an hfsc class from its options (`opts` after `hfsc`).
/// `inner`: the class has children (an `rt` there is left out with a note: the kernel, like
/// linkshare, only serves leaves by real time).
pub fn class_fields(opts: &[String], inner: bool) -> Result<(Vec<Field>, Vec<String>), String> {
    let mut rt: Option<Curve> = None;
    let mut ls: Option<Curve> = None;
    let mut ul: Option<Curve> = None;
    let mut notes = Vec::new();
    let mut i = 0;
    while i < opts.len() {
        let k = opts[i].as_str();
        if !is_key(k) {
            // What `tc class show` prints beside the curves.
            match k {
                "leaf" | "level" | "period" | "parent" => {
                    i += 2;
                    continue;
                }
                "root" => {
                    i += 1;
                    continue;
                }
                other => {
                    return Err(format!(
                        "hfsc: unknown class option `{other}` (tc-hfsc(8): rt, ls, ul or sc, each \
                         followed by a curve)"
                    ))
                }
            }
        }
        let end = opts[i + 1..]
            .iter()
            .position(|w| is_key(w) || matches!(w.as_str(), "leaf" | "level" | "period"))
            .map(|p| i + 1 + p)
            .unwrap_or(opts.len());
        let c = curve(&opts[i + 1..end])?;
        let c = (!c.sc.is_zero()).then_some(c);
        match k {
            "rt" => rt = c,
            "ls" => ls = c,
            "ul" => ul = c,
            _ => {
                rt = c.clone();
                ls = c;
            }
        }
        i = end;
    }
    if inner && rt.is_some() {
        notes.push("hfsc: an `rt` curve on a class with children was left out: only leaves are served by real time".into());
        rt = None;
    }
    let mut f = Vec::new();
    for (key, c) in [("rt", rt), ("ls", ls), ("ul", ul)] {
        if let Some(c) = c {
            f.push(Field::new(key, c.field));
        }
    }
    if f.is_empty() {
        return Err("hfsc: the class has no curve (tc-hfsc(8) needs rt, ls or sc)".into());
    }
    Ok((f, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn every_curve_form_reads() {
        let c = curve(&words("m1 400kbit d 30ms m2 100kbit")).unwrap();
        assert_eq!(
            c.sc,
            ServiceCurve {
                m1: 400_000,
                d: 30_000_000,
                m2: 100_000
            }
        );
        assert_eq!(
            curve(&words("m2 1Mbit")).unwrap().sc,
            ServiceCurve::rate(1_000_000)
        );
        assert_eq!(
            curve(&words("m1 0bit d 0us m2 1Mbit")).unwrap().sc,
            ServiceCurve::rate(1_000_000)
        );
        assert_eq!(
            curve(&words("rate 2mbit")).unwrap().sc,
            ServiceCurve::rate(2_000_000)
        );
        let u = curve(&words("umax 1500b dmax 30ms rate 100kbit")).unwrap();
        assert_eq!(
            u.sc,
            ServiceCurve::from_umax(1500, 30_000_000, 100_000).unwrap()
        );
        assert!(curve(&words("m1 1mbit d 1ms")).is_err());
        assert!(curve(&words("m1 1mbit d 1ms m2 1mbit rate 3mbit")).is_err());
        assert!(curve(&words("m2")).is_err());
    }

    #[test]
    fn sc_is_rt_and_ls_and_an_inner_rt_is_left_out_with_a_note() {
        let (f, n) =
            class_fields(&words("sc m1 400kbit d 30ms m2 100kbit ul m2 1mbit"), false).unwrap();
        let keys: Vec<&str> = f.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["rt", "ls", "ul"]);
        assert!(n.is_empty());
        let (f, n) = class_fields(&words("rt m2 1mbit ls m2 2mbit"), true).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].key, "ls");
        assert_eq!(n.len(), 1);
        assert!(class_fields(&words("ul m2 1mbit bogus 1"), false).is_err());
    }
}
