//! Seed 000 (K. Cho, "ALTQ/CBQ Performance", 1997) as sweep scenarios: bandwidth allocation
//! (Figure 2), bandwidth guarantee (Figure 3) and link sharing by borrowing in the two-agency
//! hierarchy (Figures 7–8), each asserted in compatibility mode (`altq_compat`) and by default.
//! See `scenarios/seed000/README.md`. Only the points a test needs are run, some shortened.

use std::path::Path;

use linkshare_core::Duration;
use linkshare_sim::model::SeriesKind;
use linkshare_sim::sweep::{self, PointResult, SweepResult};
use linkshare_sim::Scenario;

/// Run the points of `file` that match one of `keep` (`axis=label,…`; empty: every point),
/// each for `secs` simulated seconds (0: the file's duration).
fn sweep(file: &str, secs: u64, keep: &[&str]) -> SweepResult {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/seed000")
        .join(file);
    let mut sc = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut sw = sc.sweep.take().expect("a sweep");
    let axes: Vec<String> = sw.axes.iter().map(|a| a.name.clone()).collect();
    sw.points.retain(|p| {
        keep.is_empty()
            || keep.iter().any(|sel| {
                sel.split(',').all(|part| {
                    let (a, v) = part.split_once('=').unwrap();
                    let i = axes.iter().position(|x| x == a).unwrap();
                    p.labels[i] == v
                })
            })
    });
    assert!(!sw.points.is_empty(), "no point matches {keep:?}");
    for p in &mut sw.points {
        if secs > 0 {
            p.scenario.duration = Duration::from_secs(secs);
        }
    }
    sweep::run(&sc.name, &sw, 2, None).unwrap_or_else(|e| panic!("{e}"))
}

/// Mean rate of a class in Mbit/s over the samples in `(from, to]` seconds.
fn rate(p: &PointResult, class: &str, from: f64, to: f64) -> f64 {
    let xs: Vec<f64> = p
        .result
        .samples
        .iter()
        .filter(|s| {
            s.kind == SeriesKind::Class
                && s.name == class
                && s.time_s > from + 1e-9
                && s.time_s <= to + 1e-9
        })
        .map(|s| s.rate_bps / 1e6)
        .collect();
    assert!(!xs.is_empty(), "no samples of {class} in ({from}, {to}]");
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn one<'a>(sw: &'a SweepResult, sel: &str) -> &'a PointResult {
    let v = sw.select(sel).unwrap();
    assert_eq!(v.len(), 1, "{sel}");
    v[0]
}

fn near(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * want,
        "{what}: {got:.3} Mbit/s, want {want:.3} ± {:.0} %",
        tol * 100.0
    );
}

/// Figure 2: a saturated non-borrowing class gets its allocation within 2 % by default (exact
/// and 1 kHz timers), on 10 and 100 Mbit/s, from 5 % to 95 % of the link.
#[test]
fn fig02_saturated_class_gets_its_share() {
    let sw = sweep(
        "fig02-allocation.toml",
        0,
        &[
            "mode=default,hz=exact,buffer=24k",
            "mode=default,hz=1000,buffer=24k",
            "link=10,hz=1000,mode=altq,buffer=24k",
        ],
    );
    for link in [10.0, 100.0] {
        for share in [5, 50, 95] {
            let want = link * share as f64 / 100.0;
            for hz in ["exact", "1000"] {
                let sel = format!("link={link},share={share},hz={hz},mode=default,buffer=24k");
                near(rate(one(&sw, &sel), "tcp", 2.0, 10.0), want, 0.02, &sel);
            }
        }
    }
    // ALTQ on 10 Mbit/s at 1 kHz: the seed's linear 10baseT curve.
    for share in [20, 50, 90] {
        let sel = format!("link=10,share={share},hz=1000,mode=altq,buffer=24k");
        near(
            rate(one(&sw, &sel), "tcp", 2.0, 10.0),
            share as f64 / 10.0,
            0.03,
            &sel,
        );
    }
}

/// Figure 2, 100baseT: ALTQ's two-tick minimum suspension at 100 Hz caps the class near
/// 16·1500·8/0.02 = 9.6 Mbit/s (10.2: the 17th packet) whatever its allocation above that; 1 kHz
/// lifts the cap to ~91 (the seed's calculated 96) when the driver takes the burst at once, ~51
/// when it does not; linkshare's default has no cap.
#[test]
fn fig02_timer_cap_at_100hz() {
    let sw = sweep(
        "fig02-allocation.toml",
        3,
        &["link=100,share=30", "link=100,share=95"],
    );
    let rb = |share: u32, hz: &str, mode: &str, buffer: &str| {
        let sel = format!("link=100,share={share},hz={hz},mode={mode},buffer={buffer}");
        rate(one(&sw, &sel), "tcp", 1.0, 3.0)
    };
    let r = |share: u32, hz: &str, mode: &str| rb(share, hz, mode, "24k");
    for share in [30, 95] {
        let capped = r(share, "100", "altq");
        assert!(
            (9.0..=10.8).contains(&capped),
            "{share} % altq 100 Hz: {capped}"
        );
    }
    let k = r(95, "1000", "altq");
    assert!(k > 85.0 && k < 96.0, "95 % altq 1 kHz: {k}");
    // Without a driver buffer the two ticks start only after the 2 ms burst has left: ~51.
    let k0 = rb(95, "1000", "altq", "0");
    assert!(
        k0 > 45.0 && k0 < 0.7 * k,
        "95 % altq 1 kHz, no buffer: {k0}"
    );
    near(r(95, "100", "default"), 95.0, 0.02, "95 % default 100 Hz");
    near(r(30, "1000", "default"), 30.0, 0.02, "30 % default 1 kHz");
    near(r(95, "exact", "altq"), 95.0, 0.03, "95 % altq exact timer");
}

/// Figure 3: four non-borrowing classes of 10/20/30/40 Mbit/s on the 155 Mbit/s ATM link, started
/// 5 s apart, each get their allocation and the background flow (the borrowing default class)
/// the rest of the link.
#[test]
fn fig03_bandwidth_guarantee() {
    let sw = sweep("fig03-guarantee.toml", 26, &[]);
    for mode in ["altq", "default"] {
        let p = one(&sw, &format!("mode={mode}"));
        let tol = if mode == "default" { 0.02 } else { 0.15 };
        let mut sum = 0.0;
        for (c, want) in [
            ("class-0", 10.0),
            ("class-1", 20.0),
            ("class-2", 30.0),
            ("class-3", 40.0),
        ] {
            let got = rate(p, c, 21.0, 26.0);
            near(got, want, tol, &format!("{mode} {c}"));
            sum += got;
        }
        near(
            rate(p, "class-0", 6.0, 10.0),
            10.0,
            tol,
            &format!("{mode} class-0 alone"),
        );
        let bg = rate(p, "background", 21.0, 26.0);
        near(
            bg + sum,
            155.0,
            0.01,
            &format!("{mode}: background {bg} + classes {sum}"),
        );
        assert!(bg > 50.0, "{mode}: background {bg}");
        near(
            rate(p, "background", 1.0, 5.0),
            155.0,
            0.01,
            &format!("{mode} background alone"),
        );
    }
}

/// Figures 7–8: the two-agency hierarchy. By default (formal guideline) an agency's idle
/// bandwidth goes to its own other class first: with x-bulk idle x-rt takes agency X's 7 Mbit/s
/// and no more; with x-rt idle x-bulk keeps X at 7. ALTQ with a high-priority x-rt lets it take
/// more than its agency's share when Y has only its bulk class (the seed's "class-4 gets more
/// than its share"); at equal priorities it does not.
#[test]
fn fig07_08_two_agency_borrowing() {
    let sw = sweep("fig07-08-two-agency.toml", 30, &[]);
    for prio in ["yes", "no"] {
        let p = one(&sw, &format!("prio={prio},mode=default"));
        let what = |s: &str| format!("default prio={prio}: {s}");
        near(
            rate(p, "x-rt", 1.0, 5.0),
            7.0,
            0.05,
            &what("x-rt alone in X"),
        );
        near(
            rate(p, "y-bulk", 1.0, 5.0),
            3.0,
            0.12,
            &what("y-bulk alone in Y"),
        );
        for (c, want) in [
            ("x-rt", 3.0),
            ("x-bulk", 4.0),
            ("y-web", 2.0),
            ("y-bulk", 1.0),
        ] {
            // 7 %: with the Linux-like sender (PRR, RTO bounds) the 1 Mbit/s class's share
            // measures 6.3 % high at prio=yes (was within 6 % with the toy sender).
            near(rate(p, c, 11.0, 25.0), want, 0.07, &what(c));
        }
        near(
            rate(p, "x-bulk", 26.0, 30.0),
            7.0,
            0.03,
            &what("x-bulk, x-rt idle"),
        );
        near(
            rate(p, "agency-y", 26.0, 30.0),
            3.0,
            0.05,
            &what("agency Y"),
        );
    }
    let x = |prio: &str| {
        rate(
            one(&sw, &format!("prio={prio},mode=altq")),
            "x-rt",
            1.0,
            5.0,
        )
    };
    assert!(x("yes") > 8.0, "altq with priority: x-rt {}", x("yes"));
    near(x("no"), 7.0, 0.05, "altq without priority: x-rt");
}
