//! The flow groups of a run as a table: each `[[flow]]` entry's flows summed, per phase of the
//! scenario (the figures `linkshare compare` judges, [`crate::model::FlowGroupSummary`]), and the
//! delay its flows saw — RTT for TCP, one-way delay for UDP — as the range over its flows of
//! each flow's p50 and p99, so one table says what a group got and how long it waited.

use super::numfmt::{fixed, fixed_pad, human_rate};
use super::table::{share, Align, TextTable};
use crate::model::{RttStats, Summary};

/// The table, or `None` when the run has no flow groups.
pub fn group_table(s: &Summary) -> Option<TextTable> {
    let first = s.flow_groups.values().next()?;
    let heads: Vec<String> = first
        .phases
        .iter()
        .map(|p| {
            format!(
                "phase {} ({}–{} s)",
                p.index,
                fixed(p.from_s, 1),
                fixed(p.end_s, 1)
            )
        })
        .collect();
    let delay = |get: fn(&crate::model::FlowSummary) -> &Option<RttStats>| {
        s.flow_groups
            .values()
            .flat_map(|g| &g.flows)
            .filter_map(|f| s.flows.get(f))
            .any(|f| get(f).as_ref().is_some_and(|r| r.samples > 0))
    };
    let (show_rtt, show_owd) = (delay(|f| &f.rtt_ms), delay(|f| &f.owd_ms));
    let mut h: Vec<(&str, Align)> = vec![("group", Align::Left), ("flows", Align::Right)];
    h.extend(heads.iter().map(|n| (n.as_str(), Align::Right)));
    if show_rtt {
        h.extend([
            ("RTT p50 (ms)", Align::Right),
            ("RTT p99 (ms)", Align::Right),
        ]);
    }
    if show_owd {
        h.extend([
            ("one-way p50 (ms)", Align::Right),
            ("one-way p99 (ms)", Align::Right),
        ]);
    }
    let mut t = TextTable::new(&h);
    for (name, g) in &s.flow_groups {
        let mut row = vec![name.clone(), g.flows.len().to_string()];
        for i in 0..heads.len() {
            row.push(match g.phases.get(i).and_then(|p| p.goodput_bps) {
                Some(b) => format!("{} ({})", human_rate(b), share(b, s.link.rate_bps)),
                None => "-".into(),
            });
        }
        let stats = |get: fn(&crate::model::FlowSummary) -> &Option<RttStats>| {
            g.flows
                .iter()
                .filter_map(|f| s.flows.get(f))
                .filter_map(move |f| get(f).as_ref().filter(|r| r.samples > 0))
        };
        if show_rtt {
            row.push(range(stats(|f| &f.rtt_ms).map(|r| r.p50)));
            row.push(range(stats(|f| &f.rtt_ms).map(|r| r.p99)));
        }
        if show_owd {
            row.push(range(stats(|f| &f.owd_ms).map(|r| r.p50)));
            row.push(range(stats(|f| &f.owd_ms).map(|r| r.p99)));
        }
        t.rows.push(row);
    }
    Some(t)
}

/// `12.34` for one value (or equal ones), `12.34–56.78` for a range, `-` for none.
fn range(xs: impl Iterator<Item = f64>) -> String {
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    if !lo.is_finite() {
        "-".into()
    } else if hi - lo < 0.005 {
        fixed_pad(lo, 2)
    } else {
        format!("{}–{}", fixed_pad(lo, 2), fixed_pad(hi, 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_of_delays() {
        assert_eq!(range([].into_iter()), "-");
        assert_eq!(range([3.0, 3.001].into_iter()), "3.00");
        assert_eq!(range([64.2, 124.0, 80.0].into_iter()), "64.20–124.00");
    }
}
