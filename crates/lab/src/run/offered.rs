//! Did the lab's UDP sources offer what the scenario says? A source paces its datagrams by
//! absolute deadlines and, woken from a sleep more than 50 ms late, skips the backlog rather
//! than burst it (`traffic::udp`). A sender the machine starves (a busy host, or a user-mode
//! Linux guest whose one CPU cannot keep up) thus offers less than its rate, and every figure
//! downstream of it is the machine's load, not the scheduler's decision.
//!
//! Only late wake-ups count: a source that blocks in `send` because the kernel's queue holds
//! its socket's buffer (a saturated class of the kernel's qdisc pushes back on a local sender)
//! is the network's answer, offered less by design, and the scenario saturates there. Each
//! source's skipped time (`FlowLive::late_skipped_ns`) over its active time is its shortfall;
//! more than [`SHORTFALL_PCT`] is starvation.

use crate::traffic::Plan;

/// A source that skipped more than this share of its active time (percent) was starved.
pub const SHORTFALL_PCT: f64 = 5.0;
/// How the note of [`shortfall_note`] begins (to find it among a run's notes).
pub const NOTE_START: &str = "UDP sources woke late and skipped";

/// One note naming the sources that skipped more than [`SHORTFALL_PCT`] of their active time,
/// with their figures; `None` when every source kept up. `skipped_ns[i]` is plan `i`'s
/// skipped time (zero for flows that are not UDP).
pub(super) fn shortfall_note(plans: &[Plan], skipped_ns: &[u64]) -> Option<String> {
    let mut short = Vec::new();
    for (p, &ns) in plans.iter().zip(skipped_ns) {
        let active = p.stop - p.start;
        if ns == 0 || active <= 0.0 {
            continue;
        }
        let skipped = ns as f64 / 1e9;
        let pct = skipped * 100.0 / active;
        if pct > SHORTFALL_PCT {
            short.push(format!(
                "`{}` {skipped:.2} of {active:.1} s ({pct:.0} %)",
                p.spec.name
            ));
        }
    }
    (!short.is_empty()).then(|| {
        format!(
            "{NOTE_START} part of their schedule ({}): the machine starved the senders, so this \
             run's figures are its load, not the scheduler's (run it on a quiet machine)",
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

    const MS: u64 = 1_000_000;

    #[test]
    fn a_source_that_skipped_more_than_five_percent_of_its_time_is_named() {
        let p = plans(FLOWS);
        // The UDP flow is active 8 s (2 to 10): 5 % is 400 ms.
        assert_eq!(shortfall_note(&p, &[0, 0]), None);
        assert_eq!(shortfall_note(&p, &[400 * MS, 0]), None, "5 % is within");
        let note = shortfall_note(&p, &[3_040 * MS, 0]).expect("38 % is starved");
        assert!(note.starts_with(NOTE_START), "{note}");
        assert!(note.contains("`cbr` 3.04 of 8.0 s (38 %)"), "{note}");
        assert!(!note.contains("bulk"), "{note}");
    }

    #[test]
    fn every_short_source_is_named() {
        let p = plans(&format!(
            "{FLOWS}{}",
            r#"
[[flow]]
name = "other"
kind = "udp"
src = "10.0.0.3"
dst = "10.0.9.9"
rate = "2mbit"
"#
        ));
        let note = shortfall_note(&p, &[1_000 * MS, 0, 600 * MS]).expect("both are over");
        assert!(note.contains("`cbr` 1.00 of 8.0 s (12 %)"), "{note}");
        assert!(note.contains("`other` 0.60 of 10.0 s (6 %)"), "{note}");
    }
}
