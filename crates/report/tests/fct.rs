//! The FCT outputs end to end: `fct.csv`, the CDF plot, the HTML section, `summary.json` and the
//! terminal table from a result with arriving flows.

use linkshare_report::fct::{summarise, FctRecord};
use linkshare_report::model::SimResult;

fn rec(size: u64, fct: Option<f64>, ideal: f64) -> FctRecord {
    FctRecord {
        group: "web".into(),
        flow: format!("web.{size}"),
        size_bytes: size,
        start_s: 0.0,
        fct_s: fct,
        ideal_s: ideal,
    }
}

#[test]
fn every_output_shows_the_fcts() {
    let mut r = SimResult::default();
    r.summary.scenario = "arrive".into();
    r.fct = (1..=40)
        .map(|k| rec(k * 5_000, Some(k as f64 * 1e-3), 0.5e-3))
        .collect();
    r.summary.fct = summarise(&r.fct);
    let dir = std::env::temp_dir().join(format!("lsfctreport-{}", std::process::id()));
    let written = linkshare_report::write_all(&r, &dir).unwrap();
    let names: Vec<String> = written
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    for want in ["fct.csv", "fct_cdf.svg", "fct_cdf.png"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Flow completion times") && html.contains("fct.csv"));
    let json = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(json.contains("\"slowdown_p99\""), "{json}");
    let table = linkshare_report::render_table(&r);
    // 20 flows ≤ 100 kB: p50 the 10th (10 ms), p99 the 20th (20 ms); slowdown 20 and 40.
    let small = table.lines().find(|l| l.contains("<=100kB")).unwrap();
    assert!(
        small.contains("20/20") && small.contains("10 ms") && small.contains("40"),
        "{small}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
