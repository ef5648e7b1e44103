//! The per-class series of `/metrics`, written a piece at a time from a finished snapshot, so
//! that a scrape of every class of 100,000 subscribers is never one string in memory and never
//! a registry of millions of series.
//!
//! Principles: the snapshot is immutable and shared (`Arc`), so a stream is a cursor into it
//! (family, direction, row) and each [`ClassSeriesBody::fill`] writes the next rows of the
//! current family until a piece of about [`PIECE`] bytes is ready — the HTTP server
//! (http/mod.rs) asks for the next piece only when the client has taken the last one, so a
//! client that reads slowly holds one piece, and one that stops reading is dropped after
//! `SLOW_NS` as any other. Families stay contiguous as both exposition formats require
//! (OpenMetrics 1.0 "MetricFamily"; Prometheus text 0.0.4: "all lines for a given metric must
//! be provided as one single group"). The metric names, units, help and label escaping are the
//! ones the `prometheus-client` encoder writes for the other families (metrics.rs), so that a
//! scrape reads as one document; counters carry `_total` on their samples and, in text 0.0.4,
//! on their `# HELP`/`# TYPE` lines too.
//!
//! Labels of every class series: `dev` (the interface the direction sends on), `direction`
//! (`forward`: IN → OUT, `reverse`), `class` (the class's name: for a subscriber table's row,
//! its `name` column) and `parent` (the node above it: site, AP), and for a subscriber with a
//! circuit id (its table's `id` column, circuits.rs) `circuit_id`; drops add `reason`. The
//! label set of a row is written once per stream and reused by its families.

use std::fmt::Write;
use std::sync::Arc;

use super::metrics::{escape, ClassSeries};
use super::Body;
use crate::control::snapshot::{CakeSnapshot, ClassSnapshot, Snapshot, TinSnapshot};

/// About how many bytes a piece holds.
pub const PIECE: usize = 256 << 10;

/// A sample's value.
enum V {
    U(u64),
    I(i64),
    F(f64),
}

/// One family of per-class series: name without the `linkshare_` prefix and unit, unit, help,
/// counter or gauge, and its value for a row (`None`: the drops, one sample per reason).
struct Family {
    name: &'static str,
    unit: Option<&'static str>,
    help: &'static str,
    counter: bool,
    value: Option<fn(&ClassSnapshot) -> V>,
}

const fn fam(
    name: &'static str,
    unit: Option<&'static str>,
    help: &'static str,
    counter: bool,
    value: fn(&ClassSnapshot) -> V,
) -> Family {
    Family {
        name,
        unit,
        help,
        counter,
        value: Some(value),
    }
}

const BYTES: Option<&str> = Some("bytes");
const BPS: Option<&str> = Some("bytes_per_second");

/// The families, in the order a scrape carries them.
const FAMILIES: [Family; 13] = [
    fam("class_sent", BYTES, "Bytes sent by the class", true, |c| {
        V::U(c.sent_bytes)
    }),
    fam(
        "class_sent_packets",
        None,
        "Packets sent by the class",
        true,
        |c| V::U(c.sent_packets),
    ),
    Family {
        name: "class_drops",
        unit: None,
        help: "Packets dropped by the class's queue, by reason",
        counter: true,
        value: None,
    },
    fam(
        "class_overlimits",
        None,
        "Times the class was over its limit when asked to send",
        true,
        |c| V::U(c.overlimits),
    ),
    fam(
        "class_borrowed",
        None,
        "Packets the class sent with tokens borrowed from an ancestor",
        true,
        |c| V::U(c.borrowed),
    ),
    fam(
        "class_lent",
        None,
        "Packets the class sent within its own rate",
        true,
        |c| V::U(c.lended),
    ),
    fam(
        "class_backlog",
        BYTES,
        "Bytes queued in the class",
        false,
        |c| V::I(i(c.backlog_bytes)),
    ),
    fam(
        "class_backlog_packets",
        None,
        "Packets queued in the class",
        false,
        |c| V::I(i(c.backlog_packets)),
    ),
    fam(
        "class_tokens",
        BYTES,
        "Rate tokens of the class (negative in debt)",
        false,
        |c| V::I(c.tokens),
    ),
    fam(
        "class_ctokens",
        BYTES,
        "Ceil tokens of the class (negative in debt)",
        false,
        |c| V::I(c.ctokens),
    ),
    fam(
        "class_rate",
        BPS,
        "Configured (assured) rate of the class",
        false,
        |c| V::F(c.rate_bps as f64 / 8.0),
    ),
    fam(
        "class_ceil",
        BPS,
        "Configured ceiling of the class",
        false,
        |c| V::F(c.ceil_bps as f64 / 8.0),
    ),
    fam(
        "class_live_rate",
        BPS,
        "Measured send rate of the class",
        false,
        |c| V::F(c.live_rate_bps / 8.0),
    ),
];

/// One family of per-tin series of CAKE qdiscs: as [`Family`], valued per tin.
struct TinFamily {
    name: &'static str,
    unit: Option<&'static str>,
    help: &'static str,
    counter: bool,
    value: fn(&TinSnapshot) -> V,
}

const fn tfam(
    name: &'static str,
    unit: Option<&'static str>,
    help: &'static str,
    counter: bool,
    value: fn(&TinSnapshot) -> V,
) -> TinFamily {
    TinFamily {
        name,
        unit,
        help,
        counter,
        value,
    }
}

const SECONDS: Option<&str> = Some("seconds");

/// The per-tin families (tc-cake's table), after the per-class ones. A class's tins are
/// carried when its series are (the same [`ClassSeries`] choice) and its leaf is a CAKE that
/// has had a packet; a CAKE root's tins have `class=""`. Labels: the class's, and `tin`.
const TIN_FAMILIES: [TinFamily; 15] = [
    tfam(
        "cake_tin_sent",
        BYTES,
        "Bytes enqueued in the CAKE tin",
        true,
        |t| V::U(t.bytes),
    ),
    tfam(
        "cake_tin_sent_packets",
        None,
        "Packets enqueued in the CAKE tin",
        true,
        |t| V::U(t.packets),
    ),
    tfam(
        "cake_tin_drops",
        None,
        "Packets the CAKE tin dropped (AQM and overflow)",
        true,
        |t| V::U(t.drops),
    ),
    tfam(
        "cake_tin_marks",
        None,
        "Packets the CAKE tin marked ECN CE",
        true,
        |t| V::U(t.marks),
    ),
    tfam(
        "cake_tin_ack_drops",
        None,
        "ACKs the CAKE tin's ACK filter dropped",
        true,
        |t| V::U(t.ack_drops),
    ),
    tfam(
        "cake_tin_backlog",
        BYTES,
        "Bytes queued in the CAKE tin",
        false,
        |t| V::I(i(t.backlog_bytes)),
    ),
    tfam(
        "cake_tin_threshold",
        BPS,
        "Rate above which the CAKE tin yields to the others",
        false,
        |t| V::F(t.threshold_bps as f64 / 8.0),
    ),
    tfam(
        "cake_tin_peak_delay",
        SECONDS,
        "Peak sojourn time in the CAKE tin (pk_delay)",
        false,
        |t| V::F(t.peak_delay_ns as f64 / 1e9),
    ),
    tfam(
        "cake_tin_avg_delay",
        SECONDS,
        "Average sojourn time in the CAKE tin (av_delay)",
        false,
        |t| V::F(t.avg_delay_ns as f64 / 1e9),
    ),
    tfam(
        "cake_tin_sparse_delay",
        SECONDS,
        "Sparse flows' sojourn time in the CAKE tin (sp_delay)",
        false,
        |t| V::F(t.base_delay_ns as f64 / 1e9),
    ),
    tfam(
        "cake_tin_sparse_flows",
        None,
        "Sparse flows in the CAKE tin",
        false,
        |t| V::I(i(t.sparse_flows)),
    ),
    tfam(
        "cake_tin_bulk_flows",
        None,
        "Bulk flows in the CAKE tin",
        false,
        |t| V::I(i(t.bulk_flows)),
    ),
    tfam(
        "cake_tin_unresponsive_flows",
        None,
        "Unresponsive flows in the CAKE tin",
        false,
        |t| V::I(i(t.unresponsive_flows)),
    ),
    tfam(
        "cake_tin_way_misses",
        None,
        "Flow-table misses in the CAKE tin (way_miss)",
        true,
        |t| V::U(t.way_misses),
    ),
    tfam(
        "cake_tin_way_collisions",
        None,
        "Flow-table collisions in the CAKE tin (way_cols)",
        true,
        |t| V::U(t.way_collisions),
    ),
];

/// Families of either kind, by cursor position: the per-class ones, then the per-tin ones.
const ALL_FAMILIES: usize = FAMILIES.len() + TIN_FAMILIES.len();

/// A family's name, unit, help and type.
fn meta(fam: usize) -> (&'static str, Option<&'static str>, &'static str, bool) {
    match FAMILIES.get(fam) {
        Some(f) => (f.name, f.unit, f.help, f.counter),
        None => {
            let t = &TIN_FAMILIES[fam - FAMILIES.len()];
            (t.name, t.unit, t.help, t.counter)
        }
    }
}

fn push_value(s: &mut String, v: V) {
    match v {
        V::U(x) => push_u64(s, x),
        V::I(x) => {
            if x < 0 {
                s.push('-');
            }
            push_u64(s, x.unsigned_abs());
        }
        V::F(x) => {
            let _ = write!(s, "{x:?}");
        }
    }
}

/// One sample per tin of `c`: `name{labels,tin="…"} value`.
fn push_tins(s: &mut String, name: &str, labels: &str, c: &CakeSnapshot, f: &TinFamily) {
    for t in &c.tins {
        let _ = write!(s, "{name}{{{labels},tin=\"{}\"}} ", escape(&t.name));
        push_value(s, (f.value)(t));
        s.push('\n');
    }
}

/// `v` in decimal, without the formatting machinery (most of a scrape is these numbers).
fn push_u64(s: &mut String, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    s.push_str(std::str::from_utf8(&buf[at..]).unwrap_or("0"));
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The per-class series of a snapshot as a body written piece by piece; `head` (the other
/// families, encoded whole: they do not grow with the classes) goes first, `tail` last.
pub struct ClassSeriesBody {
    snap: Arc<Snapshot>,
    openmetrics: bool,
    head: Option<String>,
    tail: &'static str,
    /// Per direction: the rows carried (indices into its classes) and their label sets.
    rows: Vec<Vec<u32>>,
    labels: Vec<Vec<String>>,
    /// The cursor: family, direction, position in `rows` (per-tin families: 0 is the root's
    /// tins, `k + 1` row `k`); `fam == end`: done.
    fam: usize,
    dir: usize,
    pos: usize,
    described: bool,
    /// Where the cursor stops: after the per-tin families when a CAKE is in the snapshot,
    /// else after the per-class ones.
    end: usize,
    /// The current family's sample name (with `_total` on a counter).
    sample: String,
}

impl ClassSeriesBody {
    pub fn new(
        snap: Arc<Snapshot>,
        which: ClassSeries,
        openmetrics: bool,
        head: String,
        tail: &'static str,
    ) -> ClassSeriesBody {
        let rows = snap
            .directions
            .iter()
            .map(|d| which.pick_indices(&d.classes))
            .collect();
        let cake = snap.directions.iter().any(|d| {
            d.qdisc.as_ref().is_some_and(|q| q.cake.is_some())
                || d.classes.iter().any(|c| c.cake.is_some())
        });
        ClassSeriesBody {
            end: if cake { ALL_FAMILIES } else { FAMILIES.len() },
            snap,
            openmetrics,
            head: Some(head),
            tail,
            rows,
            labels: Vec::new(),
            fam: 0,
            dir: 0,
            pos: 0,
            described: false,
            sample: String::new(),
        }
    }

    /// Every piece, in one string (tests, small snapshots).
    pub fn collect(mut self) -> String {
        let mut out = Vec::new();
        while self.fill(&mut out) {}
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The label sets of every row carried, made once.
    fn make_labels(&mut self) {
        self.labels = self
            .snap
            .directions
            .iter()
            .zip(&self.rows)
            .enumerate()
            .map(|(di, (d, rows))| {
                let direction = if di == 0 { "forward" } else { "reverse" };
                let dev = escape(&d.to);
                rows.iter()
                    .filter_map(|&k| d.classes.get(k as usize))
                    .map(|c| {
                        let mut l = format!(
                            "dev=\"{dev}\",direction=\"{direction}\",class=\"{}\",parent=\"{}\"",
                            escape(&c.name),
                            escape(c.parent.as_deref().unwrap_or(""))
                        );
                        if let Some(id) = &c.circuit_id {
                            let _ = write!(l, ",circuit_id=\"{}\"", escape(id));
                        }
                        l
                    })
                    .collect()
            })
            .collect();
    }

    /// The samples of the current per-tin family at the cursor (position 0: the direction's
    /// CAKE root; `k + 1`: row `k`), and the cursor moved on.
    fn tin_samples(&mut self, s: &mut String) {
        let f = &TIN_FAMILIES[self.fam - FAMILIES.len()];
        let d = &self.snap.directions[self.dir];
        let rows = &self.rows[self.dir];
        if self.pos == 0 {
            if let Some(c) = d.qdisc.as_ref().and_then(|q| q.cake.as_ref()) {
                let direction = if self.dir == 0 { "forward" } else { "reverse" };
                let l = format!(
                    "dev=\"{}\",direction=\"{direction}\",class=\"\",parent=\"\"",
                    escape(&d.to)
                );
                push_tins(s, &self.sample, &l, c, f);
            }
            self.pos = 1;
            return;
        }
        let Some(&k) = rows.get(self.pos - 1) else {
            self.dir += 1;
            self.pos = 0;
            return;
        };
        if let (Some(Some(c)), Some(l)) = (
            d.classes.get(k as usize).map(|c| c.cake.as_ref()),
            self.labels[self.dir].get(self.pos - 1),
        ) {
            push_tins(s, &self.sample, l, c, f);
        }
        self.pos += 1;
    }

    /// `# HELP`, `# TYPE` (and in OpenMetrics `# UNIT`) of family `fam`.
    fn describe(&self, fam: usize, out: &mut String) {
        let (fname, unit, help, counter) = meta(fam);
        let mut name = format!("linkshare_{fname}");
        if let Some(u) = unit {
            name.push('_');
            name.push_str(u);
        }
        let kind = if counter { "counter" } else { "gauge" };
        let meta = if counter && !self.openmetrics {
            format!("{name}_total")
        } else {
            name.clone()
        };
        let _ = writeln!(out, "# HELP {meta} {help}.");
        let _ = writeln!(out, "# TYPE {meta} {kind}");
        if let (Some(u), true) = (unit, self.openmetrics) {
            let _ = writeln!(out, "# UNIT {name} {u}");
        }
    }
}

impl Body for ClassSeriesBody {
    fn fill(&mut self, out: &mut Vec<u8>) -> bool {
        let mut s = String::with_capacity(PIECE + 4096);
        if let Some(h) = self.head.take() {
            s.push_str(&h);
            self.make_labels();
        }
        while s.len() < PIECE && self.fam < self.end {
            let (fname, unit, _, counter) = meta(self.fam);
            if !self.described {
                self.describe(self.fam, &mut s);
                self.described = true;
                self.sample = format!("linkshare_{fname}");
                if let Some(u) = unit {
                    self.sample.push('_');
                    self.sample.push_str(u);
                }
                if counter {
                    self.sample.push_str("_total");
                }
            }
            let Some(rows) = self.rows.get(self.dir) else {
                self.fam += 1;
                self.dir = 0;
                self.pos = 0;
                self.described = false;
                continue;
            };
            let Some(f) = FAMILIES.get(self.fam) else {
                // A per-tin family: the root's tins first (position 0), then the rows'.
                self.tin_samples(&mut s);
                continue;
            };
            let Some(&k) = rows.get(self.pos) else {
                self.dir += 1;
                self.pos = 0;
                continue;
            };
            let classes = &self.snap.directions[self.dir].classes;
            let (Some(c), Some(l)) = (classes.get(k as usize), self.labels[self.dir].get(self.pos))
            else {
                self.pos += 1;
                continue;
            };
            let name = &self.sample;
            match f.value {
                Some(v) => {
                    s.push_str(name);
                    s.push('{');
                    s.push_str(l);
                    s.push_str("} ");
                    push_value(&mut s, v(c));
                    s.push('\n');
                }
                None => {
                    for (reason, n) in &c.drops_by_reason {
                        let _ = writeln!(s, "{name}{{{l},reason=\"{}\"}} {n}", escape(reason));
                    }
                }
            }
            self.pos += 1;
        }
        let done = self.fam >= self.end;
        if done {
            s.push_str(self.tail);
            self.tail = "";
        }
        out.extend_from_slice(s.as_bytes());
        !done
    }
}
