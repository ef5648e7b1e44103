//! `report.html` of a comparison: the tables, then per class the time series of every side
//! overlaid (simulator solid, lab dashed, kernel dotted) with the measured stretch of each phase
//! shaded, then the RTT of each ping flow over time. Plots go through the report's offline plot
//! code (`report::plot`): inline SVG, no script, no URL.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::figures::NO_POLICY;
use super::{render_text, Comparison};
use crate::model::{SeriesKind, SimResult};
use linkshare_report::plot::svg::{escape, render};
use linkshare_report::plot::{layout::layout, Figure, Item, LineStyle, Rect, Rgb, Series, PALETTE};

/// One side's run, for the overlays.
pub struct Overlay<'a> {
    /// `sim`, `lab`, `kernel`.
    pub label: &'a str,
    pub result: &'a SimResult,
}

/// Fill of a phase's measured stretch.
const SHADE: Rgb = Rgb(232, 240, 250);

fn look(i: usize) -> (Rgb, LineStyle) {
    let style = match i {
        0 => LineStyle::Solid,
        1 => LineStyle::Dashed,
        _ => LineStyle::Dotted,
    };
    (PALETTE[i % PALETTE.len()], style)
}

/// Class → (t, Mbit/s) of one side; with `no_policy` every class is [`NO_POLICY`].
fn class_points(r: &SimResult, no_policy: bool) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut m: BTreeMap<String, BTreeMap<u64, f64>> = BTreeMap::new();
    for s in r.samples.iter().filter(|s| s.kind == SeriesKind::Class) {
        let name = if no_policy {
            NO_POLICY.to_string()
        } else {
            s.name.clone()
        };
        // Keyed by µs so that merged classes add up at equal times.
        *m.entry(name)
            .or_default()
            .entry((s.time_s * 1e6).round() as u64)
            .or_default() += s.rate_bps / 1e6;
    }
    m.into_iter()
        .map(|(k, v)| (k, v.into_iter().map(|(t, y)| (t as f64 / 1e6, y)).collect()))
        .collect()
}

/// Lay out `fig` with the comparison's phases shaded, as inline SVG.
fn shaded_svg(fig: &Figure, c: &Comparison, duration: f64) -> String {
    let mut scene = layout(fig);
    let plot = scene.plot;
    let x = |t: f64| plot.x + (t / duration).clamp(0.0, 1.0) * plot.w;
    let shades: Vec<Item> = c
        .phases
        .iter()
        .filter(|p| !p.skipped)
        .map(|p| Item::Rect {
            rect: Rect {
                x: x(p.from_s),
                y: plot.y,
                w: (x(p.end_s) - x(p.from_s)).max(0.0),
                h: plot.h,
            },
            fill: Some(SHADE),
            stroke: None,
        })
        .collect();
    // Right after the background, under the grid and the data.
    let at = 1.min(scene.items.len());
    scene.items.splice(at..at, shades);
    render(&scene, false)
}

/// The page. `no_policy`: the scenario has no policy (one class, see [`NO_POLICY`]).
pub fn render_html(
    c: &Comparison,
    sides: &[Overlay],
    no_policy: bool,
    command: Option<&str>,
) -> String {
    let duration = sides
        .iter()
        .map(|s| s.result.summary.duration_s)
        .fold(0.0, f64::max)
        .max(1e-3);
    let kernel = sides.len() > 2;
    let mut h = String::new();
    let name = escape(&c.scenario);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>linkshare compare: {name}</title>\n<style>body{{font-family:system-ui,sans-serif;\
         max-width:1040px;margin:2em auto;padding:0 1em;color:#222}}pre{{font-size:.85em;\
         background:#f7f7f7;padding:.8em;overflow-x:auto}}figure svg{{max-width:100%;height:auto;\
         border:1px solid #eee}}.pass{{color:#060}}.fail{{color:#a00}}</style>\n</head>\n<body>\n\
         <h1>linkshare compare: {name}</h1>\n<p class=\"{}\">{}</p>\n\
         <p>Simulator (solid) against the lab through linkshare (dashed){}. Shaded: the measured \
         stretch of each phase (after settling). Errors are percentages of the link rate.</p>\n\
         <pre>{}</pre>\n",
        if c.pass { "pass" } else { "fail" },
        match (c.pass, c.trustworthy()) {
            (true, _) => "Within the tolerance.",
            (false, true) => "Outside the tolerance.",
            (false, false) => {
                "Outside the tolerance, on an untrustworthy host (below): not a verdict on the simulator."
            }
        },
        if kernel {
            " and the kernel's qdisc (dotted)"
        } else {
            ""
        },
        escape(&render_text(c, kernel))
    );

    let per_side: Vec<_> = sides
        .iter()
        .map(|s| class_points(s.result, no_policy))
        .collect();
    let mut classes: Vec<&String> = c.classes.iter().map(|r| &r.class).collect();
    classes.dedup();
    h.push_str("<h2>Rate per class</h2>\n");
    for (n, class) in classes.iter().enumerate() {
        let mut fig = Figure::new(
            &format!("cmp_class_{n}"),
            &format!("class {class}"),
            "time (s)",
            "rate (Mbit/s)",
        );
        fig.x_range = Some((0.0, duration));
        fig.height = 320;
        for (i, s) in sides.iter().enumerate() {
            let (colour, style) = look(i);
            fig.series.push(Series {
                name: s.label.to_string(),
                points: per_side[i].get(*class).cloned().unwrap_or_default(),
                colour,
                style,
                width: 2.0,
            });
        }
        fig.series.push(Series::reference(
            "link",
            vec![(0.0, c.link_rate_mbit), (duration, c.link_rate_mbit)],
        ));
        let _ = writeln!(h, "<figure>{}</figure>", shaded_svg(&fig, c, duration));
    }

    if !c.pings.is_empty() {
        h.push_str("<h2>Ping RTT</h2>\n");
        // One figure per ping flow (the rows are per flow per phase; the shading shows phases).
        let mut flows: Vec<&str> = c.pings.iter().map(|r| r.flow.as_str()).collect();
        flows.dedup();
        for (n, flow) in flows.into_iter().enumerate() {
            let mut fig = Figure::new(
                &format!("cmp_ping_{n}"),
                &format!("ping {flow}"),
                "time (s)",
                "RTT (ms)",
            );
            fig.x_range = Some((0.0, duration));
            fig.height = 300;
            for (i, s) in sides.iter().enumerate() {
                let (colour, style) = look(i);
                let points = s
                    .result
                    .rtt_points
                    .iter()
                    .filter(|(_, f, _)| f == flow)
                    .map(|(t, _, ms)| (*t, *ms))
                    .collect();
                fig.series.push(Series {
                    name: s.label.to_string(),
                    points,
                    colour,
                    style,
                    width: 1.5,
                });
            }
            let _ = writeln!(h, "<figure>{}</figure>", shaded_svg(&fig, c, duration));
        }
    }
    if let Some(cmd) = command {
        let _ = writeln!(h, "<footer><code>{}</code></footer>", escape(cmd));
    }
    h.push_str("</body>\n</html>\n");
    h
}
