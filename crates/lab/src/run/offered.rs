//! Did the lab's UDP sources offer what the scenario says? A source paces its datagrams by
//! absolute deadlines and, woken more than 50 ms late, drops the backlog rather than burst it
//! (`traffic::udp`), so a sender the machine starves (a busy host, or a user-mode Linux guest
//! waiting for a host CPU) sends fewer datagrams than planned — and every figure downstream of
//! it is then the machine's load, not the scheduler's decision. This check counts, per
//! constant-rate or Poisson UDP flow, the datagrams sent against those its rate and mean size
//! plan for its active time, and says which fell short by more than [`SHORTFALL_PCT`].

use linkshare_sim::scenario::{FlowKind, Pattern};

use crate::traffic::Plan;

/// A source that sent less than this much below its plan (percent) was starved.
pub const SHORTFALL_PCT: f64 = 5.0;
/// How the note of [`shortfall_note`] begins (to find it among a run's notes).
pub const NOTE_START: &str = "UDP sources sent fewer datagrams than their rate plans";

/// The datagrams `p` plans to send (rate × active time ÷ mean size); `None` for flows whose
/// count is not a plain rate (TCP, ping, on/off) or an empty plan.
pub(super) fn planned_datagrams(p: &Plan) -> Option<f64> {
    let FlowKind::Udp(u) = &p.spec.kind else {
        return None;
    };
    if !matches!(u.pattern, Pattern::Cbr | Pattern::Poisson) {
        return None;
    }
    let mean = u.size.mean();
    let active = p.stop - p.start;
    (mean > 0.0 && active > 0.0 && u.rate.0 > 0).then(|| u.rate.0 as f64 * active / (8.0 * mean))
}

/// One note naming the sources that sent more than [`SHORTFALL_PCT`] below plan, with their
/// counts; `None` when every source kept up. `sent[i]` is plan `i`'s datagrams sent.
pub(super) fn shortfall_note(plans: &[Plan], sent: &[u64]) -> Option<String> {
    let mut short = Vec::new();
    for (p, &n) in plans.iter().zip(sent) {
        let Some(planned) = planned_datagrams(p) else {
            continue;
        };
        // Under ten datagrams a one-datagram rounding is already 10 %.
        if planned < 10.0 {
            continue;
        }
        let pct = n as f64 * 100.0 / planned;
        if pct < 100.0 - SHORTFALL_PCT {
            short.push(format!(
                "`{}` {n} of {planned:.0} ({pct:.0} %)",
                p.spec.name
            ));
        }
    }
    (!short.is_empty()).then(|| {
        format!(
            "{NOTE_START} ({}): the machine starved the senders, so this run's figures are its \
             load, not the scheduler's (run it on a quiet machine)",
            short.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkshare_sim::Scenario;

    fn plans(flows: &str) -> Vec<Plan> {
        let text = format!("name = \"t\"\nduration = \"10s\"\n[link]\nrate = \"10mbit\"\n{flows}");
        let sc = Scenario::parse(&text, "t.toml").expect("a valid scenario");
        sc.flows
            .iter()
            .map(|f| Plan::new(f, 10.0, 1, 0.0).expect("a lab plan"))
            .collect()
    }

    const FLOWS: &str = r#"
[[flow]]
name = "cbr"
kind = "udp"
src = "10.0.0.1"
dst = "10.0.9.9"
rate = "1mbit"
size = 1250
start = "2s"
[[flow]]
name = "bulk"
kind = "tcp"
src = "10.0.0.2"
dst = "10.0.9.9"
"#;

    #[test]
    fn a_cbr_source_plans_rate_times_time_over_size() {
        let p = plans(FLOWS);
        // 1 Mbit/s for 8 s in 1250-byte datagrams: 800.
        assert_eq!(planned_datagrams(&p[0]), Some(800.0));
        assert_eq!(planned_datagrams(&p[1]), None, "TCP has no plan");
    }

    #[test]
    fn a_source_more_than_five_percent_short_is_named() {
        let p = plans(FLOWS);
        assert_eq!(shortfall_note(&p, &[800, 123_456]), None);
        assert_eq!(shortfall_note(&p, &[761, 0]), None, "4.9 % short is within");
        let note = shortfall_note(&p, &[496, 0]).expect("62 % is starved");
        assert!(note.starts_with(NOTE_START), "{note}");
        assert!(note.contains("`cbr` 496 of 800 (62 %)"), "{note}");
        assert!(!note.contains("bulk"), "{note}");
    }
}
