//! Scenario values that overflowed or exhausted memory (issue 13, found by fuzzing): times that
//! add up past `u64` (`delay` + `extra_delay`, `on` + `off`) and sweeps whose points × flows
//! would take gigabytes are located errors, reported before anything large is allocated.

use linkshare_sim::scenario::MAX_DURATION;
use linkshare_sim::sweep::MAX_FLOW_RUNS;
use linkshare_sim::{Scenario, ScenarioError};

/// The 1-based line and column of the only occurrence of `needle` in `text`.
fn pos(text: &str, needle: &str) -> (usize, usize) {
    assert_eq!(text.matches(needle).count(), 1, "`{needle}`");
    let off = text.find(needle).unwrap_or(0);
    let before = &text[..off];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, col)
}

/// The scenario is refused with one error at `needle` whose message has every word of `words`.
#[track_caller]
fn refused_at(text: &str, needle: &str, words: &[&str]) {
    let e: ScenarioError = match Scenario::parse(text, "s.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    };
    let d = e.first().unwrap_or_else(|| panic!("no diagnostic"));
    assert_eq!((d.line, d.col), pos(text, needle), "{d}");
    for w in words {
        assert!(d.message.contains(w), "message lacks `{w}`: {d}");
    }
}

const LINK: &str = "duration = \"1s\"\n[link]\nrate = \"10mbit\"\n";

#[test]
fn delay_plus_extra_delay_cannot_overflow() {
    let text = format!(
        "{LINK}delay = \"10000000000s\"\n[[flow]]\nname = \"t\"\nkind = \"tcp\"\nextra_delay = \"10000000000s\"\n"
    );
    refused_at(&text, "\"10000000000s\"\n[[flow]]", &["delay"]);
    let text = format!(
        "{LINK}delay = \"72000s\"\n[[flow]]\nname = \"t\"\nkind = \"tcp\"\nextra_delay = \"72001s\"\n"
    );
    let max = MAX_DURATION.to_string();
    refused_at(&text, "\"72001s\"", &["extra_delay", "delay", &max]);
}

#[test]
fn on_plus_off_cannot_overflow() {
    let text = format!(
        "{LINK}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\npattern = \"onoff\"\non = \"10000000000s\"\noff = \"9000000000s\"\n"
    );
    refused_at(&text, "\"9000000000s\"", &["on", "off"]);
    let text = format!(
        "{LINK}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\npattern = \"onoff\"\non = \"1s\"\noff = \"108000s\"\n"
    );
    let max = MAX_DURATION.to_string();
    refused_at(&text, "\"108000s\"", &["on", "off", &max]);
}

/// The fuzzer's 942-byte scenario: one flow with `count = 10000` and two sweep axes of 100
/// values: 10^4 points × 10^4 flows. Refused at the sweep, naming the product and the limit.
#[test]
fn sweep_points_times_flows_is_bounded() {
    let values: Vec<String> = (1..=100).map(|i| format!("\"{i}ms\"")).collect();
    let values = values.join(", ");
    let text = format!(
        "{LINK}[[flow]]\nname = \"t\"\nkind = \"tcp\"\ncount = 10000\n\
         [[sweep.axis]]\nkey = \"link.delay\"\nvalues = [{values}]\n\
         [[sweep.axis]]\nkey = \"flow.t.extra_delay\"\nvalues = [{values}]\n"
    );
    refused_at(
        &text,
        "[[sweep.axis]]\nkey = \"link.delay\"",
        &["100,000,000", "1,000,000"],
    );
    assert_eq!(MAX_FLOW_RUNS, 1_000_000);
    // At the limit: 100 points of 10,000 flows is accepted.
    let text = format!(
        "{LINK}[[flow]]\nname = \"t\"\nkind = \"tcp\"\ncount = 10000\n\
         [[sweep.axis]]\nkey = \"link.delay\"\nvalues = [{values}]\n"
    );
    let sc = Scenario::parse(&text, "s.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sc.sweep.map(|s| s.points.len()), Some(100));
}
