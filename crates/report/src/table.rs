//! The terminal table: classes (in tree order) then flows, in human units.

use super::numfmt::{fixed, fixed_pad, human_bytes, human_rate, percent};
use super::order::class_tree;
use crate::model::{RttStats, SimResult};

/// Column alignment.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A plain text table: columns padded to their widest cell, two spaces apart.
#[derive(Clone, Debug, Default)]
pub struct TextTable {
    pub headers: Vec<(String, Align)>,
    pub rows: Vec<Vec<String>>,
}

impl TextTable {
    pub fn new(headers: &[(&str, Align)]) -> TextTable {
        TextTable {
            headers: headers.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Render with a header line and a rule; no trailing spaces.
    pub fn render(&self) -> String {
        let cols = self.headers.len();
        let mut widths: Vec<usize> = self
            .headers
            .iter()
            .map(|(h, _)| h.chars().count())
            .collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let headers: Vec<String> = self.headers.iter().map(|(h, _)| h.clone()).collect();
        self.line(&mut out, &headers, &widths);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        self.line(&mut out, &rule, &widths);
        for row in &self.rows {
            self.line(&mut out, row, &widths);
        }
        out
    }

    fn line(&self, out: &mut String, cells: &[String], widths: &[usize]) {
        let mut line = String::new();
        for (i, (w, (_, align))) in widths.iter().zip(&self.headers).enumerate() {
            let cell = cells.get(i).map(String::as_str).unwrap_or("");
            let pad = w.saturating_sub(cell.chars().count());
            if i > 0 {
                line.push_str("  ");
            }
            match align {
                Align::Left => {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                }
                Align::Right => {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// The run as an aligned table for the terminal.
pub fn render_table(result: &SimResult) -> String {
    let s = &result.summary;
    let link = s.link.rate_bps;
    let mut out = String::new();
    out.push_str(&format!(
        "scenario {}: {} s, link {} (delay {} ms, mtu {} B), utilisation {}\n\n",
        if s.scenario.is_empty() {
            "-"
        } else {
            &s.scenario
        },
        fixed(s.duration_s, 3),
        human_rate(link),
        fixed(s.link.delay_ms, 3),
        s.link.mtu,
        percent(s.link.utilisation),
    ));
    if let Some(lab) = &s.lab {
        out.push_str(&format!(
            "measured in the lab: real kernel traffic through {} ({} s wall clock{})\n",
            lab.router,
            fixed(lab.wall_clock_s, 1),
            if lab.interrupted { ", interrupted" } else { "" }
        ));
        if let Some(h) = &lab.host {
            out.push_str(&format!("host: {h}\n"));
        }
        for n in &lab.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out.push('\n');
    }

    // Classes.
    let tree = class_tree(s);
    let any = |f: &dyn Fn(&crate::model::ClassSummary) -> bool| s.classes.values().any(f);
    let show_conf = any(&|c| c.assigned_rate_bps > 0.0 || c.ceil_bps > 0.0);
    let show_over = any(&|c| c.overlimits > 0);
    let show_borrow = any(&|c| c.borrows > 0 || c.lends > 0);
    let mut headers = vec![("class", Align::Left)];
    if show_conf {
        headers.push(("assured", Align::Right));
        headers.push(("ceil", Align::Right));
    }
    headers.extend([
        ("rate", Align::Right),
        ("of link", Align::Right),
        ("sent", Align::Right),
        ("packets", Align::Right),
        ("drops", Align::Right),
    ]);
    if show_over {
        headers.push(("overlimits", Align::Right));
    }
    if show_borrow {
        headers.push(("borrowed", Align::Right));
        headers.push(("lent", Align::Right));
    }
    let mut t = TextTable::new(&headers);
    for (name, depth) in &tree {
        let Some(c) = s.classes.get(name) else {
            continue;
        };
        let mut row = vec![format!("{}{}", "  ".repeat(*depth), name)];
        if show_conf {
            row.push(rate_or_dash(c.assigned_rate_bps));
            row.push(rate_or_dash(c.ceil_bps));
        }
        row.extend([
            human_rate(c.rate_bps),
            share(c.rate_bps, link),
            human_bytes(c.bytes),
            c.packets.to_string(),
            c.drops.to_string(),
        ]);
        if show_over {
            row.push(c.overlimits.to_string());
        }
        if show_borrow {
            row.push(c.borrows.to_string());
            row.push(c.lends.to_string());
        }
        t.rows.push(row);
    }
    if t.rows.is_empty() {
        out.push_str("(no classes)\n");
    } else {
        out.push_str(&t.render());
    }

    // Flows.
    out.push('\n');
    let has = |r: &Option<RttStats>| r.as_ref().is_some_and(|r| r.samples > 0);
    let show_timeouts = s.flows.values().any(|f| f.timeouts > 0);
    let show_rtt = s.flows.values().any(|f| has(&f.rtt_ms));
    let show_owd = s.flows.values().any(|f| has(&f.owd_ms));
    let mut headers = vec![
        ("flow", Align::Left),
        ("kind", Align::Left),
        ("class", Align::Left),
        ("goodput", Align::Right),
        ("of link", Align::Right),
        ("delivered", Align::Right),
        ("lost", Align::Right),
        ("retrans", Align::Right),
    ];
    if show_timeouts {
        headers.push(("timeouts", Align::Right));
    }
    let show_fct = s.flows.values().any(|f| f.fct_s.is_some());
    if show_fct {
        headers.push(("fct", Align::Right));
    }
    if show_rtt {
        headers.push(("rtt p50", Align::Right));
        headers.push(("rtt p99", Align::Right));
    }
    if show_owd {
        headers.push(("owd p50", Align::Right));
        headers.push(("owd p99", Align::Right));
    }
    let mut t = TextTable::new(&headers);
    for (name, f) in &s.flows {
        let mut row = vec![
            name.clone(),
            f.kind.clone(),
            f.class.clone(),
            human_rate(f.goodput_bps),
            share(f.goodput_bps, link),
            human_bytes(f.bytes_delivered),
            f.packets_lost.to_string(),
            f.retransmits.to_string(),
        ];
        if show_timeouts {
            row.push(f.timeouts.to_string());
        }
        if show_fct {
            row.push(match f.fct_s {
                Some(t) => format!("{} s", fixed_pad(t, 3)),
                None => "-".to_string(),
            });
        }
        if show_rtt {
            row.push(rtt_cell(f.rtt_ms.as_ref(), |r| r.p50));
            row.push(rtt_cell(f.rtt_ms.as_ref(), |r| r.p99));
        }
        if show_owd {
            row.push(rtt_cell(f.owd_ms.as_ref(), |r| r.p50));
            row.push(rtt_cell(f.owd_ms.as_ref(), |r| r.p99));
        }
        t.rows.push(row);
    }
    if t.rows.is_empty() {
        out.push_str("(no flows)\n");
    } else {
        out.push_str(&t.render());
    }

    if !s.fct.is_empty() {
        out.push_str("\nflow completion times (arriving flows; slowdown = FCT / unloaded FCT):\n");
        out.push_str(&crate::fct::fct_table(&s.fct).render());
    }

    if !s.fairness.is_empty() {
        let parts: Vec<String> = s
            .fairness
            .iter()
            .map(|(class, j)| format!("{class} {}", fixed_pad(*j, 3)))
            .collect();
        out.push_str(&format!(
            "\nfairness (Jain's index of flow goodput, 1 = equal): {}\n",
            parts.join(", ")
        ));
    }
    out
}

/// `part / link` as a percentage, `-` without a link rate.
pub fn share(part: f64, link: f64) -> String {
    if link > 0.0 {
        percent(part / link)
    } else {
        "-".to_string()
    }
}

fn rate_or_dash(bps: f64) -> String {
    if bps > 0.0 {
        human_rate(bps)
    } else {
        "-".to_string()
    }
}

fn rtt_cell(r: Option<&RttStats>, f: impl Fn(&RttStats) -> f64) -> String {
    match r {
        Some(r) if r.samples > 0 => format!("{} ms", fixed_pad(f(r), 1)),
        _ => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let mut t = TextTable::new(&[("name", Align::Left), ("rate", Align::Right)]);
        t.rows.push(vec!["a".into(), "4.97 Mbit/s".into()]);
        t.rows.push(vec!["longer".into(), "12 kbit/s".into()]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "name           rate");
        assert_eq!(lines[1], "------  -----------");
        assert_eq!(lines[2], "a       4.97 Mbit/s");
        assert_eq!(lines[3], "longer    12 kbit/s");
    }
}
