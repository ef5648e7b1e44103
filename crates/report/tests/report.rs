//! Report writers on a synthetic `SimResult`: files exist and parse, are byte-identical across
//! writes, PNGs decode to the laid-out size, SVG and HTML are well-formed and offline.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use linkshare_report::model::{
    ClassSummary, FlowSummary, LinkSummary, RttStats, Sample, SeriesKind, SimResult, Summary,
};
use linkshare_report::plot::ticks::{format_tick, nice_step, nice_ticks};
use linkshare_report::plot::{layout::layout, raster, Rgb, PALETTE};
use linkshare_report::{
    charts, render_table, timeseries_csv, write_all, write_all_with, write_summary_json,
    write_timeseries_csv, ReportOptions, TIMESERIES_HEADER,
};

const WEIRD_FLOW: &str = "tcp \"bulk\", #2";

/// Two leaf classes under a root, three flows (one with a comma and quotes in its name), 10 s
/// sampled every 100 ms, RTT probes every 2 ms (5000 per TCP flow: more than a plot draws).
fn synthetic() -> SimResult {
    let duration = 10.0;
    let link = 10e6;
    let mut classes = BTreeMap::new();
    let class = |parent: Option<&str>, rate: f64, assured: f64, borrows: u64| ClassSummary {
        bytes: (rate * duration / 8.0) as u64,
        packets: (rate * duration / 8.0 / 1500.0) as u64,
        drops: 17,
        rate_bps: rate,
        parent: parent.map(str::to_string),
        assigned_rate_bps: assured,
        ceil_bps: link,
        overlimits: 3,
        lends: 0,
        borrows,
    };
    classes.insert("root".to_string(), class(None, 9.7e6, 10e6, 0));
    classes.insert("web".to_string(), class(Some("root"), 2.9e6, 3e6, 0));
    classes.insert("bulk".to_string(), class(Some("root"), 6.8e6, 2e6, 1234));
    let rtt = |base: f64| RttStats {
        min: base,
        mean: base + 12.5,
        p50: base + 10.0,
        p99: base + 60.25,
        max: base + 80.0,
        samples: 5000,
    };
    let mut flows = BTreeMap::new();
    flows.insert(
        "web-1".to_string(),
        FlowSummary {
            kind: "tcp".into(),
            class: "web".into(),
            bytes_delivered: 3_600_000,
            goodput_bps: 2.88e6,
            packets_sent: 2500,
            packets_lost: 4,
            retransmits: 4,
            rtt_ms: Some(rtt(20.0)),
            ..Default::default()
        },
    );
    flows.insert(
        WEIRD_FLOW.to_string(),
        FlowSummary {
            kind: "tcp".into(),
            class: "bulk".into(),
            bytes_delivered: 8_400_000,
            goodput_bps: 6.72e6,
            packets_sent: 5800,
            packets_lost: 31,
            retransmits: 29,
            rtt_ms: Some(rtt(40.0)),
            timeouts: 2,
            cwnd_reductions: 9,
            ..Default::default()
        },
    );
    flows.insert(
        "voip".to_string(),
        FlowSummary {
            kind: "udp".into(),
            class: "web".into(),
            bytes_delivered: 80_000,
            goodput_bps: 64e3,
            packets_sent: 500,
            packets_lost: 0,
            retransmits: 0,
            rtt_ms: None,
            owd_ms: Some(RttStats {
                min: 10.0,
                mean: 11.0,
                p50: 10.5,
                p99: 17.75,
                max: 30.0,
                samples: 500,
            }),
            ..Default::default()
        },
    );
    let mut fairness = BTreeMap::new();
    fairness.insert("web".to_string(), 0.5123);
    fairness.insert("bulk".to_string(), 1.0);
    let summary = Summary {
        scenario: "two-classes".into(),
        duration_s: duration,
        seed: 7,
        link: LinkSummary {
            rate_bps: link,
            utilisation: 0.97,
            delay_ms: 20.0,
            mtu: 1500,
            device_buffer_bytes: 3000,
            timer_hz: 1000,
            clock_hz: 0,
        },
        classes,
        flows,
        fairness,
        qdisc: Default::default(),
        uplink: None,
        path: None,
        fct: Default::default(),
        flow_groups: Default::default(),
        lab: None,
        events: 123,
    };

    let mut samples = Vec::new();
    for k in 1..=100u32 {
        let t = k as f64 * 0.1;
        // Bulk ramps up like a TCP slow start, web is steady, the root is their sum.
        let bulk = 6.8e6 * (1.0 - (-t).exp()) + 0.3e6 * (t * 3.0).sin();
        let web = 2.9e6 + 0.1e6 * (t * 7.0).cos();
        let row = |kind, name: &str, rate: f64, backlog: u64, rtt| Sample {
            time_s: t,
            kind,
            name: name.to_string(),
            bytes: (rate * 0.1 / 8.0) as u64,
            rate_bps: rate,
            backlog_bytes: backlog,
            drops: u64::from(k % 10 == 0),
            rtt_ms: rtt,
        };
        // Flows first: the writer must still put classes first within a time.
        samples.push(row(
            SeriesKind::Flow,
            WEIRD_FLOW,
            bulk * 0.99,
            0,
            Some(45.0 + t),
        ));
        samples.push(row(SeriesKind::Flow, "web-1", web * 0.98, 0, Some(25.0)));
        samples.push(row(SeriesKind::Flow, "voip", 64e3, 0, None));
        samples.push(row(SeriesKind::Class, "web", web, 3000, None));
        samples.push(row(
            SeriesKind::Class,
            "bulk",
            bulk,
            20_000 + k as u64 * 300,
            None,
        ));
        samples.push(row(SeriesKind::Class, "root", web + bulk, 0, None));
    }
    let mut rtt_points = Vec::new();
    for k in 0..5000u32 {
        let t = k as f64 * 0.002;
        rtt_points.push((t, "web-1".to_string(), 20.0 + 5.0 * (t * 2.0).sin().abs()));
        rtt_points.push((t, WEIRD_FLOW.to_string(), 40.0 + 60.0 * (1.0 - (-t).exp())));
    }
    SimResult {
        summary,
        samples,
        class_states: Vec::new(),
        rtt_points,
        owd_points: Vec::new(),
        fct: Vec::new(),
    }
}

fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("report-tests")
        .join(name);
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// Split one CSV line into fields (RFC 4180 quoting).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.is_empty() => quoted = true,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

/// Check that every element opened is closed in order (comments, `<!DOCTYPE>` and void HTML
/// elements aside). Returns the number of elements.
fn check_balanced(text: &str) -> usize {
    const VOID: [&str; 4] = ["meta", "br", "hr", "img"];
    let mut stack: Vec<String> = Vec::new();
    let mut count = 0;
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("unterminated tag") + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack
                .pop()
                .unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(open, name.trim(), "mismatched close");
            continue;
        }
        let name: String = tag
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '/')
            .collect();
        assert!(!name.is_empty(), "empty tag");
        count += 1;
        if !tag.ends_with('/') && !VOID.contains(&name.as_str()) {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    count
}

#[test]
fn all_files_are_written_and_parse() {
    let result = synthetic();
    let dir = out_dir("all");
    let files = write_all(&result, &dir).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "summary.json",
        "timeseries.csv",
        "throughput_classes.svg",
        "throughput_classes.png",
        "throughput_flows.svg",
        "throughput_flows.png",
        "rtt.svg",
        "rtt.png",
        "backlog_classes.svg",
        "backlog_classes.png",
        "report.html",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    for f in &files {
        assert!(f.starts_with(&dir));
        assert!(fs::metadata(f).unwrap().len() > 0, "{f:?} is empty");
    }

    // summary.json: the contract's fields, with the values we put in.
    let v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["scenario"], "two-classes");
    assert_eq!(v["duration_s"].as_f64(), Some(10.0));
    assert_eq!(v["link"]["rate_bps"].as_f64(), Some(10e6));
    assert_eq!(v["link"]["utilisation"].as_f64(), Some(0.97));
    assert_eq!(v["classes"]["bulk"]["drops"].as_u64(), Some(17));
    assert_eq!(v["classes"]["bulk"]["rate_bps"].as_f64(), Some(6.8e6));
    assert!(v["classes"]["web"]["bytes"].is_u64());
    assert!(v["classes"]["web"]["packets"].is_u64());
    let weird = &v["flows"][WEIRD_FLOW];
    assert_eq!(weird["class"], "bulk");
    assert_eq!(weird["bytes_delivered"].as_u64(), Some(8_400_000));
    assert_eq!(weird["retransmits"].as_u64(), Some(29));
    assert_eq!(weird["goodput_bps"].as_f64(), Some(6.72e6));
    for k in ["min", "mean", "p50", "p99", "max"] {
        assert!(weird["rtt_ms"][k].is_number(), "rtt_ms.{k}");
    }
    assert_eq!(weird["rtt_ms"]["p99"].as_f64(), Some(100.25));
    assert!(v["flows"]["voip"].get("rtt_ms").is_none());
    assert_eq!(v["fairness"]["web"].as_f64(), Some(0.5123));

    // timeseries.csv: exact header, one row per sample, quoted names survive, fixed decimals.
    let csv = fs::read_to_string(dir.join("timeseries.csv")).unwrap();
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert_eq!(header, TIMESERIES_HEADER);
    assert!(header.starts_with("time_s,kind,name,bytes,rate_bps,backlog_bytes,drops"));
    let rows: Vec<Vec<String>> = lines.map(csv_fields).collect();
    assert_eq!(rows.len(), result.samples.len());
    let ncols = header.split(',').count();
    let mut last_time = 0.0;
    for r in &rows {
        assert_eq!(r.len(), ncols, "{r:?}");
        let t: f64 = r[0].parse().unwrap();
        assert!(t >= last_time, "rows ordered by time");
        last_time = t;
        assert!(r[1] == "class" || r[1] == "flow");
        let dec = |s: &str| s.split('.').nth(1).map_or(0, str::len);
        assert!(dec(&r[0]) <= 6 && dec(&r[4]) <= 3, "{r:?}");
        let _: u64 = r[3].parse().unwrap();
        let _: f64 = r[4].parse().unwrap();
        let _: u64 = r[5].parse().unwrap();
        let _: u64 = r[6].parse().unwrap();
    }
    assert_eq!(rows.iter().filter(|r| r[2] == WEIRD_FLOW).count(), 100);
    assert_eq!(rows.iter().filter(|r| r[1] == "class").count(), 300);
    // Within the first interval classes come first, by name, then flows by name.
    let first: Vec<(&str, &str)> = rows[..6]
        .iter()
        .map(|r| (r[1].as_str(), r[2].as_str()))
        .collect();
    assert_eq!(
        first,
        [
            ("class", "bulk"),
            ("class", "root"),
            ("class", "web"),
            ("flow", WEIRD_FLOW),
            ("flow", "voip"),
            ("flow", "web-1")
        ]
    );
    // time_s is the end of the interval: 0.1 s for the first, never printed as 0.30000000000000004.
    assert_eq!(rows[0][0], "0.1");
    assert!(rows.iter().any(|r| r[0] == "0.3"));
}

#[test]
fn writes_are_byte_identical() {
    let result = synthetic();
    let a = write_all(&result, &out_dir("det-a")).unwrap();
    let b = write_all(&result, &out_dir("det-b")).unwrap();
    assert_eq!(a.len(), b.len());
    for (fa, fb) in a.iter().zip(&b) {
        assert_eq!(fa.file_name(), fb.file_name());
        assert!(
            fs::read(fa).unwrap() == fs::read(fb).unwrap(),
            "{:?} differs",
            fa.file_name()
        );
    }
    // The single-file writers agree with write_all.
    let dir = out_dir("single");
    fs::create_dir_all(&dir).unwrap();
    write_summary_json(&result, &dir.join("s.json")).unwrap();
    write_timeseries_csv(&result, &dir.join("t.csv")).unwrap();
    assert_eq!(
        fs::read(dir.join("s.json")).unwrap(),
        fs::read(&a[0]).unwrap()
    );
    assert_eq!(
        fs::read(dir.join("t.csv")).unwrap(),
        fs::read(&a[1]).unwrap()
    );
    // Sample order from the engine does not matter.
    let mut shuffled = result.clone();
    shuffled.samples.reverse();
    assert_eq!(timeseries_csv(&shuffled), timeseries_csv(&result));
}

#[test]
fn pngs_decode_to_the_laid_out_size_and_show_the_data() {
    let result = synthetic();
    let dir = out_dir("png");
    write_all(&result, &dir).unwrap();
    for chart in charts(&result) {
        let scene = layout(&chart.figure);
        let file = fs::File::open(dir.join(format!("{}.png", chart.stem))).unwrap();
        let mut reader = png::Decoder::new(file).read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (scene.width, scene.height));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert!(info.width >= 640 && info.height >= 400);
        // The first series' colour is drawn inside the plot area.
        let canvas = raster::render(&scene);
        assert_eq!(canvas.data, buf[..canvas.data.len()].to_vec());
        let p = scene.plot;
        let mut hits = 0;
        for y in p.y as u32..(p.y + p.h) as u32 {
            for x in p.x as u32..(p.x + p.w) as u32 {
                if canvas.pixel(x, y) == Some(PALETTE[0]) {
                    hits += 1;
                }
            }
        }
        assert!(hits > 100, "{}: only {hits} pixels of series 0", chart.stem);
        // And nothing outside the canvas margins is data-coloured above the plot (title area
        // is text colour only).
        for x in 0..scene.width {
            assert_ne!(canvas.pixel(x, 2), Some(PALETTE[0]));
        }
        assert_eq!(canvas.pixel(0, 0), Some(Rgb::WHITE));
    }
}

#[test]
fn svgs_are_well_formed() {
    let result = synthetic();
    let dir = out_dir("svg");
    write_all(&result, &dir).unwrap();
    for chart in charts(&result) {
        let svg = fs::read_to_string(dir.join(format!("{}.svg", chart.stem))).unwrap();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        let elements = check_balanced(&svg);
        assert!(elements > 20, "{}: {elements} elements", chart.stem);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
    // RTT probes are downsampled: 5000 per flow in, at most 2000 points drawn.
    let rtt = charts(&result)
        .into_iter()
        .find(|c| c.stem == "rtt")
        .unwrap();
    assert_eq!(rtt.figure.series.len(), 2);
    for s in &rtt.figure.series {
        assert!(
            s.points.len() <= 2000 && s.points.len() >= 1000,
            "{}",
            s.points.len()
        );
    }
    // Inner classes stay out of the per-class plots; the link rate is a reference line.
    let classes = charts(&result)
        .into_iter()
        .find(|c| c.stem == "throughput_classes")
        .unwrap();
    let names: Vec<&str> = classes
        .figure
        .series
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["bulk", "web", "link rate"]);
    assert_eq!(classes.figure.y_label, "throughput (Mbit/s)");
}

#[test]
fn html_is_offline_and_names_everything() {
    let result = synthetic();
    let dir = out_dir("html");
    let opts = ReportOptions {
        command: Some("linkshare sim two-classes.toml --out out".into()),
    };
    write_all_with(&result, &dir, &opts).unwrap();
    let html = fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    check_balanced(&html);
    let lower = html.to_ascii_lowercase();
    assert!(!lower.contains("http://") && !lower.contains("https://"));
    assert!(!lower.contains("<script") && !lower.contains("<link"));
    for name in ["root", "web", "bulk", "web-1", "voip", "two-classes"] {
        assert!(html.contains(name), "{name} missing");
    }
    assert!(
        html.contains("tcp &quot;bulk&quot;, #2"),
        "escaped flow name"
    );
    assert_eq!(html.matches("<svg").count(), 4, "four inline plots");
    for stem in [
        "throughput_classes",
        "throughput_flows",
        "rtt",
        "backlog_classes",
    ] {
        assert!(html.contains(&format!("href=\"{stem}.png\"")));
        assert!(dir.join(format!("{stem}.png")).exists());
    }
    assert!(html.contains("<code>linkshare sim two-classes.toml --out out</code>"));
    assert!(html.contains("borrowed"), "non-zero borrows are shown");
    assert!(html.contains("1234"));
    assert!(html.contains("cwnd reductions") && html.contains("17.75"));
}

#[test]
fn terminal_table_is_aligned_and_human() {
    let result = synthetic();
    let t = render_table(&result);
    // Kept for eyeballing, like the other outputs under the target's tmp dir.
    let dir = out_dir("table");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("table.txt"), &t).unwrap();
    assert!(t.contains("two-classes"));
    assert!(t.contains("6.80 Mbit/s"), "{t}");
    assert!(
        t.contains("68.0%"),
        "bulk's share of the 10 Mbit/s link: {t}"
    );
    assert!(t.contains("64.0 kbit/s"));
    assert!(
        t.contains("100.2 ms") || t.contains("100.3 ms"),
        "bulk p99 RTT: {t}"
    );
    assert!(t.contains("0.512"), "fairness");
    assert!(
        t.contains("owd p99") && t.contains("17.8 ms"),
        "voip one-way delay: {t}"
    );
    assert!(t.contains("timeouts"));
    // Every line of a table section has the header's column positions: check "rate" column ends.
    let lines: Vec<&str> = t.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("class")).unwrap();
    let rate_end = lines[header].find("rate").unwrap() + "rate".len();
    for l in &lines[header + 2..header + 5] {
        assert!(
            l[..rate_end].ends_with("Mbit/s"),
            "rate column misaligned in {l:?}"
        );
    }
    // Children are indented under their parent.
    assert!(lines.iter().any(|l| l.starts_with("  bulk")));
    assert!(lines.iter().any(|l| l.starts_with("root")));
}

#[test]
fn empty_result_still_reports() {
    let result = SimResult::default();
    let dir = out_dir("empty");
    let files = write_all(&result, &dir).unwrap();
    assert_eq!(files.len(), 12);
    let csv = fs::read_to_string(dir.join("timeseries.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1);
    let svg = fs::read_to_string(dir.join("rtt.svg")).unwrap();
    assert!(svg.contains("no RTT samples"));
    check_balanced(&svg);
    assert!(render_table(&result).contains("(no flows)"));
}

#[test]
fn nice_ticks_are_round_numbers() {
    assert_eq!(
        nice_ticks(0.0, 9.7e6, 5),
        vec![0.0, 2e6, 4e6, 6e6, 8e6, 10e6]
    );
    assert_eq!(
        nice_ticks(0.0, 97.0, 5),
        vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    );
    let labels: Vec<String> = nice_ticks(0.0, 0.7, 4)
        .iter()
        .map(|v| format_tick(*v, 0.2))
        .collect();
    assert_eq!(labels, ["0.0", "0.2", "0.4", "0.6", "0.8"]);
    for (span, target) in [(1.0, 5), (37.0, 6), (12345.0, 8), (0.0042, 3), (9.7e6, 5)] {
        let step = nice_step(span, target);
        let mant = step / 10f64.powf(step.log10().floor());
        assert!(
            [1.0, 2.0, 5.0].iter().any(|m| (mant - m).abs() < 1e-9),
            "step {step} for span {span}"
        );
        assert!(span / step <= target as f64 + 1e-9);
        let t = nice_ticks(0.0, span, target);
        assert!(t[0] <= 0.0 && *t.last().unwrap() >= span);
    }
}

#[test]
fn many_long_series_stay_bounded_and_legible() {
    // 35 flows sampled every 10 ms for 100 s: 350 000 rows; plots must stay small.
    let mut result = synthetic();
    result.summary.duration_s = 100.0;
    result.summary.link.rate_bps = 1e9;
    result.samples.clear();
    result.rtt_points.clear();
    for k in 1..=10_000u32 {
        let t = k as f64 * 0.01;
        for f in 0..35u32 {
            let rate =
                28e6 + 1e6 * ((t + f as f64) * 0.7).sin() + if k == 5000 { 20e6 } else { 0.0 };
            result.samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Flow,
                name: format!("a-rather-long-flow-name-number-{f:02}-of-many"),
                bytes: (rate * 0.01 / 8.0) as u64,
                rate_bps: rate,
                backlog_bytes: 0,
                drops: 0,
                rtt_ms: None,
            });
        }
    }
    let dir = out_dir("many");
    let start = std::time::Instant::now();
    write_all(&result, &dir).unwrap();
    let elapsed = start.elapsed();
    assert!(elapsed.as_secs() < 30, "took {elapsed:?}");
    let csv = fs::read_to_string(dir.join("timeseries.csv")).unwrap();
    assert_eq!(csv.lines().count(), 350_001);
    let svg = fs::read_to_string(dir.join("throughput_flows.svg")).unwrap();
    check_balanced(&svg);
    assert!(svg.len() < 3_000_000, "svg is {} bytes", svg.len());
    // The spike at t = 50 s survives downsampling: the y axis reaches past 48 Mbit/s.
    let flows = charts(&result)
        .into_iter()
        .find(|c| c.stem == "throughput_flows")
        .unwrap();
    let scene = layout(&flows.figure);
    assert!(
        svg.contains(">50</text>") || svg.contains(">60</text>"),
        "y axis too short"
    );
    assert!(scene.height > 480 + 26 * 5, "legend rows added below");
    assert!(svg.contains("... 12 more"));
}

#[test]
fn font_sheet_draws_every_printable_character() {
    use linkshare_report::plot::{Anchor, Item, Rect, Scene};
    let chars: String = (32u8..=126).map(char::from).collect();
    let mut items = Vec::new();
    for (row, chunk) in chars.as_bytes().chunks(32).enumerate() {
        items.push(Item::Text {
            x: 10.0,
            y: 40.0 + row as f64 * 40.0,
            text: String::from_utf8(chunk.to_vec()).unwrap(),
            scale: 3,
            anchor: Anchor::Start,
            colour: Rgb(0, 0, 0),
            vertical: false,
        });
    }
    let scene = Scene {
        id: "font".into(),
        title: "font".into(),
        width: 600,
        height: 140,
        background: Rgb::WHITE,
        plot: Rect {
            x: 0.0,
            y: 0.0,
            w: 600.0,
            h: 140.0,
        },
        items,
    };
    let canvas = raster::render(&scene);
    // Each character cell (18 px wide at scale 3) has ink, except the space.
    for (i, c) in chars.chars().enumerate() {
        let (row, col) = (i / 32, i % 32);
        let x0 = 10 + col as u32 * 18;
        let y0 = 40 + row as u32 * 40 - 21;
        let ink = (x0..x0 + 15)
            .flat_map(|x| (y0..y0 + 27).map(move |y| (x, y)))
            .filter(|&(x, y)| canvas.pixel(x, y) == Some(Rgb(0, 0, 0)))
            .count();
        assert_eq!(ink == 0, c == ' ', "character {c:?} has {ink} ink pixels");
    }
    let dir = out_dir("font");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("font.png"), raster::encode_png(&canvas).unwrap()).unwrap();
}

#[test]
fn lab_runs_are_marked_and_simulations_are_not() {
    let sim = synthetic();
    let json = linkshare_report::summary_json(&sim).unwrap();
    assert!(!json.contains("\"lab\""), "{json}");
    assert!(!render_table(&sim).contains("measured in the lab"));

    let mut lab = synthetic();
    lab.summary.lab = Some(linkshare_report::model::LabInfo {
        router: "linkshare".into(),
        wall_clock_s: 9.5,
        interrupted: true,
        notes: vec!["per-flow `extra_delay` is not emulated".into()],
        host: None,
    });
    let v: serde_json::Value =
        serde_json::from_str(&linkshare_report::summary_json(&lab).unwrap()).unwrap();
    assert_eq!(v["lab"]["router"], "linkshare");
    assert_eq!(v["lab"]["interrupted"], true);
    let table = render_table(&lab);
    assert!(
        table.contains("through linkshare (9.5 s wall clock, interrupted)"),
        "{table}"
    );
    assert!(table.contains("note: per-flow `extra_delay`"), "{table}");
    let dir = out_dir("lab-marked");
    write_all(&lab, &dir).unwrap();
    let html = fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("<h1>linkshare lab run: two-classes</h1>"),
        "{html}"
    );
    assert!(html.contains("interrupted"));
}
