//! A TCP `[[flow]]` with `arrivals`: its keys checked and the entry expanded into one finite TCP
//! flow per arrival, named `name.1`, `name.2`, … in arrival order, each with its own size.
//!
//! Rule: everything random is drawn here, once, from the scenario's seed and the entry's name
//! (a PCG stream per entry, so adding an entry does not change another's flows); the simulator
//! and the lab then run the same list. The draws themselves are [`crate::workload`]'s.

use std::ops::Range;
use std::path::Path;

use linkshare_core::Duration;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::error::{Doc, ScenarioError};
use super::raw::{RawFlow, Val, SV};
use super::spec::{Arrival, FlowKind, FlowSpec, LinkSpec, MAX_ARRIVALS};
use super::value::{opt_int, opt_size, size_val};
use crate::workload::{ideal_fct_ns, poisson_arrivals, Cdf, IdealPath, SizeDist};

/// The web-search workload of DCTCP (Alizadeh et al., SIGCOMM 2010, Fig. 4), bytes.
pub const WEBSEARCH_CDF: &str = include_str!("../../../../scenarios/workloads/websearch.cdf");
/// The data-mining workload (VL2, Greenberg et al., SIGCOMM 2009) as pFabric used it, bytes.
pub const DATAMINING_CDF: &str = include_str!("../../../../scenarios/workloads/datamining.cdf");

/// Largest flow size drawn unless `size_max` says otherwise (a Pareto tail stays finite).
pub const DEFAULT_SIZE_MAX: u64 = 1_000_000_000;

/// The keys of arriving flows, for messages.
pub(super) const KEYS: &str =
    "arrivals, arrival_rate, load, trace, size_dist, size_sigma, size_alpha, size_cdf, size_max, request, dst_hosts";

/// Most destination hosts an entry's arrivals spread over (`dst_hosts`).
pub const MAX_DST_HOSTS: i64 = 1 << 20;

/// The first arrival key set in `rf`, if any: for kinds and flows that do not take them.
pub(super) fn first_key(rf: &RawFlow) -> Option<(Range<usize>, &'static str)> {
    let s = |v: &Option<SV>| v.as_ref().map(|v| v.span());
    let t = |v: &Option<toml::Spanned<String>>| v.as_ref().map(|v| v.span());
    [
        (t(&rf.arrivals), "arrivals"),
        (s(&rf.arrival_rate), "arrival_rate"),
        (s(&rf.load), "load"),
        (t(&rf.trace), "trace"),
        (t(&rf.size_dist), "size_dist"),
        (s(&rf.size_sigma), "size_sigma"),
        (s(&rf.size_alpha), "size_alpha"),
        (t(&rf.size_cdf), "size_cdf"),
        (s(&rf.size_max), "size_max"),
        (s(&rf.request), "request"),
        (s(&rf.dst_hosts), "dst_hosts"),
    ]
    .into_iter()
    .find_map(|(sp, k)| sp.map(|sp| (sp, k)))
}

/// What the expansion needs of the scenario around the entry.
pub(super) struct Ctx<'a> {
    pub duration: Duration,
    pub link: &'a LinkSpec,
    pub seed: u64,
    /// Directory `trace` and `size_cdf` paths are relative to.
    pub dir: &'a Path,
}

fn float_val(doc: &Doc<'_>, v: &SV, what: &str) -> Result<f64, ScenarioError> {
    let x = match v.get_ref() {
        Val::Int(n) => *n as f64,
        Val::Float(f) => *f,
        _ => return Err(doc.err(v.span(), format!("`{what}` is a number"), None)),
    };
    if !x.is_finite() || x <= 0.0 {
        return Err(doc.err(v.span(), format!("`{what}` must be above 0"), None));
    }
    Ok(x)
}

fn read_file(
    doc: &Doc<'_>,
    ctx: &Ctx<'_>,
    v: &toml::Spanned<String>,
) -> Result<(String, String), ScenarioError> {
    let full = ctx.dir.join(v.get_ref());
    let shown = full.display().to_string();
    std::fs::read_to_string(&full)
        .map(|t| (t, shown.clone()))
        .map_err(|e| {
            doc.err(
                v.span(),
                format!("cannot read `{shown}`: {e}"),
                Some("the path is relative to the scenario file's directory".into()),
            )
        })
}

/// A CDF's text parsed, or an error at `span` naming the file's line.
fn cdf(doc: &Doc<'_>, span: Range<usize>, text: &str, file: &str) -> Result<Cdf, ScenarioError> {
    Cdf::parse(text, 1.0).map_err(|(line, m)| {
        doc.err(
            span,
            format!("{file}:{line}: {m}"),
            Some(
                "a CDF file has `size_bytes probability` lines, probability 0..1 (or 0..100)"
                    .into(),
            ),
        )
    })
}

fn size_dist(
    doc: &Doc<'_>,
    rf: &RawFlow,
    ctx: &Ctx<'_>,
    span: &Range<usize>,
) -> Result<SizeDist, ScenarioError> {
    let dist = rf.size_dist.as_ref();
    let name = dist.map(|d| d.get_ref().as_str()).unwrap_or("fixed");
    let dspan = dist.map(|d| d.span()).unwrap_or(span.clone());
    let parametric = matches!(name, "fixed" | "exponential" | "lognormal" | "pareto");
    let mean = match (&rf.bytes, parametric) {
        (Some(b), true) => {
            let v = size_val(doc, b)?;
            if v == 0 {
                return Err(doc.err(b.span(), "`bytes` must be above 0", None));
            }
            v
        }
        (None, true) => {
            return Err(doc.err(
                dspan,
                format!("size_dist \"{name}\" needs `bytes` (the size, or the mean)"),
                Some("e.g. bytes = \"100k\"".into()),
            ))
        }
        (Some(b), false) => {
            return Err(doc.err(
                b.span(),
                format!("`bytes` does not apply to size_dist \"{name}\" (the CDF gives the sizes)"),
                None,
            ))
        }
        (None, false) => 0,
    };
    let deny = |v: &Option<SV>, key: &str, for_: &str| -> Result<(), ScenarioError> {
        match v {
            Some(v) if for_ != name => Err(doc.err(
                v.span(),
                format!("`{key}` applies to size_dist \"{for_}\" only"),
                None,
            )),
            _ => Ok(()),
        }
    };
    deny(&rf.size_sigma, "size_sigma", "lognormal")?;
    deny(&rf.size_alpha, "size_alpha", "pareto")?;
    if let (Some(c), false) = (&rf.size_cdf, name == "cdf") {
        return Err(doc.err(
            c.span(),
            "`size_cdf` applies to size_dist \"cdf\" only",
            None,
        ));
    }
    let m = mean as f64;
    Ok(match name {
        "fixed" => SizeDist::Fixed(mean),
        "exponential" => SizeDist::Exponential { mean: m },
        "lognormal" => {
            let sigma = match &rf.size_sigma {
                Some(v) => float_val(doc, v, "size_sigma")?,
                None => 1.0,
            };
            SizeDist::lognormal(m, sigma)
        }
        "pareto" => {
            let alpha = match &rf.size_alpha {
                Some(v) => float_val(doc, v, "size_alpha")?,
                None => 1.5,
            };
            if alpha <= 1.0 {
                let sp = rf.size_alpha.as_ref().map(|v| v.span()).unwrap_or(dspan);
                return Err(doc.err(sp, "`size_alpha` must be above 1 (the mean is finite)", None));
            }
            SizeDist::pareto(m, alpha)
        }
        "websearch" => SizeDist::Empirical(cdf(doc, dspan, WEBSEARCH_CDF, "websearch")?),
        "datamining" => SizeDist::Empirical(cdf(doc, dspan, DATAMINING_CDF, "datamining")?),
        "cdf" => {
            let Some(c) = &rf.size_cdf else {
                return Err(doc.err(dspan, "size_dist \"cdf\" needs `size_cdf` (a file)", Some("e.g. size_cdf = \"workloads/websearch.cdf\"".into())));
            };
            let (text, shown) = read_file(doc, ctx, c)?;
            SizeDist::Empirical(cdf(doc, c.span(), &text, &shown)?)
        }
        other => {
            return Err(doc.err(
                dspan,
                format!("unknown size_dist `{other}`"),
                Some("size_dist = \"fixed\", \"exponential\", \"lognormal\", \"pareto\", \"websearch\", \"datamining\" or \"cdf\"".into()),
            ))
        }
    })
}

/// Expand `base` (the entry as one TCP flow, its `bytes` unset) into its arrivals.
pub(super) fn expand(
    doc: &Doc<'_>,
    rf: &RawFlow,
    span: Range<usize>,
    base: FlowSpec,
    ctx: &Ctx<'_>,
) -> Result<Vec<FlowSpec>, ScenarioError> {
    let Some(kind) = rf.arrivals.as_ref() else {
        if let Some((sp, key)) = first_key(rf) {
            return Err(doc.err(
                sp,
                format!("`{key}` needs `arrivals`"),
                Some("arrivals = \"poisson\" or \"trace\"".into()),
            ));
        }
        return Ok(vec![base]);
    };
    if let Some(c) = &rf.count {
        return Err(doc.err(
            c.span(),
            "`count` does not apply to arriving flows (the arrivals give their number)",
            None,
        ));
    }
    if rf.sport.is_some() && rf.src.is_some() {
        let sp = rf.sport.as_ref().map(|s| s.span()).unwrap_or(span.clone());
        return Err(doc.err(
            sp,
            "arriving flows cannot fix both `src` and `sport` (the flows would be one)",
            None,
        ));
    }
    let FlowKind::Tcp(tcp) = &base.kind else {
        return Ok(vec![base]);
    };
    // Drawn from unless a trace gives every size.
    let mut dists: Option<SizeDist> = None;
    let cap = opt_size(doc, rf.size_max.as_ref(), DEFAULT_SIZE_MAX)?.max(1);
    let mut rng = Pcg64Mcg::seed_from_u64(
        ctx.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ fnv1a(base.name.as_bytes()),
    );
    let (from, to) = (base.start.0, base.stop.0);
    // (arrival ns, size from the trace)
    let arrivals: Vec<TraceRow> = match kind.get_ref().as_str() {
        "poisson" => {
            if let Some(t) = &rf.trace {
                return Err(doc.err(t.span(), "`trace` applies to arrivals = \"trace\"", None));
            }
            let d = size_dist(doc, rf, ctx, &span)?;
            let mean = d.mean();
            dists = Some(d);
            let rate = match (&rf.arrival_rate, &rf.load) {
                (Some(r), None) => float_val(doc, r, "arrival_rate")?,
                (None, Some(l)) => {
                    let load = float_val(doc, l, "load")?;
                    load * ctx.link.rate.0 as f64 / 8.0 / mean.max(1.0)
                }
                (Some(_), Some(l)) => return Err(doc.err(l.span(), "give `arrival_rate` or `load`, not both", None)),
                (None, None) => {
                    return Err(doc.err(kind.span(), "Poisson arrivals need `arrival_rate` (flows per second) or `load` (share of the link)", Some("e.g. arrival_rate = 50".into())))
                }
            };
            let expected = rate * (to - from) as f64 / 1e9;
            if expected > MAX_ARRIVALS as f64 {
                let sp = rf
                    .arrival_rate
                    .as_ref()
                    .or(rf.load.as_ref())
                    .map(|v| v.span())
                    .unwrap_or(span.clone());
                return Err(doc.err(
                    sp,
                    format!(
                        "about {expected:.0} flows would arrive; at most {MAX_ARRIVALS} per entry"
                    ),
                    Some("lower the rate or shorten start..stop".into()),
                ));
            }
            poisson_arrivals(rate, from, to, MAX_ARRIVALS, &mut rng)
                .into_iter()
                .map(|t| (t, None))
                .collect()
        }
        "trace" => {
            for (v, k) in [(&rf.arrival_rate, "arrival_rate"), (&rf.load, "load")] {
                if let Some(v) = v {
                    return Err(doc.err(
                        v.span(),
                        format!("`{k}` applies to arrivals = \"poisson\""),
                        None,
                    ));
                }
            }
            let Some(t) = &rf.trace else {
                return Err(doc.err(
                    kind.span(),
                    "arrivals = \"trace\" needs `trace` (a file of start times)",
                    Some("one `seconds [bytes]` per line".into()),
                ));
            };
            let (text, shown) = read_file(doc, ctx, t)?;
            let rows = parse_trace(&text).map_err(|(line, m)| {
                doc.err(
                    t.span(),
                    format!("{shown}:{line}: {m}"),
                    Some(
                        "one `seconds [bytes]` per line, seconds from the start of the run".into(),
                    ),
                )
            })?;
            if rows.iter().any(|r| r.1.is_some()) {
                if rf.size_dist.is_some() || rf.bytes.is_some() {
                    return Err(doc.err(
                        t.span(),
                        "the trace gives sizes: drop `size_dist` and `bytes`",
                        None,
                    ));
                }
            } else {
                dists = Some(size_dist(doc, rf, ctx, &span)?);
            }
            let mut rows: Vec<TraceRow> = rows
                .into_iter()
                .filter(|r| r.0 >= from && r.0 < to)
                .collect();
            rows.sort_by_key(|r| r.0);
            if rows.len() > MAX_ARRIVALS {
                return Err(doc.err(
                    t.span(),
                    format!("{} flows in the trace; at most {MAX_ARRIVALS}", rows.len()),
                    None,
                ));
            }
            rows
        }
        other => {
            return Err(doc.err(
                kind.span(),
                format!("unknown arrivals `{other}`"),
                Some("arrivals = \"poisson\" or \"trace\"".into()),
            ));
        }
    };
    let mss = crate::packet::mss_for_mtu(ctx.link.mtu) as u64;
    let request = match &rf.request {
        None => 0,
        Some(v) => {
            let r = size_val(doc, v)?;
            let flight = mss * u64::from(tcp.init_cwnd);
            if r == 0 || r > flight {
                return Err(doc.err(v.span(), format!("`request` must be 1..={flight} bytes (one initial window: the request goes in one flight)"), None));
            }
            r
        }
    };
    // `dst_hosts`: each flow goes to one of that many consecutive addresses from `dst`.
    let hosts = opt_int(doc, rf.dst_hosts.as_ref(), 1, 1, MAX_DST_HOSTS)? as u64;
    if hosts > 1 && nth_address(base.dst, hosts - 1).is_none() {
        let sp = rf
            .dst_hosts
            .as_ref()
            .map(|v| v.span())
            .unwrap_or(span.clone());
        return Err(doc.err(
            sp,
            format!("{hosts} hosts from {} run past the last address", base.dst),
            Some("start `dst` lower or lower `dst_hosts`".into()),
        ));
    }
    // The request crosses the (unshaped) return path: one one-way trip before the response.
    let one_way = ctx.link.delay.0 + base.extra_delay.0;
    Ok(arrivals
        .into_iter()
        .enumerate()
        .map(|(k, (at, trace_size))| {
            let size = trace_size
                .or_else(|| dists.as_ref().map(|d| d.sample(&mut rng, cap)))
                .unwrap_or(1);
            let mut f = base.clone();
            f.name = format!("{}.{}", base.name, k + 1);
            if hosts > 1 {
                let k = rng.gen_range(0..hosts);
                f.dst = nth_address(base.dst, k).unwrap_or(base.dst);
            }
            if let FlowKind::Tcp(t) = &mut f.kind {
                t.bytes = Some(size.max(1));
            }
            f.start = Duration(at + if request > 0 { one_way } else { 0 });
            f.stop = ctx.duration;
            f.arrival = Some(Arrival {
                group: base.name.clone(),
                at: Duration(at),
                request,
            });
            f
        })
        .collect())
}

/// The address `k` after `a` (IPv4 or IPv6), if it does not run past the last one.
fn nth_address(a: std::net::IpAddr, k: u64) -> Option<std::net::IpAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    match a {
        IpAddr::V4(v) => u32::try_from(k)
            .ok()
            .and_then(|k| u32::from(v).checked_add(k))
            .map(|n| IpAddr::V4(Ipv4Addr::from(n))),
        IpAddr::V6(v) => u128::from(v)
            .checked_add(k as u128)
            .map(|n| IpAddr::V6(Ipv6Addr::from(n))),
    }
}

impl FlowSpec {
    /// The unloaded FCT in seconds of an arriving flow on `link` ([`ideal_fct_ns`] of its size
    /// on its own path, plus the request's one-way trip with request/response); `None` for a
    /// flow that did not arrive. Sim and lab divide by the same figure.
    pub fn ideal_fct_s(&self, link: &LinkSpec) -> Option<f64> {
        let (Some(a), FlowKind::Tcp(t)) = (&self.arrival, &self.kind) else {
            return None;
        };
        let one_way = link.delay.0 + self.extra_delay.0;
        let path = IdealPath {
            base_rtt_ns: 2 * one_way,
            rate_bps: link.rate.0,
            mss: crate::packet::mss_for_mtu(link.mtu),
            per_segment: crate::packet::HEADER_BYTES + link.overhead,
            init_cwnd: t.init_cwnd,
        };
        let request = if a.request > 0 { one_way } else { 0 };
        Some((ideal_fct_ns(t.bytes.unwrap_or(0), &path) + request) as f64 / 1e9)
    }
}

/// One trace line: arrival (ns) and the size it gives, if any.
type TraceRow = (u64, Option<u64>);

/// Trace lines `seconds [bytes]`, `#` comments; times in ns. Errors carry the 1-based line.
fn parse_trace(text: &str) -> Result<Vec<TraceRow>, (usize, String)> {
    let mut out = Vec::new();
    let mut sized = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|c| !c.is_empty())
            .collect();
        let t = cols
            .first()
            .and_then(|c| c.parse::<f64>().ok())
            .filter(|t| t.is_finite() && *t >= 0.0 && *t < 86_400.0)
            .ok_or((
                i + 1,
                format!("`{line}`: the start time is seconds, 0 ≤ t < 86400"),
            ))?;
        let size = match cols.get(1) {
            None => None,
            Some(c) => Some(
                c.parse::<u64>()
                    .ok()
                    .filter(|b| *b > 0)
                    .ok_or((i + 1, format!("`{c}` is not a size in bytes above 0")))?,
            ),
        };
        if cols.len() > 2 || *sized.get_or_insert(size.is_some()) != size.is_some() {
            return Err((
                i + 1,
                "every line has the same columns: `seconds` or `seconds bytes`".into(),
            ));
        }
        out.push(((t * 1e9).round() as u64, size));
    }
    Ok(out)
}

/// FNV-1a: a stable hash of the entry's name for its random stream.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_read_times_and_sizes() {
        assert_eq!(
            parse_trace("0.5\n# x\n1 \n").unwrap(),
            vec![(500_000_000, None), (1_000_000_000, None)]
        );
        assert_eq!(
            parse_trace("0.5 100\n2,7\n").unwrap(),
            vec![(500_000_000, Some(100)), (2_000_000_000, Some(7))]
        );
        assert_eq!(parse_trace("0.5 100\n2\n").unwrap_err().0, 2);
        assert_eq!(parse_trace("a\n").unwrap_err().0, 1);
        assert_eq!(parse_trace("1 0\n").unwrap_err().0, 1);
    }

    #[test]
    fn shipped_cdfs_parse() {
        for text in [WEBSEARCH_CDF, DATAMINING_CDF] {
            let c = Cdf::parse(text, 1.0).unwrap();
            assert!(c.mean() > 10_000.0);
        }
    }
}
