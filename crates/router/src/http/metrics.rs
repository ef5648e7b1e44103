//! `/metrics`: the shaper's [`Snapshot`] rendered as OpenMetrics text (OpenMetrics 1.0; the
//! `prometheus-client` crate's encoder), or as Prometheus text format 0.0.4 for scrapers that do
//! not ask for OpenMetrics. Rendering only: the state is computed once, by the stats plane
//! (control/plane.rs), for `stat`, the metrics and the dashboard alike.
//!
//! Cardinality: a scrape carries every class's series up to [`DEFAULT_MAX_CLASS_SERIES`]
//! classes, and beyond that only the inner classes' (each its subtree's aggregate) and the
//! per-parent sums (`linkshare_parent_*{parent}`); `?classes=all` (any number of classes),
//! `?classes=parents` and `?top=N&by=rate|drops|backlog` (the inner classes and the first N
//! leaves) choose otherwise. The per-class series are written piece by piece from the shared
//! snapshot as the scraper reads them (classes.rs), the rest through the registry here.
//!
//! Naming follows Prometheus' conventions (base units, `_total` on counters, the unit in the
//! name): `linkshare_class_sent_bytes_total{dev,direction,class,parent}` and so on; `dev` is the interface
//! a direction sends on (as in `tc -s class show dev DEV`). Rates are in bytes per second (the
//! base unit; the policy's bit/s divided by 8). Label values are escaped as the
//! exposition formats require (`\\`, `\"`, `\n`), since class names come from the policy.

use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::encoding::{
    EncodeLabelValue, EncodeMetric, LabelValueEncoder, MetricEncoder,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};

use std::sync::Arc;

use super::classes::ClassSeriesBody;
use super::{Request, Route};
use crate::control::select::{top, TopBy};
use crate::control::snapshot::{ClassSnapshot, Snapshot};

/// Above this many classes in a direction, a scrape carries per-class series only for inner
/// classes (the per-parent aggregates) unless it asks for them (`?classes=all` or `?top=N`).
pub const DEFAULT_MAX_CLASS_SERIES: usize = 10_000;

/// Which classes' series a scrape carries (Prometheus exporters' cardinality controls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassSeries {
    /// Every class.
    All,
    /// Inner classes, and the first N leaves by `TopBy`.
    Top(usize, TopBy),
    /// Inner classes only: each is its subtree's aggregate (sent bytes and packets, backlog),
    /// and `linkshare_parent_*` sums its children's drops.
    Parents,
}

impl ClassSeries {
    /// From a scrape's query (`classes=all|parents`, `top=N`, `by=rate|drops|backlog`); the
    /// default is every class up to [`DEFAULT_MAX_CLASS_SERIES`] per direction, else parents.
    pub fn from_request(req: &Request, s: &Snapshot) -> Result<ClassSeries, String> {
        let by = match req.param("by") {
            None => TopBy::Rate,
            Some(b) => {
                TopBy::parse(&b).ok_or_else(|| format!("by={b}: use rate, drops or backlog"))?
            }
        };
        if let Some(n) = req.param("top") {
            let n = n
                .parse()
                .map_err(|_| format!("top={n}: a number of classes"))?;
            return Ok(ClassSeries::Top(n, by));
        }
        match req.param("classes").as_deref() {
            Some("all") => Ok(ClassSeries::All),
            Some("parents") | Some("none") => Ok(ClassSeries::Parents),
            Some(o) => Err(format!("classes={o}: use all or parents")),
            None => Ok(ClassSeries::default_for(s)),
        }
    }

    /// The default for a snapshot of this size.
    pub fn default_for(s: &Snapshot) -> ClassSeries {
        let most = s.directions.iter().map(|d| d.classes.len()).max();
        if most.unwrap_or(0) > DEFAULT_MAX_CLASS_SERIES {
            ClassSeries::Parents
        } else {
            ClassSeries::All
        }
    }

    /// The positions in `classes` of the rows it keeps, in their order.
    pub fn pick_indices(&self, classes: &[ClassSnapshot]) -> Vec<u32> {
        let all = classes.iter().enumerate();
        match *self {
            ClassSeries::All => (0..classes.len() as u32).collect(),
            ClassSeries::Parents => all
                .filter(|(_, c)| !c.leaf)
                .map(|(i, _)| i as u32)
                .collect(),
            ClassSeries::Top(n, by) => {
                let leaves: Vec<&ClassSnapshot> = classes.iter().filter(|c| c.leaf).collect();
                let chosen: std::collections::HashSet<*const ClassSnapshot> = top(leaves, n, by)
                    .into_iter()
                    .map(|c| c as *const _)
                    .collect();
                all.filter(|(_, c)| !c.leaf || chosen.contains(&(*c as *const _)))
                    .map(|(i, _)| i as u32)
                    .collect()
            }
        }
    }
}

/// Content types of the two formats.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT_004: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value, escaped when encoded.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Lv(pub String);

impl EncodeLabelValue for Lv {
    fn encode(&self, e: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        e.write_str(&escape(&self.0))
    }
}

/// A label value escaped for the text formats: backslash, double quote and line feed.
pub fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for ch in v.chars() {
        match ch {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

type Labels = Vec<(&'static str, Lv)>;
type C = Family<Labels, Counter>;
type G = Family<Labels, Gauge<i64, AtomicI64>>;
type F = Family<Labels, Gauge<f64, AtomicU64>>;

/// A histogram whose buckets are already counted (the shaper's lateness histogram).
#[derive(Debug, Default)]
struct FixedHistogram {
    sum: f64,
    count: u64,
    /// (upper bound, samples in this bucket alone); the last bound is `f64::MAX` (+Inf).
    buckets: Vec<(f64, u64)>,
}

impl TypedMetric for FixedHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for FixedHistogram {
    fn encode(&self, mut e: MetricEncoder) -> Result<(), std::fmt::Error> {
        e.encode_histogram::<()>(self.sum, self.count, &self.buckets, None)
    }
    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

fn lv(s: &str) -> Lv {
    Lv(s.to_string())
}

/// Register a counter family `name` (unit `unit`, if any) and return it for filling.
fn counter(r: &mut Registry, name: &str, help: &str, unit: Option<Unit>) -> C {
    let f = C::default();
    match unit {
        Some(u) => r.register_with_unit(name, help, u, f.clone()),
        None => r.register(name, help, f.clone()),
    }
    f
}

fn gauge(r: &mut Registry, name: &str, help: &str, unit: Option<Unit>) -> G {
    let f = G::default();
    match unit {
        Some(u) => r.register_with_unit(name, help, u, f.clone()),
        None => r.register(name, help, f.clone()),
    }
    f
}

fn fgauge(r: &mut Registry, name: &str, help: &str, unit: Unit) -> F {
    let f = F::default();
    r.register_with_unit(name, help, unit, f.clone());
    f
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Build the registry of `s`'s metrics but the per-class series (classes.rs streams those).
pub fn registry(s: &Snapshot) -> Registry {
    let mut r = Registry::with_prefix("linkshare");
    let q_drop = counter(
        &mut r,
        "qdisc_drops",
        "Packets the scheduler dropped, by reason and stage",
        None,
    );
    let q_back = gauge(
        &mut r,
        "qdisc_backlog",
        "Bytes queued in the scheduler",
        Some(Unit::Bytes),
    );
    let q_over = counter(
        &mut r,
        "qdisc_overlimits",
        "Scheduler overlimit events",
        None,
    );
    let rx_p = counter(
        &mut r,
        "port_rx_packets",
        "Frames received on the interface",
        None,
    );
    let rx_b = counter(
        &mut r,
        "port_rx",
        "Bytes received on the interface",
        Some(Unit::Bytes),
    );
    let tx_p = counter(
        &mut r,
        "port_tx_packets",
        "Frames sent on the interface",
        None,
    );
    let tx_b = counter(
        &mut r,
        "port_tx",
        "Bytes sent on the interface",
        Some(Unit::Bytes),
    );
    let ring = counter(
        &mut r,
        "port_rx_ring_drops",
        "Frames the kernel dropped because the receive ring was full",
        None,
    );
    let tx_d = counter(&mut r, "port_tx_drops", "Frames not sent, by reason", None);
    let dscp = counter(
        &mut r,
        "port_rx_dscp",
        "Packets received whose DSCP was not trusted (classified as 0) or was washed, by action",
        None,
    );
    let reloads = counter(&mut r, "reloads", "Policy reloads, by result", None);
    let up = fgauge(
        &mut r,
        "uptime",
        "Time since the shaper started",
        Unit::Seconds,
    );
    up.get_or_create(&Vec::new()).set(s.uptime_s);
    // The forwarding pauses the loop causes itself (router/src/turns.rs).
    let turn_max = fgauge(
        &mut r,
        "loop_turn_max",
        "The longest the datapath loop worked in one turn between two waits, since start",
        Unit::Seconds,
    );
    turn_max
        .get_or_create(&Vec::new())
        .set(s.loop_turn_ns.max as f64 / 1e9);
    let long = counter(
        &mut r,
        "loop_long_turns",
        "Datapath loop turns longer than 1 ms",
        None,
    );
    long.get_or_create(&Vec::new()).inc_by(s.long_turns);

    let p_drops = counter(
        &mut r,
        "parent_drops",
        "Packets dropped by the queues of the parent's children",
        None,
    );
    let p_children = gauge(
        &mut r,
        "parent_children",
        "Classes directly under the parent",
        None,
    );
    for (di, d) in s.directions.iter().enumerate() {
        let dev = lv(&d.to);
        let direction = lv(if di == 0 { "forward" } else { "reverse" });
        let mut parents: std::collections::HashMap<&str, (u64, i64)> = Default::default();
        for c in &d.classes {
            if let Some(p) = &c.parent {
                let e = parents.entry(p.as_str()).or_default();
                e.0 += c.drops;
                e.1 += 1;
            }
        }
        for (p, (dr, n)) in parents {
            let l: Labels = vec![
                ("dev", dev.clone()),
                ("direction", direction.clone()),
                ("parent", lv(p)),
            ];
            p_drops.get_or_create(&l).inc_by(dr);
            p_children.get_or_create(&l).set(n);
        }
        if let Some(q) = &d.qdisc {
            let l: Labels = vec![("dev", dev.clone())];
            q_back.get_or_create(&l).set(i(q.backlog_bytes));
            q_over.get_or_create(&l).inc_by(q.overlimits);
            for (stage, m) in [
                ("dequeue", &q.dropped_by_reason),
                ("enqueue", &q.refused_by_reason),
            ] {
                for (reason, n) in m {
                    let mut lr = l.clone();
                    lr.push(("stage", lv(stage)));
                    lr.push(("reason", lv(reason)));
                    q_drop.get_or_create(&lr).inc_by(*n);
                }
            }
        }
    }
    for p in &s.interfaces {
        let l: Labels = vec![("dev", lv(&p.name))];
        rx_p.get_or_create(&l).inc_by(p.rx_packets);
        rx_b.get_or_create(&l).inc_by(p.rx_bytes);
        tx_p.get_or_create(&l).inc_by(p.tx_packets);
        tx_b.get_or_create(&l).inc_by(p.tx_bytes);
        ring.get_or_create(&l).inc_by(p.rx_ring_drops);
        for (action, n) in [("untrusted", p.dscp_untrusted), ("washed", p.dscp_washed)] {
            let mut la = l.clone();
            la.push(("action", lv(action)));
            dscp.get_or_create(&la).inc_by(n);
        }
        for (reason, n) in [
            ("ring_full", p.tx_drops.ring_full),
            ("too_big", p.tx_drops.too_big),
        ] {
            let mut lr = l.clone();
            lr.push(("reason", lv(reason)));
            tx_d.get_or_create(&lr).inc_by(n);
        }
    }
    for (res, n) in [("ok", s.reloads.ok), ("failed", s.reloads.failed)] {
        reloads.get_or_create(&vec![("result", lv(res))]).inc_by(n);
    }
    r.register_with_unit(
        "pacing_lateness",
        "How late departures left after their eligible instant",
        Unit::Seconds,
        lateness(s),
    );
    r
}

/// The lateness histogram from the snapshot's cumulative buckets, in seconds.
fn lateness(s: &Snapshot) -> FixedHistogram {
    let h = &s.lateness_hist;
    let mut buckets = Vec::with_capacity(h.le_ns.len() + 1);
    let mut below = 0;
    for (le, cum) in h.le_ns.iter().zip(&h.buckets) {
        buckets.push((*le as f64 / 1e9, cum.saturating_sub(below)));
        below = below.max(*cum);
    }
    buckets.push((f64::MAX, h.count.saturating_sub(below)));
    FixedHistogram {
        sum: h.sum_ns as f64 / 1e9,
        count: h.count,
        buckets,
    }
}

/// OpenMetrics text of `s` (ends with `# EOF`), with the default class series.
pub fn openmetrics(s: &Snapshot) -> String {
    openmetrics_of(s, ClassSeries::default_for(s))
}

/// OpenMetrics text of `s` with the series of `which` classes, whole (tests; the endpoint
/// streams it, [`body`]).
pub fn openmetrics_of(s: &Snapshot, which: ClassSeries) -> String {
    body(Arc::new(s.clone()), which, true).collect()
}

/// The same metrics in Prometheus text format 0.0.4, with the default class series.
pub fn text_004(s: &Snapshot) -> String {
    text_004_of(s, ClassSeries::default_for(s))
}

/// Prometheus text format 0.0.4 of `s`, whole (see [`openmetrics_of`]).
pub fn text_004_of(s: &Snapshot, which: ClassSeries) -> String {
    body(Arc::new(s.clone()), which, false).collect()
}

/// The scrape of `s` in either format, as a body written piece by piece: the families that
/// do not grow with the classes encoded at once, then the per-class series (classes.rs).
pub fn body(s: Arc<Snapshot>, which: ClassSeries, openmetrics: bool) -> ClassSeriesBody {
    let mut om = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut om, &registry(&s));
    let om = om.strip_suffix("# EOF\n").unwrap_or(&om).to_string();
    let (head, tail) = if openmetrics {
        (om, "# EOF\n")
    } else {
        (to_004(&om), "")
    };
    ClassSeriesBody::new(s, which, openmetrics, head, tail)
}

/// OpenMetrics text as Prometheus text format 0.0.4: no `# UNIT` or `# EOF` lines, and a
/// counter's `# HELP`/`# TYPE` name its samples' `_total` name.
fn to_004(om: &str) -> String {
    let mut counters = std::collections::HashSet::new();
    for l in om.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            if let Some(name) = rest.strip_suffix(" counter") {
                counters.insert(name.to_string());
            }
        }
    }
    let mut out = String::with_capacity(om.len());
    for l in om.lines() {
        if l.starts_with("# UNIT ") || l == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "].iter().find(|p| l.starts_with(**p));
        match meta {
            Some(p) => {
                let rest = &l[p.len()..];
                let name = rest.split(' ').next().unwrap_or("");
                if counters.contains(name) {
                    out.push_str(&format!("{p}{name}_total{}", &rest[name.len()..]));
                } else {
                    out.push_str(l);
                }
            }
            None => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

/// Answer `/metrics` (OpenMetrics when the scraper accepts it, else text 0.0.4; the class
/// series the query asks for, [`ClassSeries`], every class of any number with
/// `?classes=all`), streamed (classes.rs); 404 for other paths.
pub fn route(req: &Request, snap: &mut dyn FnMut() -> Arc<Snapshot>) -> Route {
    if req.path != "/metrics" {
        return Route::text(404, "not found: the metrics are at /metrics\n");
    }
    let s = snap();
    let which = match ClassSeries::from_request(req, &s) {
        Ok(w) => w,
        Err(e) => return Route::text(400, &format!("{e}\n")),
    };
    let om = req.accept.contains("application/openmetrics-text");
    let ctype = if om { OPENMETRICS } else { TEXT_004 };
    Route::streamed(ctype, Box::new(body(s, which, om)))
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
