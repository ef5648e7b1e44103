//! Export of an HFSC policy as tc-hfsc(8) commands, and the words of one service curve.
//!
//! Principles: the script sets the kernel's `sch_hfsc` to the same tree: `qdisc replace … root
//! handle 1: hfsc default D`, one `class add … hfsc` per class with its curves written out in
//! the two-piece form (`rt m1 … d … m2 …`, `ls …`, `ul …`; `sc …` when `rt` and `ls` are the
//! same curve, as tc prints it) and the class name as the comment, then the leaf qdiscs and the
//! filters exactly as for HTB (`export.rs`). Where the kernel cannot hold a value exactly the
//! script says so in a `# note:` line: tc's `struct tc_service_curve` keeps slopes in whole
//! bytes per second in 32 bits (≤ 34.36 Gbit/s) and `d` in whole microseconds.

use std::fmt::Write as _;

use anyhow::bail;
use linkshare_config::{ClassInfo, HfscCompat, Policy};
use linkshare_core::hfsc::ServiceCurve;

use super::export::{classid, leaves_and_filters, ExportOptions};

/// The largest slope tc's 32-bit bytes-per-second fields hold, in bit/s.
const TC_MAX_BITS: u64 = u32::MAX as u64 * 8;

/// tc's words for a curve: `m1 …bit d …us m2 …bit`, or `m2 …bit` for a linear one. What the
/// kernel will hold differently is pushed onto `notes`.
pub fn curve_words(sc: &ServiceCurve, notes: &mut Vec<String>) -> String {
    if sc.d == 0 {
        return format!("m2 {}bit", tc_bits(sc.m2, notes));
    }
    let us = sc.d.div_ceil(1000);
    if !sc.d.is_multiple_of(1000) {
        notes.push(format!(
            "tc keeps a curve's d in whole microseconds: {} ns becomes {us}us",
            sc.d
        ));
    }
    let m1 = tc_bits(sc.m1, notes);
    format!("m1 {m1}bit d {us}us m2 {}bit", tc_bits(sc.m2, notes))
}

/// A slope as tc can hold it (the words keep the bits; the kernel truncates to bytes/s).
fn tc_bits(m: u64, notes: &mut Vec<String>) -> u64 {
    if m > TC_MAX_BITS {
        notes.push(format!(
            "tc keeps curve slopes in 32 bits of bytes/s: {m}bit is cut to {TC_MAX_BITS}bit"
        ));
        return TC_MAX_BITS;
    }
    if !m.is_multiple_of(8) {
        notes.push(format!(
            "tc keeps curve slopes in whole bytes/s: {m}bit becomes {}bit",
            m / 8 * 8
        ));
    }
    m
}

/// The `hfsc` options of one class (`sc …` or `rt … ls …`, then `ul …`).
fn class_opts(c: &ClassInfo, notes: &mut Vec<String>) -> String {
    let k = c.hfsc.unwrap_or_default();
    let rt = if c.is_leaf { k.rt } else { None };
    let mut s = String::new();
    match (rt, k.ls) {
        (Some(r), Some(l)) if r == l => {
            let _ = write!(s, " sc {}", curve_words(&r, notes));
        }
        (r, l) => {
            if let Some(r) = r {
                let _ = write!(s, " rt {}", curve_words(&r, notes));
            }
            if let Some(l) = l {
                let _ = write!(s, " ls {}", curve_words(&l, notes));
            }
        }
    }
    if let Some(u) = k.ul {
        let _ = write!(s, " ul {}", curve_words(&u, notes));
    }
    s
}

/// The script of an HFSC policy (after the header lines `tc_script_with` writes).
pub(super) fn hfsc(
    policy: &Policy,
    dev: &str,
    stab: &str,
    opts: &ExportOptions,
    out: &mut String,
) -> anyhow::Result<()> {
    let classes = policy.classes();
    if classes.len() > opts.htb_class_limit {
        bail!(
            "{}: {} classes: one kernel hfsc numbers at most {} (16-bit minor ids); split the tree",
            policy.origin(),
            classes.len(),
            opts.htb_class_limit
        );
    }
    if policy.hfsc_compat() == Some(HfscCompat::OpenBsd) {
        let _ = writeln!(
            out,
            "# note: hfsc_compat = \"openbsd\": the kernel's hfsc follows Linux (no upper-limit \
             catch-up, virtual times carried over between parent periods; docs/hfsc.md)"
        );
    }
    let default = policy.default_class_id() as usize;
    let _ = writeln!(
        out,
        "qdisc replace dev {dev} root handle 1: {stab}hfsc default {:x}",
        default + 1
    );
    for (i, c) in classes.iter().enumerate() {
        let parent = c
            .parent_id
            .map(|p| classid(p as usize))
            .unwrap_or_else(|| "1:".into());
        let mut notes = Vec::new();
        let words = class_opts(c, &mut notes);
        for n in notes {
            let _ = writeln!(out, "# note: class `{}`: {n}", c.name);
        }
        let _ = writeln!(
            out,
            "class add dev {dev} parent {parent} classid {} hfsc{words}  # {}",
            classid(i),
            c.name
        );
    }
    leaves_and_filters(policy, dev, opts, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_are_written_in_the_two_piece_form_with_notes_where_tc_rounds() {
        let mut n = Vec::new();
        let voip = ServiceCurve {
            m1: 400_000,
            d: 30_000_000,
            m2: 100_000,
        };
        assert_eq!(
            curve_words(&voip, &mut n),
            "m1 400000bit d 30000us m2 100000bit"
        );
        assert_eq!(
            curve_words(&ServiceCurve::rate(1_000_000), &mut n),
            "m2 1000000bit"
        );
        assert!(n.is_empty(), "{n:?}");
        let odd = ServiceCurve {
            m1: 0,
            d: 1_500,
            m2: 100_001,
        };
        assert_eq!(curve_words(&odd, &mut n), "m1 0bit d 2us m2 100001bit");
        assert_eq!(n.len(), 2, "{n:?}");
        n.clear();
        assert_eq!(
            curve_words(&ServiceCurve::rate(40_000_000_000), &mut n),
            format!("m2 {TC_MAX_BITS}bit")
        );
        assert_eq!(n.len(), 1);
    }
}
