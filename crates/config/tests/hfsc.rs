//! HFSC policies: the curve forms, `sc`, the errors Linux refuses and the warnings of
//! tc-hfsc(7), each with its line, column and help.

use linkshare_config::{HfscCompat, Policy, QdiscKind, Severity};
use linkshare_core::hfsc::ServiceCurve;
use linkshare_core::units::Time;
use linkshare_core::PacketMeta;

fn diags(text: &str, severity: Severity) -> Vec<(usize, usize, String, String)> {
    let d = match Policy::parse(text, "p.toml") {
        Ok(p) => p.warnings().to_vec(),
        Err(e) => e.diagnostics,
    };
    d.into_iter()
        .filter(|d| d.severity == severity)
        .map(|d| (d.line, d.col, d.message, d.help.unwrap_or_default()))
        .collect()
}

#[test]
fn the_example_policy_checks_and_builds() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../policies/hfsc-voip.toml"
    ))
    .unwrap();
    let p = Policy::parse(&text, "hfsc-voip.toml").unwrap();
    assert_eq!(p.kind(), QdiscKind::Hfsc);
    assert_eq!(p.hfsc_compat(), Some(HfscCompat::Linux));
    let voip = p.classes().iter().find(|c| c.name == "voip").unwrap();
    let h = voip.hfsc.unwrap();
    assert_eq!(
        h.rt,
        Some(ServiceCurve {
            m1: 400_000,
            d: 30_000_000,
            m2: 100_000
        })
    );
    assert_eq!(h.ls, Some(ServiceCurve::rate(100_000)));
    // umax 1500 bytes within 52.5 ms at 400 kbit/s: 30 ms at the rate, so a convex curve
    // idle for 22.5 ms.
    let data = p.classes().iter().find(|c| c.name == "data").unwrap();
    assert_eq!(
        data.hfsc.unwrap().rt,
        Some(ServiceCurve {
            m1: 0,
            d: 22_500_000,
            m2: 400_000
        })
    );
    let uplink = p.classes().iter().find(|c| c.name == "uplink").unwrap();
    assert_eq!(uplink.hfsc.unwrap().ul, Some(ServiceCurve::rate(1_000_000)));
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    // `sc` on a parent: its `rt` is dropped with a warning, its `ls` stays.
    let inner = Policy::parse(
        &format!("{BASE}[[class]]\nname = \"p\"\nsc = \"1mbit\"\n[[class]]\nname = \"a\"\nparent = \"p\"\nls = \"1mbit\"\n"),
        "p.toml",
    )
    .unwrap();
    let h = inner.classes()[0].hfsc.unwrap();
    assert_eq!((h.rt, h.ls), (None, Some(ServiceCurve::rate(1_000_000))));
    assert!(inner
        .warnings()
        .iter()
        .any(|w| w.message.contains("`rt` on a class with children") && w.line == 5));
    let mut q = p.build::<PacketMeta>().unwrap();
    assert_eq!(q.kind(), "hfsc");
    let m = PacketMeta {
        len: 1000,
        ..Default::default()
    };
    q.enqueue(m, Time(0)).unwrap();
    assert!(q.dequeue(Time(0)).packet().is_some());
}

const BASE: &str = "qdisc = \"hfsc\"\ndefault = \"a\"\n";

#[test]
fn errors_users_make() {
    // ul without ls.
    let e = diags(
        &format!("{BASE}[[class]]\nname = \"a\"\nrt = \"1mbit\"\nul = \"2mbit\"\n"),
        Severity::Error,
    );
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!((e[0].0, e[0].1), (6, 6));
    assert!(e[0].2.contains("`ul` without `ls`") && e[0].3.contains("add `ls`"));
    // A parent without ls (Linux refuses it: CVE-2023-4623).
    let e = diags(
        &format!("{BASE}[[class]]\nname = \"p\"\nrt = \"1mbit\"\n[[class]]\nname = \"a\"\nparent = \"p\"\nls = \"1mbit\"\n"),
        Severity::Error,
    );
    assert!(
        e.iter()
            .any(|d| d.2.contains("has children but no `ls`") && d.0 == 3),
        "{e:?}"
    );
    // No curve at all.
    let e = diags(&format!("{BASE}[[class]]\nname = \"a\"\n"), Severity::Error);
    assert!(
        e[0].2.contains("no service curve") && e[0].3.contains("sc = "),
        "{e:?}"
    );
    // Both forms mixed, a missing m2, m1 without d, a bad unit.
    let e = diags(
        &format!("{BASE}[[class]]\nname = \"a\"\nls = {{ m1 = \"1mbit\", dmax = \"1ms\", m2 = \"1mbit\" }}\n"),
        Severity::Error,
    );
    assert!(
        e.iter().any(|d| d.2.contains("mixes the two forms")),
        "{e:?}"
    );
    let e = diags(
        &format!("{BASE}[[class]]\nname = \"a\"\nls = {{ m1 = \"1mbit\", d = \"1ms\" }}\n"),
        Severity::Error,
    );
    assert!(
        e.iter().any(|d| d.2.contains("has no `m2`") && d.0 == 5),
        "{e:?}"
    );
    let e = diags(
        &format!("{BASE}[[class]]\nname = \"a\"\nls = {{ m1 = \"1mbit\", m2 = \"1mbit\" }}\n"),
        Severity::Error,
    );
    assert!(
        e.iter().any(|d| d.2.contains("`m1` and `d` go together")),
        "{e:?}"
    );
    let e = diags(
        &format!("{BASE}[[class]]\nname = \"a\"\nsc = \"1mbps_\"\n"),
        Severity::Error,
    );
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, 5);
    // sc with rt.
    let e = diags(
        &format!("{BASE}[[class]]\nname = \"a\"\nsc = \"1mbit\"\nrt = \"1mbit\"\n"),
        Severity::Error,
    );
    assert!(
        e.iter().any(|d| d.2.contains("both `sc` and `rt`")),
        "{e:?}"
    );
    // HTB keys under hfsc, and the compat key under htb.
    let e = diags(
        &format!("{BASE}[[class]]\nname = \"a\"\nsc = \"1mbit\"\nceil = \"2mbit\"\n"),
        Severity::Error,
    );
    assert!(e.iter().any(|d| d.2.contains("ceil")), "{e:?}");
    let e = diags(
        "qdisc = \"htb\"\ndefault = \"a\"\nhfsc_compat = \"openbsd\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n",
        Severity::Error,
    );
    assert!(
        e.iter().any(|d| d.2.contains("HFSC option") && d.0 == 3),
        "{e:?}"
    );
}

#[test]
fn warnings_of_tc_hfsc_7() {
    let text = format!(
        "{BASE}[[class]]\nname = \"top\"\nls = \"10mbit\"\nul = \"10mbit\"\n\
         [[class]]\nname = \"a\"\nparent = \"top\"\nsc = \"6mbit\"\n\
         [[class]]\nname = \"b\"\nparent = \"top\"\nrt = {{ m1 = \"8mbit\", d = \"10ms\", m2 = \"1mbit\" }}\nls = \"6mbit\"\n"
    );
    let w = diags(&text, Severity::Warning);
    assert!(
        w.iter()
            .any(|d| d.2.contains("children's `ls` rates add up to 12mbit") && d.0 == 5),
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|d| d.2.contains("real-time curves add up to 14mbit") && d.0 == 14),
        "{w:?}"
    );
    assert!(Policy::parse(&text, "p.toml").is_ok());
}

#[test]
fn openbsd_compat_selects_both_choices() {
    let p = Policy::parse(
        &format!("hfsc_compat = \"openbsd\"\n{BASE}[[class]]\nname = \"a\"\nsc = \"1mbit\"\n"),
        "p.toml",
    )
    .unwrap();
    let params = p.hfsc_params().unwrap();
    assert_eq!(params.period_vt, linkshare_core::hfsc::PeriodVt::OpenBsd);
    assert_eq!(params.ul_catchup, Some(10_000_000));
    let e = diags(
        &format!("hfsc_compat = \"bsd\"\n{BASE}[[class]]\nname = \"a\"\nsc = \"1mbit\"\n"),
        Severity::Error,
    );
    assert!(e[0].3.contains("\"openbsd\""), "{e:?}");
}
