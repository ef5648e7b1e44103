//! Merging adjacent tc rules back into linkshare filters: what `export tc` had to expand (port
//! ranges into aligned blocks, DSCP lists into one rule per code point, port rules without a
//! protocol into TCP and UDP copies, family-less filters into an IPv4 and an IPv6 filter) is
//! joined again. Only runs of adjacent rules with the same flowid are merged, so first-match
//! order never changes; port blocks are joined only when they tile one range exactly.

use super::filter::{Match, Rule};

/// Merge adjacent rules that differ in one field only, innermost first: destination port
/// blocks, source port blocks, TCP+UDP with ports, DSCP code points, then an IPv4 and an IPv6
/// copy of a filter without addresses.
pub fn merge(rules: Vec<Rule>) -> Vec<Rule> {
    let rules = merge_by(rules, |m| &mut m.dport, join_ranges, true);
    let rules = merge_by(rules, |m| &mut m.sport, join_ranges, true);
    let rules = merge_by(rules, |m| &mut m.proto, join_tcp_udp, true);
    let rules = merge_by(rules, |m| &mut m.dscp, join_dscp, true);
    merge_by(rules, |m| &mut m.v6, join_families, false)
}

/// Merge runs of adjacent rules (same prio, unless `across_prio` is false, same flowid) that
/// are equal with field `f` cleared, when `join` can combine their values of `f`.
fn merge_by<T: Clone + Default>(
    rules: Vec<Rule>,
    f: fn(&mut Match) -> &mut T,
    join: fn(&[T]) -> Option<T>,
    same_prio: bool,
) -> Vec<Rule> {
    let key = |r: &Rule| {
        let mut m = r.m.clone();
        *f(&mut m) = T::default();
        (m, r.flowid, if same_prio { r.prio } else { 0 })
    };
    let mut out: Vec<Rule> = Vec::with_capacity(rules.len());
    let mut i = 0;
    while i < rules.len() {
        let k = key(&rules[i]);
        let mut j = i + 1;
        while j < rules.len() && key(&rules[j]) == k {
            j += 1;
        }
        // Try the longest run first, then shorter ones from the same start.
        let mut end = j;
        loop {
            if end - i >= 2 {
                let vals: Vec<T> = rules[i..end]
                    .iter()
                    .map(|r| f(&mut r.m.clone()).clone())
                    .collect();
                if let Some(v) = join(&vals) {
                    let mut r = rules[i].clone();
                    *f(&mut r.m) = v;
                    for x in &rules[i + 1..end] {
                        for n in &x.notes {
                            if !r.notes.contains(n) {
                                r.notes.push(n.clone());
                            }
                        }
                    }
                    out.push(r);
                    i = end;
                    break;
                }
                end -= 1;
            } else {
                out.push(rules[i].clone());
                i += 1;
                break;
            }
        }
    }
    out
}

fn join_ranges(v: &[Option<(u16, u16)>]) -> Option<Option<(u16, u16)>> {
    let mut rs: Vec<(u16, u16)> = v
        .iter()
        .map(|r| r.ok_or(()))
        .collect::<Result<_, _>>()
        .ok()?;
    rs.sort();
    let mut hi = rs[0].1;
    for r in &rs[1..] {
        if u32::from(r.0) != u32::from(hi) + 1 {
            return None;
        }
        hi = r.1;
    }
    Some(Some((rs[0].0, hi)))
}

fn join_tcp_udp(v: &[Option<u8>]) -> Option<Option<u8>> {
    (v == [Some(6), Some(17)]).then_some(None)
}

fn join_dscp(v: &[Vec<u8>]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for d in v {
        if d.len() != 1 {
            return None;
        }
        out.push(d[0]);
    }
    Some(out)
}

fn join_families(v: &[Option<bool>]) -> Option<Option<bool>> {
    (v == [Some(false), Some(true)]).then_some(None)
}
