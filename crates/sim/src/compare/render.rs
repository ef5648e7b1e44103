//! The comparison as text for the terminal: one table per kind of figure, then the worst errors
//! and the verdict. The same numbers as `compare.json`, rounded for reading.

use std::fmt::Write;

use super::{Comparison, Rtt};
use linkshare_report::{Align, TextTable};

fn opt(x: Option<f64>, decimals: usize) -> String {
    x.map(|v| format!("{v:.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

fn signed(x: Option<f64>) -> String {
    x.map(|v| format!("{v:+.1}")).unwrap_or_else(|| "-".into())
}

fn rtt(r: Option<Rtt>) -> String {
    r.map(|r| format!("{:.2} / {:.2}", r.p50_ms, r.p99_ms))
        .unwrap_or_else(|| "-".into())
}

/// The tables. `kernel`: show the kernel's columns.
pub fn render_text(c: &Comparison, kernel: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: simulator against lab, {} Mbit/s link; errors in % of the link rate",
        c.scenario, c.link_rate_mbit
    );
    let _ = writeln!(out, "\nphases (measured after settling):");
    for p in &c.phases {
        let _ = writeln!(
            out,
            "  {}  {:.1}–{:.1} s{}",
            p.index,
            p.start_s,
            p.end_s,
            if p.skipped {
                " — skipped (shorter than 1.5 s)".to_string()
            } else {
                format!(", measured {} s", p.span())
            }
        );
    }

    let mut h: Vec<(&str, Align)> = vec![
        ("class", Align::Left),
        ("phase", Align::Right),
        ("sim Mbit/s", Align::Right),
        ("lab Mbit/s", Align::Right),
    ];
    if kernel {
        h.push(("kernel Mbit/s", Align::Right));
    }
    h.push(("sim−lab %", Align::Right));
    if kernel {
        h.push(("kernel−lab %", Align::Right));
    }
    let mut t = TextTable::new(&h);
    for r in &c.classes {
        let mut row = vec![
            r.class.clone(),
            r.phase.to_string(),
            opt(r.sim, 2),
            opt(r.lab, 2),
        ];
        if kernel {
            row.push(opt(r.kernel, 2));
        }
        row.push(signed(r.error_pct));
        if kernel {
            row.push(signed(r.kernel_error_pct));
        }
        t.rows.push(row);
    }
    let _ = write!(out, "\n{}", t.render());

    if !c.pings.is_empty() {
        let mut h: Vec<(&str, Align)> = vec![
            ("ping", Align::Left),
            ("phase", Align::Right),
            ("sim p50 / p99 ms", Align::Right),
            ("lab p50 / p99 ms", Align::Right),
        ];
        if kernel {
            h.push(("kernel p50 / p99 ms", Align::Right));
        }
        h.push(("p50 sim−lab", Align::Right));
        h.push(("ok", Align::Left));
        let mut t = TextTable::new(&h);
        for r in &c.pings {
            let mut row = vec![r.flow.clone(), r.phase.to_string(), rtt(r.sim), rtt(r.lab)];
            if kernel {
                row.push(rtt(r.kernel));
            }
            row.push(match (r.p50_error_ms, r.p50_error_pct) {
                (Some(ms), Some(pc)) => format!("{ms:+.2} ms ({pc:+.0} %)"),
                (Some(ms), None) => format!("{ms:+.2} ms"),
                _ => "-".into(),
            });
            row.push(if r.within { "yes" } else { "NO" }.into());
            t.rows.push(row);
        }
        let _ = write!(out, "\n{}", t.render());
    }

    if !c.flow_groups.is_empty() {
        let mut t = TextTable::new(&[
            ("flow group", Align::Left),
            ("phase", Align::Right),
            ("sim Mbit/s", Align::Right),
            ("lab Mbit/s", Align::Right),
            ("sim−lab %", Align::Right),
        ]);
        for r in &c.flow_groups {
            t.rows.push(vec![
                r.class.clone(),
                r.phase.to_string(),
                opt(r.sim, 2),
                opt(r.lab, 2),
                signed(r.error_pct),
            ]);
        }
        let _ = write!(out, "\n{}", t.render());
    }

    if !c.flows.is_empty() {
        let mut h: Vec<(&str, Align)> = vec![
            ("flow", Align::Left),
            ("sim goodput Mbit/s", Align::Right),
            ("lab goodput Mbit/s", Align::Right),
        ];
        if kernel {
            h.push(("kernel goodput Mbit/s", Align::Right));
        }
        let mut t = TextTable::new(&h);
        for r in &c.flows {
            let mut row = vec![r.flow.clone(), opt(r.sim, 3), opt(r.lab, 3)];
            if kernel {
                row.push(opt(r.kernel, 3));
            }
            t.rows.push(row);
        }
        let _ = write!(out, "\n{}", t.render());
    }

    if !c.fct.is_empty() {
        let mut t = TextTable::new(&[
            ("fct group", Align::Left),
            ("sizes", Align::Left),
            ("sim p50 / p99 ms", Align::Right),
            ("lab p50 / p99 ms", Align::Right),
            ("p50 err %", Align::Right),
            ("p99 err %", Align::Right),
            ("done sim / lab", Align::Right),
            ("within", Align::Left),
        ]);
        let fig = |f: Option<super::fct::FctFig>| {
            f.map(|f| format!("{:.1} / {:.1}", f.p50_ms, f.p99_ms))
                .unwrap_or_else(|| "-".into())
        };
        let done = |f: Option<super::fct::FctFig>| f.map_or(0, |f| f.completed);
        for r in &c.fct {
            t.rows.push(vec![
                r.group.clone(),
                r.bucket.clone(),
                fig(r.sim),
                fig(r.lab),
                signed(r.p50_error_pct),
                signed(r.p99_error_pct),
                format!("{} / {}", done(r.sim), done(r.lab)),
                match (r.judged, r.within) {
                    (false, _) => format!("(< {} flows)", super::fct::MIN_FCT_FLOWS),
                    (true, true) => "yes".into(),
                    (true, false) => "NO".into(),
                },
            ]);
        }
        let _ = write!(out, "\n{}", t.render());
    }

    let w = &c.worst;
    let _ = writeln!(
        out,
        "\nworst rate error: {:+.1} % of the link{}",
        w.rate_pct,
        w.rate_at
            .as_deref()
            .map(|a| format!(" ({a})"))
            .unwrap_or_default()
    );
    if let (Some(ms), Some(at)) = (w.rtt_p50_ms, &w.rtt_at) {
        let _ = writeln!(
            out,
            "worst RTT p50 error: {ms:+.2} ms{} ({at})",
            w.rtt_p50_pct
                .map(|p| format!(" = {p:+.0} %"))
                .unwrap_or_default()
        );
    }
    if let (Some(e), Some(at)) = (w.flow_pct, &w.flow_at) {
        let _ = writeln!(out, "worst flow-group error: {e:+.1} % of the link ({at})");
    }
    if let Some(k) = w.kernel_rate_pct {
        let _ = writeln!(
            out,
            "the kernel's qdisc against linkshare in the lab: worst {k:+.1} % of the link{}",
            w.kernel_rtt_p50_ms
                .map(|ms| format!(
                    ", ping p50 {ms:+.2} ms{}",
                    w.kernel_rtt_p50_pct
                        .map(|p| format!(" = {p:+.0} %"))
                        .unwrap_or_default()
                ))
                .unwrap_or_default()
        );
    }
    if let Some(h) = &c.host {
        let _ = writeln!(out, "{}", h.line());
    }
    let t = &c.tolerance;
    if c.pass {
        let _ = writeln!(
            out,
            "PASS: within {} % of the link, RTT p50 within {} % or {} ms{}{}",
            t.rate_pct,
            t.rtt_pct,
            t.rtt_floor_ms,
            match t.flow_pct {
                Some(f) if !c.flow_groups.is_empty() => {
                    format!(", flow groups within {f} % of the link")
                }
                _ => String::new(),
            },
            if c.fct.is_empty() {
                String::new()
            } else {
                format!(", FCT p50/p99 within {} %", t.fct_pct)
            }
        );
    } else {
        let _ = writeln!(
            out,
            "FAIL: {} figure(s) outside {} % of the link / RTT p50 {} % or {} ms:",
            c.failures.len(),
            t.rate_pct,
            t.rtt_pct,
            t.rtt_floor_ms
        );
        for f in &c.failures {
            let _ = writeln!(out, "  {f}");
        }
        if !c.trustworthy() {
            let _ = writeln!(
                out,
                "NOT A VERDICT on the simulator: the lab's host was busy (above); run it again on a quiet machine"
            );
        }
    }
    out
}
