//! Expectations (`[[expect]]` in a scenario): a bound on one figure of one flow, group of
//! arriving flows or class, judged on a run's [`Summary`] — the simulator's and the lab's alike,
//! since both produce the same model — so a what-if run ends with a verdict.
//!
//! Principles: a figure is read from the summary exactly as `summary.json` reports it (no figure
//! of its own); a figure that is absent (a flow without samples, a group with no completed flow)
//! fails the expectation and says why; the verdict prints the bound, the figure and PASS/FAIL.

use crate::model::Summary;

/// What an expectation is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A flow, or a group of arriving flows (the entry's name).
    Flow(String),
    Class(String),
}

/// The figures an expectation can bound.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Goodput of a flow or group, sending rate of a class; bit/s.
    Rate,
    /// One-way delay percentiles (UDP, ping); ms.
    OwdP50,
    OwdP99,
    /// Round-trip time percentiles (TCP, ping); ms.
    RttP50,
    RttP99,
    /// Flow: packets lost / packets sent; class: drops / (packets + drops); a fraction.
    Loss,
    /// Flow completion time percentiles of a group of arriving flows (all sizes); ms.
    FctP50,
    FctP99,
}

impl Metric {
    /// Every metric with its name in the file.
    pub const ALL: [(&'static str, Metric); 8] = [
        ("rate", Metric::Rate),
        ("owd_p50", Metric::OwdP50),
        ("owd_p99", Metric::OwdP99),
        ("rtt_p50", Metric::RttP50),
        ("rtt_p99", Metric::RttP99),
        ("loss", Metric::Loss),
        ("fct_p50", Metric::FctP50),
        ("fct_p99", Metric::FctP99),
    ];

    pub fn name(self) -> &'static str {
        Metric::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(n, _)| n)
    }

    /// What the bounds are written as: `rate`, `time` or `probability`.
    pub fn unit(self) -> Unit {
        match self {
            Metric::Rate => Unit::Rate,
            Metric::Loss => Unit::Fraction,
            _ => Unit::Ms,
        }
    }
}

/// The unit of a metric's figure and bounds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Unit {
    /// bit/s.
    Rate,
    /// Milliseconds.
    Ms,
    /// 0..1.
    Fraction,
}

impl Unit {
    /// A figure in this unit, for people.
    pub fn show(self, x: f64) -> String {
        match self {
            Unit::Rate if x >= 1e6 => format!("{:.3} Mbit/s", x / 1e6),
            Unit::Rate => format!("{:.1} kbit/s", x / 1e3),
            Unit::Ms => format!("{x:.2} ms"),
            Unit::Fraction => format!("{:.3} %", x * 100.0),
        }
    }
}

/// One checked `[[expect]]`: bounds in the metric's unit ([`Metric::unit`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub target: Target,
    pub metric: Metric,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// The judgement of one expectation.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// `flow voip owd_p99 ≤ 30.00 ms`.
    pub what: String,
    /// The figure, or why there is none.
    pub figure: Result<f64, String>,
    pub pass: bool,
    pub unit: Unit,
}

impl Verdict {
    /// `PASS flow voip owd_p99 ≤ 30.00 ms: 12.40 ms`.
    pub fn line(&self) -> String {
        let fig = match &self.figure {
            Ok(x) => self.unit.show(*x),
            Err(why) => why.clone(),
        };
        let mark = if self.pass { "PASS" } else { "FAIL" };
        format!("{mark} {}: {fig}", self.what)
    }
}

impl Expect {
    fn what(&self) -> String {
        let (kind, name) = match &self.target {
            Target::Flow(n) => ("flow", n),
            Target::Class(n) => ("class", n),
        };
        let u = self.metric.unit();
        let bound = match (self.min, self.max) {
            (Some(lo), Some(hi)) => format!("in {} .. {}", u.show(lo), u.show(hi)),
            (Some(lo), None) => format!("≥ {}", u.show(lo)),
            (None, Some(hi)) => format!("≤ {}", u.show(hi)),
            (None, None) => "(no bound)".to_string(),
        };
        format!("{kind} {name} {} {bound}", self.metric.name())
    }

    /// The figure this expectation bounds, from a run's summary.
    pub fn figure(&self, s: &Summary) -> Result<f64, String> {
        match &self.target {
            Target::Class(n) => {
                let c = s
                    .classes
                    .get(n)
                    .ok_or_else(|| format!("no class `{n}` in the results"))?;
                match self.metric {
                    Metric::Rate => Ok(c.rate_bps),
                    Metric::Loss => {
                        let offered = c.packets + c.drops;
                        Ok(if offered == 0 {
                            0.0
                        } else {
                            c.drops as f64 / offered as f64
                        })
                    }
                    m => Err(format!("`{}` is not a class figure", m.name())),
                }
            }
            Target::Flow(n) => {
                if let Some(f) = s
                    .fct
                    .get(n)
                    .filter(|_| matches!(self.metric, Metric::FctP50 | Metric::FctP99))
                {
                    let all = f.bucket("all").ok_or("no completed flow")?;
                    let x = match self.metric {
                        Metric::FctP50 => all.fct_p50_ms,
                        _ => all.fct_p99_ms,
                    };
                    return x.ok_or_else(|| "no completed flow".to_string());
                }
                let f = s
                    .flows
                    .get(n)
                    .ok_or_else(|| format!("no flow `{n}` in the results"))?;
                let stat = |st: &Option<crate::model::RttStats>, p99: bool| {
                    st.as_ref()
                        .filter(|r| r.samples > 0)
                        .map(|r| if p99 { r.p99 } else { r.p50 })
                        .ok_or_else(|| "no samples".to_string())
                };
                match self.metric {
                    Metric::Rate => Ok(f.goodput_bps),
                    Metric::OwdP50 => stat(&f.owd_ms, false),
                    Metric::OwdP99 => stat(&f.owd_ms, true),
                    Metric::RttP50 => stat(&f.rtt_ms, false),
                    Metric::RttP99 => stat(&f.rtt_ms, true),
                    Metric::Loss => Ok(if f.packets_sent == 0 {
                        0.0
                    } else {
                        f.packets_lost as f64 / f.packets_sent as f64
                    }),
                    Metric::FctP50 | Metric::FctP99 => {
                        Err("not a group of arriving flows".to_string())
                    }
                }
            }
        }
    }

    /// Judge this expectation on `s`.
    pub fn judge(&self, s: &Summary) -> Verdict {
        let figure = self.figure(s);
        let pass = match &figure {
            Ok(x) => self.min.is_none_or(|lo| *x >= lo) && self.max.is_none_or(|hi| *x <= hi),
            Err(_) => false,
        };
        Verdict {
            what: self.what(),
            figure,
            pass,
            unit: self.metric.unit(),
        }
    }
}

/// Judge every expectation on `s`, in file order.
pub fn judge_all(expects: &[Expect], s: &Summary) -> Vec<Verdict> {
    expects.iter().map(|e| e.judge(s)).collect()
}

/// The verdicts as lines under a heading naming the side (`sim`, `lab`); empty without any.
pub fn render(side: &str, verdicts: &[Verdict]) -> String {
    if verdicts.is_empty() {
        return String::new();
    }
    let failed = verdicts.iter().filter(|v| !v.pass).count();
    let mut out = format!(
        "\nexpectations ({side}): {} of {} met\n",
        verdicts.len() - failed,
        verdicts.len()
    );
    for v in verdicts {
        out.push_str("  ");
        out.push_str(&v.line());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClassSummary, FlowSummary, RttStats};

    fn summary() -> Summary {
        let mut s = Summary::default();
        s.flows.insert(
            "voip".into(),
            FlowSummary {
                kind: "udp".into(),
                goodput_bps: 80_000.0,
                packets_sent: 1000,
                packets_lost: 5,
                owd_ms: Some(RttStats {
                    p50: 12.0,
                    p99: 31.5,
                    samples: 995,
                    ..RttStats::default()
                }),
                ..FlowSummary::default()
            },
        );
        s.classes.insert(
            "bulk".into(),
            ClassSummary {
                packets: 990,
                drops: 10,
                rate_bps: 9.5e6,
                ..ClassSummary::default()
            },
        );
        s
    }

    fn ex(target: Target, metric: Metric, min: Option<f64>, max: Option<f64>) -> Expect {
        Expect {
            target,
            metric,
            min,
            max,
        }
    }

    #[test]
    fn bounds_pass_and_fail_with_the_figure() {
        let s = summary();
        let v = ex(
            Target::Flow("voip".into()),
            Metric::OwdP99,
            None,
            Some(30.0),
        )
        .judge(&s);
        assert!(!v.pass);
        assert_eq!(v.figure, Ok(31.5));
        assert_eq!(v.line(), "FAIL flow voip owd_p99 ≤ 30.00 ms: 31.50 ms");
        let v = ex(Target::Flow("voip".into()), Metric::Loss, None, Some(0.01)).judge(&s);
        assert!(v.pass && v.figure == Ok(0.005), "{v:?}");
        let v = ex(Target::Class("bulk".into()), Metric::Rate, Some(9e6), None).judge(&s);
        assert!(v.pass, "{v:?}");
        assert_eq!(
            v.line(),
            "PASS class bulk rate ≥ 9.000 Mbit/s: 9.500 Mbit/s"
        );
        let v = ex(Target::Class("bulk".into()), Metric::Loss, Some(0.02), None).judge(&s);
        assert!(!v.pass && v.figure == Ok(0.01), "{v:?}");
    }

    #[test]
    fn a_missing_figure_fails_and_says_why() {
        let s = summary();
        let v = ex(Target::Flow("voip".into()), Metric::RttP50, None, Some(1.0)).judge(&s);
        assert_eq!(
            (v.pass, v.figure.clone()),
            (false, Err("no samples".into()))
        );
        let v = ex(Target::Flow("nope".into()), Metric::Rate, Some(1.0), None).judge(&s);
        assert!(
            !v.pass && v.line().contains("no flow `nope`"),
            "{}",
            v.line()
        );
        let out = render(
            "sim",
            &judge_all(
                &[ex(
                    Target::Flow("voip".into()),
                    Metric::Rate,
                    Some(1.0),
                    None,
                )],
                &s,
            ),
        );
        assert!(out.contains("expectations (sim): 1 of 1 met"), "{out}");
        assert_eq!(render("sim", &[]), "");
    }
}
