//! `report.html`: one self-contained page (inline CSS, plots inlined as SVG, PNGs linked
//! relatively), which opens offline and contains no URL.

use std::fmt::Write;

use super::numfmt::{fixed, fixed_pad, human_bytes, human_rate, percent};
use super::order::class_tree;
use super::plot::svg::escape;
use super::table::share;
use crate::model::{RttStats, SimResult};

/// A plot as the page shows it.
pub struct PlotEntry<'a> {
    pub stem: &'a str,
    pub title: &'a str,
    pub caption: &'a str,
    /// The SVG without namespace, ready to inline.
    pub inline_svg: &'a str,
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2em auto;max-width:1040px;\
padding:0 1em;color:#222;line-height:1.4}\
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0;font-size:.92em}\
th,td{padding:.25em .7em;border-bottom:1px solid #e4e4e4;text-align:right;white-space:nowrap}\
th{background:#f4f4f4}td.l,th.l{text-align:left}\
dl.meta{display:grid;grid-template-columns:max-content auto;gap:.1em 1em}dl.meta dt{color:#666}dl.meta dd{margin:0}\
figure{margin:1.2em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}\
figcaption{color:#555;font-size:.9em}footer{margin-top:2em;color:#666;font-size:.85em}\
code{background:#f4f4f4;padding:.1em .3em}";

/// The page.
pub fn render_html(result: &SimResult, plots: &[PlotEntry], command: Option<&str>) -> String {
    let s = &result.summary;
    let link = s.link.rate_bps;
    let scenario = if s.scenario.is_empty() {
        "(unnamed)".to_string()
    } else {
        escape(&s.scenario)
    };
    let (short, long) = if s.lab.is_some() {
        ("lab", "lab run")
    } else {
        ("sim", "simulation")
    };
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>linkshare {short}: {scenario}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>linkshare {long}: {scenario}</h1>\n"
    );
    if let Some(lab) = &s.lab {
        let _ = writeln!(
            h,
            "<p>Measured on real kernel traffic through <code>{}</code> in network namespaces \
             ({} s of wall-clock time{}).</p>",
            escape(&lab.router),
            fixed(lab.wall_clock_s, 1),
            if lab.interrupted { ", interrupted" } else { "" }
        );
        if let Some(host) = &lab.host {
            let _ = writeln!(h, "<p>Host while it ran: {}</p>", escape(&host.to_string()));
        }
        for n in &lab.notes {
            let _ = writeln!(h, "<p>Note: {}</p>", escape(n));
        }
    }

    // Run and link parameters.
    h.push_str("<dl class=\"meta\">\n");
    let meta = [
        ("duration", format!("{} s", fixed(s.duration_s, 6))),
        ("seed", s.seed.to_string()),
        ("link rate", human_rate(link)),
        ("link delay", format!("{} ms", fixed(s.link.delay_ms, 3))),
        ("MTU", format!("{} B", s.link.mtu)),
        ("device buffer", human_bytes(s.link.device_buffer_bytes)),
        (
            "timer",
            if s.link.timer_hz > 0 {
                format!("{} Hz", s.link.timer_hz)
            } else {
                "exact (no tick)".to_string()
            },
        ),
        ("utilisation", percent(s.link.utilisation)),
    ];
    for (k, v) in meta {
        let _ = writeln!(h, "<dt>{k}</dt><dd>{}</dd>", escape(&v));
    }
    h.push_str("</dl>\n");

    // Classes.
    h.push_str("<h2>Classes</h2>\n");
    if s.classes.is_empty() {
        h.push_str("<p>No classes.</p>\n");
    } else {
        let show_over = s.classes.values().any(|c| c.overlimits > 0);
        let show_borrow = s.classes.values().any(|c| c.borrows > 0 || c.lends > 0);
        h.push_str(
            "<table>\n<tr><th class=\"l\">class</th><th class=\"l\">parent</th><th>assured</th>\
             <th>ceil</th><th>rate</th><th>share of link</th><th>bytes</th><th>packets</th><th>drops</th>",
        );
        if show_over {
            h.push_str("<th>overlimits</th>");
        }
        if show_borrow {
            h.push_str("<th>borrowed</th><th>lent</th>");
        }
        h.push_str("</tr>\n");
        for (name, depth) in class_tree(s) {
            let Some(c) = s.classes.get(&name) else {
                continue;
            };
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                "&nbsp;&nbsp;".repeat(depth),
                escape(&name),
                escape(c.parent.as_deref().unwrap_or("-")),
                rate_or_dash(c.assigned_rate_bps),
                rate_or_dash(c.ceil_bps),
                human_rate(c.rate_bps),
                share(c.rate_bps, link),
                c.bytes,
                c.packets,
                c.drops
            );
            if show_over {
                let _ = write!(h, "<td>{}</td>", c.overlimits);
            }
            if show_borrow {
                let _ = write!(h, "<td>{}</td><td>{}</td>", c.borrows, c.lends);
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }

    // Flows.
    h.push_str("<h2>Flows</h2>\n");
    if s.flows.is_empty() {
        h.push_str("<p>No flows.</p>\n");
    } else {
        let has = |r: &Option<RttStats>| r.as_ref().is_some_and(|r| r.samples > 0);
        let show_tcp = s
            .flows
            .values()
            .any(|f| f.timeouts > 0 || f.cwnd_reductions > 0);
        let show_owd = s.flows.values().any(|f| has(&f.owd_ms));
        let show_fct = s.flows.values().any(|f| f.fct_s.is_some());
        h.push_str(
            "<table>\n<tr><th class=\"l\">flow</th><th class=\"l\">kind</th><th class=\"l\">class</th>\
             <th>goodput</th><th>share of link</th><th>delivered (B)</th><th>packets sent</th>\
             <th>lost</th><th>retransmits</th>",
        );
        if show_tcp {
            h.push_str("<th>timeouts</th><th>cwnd reductions</th>");
        }
        if show_fct {
            h.push_str("<th>completion (s)</th>");
        }
        h.push_str("<th>RTT min</th><th>mean</th><th>p50</th><th>p99</th><th>max (ms)</th>");
        if show_owd {
            h.push_str("<th>one-way delay p50</th><th>p99 (ms)</th>");
        }
        h.push_str("</tr>\n");
        for (name, f) in &s.flows {
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                escape(name),
                escape(&f.kind),
                escape(&f.class),
                human_rate(f.goodput_bps),
                share(f.goodput_bps, link),
                f.bytes_delivered,
                f.packets_sent,
                f.packets_lost,
                f.retransmits
            );
            if show_tcp {
                let _ = write!(h, "<td>{}</td><td>{}</td>", f.timeouts, f.cwnd_reductions);
            }
            if show_fct {
                let fct = f.fct_s.map_or_else(|| "-".to_string(), |t| fixed_pad(t, 3));
                let _ = write!(h, "<td>{fct}</td>");
            }
            let rtt: [fn(&RttStats) -> f64; 5] =
                [|r| r.min, |r| r.mean, |r| r.p50, |r| r.p99, |r| r.max];
            for get in rtt {
                let _ = write!(h, "<td>{}</td>", stat_cell(&f.rtt_ms, get));
            }
            if show_owd {
                for get in [|r: &RttStats| r.p50, |r: &RttStats| r.p99] {
                    let _ = write!(h, "<td>{}</td>", stat_cell(&f.owd_ms, get));
                }
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }

    // Flow groups.
    if let Some(t) = crate::groups::group_table(s) {
        h.push_str(
            "<h2 id=\"flow-groups\">Flow groups</h2>\n<p>Each <code>[[flow]]</code> entry's flows \
             summed, per phase of the scenario (each phase measured after it settled, as \
             <code>linkshare compare</code> judges flow groups; docs/fidelity.md), with the share of \
             the link; delay: the range over the group's flows of each flow's RTT (TCP) or \
             one-way delay (UDP) p50 and p99.</p>\n",
        );
        h.push_str(&table_html(&t));
    }

    // Flow completion times.
    if !s.fct.is_empty() {
        h.push_str(
            "<h2>Flow completion times</h2>\n<p>Arriving flows by size bucket: FCT from arrival \
             to the last byte at the receiver, slowdown = FCT / unloaded FCT (docs/outputs.md). \
             Every flow is in <a href=\"fct.csv\">fct.csv</a>.</p>\n",
        );
        h.push_str(&table_html(&crate::fct::fct_table(&s.fct)));
    }

    // Fairness.
    if !s.fairness.is_empty() {
        h.push_str(
            "<h2>Fairness</h2>\n<p>Jain's index of the goodput of each class's flows \
             (1 = perfectly equal, 1/n = one flow takes everything).</p>\n\
             <table>\n<tr><th class=\"l\">class</th><th>Jain's index</th></tr>\n",
        );
        for (class, j) in &s.fairness {
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td></tr>",
                escape(class),
                fixed_pad(*j, 4)
            );
        }
        h.push_str("</table>\n");
    }

    // Plots.
    h.push_str("<h2>Plots</h2>\n");
    for p in plots {
        let stem = escape(p.stem);
        let _ = write!(
            h,
            "<figure id=\"{stem}\">\n{}<figcaption><strong>{}.</strong> {} <a href=\"{stem}.png\">PNG</a> · \
             <a href=\"{stem}.svg\">SVG</a></figcaption>\n</figure>\n",
            p.inline_svg,
            escape(p.title),
            escape(p.caption)
        );
    }

    h.push_str(
        "<h2>Data</h2>\n<ul>\n<li><a href=\"summary.json\">summary.json</a>: the numbers above</li>\n\
         <li><a href=\"timeseries.csv\">timeseries.csv</a>: one row per sample interval per class \
         and per flow</li>\n<li><a href=\"rtt.csv\">rtt.csv</a>: every RTT sample</li>\n\
         <li><a href=\"scheduler.csv\">scheduler.csv</a>: each class's mode, tokens or \
         avgidle per sample (classful schedulers)</li>\n",
    );
    if !result.fct.is_empty() {
        h.push_str(
            "<li><a href=\"fct.csv\">fct.csv</a>: every arriving flow's size and completion \
             time</li>\n",
        );
    }
    h.push_str("</ul>\n");
    h.push_str("<footer>");
    match command {
        Some(cmd) => {
            let _ = write!(h, "Generated by <code>{}</code>.", escape(cmd));
        }
        None => h.push_str("Generated by linkshare sim."),
    }
    h.push_str(" Files are described in docs/outputs.md.</footer>\n</body>\n</html>\n");
    h
}

/// A [`TextTable`] as an HTML table (first column left-aligned, like the others here).
fn table_html(t: &crate::table::TextTable) -> String {
    let mut h = String::from("<table>\n<tr>");
    for (i, (name, _)) in t.headers.iter().enumerate() {
        let cls = if i == 0 { " class=\"l\"" } else { "" };
        let _ = write!(h, "<th{cls}>{}</th>", escape(name));
    }
    h.push_str("</tr>\n");
    for row in &t.rows {
        h.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let cls = if i == 0 { " class=\"l\"" } else { "" };
            let _ = write!(h, "<td{cls}>{}</td>", escape(cell));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    h
}

/// One statistic in ms with two decimals, `-` without samples.
fn stat_cell(stats: &Option<RttStats>, get: fn(&RttStats) -> f64) -> String {
    match stats {
        Some(r) if r.samples > 0 => fixed_pad(get(r), 2),
        _ => "-".to_string(),
    }
}

fn rate_or_dash(bps: f64) -> String {
    if bps > 0.0 {
        human_rate(bps)
    } else {
        "-".to_string()
    }
}
