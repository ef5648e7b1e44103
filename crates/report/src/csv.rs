//! `timeseries.csv`: one row per sample interval per class and per flow.
//!
//! Written by hand rather than through a CSV library so that the number formatting is fixed:
//! `time_s` with at most 6 decimals, `rate_bps` and `rtt_ms` with at most 3, trailing zeros
//! trimmed. Rows are ordered by time, then classes before flows, then name, whatever order the
//! engine produced them in, so the file is byte-identical for identical input.
//!
//! The columns are exactly the output contract. RTT over time goes to `rtt.csv`
//! (`time_s,flow,rtt_ms`, one row per probe or RTT sample kept for plotting).

use std::cmp::Ordering;
use std::io;
use std::path::Path;

use super::numfmt::fixed;
use crate::model::{ClassState, Sample, SeriesKind, SimResult};

/// The header line (without the newline).
pub const HEADER: &str = "time_s,kind,name,bytes,rate_bps,backlog_bytes,drops";

/// The text of `timeseries.csv`.
pub fn timeseries_csv(result: &SimResult) -> String {
    let mut rows: Vec<&Sample> = result.samples.iter().collect();
    rows.sort_by(|a, b| compare_samples(a, b));
    let mut out = String::with_capacity(64 * (rows.len() + 1));
    out.push_str(HEADER);
    out.push('\n');
    for s in rows {
        out.push_str(&fixed(s.time_s, 6));
        out.push(',');
        out.push_str(kind_name(s.kind));
        out.push(',');
        push_field(&mut out, &s.name);
        out.push(',');
        out.push_str(&s.bytes.to_string());
        out.push(',');
        out.push_str(&fixed(s.rate_bps, 3));
        out.push(',');
        out.push_str(&s.backlog_bytes.to_string());
        out.push(',');
        out.push_str(&s.drops.to_string());
        out.push('\n');
    }
    out
}

/// Write `timeseries.csv` to `path`.
pub fn write_timeseries_csv(result: &SimResult, path: &Path) -> io::Result<()> {
    std::fs::write(path, timeseries_csv(result))
}

/// The text of `rtt.csv`: every RTT point `(time_s, flow, rtt_ms)` in time order.
pub fn rtt_csv(result: &SimResult) -> String {
    let mut rows: Vec<&(f64, String, f64)> = result.rtt_points.iter().collect();
    rows.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then_with(|| a.1.cmp(&b.1))
            .then_with(|| a.2.total_cmp(&b.2))
    });
    let mut out = String::with_capacity(32 * (rows.len() + 1));
    out.push_str("time_s,flow,rtt_ms\n");
    for (t, flow, rtt) in rows {
        out.push_str(&fixed(*t, 6));
        out.push(',');
        push_field(&mut out, flow);
        out.push(',');
        out.push_str(&fixed(*rtt, 3));
        out.push('\n');
    }
    out
}

/// The header of `scheduler.csv` (without the newline).
pub const SCHEDULER_HEADER: &str = "time_s,class,mode,tokens_bytes,ctokens_bytes,avgidle_us";

/// The text of `scheduler.csv`: each class's link-sharing state at the end of each sample
/// interval, ordered by time then class name; a field the scheduler does not have is empty.
pub fn scheduler_csv(result: &SimResult) -> String {
    let mut rows: Vec<&ClassState> = result.class_states.iter().collect();
    rows.sort_by(|a, b| {
        a.time_s
            .total_cmp(&b.time_s)
            .then_with(|| a.class.cmp(&b.class))
    });
    let mut out = String::with_capacity(48 * (rows.len() + 1));
    out.push_str(SCHEDULER_HEADER);
    out.push('\n');
    let int = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
    for s in rows {
        out.push_str(&fixed(s.time_s, 6));
        out.push(',');
        push_field(&mut out, &s.class);
        out.push(',');
        out.push_str(s.mode);
        out.push(',');
        out.push_str(&int(s.tokens_bytes));
        out.push(',');
        out.push_str(&int(s.ctokens_bytes));
        out.push(',');
        if let Some(a) = s.avgidle_us {
            out.push_str(&fixed(a, 3));
        }
        out.push('\n');
    }
    out
}

/// `class` or `flow`, as in the `kind` column.
pub fn kind_name(kind: SeriesKind) -> &'static str {
    match kind {
        SeriesKind::Class => "class",
        SeriesKind::Flow => "flow",
    }
}

fn kind_rank(kind: SeriesKind) -> u8 {
    match kind {
        SeriesKind::Class => 0,
        SeriesKind::Flow => 1,
    }
}

fn compare_samples(a: &Sample, b: &Sample) -> Ordering {
    a.time_s
        .total_cmp(&b.time_s)
        .then(kind_rank(a.kind).cmp(&kind_rank(b.kind)))
        .then_with(|| a.name.cmp(&b.name))
}

/// Append `field` as a CSV field (RFC 4180): quoted when it holds a comma, a quote, a line break
/// or leading/trailing spaces, with quotes doubled.
fn push_field(out: &mut String, field: &str) {
    let needs_quotes =
        field.contains([',', '"', '\n', '\r']) || field.starts_with(' ') || field.ends_with(' ');
    if needs_quotes {
        out.push('"');
        for c in field.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(s: &str) -> String {
        let mut out = String::new();
        push_field(&mut out, s);
        out
    }

    #[test]
    fn quoting() {
        assert_eq!(field("web"), "web");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field(" pad"), "\" pad\"");
    }
}
