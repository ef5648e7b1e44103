//! `check` on a policy with tens of thousands of diagnostics (40,000 classes with one
//! warning each took 46 s, every diagnostic looking its line up from the start of the file, and
//! printed every one): parsing reports them all, the rendered report is bounded in size whatever
//! their number, and counts the ones it does not show.

use linkshare_config::{render_report, Policy, Severity, SHOWN_PER_KIND};

/// A root and `n` leaves of 8 kbit/s: each leaf's quantum (rate / r2q = 100 bytes) is raised to
/// 1000 with a warning.
fn warned_classes(n: usize) -> String {
    let mut s = String::from(
        "qdisc = \"htb\"\ndefault = \"c0\"\n\n[[class]]\nname = \"root\"\nrate = \"1gbit\"\n",
    );
    for i in 0..n {
        s.push_str(&format!(
            "\n[[class]]\nname = \"c{i}\"\nparent = \"root\"\nrate = \"8kbit\"\n"
        ));
    }
    s
}

#[test]
fn forty_thousand_warnings_render_a_bounded_report() {
    let n = 40_000;
    let text = warned_classes(n);
    let p = Policy::parse(&text, "many.toml").expect("valid, with warnings");
    let w = p.warnings();
    assert_eq!(w.len(), n);
    assert!(w.iter().all(|d| d.severity == Severity::Warning));
    // Located on each class's own `rate` line (the line index is exact at the end of the file).
    let last = &w[n - 1];
    assert_eq!(last.line, text.lines().count());
    // One kind of warning (the same message for every class): a few shown, the rest summarised
    // in one line that counts them.
    let out = render_report(&text, w);
    assert_eq!(out.matches(": warning: ").count(), SHOWN_PER_KIND);
    let hidden = n - SHOWN_PER_KIND;
    assert!(
        out.contains(&format!(
            "… and {},{:03} more warnings like",
            hidden / 1000,
            hidden % 1000
        )),
        "{out}"
    );
    assert!(out.len() < 3_000, "{} bytes", out.len());
}

/// A one-line file of several megabytes: its error echoes a bounded window of the line.
#[test]
fn a_huge_one_line_file_echoes_a_window() {
    let text = format!("qdisc = \"htb\" {}", "x".repeat(5 << 20));
    let Err(e) = Policy::parse(&text, "long.toml") else {
        panic!("a TOML syntax error was accepted")
    };
    let out = render_report(&text, &e.diagnostics);
    assert!(!e.diagnostics.is_empty());
    assert!(out.len() < 2_000, "{} bytes", out.len());
}
