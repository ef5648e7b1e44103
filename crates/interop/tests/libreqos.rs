//! `import libreqos`: the documented two-file format → a policy with plans and a subscriber
//! table that `check` accepts in both directions, with oversubscribed nodes scaled (and warned
//! about), fractional rates exact, CAKE diffserv4 where LibreQoS puts it, the uplink applied, and located errors for bad
//! rows; and a generated 10,000-circuit network imported, checked and built (the time is
//! printed, not asserted).

use std::path::Path;
use std::time::Instant;

use linkshare_config::{ClassInfo, LeafKind, Policy};
use linkshare_interop::libreqos::synthetic::{generate, Synthetic};
use linkshare_interop::libreqos::{import, Import, Options};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/libreqos/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn class<'a>(p: &'a Policy, name: &str) -> &'a ClassInfo {
    p.classes()
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no class {name}"))
}

/// Checks an import as `linkshare check` would, with its table beside the policy.
fn check(imp: &Import) -> Policy {
    let table = imp.subscribers.clone();
    Policy::parse_with(&imp.toml, "p.toml", &move |p: &Path| {
        assert_eq!(p, Path::new("subscribers.csv"));
        Ok(table.clone())
    })
    .unwrap_or_else(|e| {
        panic!(
            "{:?}\n{}\n{}",
            &e.diagnostics[..3.min(e.diagnostics.len())],
            imp.toml,
            &imp.subscribers[..imp.subscribers.len().min(2000)]
        )
    })
}

fn documented(opts: &Options) -> Import {
    import(
        &fixture("network.json"),
        "network.json",
        &fixture("ShapedDevices.csv"),
        "ShapedDevices.csv",
        opts,
    )
    .unwrap()
}

#[test]
fn documented_files_import_in_both_directions() {
    let imp = documented(&Options::default());
    let p = check(&imp);
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    // AP_A: 3 x 40 = 120 > 100: scaled by 100/120; the warning names the node and the factor.
    let w: Vec<String> = imp.warnings.iter().map(|d| d.to_string()).collect();
    assert!(
        w.iter().any(|m| m.contains("network.json:7:")
            && m.contains("`AP_A`")
            && m.contains("download")
            && m.contains("0.8333")),
        "{w:?}"
    );
    let c1 = class(&p, "968 Circle St., Gurnee");
    assert_eq!(c1.parent.as_deref(), Some("AP_A"));
    assert_eq!(c1.rate.bits_per_sec(), 40_000_000 * 100 / 120);
    assert_eq!(
        c1.ceil.bits_per_sec(),
        100_000_000,
        "max 155 lowered to AP_A's 100"
    );
    let c4 = class(&p, "8493 Campfire Street");
    assert_eq!(
        (c4.rate.bits_per_sec(), c4.ceil.bits_per_sec()),
        (25_500_000, 100_500_000)
    );
    // LibreQoS's queues: CAKE diffserv4 (default_sqm) unless the sqm column says otherwise.
    let diffserv = |c: &ClassInfo| match &c.leaf {
        LeafKind::Cake(q) => q.diffserv.name(),
        other => panic!("{other:?}"),
    };
    assert_eq!(diffserv(c4), "diffserv4");
    assert_eq!(diffserv(c1), "diffserv4");
    assert_eq!(class(&p, "31 Marconi Street").leaf.name(), "fq_codel");
    assert_eq!(class(&p, "Flat one").parent.as_deref(), Some("root"));
    assert_eq!(class(&p, "Flat one").leaf.name(), "pfifo");
    // The subscriber form: plans in the policy, one row per circuit, nothing per class.
    assert!(imp.toml.contains("[[plan]]") && !imp.toml.contains("[[filter]]"));
    assert_eq!(imp.subscribers.lines().count(), 1 + 6);
    // Each row carries its Circuit ID (devices of one circuit: one row, one id).
    let ids: Vec<(&str, &str)> = p.circuit_ids().collect();
    assert_eq!(ids.len(), 6, "{ids:?}");
    assert!(ids.contains(&("968 Circle St., Gurnee", "1")), "{ids:?}");
    assert!(ids.contains(&("Two devices", "5")), "{ids:?}");
    // Filters: every address of every device, on dst, host bits cleared.
    let dst: Vec<String> = p
        .filters()
        .iter()
        .filter_map(|f| f.spec.dst.map(|d| format!("{}={d}", f.class)))
        .collect();
    assert_eq!(dst.len(), 10, "{dst:?}");
    assert!(dst.contains(&"968 Circle St., Gurnee=100.64.0.14/32".to_string()));
    assert!(dst.contains(&"8493 Campfire Street=100.64.1.0/24".to_string()));
    assert!(p.filters().iter().all(|f| f.spec.src.is_none()));

    // The upload side of the same policy: source addresses, upload rates, upload sqm.
    let q = p.upload().expect("both directions");
    assert!(q
        .filters()
        .iter()
        .all(|f| f.spec.src.is_some() && f.spec.dst.is_none()));
    assert_eq!(
        class(q, "8493 Campfire Street").rate.bits_per_sec(),
        12_500_000
    );
    // Directional sqm: circuit 3 is cake down, fq_codel up; circuit 5 has none up.
    assert_eq!(class(q, "Two devices").leaf.name(), "pfifo");
    assert_eq!(class(&p, "Two devices").leaf.name(), "cake");
    assert_eq!(class(&p, "255 NW. Newport Ave.").leaf.name(), "cake");
    assert_eq!(class(q, "255 NW. Newport Ave.").leaf.name(), "fq_codel");
    // Without an sqm, both directions are CAKE diffserv4.
    assert_eq!(diffserv(class(q, "8493 Campfire Street")), "diffserv4");
}

#[test]
fn the_uplink_caps_and_scales_what_is_below_it() {
    // 300 Mbit/s down, 60 up: the sites (1000 + 200 down) are capped at it and their
    // guarantees scaled to fit it, as LibreQoS caps everything at the upstream capacity.
    let imp = documented(&Options {
        uplink: Some((300_000_000, 60_000_000)),
        ..Options::default()
    });
    let p = check(&imp);
    let root = class(&p, "root");
    assert_eq!((root.rate.0, root.ceil.0), (300_000_000, 300_000_000));
    let s1 = class(&p, "Site_1");
    assert_eq!(s1.ceil.0, 300_000_000);
    let top: u64 = ["Site_1", "Site_2", "unshaped", "Flat one"]
        .iter()
        .map(|n| class(&p, n).rate.0)
        .sum();
    assert!(top <= 300_000_000, "{top}");
    let u = p.upload().unwrap();
    assert_eq!(class(u, "root").rate.0, 60_000_000);
    assert!(imp
        .warnings
        .iter()
        .any(|w| w.message.contains("under `the uplink`")));
    assert!(!imp.toml.contains("no uplink given"));
}

#[test]
fn bad_rows_get_file_and_line() {
    let net = fixture("network.json");
    let dev = fixture("ShapedDevices.csv")
        .replace("40,10,60,20,,fq_codel", "4o,10,60,20,,fq_codel")
        .replace(",AP_9,,", ",AP_99,,");
    let o = Options::default();
    let e = import(&net, "network.json", &dev, "ShapedDevices.csv", &o).unwrap_err();
    let msgs: Vec<String> = e.errors.iter().map(|d| d.to_string()).collect();
    assert!(
        msgs.iter()
            .any(|m| m
                .starts_with("ShapedDevices.csv:6: error: circuit `2`: download min mbps `4o`")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.starts_with("ShapedDevices.csv:8: error: circuit `4`: parent node `AP_99`")),
        "{msgs:?}"
    );
    let e = import("{\"a\": 5", "network.json", &dev, "d.csv", &o).unwrap_err();
    assert!(
        e.errors[0]
            .to_string()
            .starts_with("network.json:1: error: not valid JSON"),
        "{e}"
    );
    let e = import(
        "{\"x\": {\"type\": \"Site\", \"downloadBandwidthMbps\": 5, \"uploadBandwidthMbps\": 1}}",
        "n.json",
        "Circuit ID\n",
        "d.csv",
        &o,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("d.csv:1: error: the header lacks column(s)"),
        "{e}"
    );
    let e = import(
        "{\"x\": {\"downloadBandwidthMbps\": 5}}",
        "n.json",
        &dev,
        "d.csv",
        &o,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("node `x` has no valid `uploadBandwidthMbps`"),
        "{e}"
    );
}

#[test]
fn ten_thousand_generated_circuits_round_trip() {
    let s = Synthetic {
        ipv6: true,
        ..Synthetic::new(10_000)
    };
    let (net, csv) = generate(&s);
    let t0 = Instant::now();
    let imp = import(
        &net,
        "network.json",
        &csv,
        "ShapedDevices.csv",
        &Options::default(),
    )
    .unwrap();
    let t_import = t0.elapsed();
    let t1 = Instant::now();
    let p = check(&imp);
    let t_check = t1.elapsed();
    eprintln!(
        "10,000 circuits: import {:.3} s ({} + {} bytes), check {:.3} s",
        t_import.as_secs_f64(),
        imp.toml.len(),
        imp.subscribers.len(),
        t_check.as_secs_f64(),
    );
    // root, unshaped, 25 sites, 200 APs, then the circuits; two addresses each.
    assert_eq!(p.classes().len(), 2 + 25 + 200 + 10_000);
    assert_eq!(p.filters().len(), 20_000);
    assert_eq!(
        p.subscribers().unwrap().plans.len(),
        4 + 1,
        "4 plans + scaled rows"
    );
    assert!(
        p.warnings().is_empty(),
        "{:?}",
        &p.warnings()[..3.min(p.warnings().len())]
    );
    // Sites hold 8 APs of 2000 Mbit/s in 10000 (down) and of 400 in 2000 (up): scaled, each;
    // APs hold 50 circuits of 46.25 Mbit/s mean minimum (9.25 up) in what the site's scaling
    // left them (1250 and 250): scaled too.
    let count = |dir: &str, what: &str| {
        imp.warnings
            .iter()
            .filter(|w| w.message.contains(dir) && w.message.contains(what))
            .count()
    };
    assert_eq!(count("download", "`Site_"), 25);
    assert_eq!(count("download", "`AP_"), 200);
    assert_eq!(count("upload", "`Site_"), 25);
    assert_eq!(count("upload", "`AP_"), 200);
    // Circuit 1234 (index 1233) keeps its address and AP.
    let c = class(&p, "Subscriber 1234");
    assert_eq!(
        c.parent.as_deref(),
        Some(&*format!("AP_{}_{}", 1233 % 200 / 8, 1233 % 8))
    );
    let f: Vec<String> = p
        .filters()
        .iter()
        .filter(|f| f.class == "Subscriber 1234")
        .map(|f| f.spec.dst.unwrap().to_string())
        .collect();
    assert_eq!(f, ["100.64.4.209/32", "2001:db8:0:4d1::/64"]);
}
