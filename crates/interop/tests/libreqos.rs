//! `import libreqos`: the documented two-file format → an HTB policy that `check` accepts, with
//! oversubscribed nodes scaled (and warned about), fractional rates exact, cake noted, and
//! located errors for bad rows; and a generated 10,000-circuit network imported and checked in
//! seconds (the time is printed, not asserted).

use std::time::Instant;

use linkshare_config::Policy;
use linkshare_interop::libreqos::{import, Direction};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/libreqos/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn class<'a>(p: &'a Policy, name: &str) -> &'a linkshare_config::ClassInfo {
    p.classes()
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no class {name}"))
}

#[test]
fn documented_files_import_in_both_directions() {
    let (net, dev) = (fixture("network.json"), fixture("ShapedDevices.csv"));
    let down = import(
        &net,
        "network.json",
        &dev,
        "ShapedDevices.csv",
        Direction::Download,
    )
    .unwrap();
    let p =
        Policy::parse(&down.toml, "down.toml").unwrap_or_else(|e| panic!("{e:?}\n{}", down.toml));
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    // AP_A: 3 x 40 = 120 > 100: scaled by 100/120; the warning names the node and the factor.
    let w: Vec<String> = down.warnings.iter().map(|d| d.to_string()).collect();
    assert!(
        w.iter()
            .any(|m| m.contains("network.json:7:") && m.contains("`AP_A`") && m.contains("0.8333")),
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
    assert_eq!(c4.leaf.name(), "fq_codel");
    assert!(down.toml.contains("# note: sqm cake"), "{}", down.toml);
    assert_eq!(class(&p, "Flat one").parent.as_deref(), Some("root"));
    assert_eq!(class(&p, "Flat one").leaf.name(), "pfifo");
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

    let up = import(
        &net,
        "network.json",
        &dev,
        "ShapedDevices.csv",
        Direction::Upload,
    )
    .unwrap();
    let q = Policy::parse(&up.toml, "up.toml").unwrap();
    assert!(q
        .filters()
        .iter()
        .all(|f| f.spec.src.is_some() && f.spec.dst.is_none()));
    assert_eq!(
        class(&q, "8493 Campfire Street").rate.bits_per_sec(),
        12_500_000
    );
    // Directional sqm: circuit 3 is cake down, fq_codel up; circuit 5 has none up.
    assert_eq!(class(&q, "Two devices").leaf.name(), "pfifo");
    assert_eq!(class(&p, "Two devices").leaf.name(), "fq_codel");
}

#[test]
fn bad_rows_get_file_and_line() {
    let net = fixture("network.json");
    let dev = fixture("ShapedDevices.csv")
        .replace("40,10,60,20,,fq_codel", "4o,10,60,20,,fq_codel")
        .replace(",AP_9,,", ",AP_99,,");
    let e = import(
        &net,
        "network.json",
        &dev,
        "ShapedDevices.csv",
        Direction::Download,
    )
    .unwrap_err();
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
    let e = import(
        "{\"a\": 5",
        "network.json",
        &dev,
        "d.csv",
        Direction::Download,
    )
    .unwrap_err();
    assert!(
        e.errors[0]
            .to_string()
            .starts_with("network.json:1: error: not valid JSON"),
        "{e}"
    );
    let e = import(
        "{\"x\": {\"type\": \"Site\"}}",
        "n.json",
        "Circuit ID\n",
        "d.csv",
        Direction::Download,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("d.csv:1: error: the header lacks column(s)"),
        "{e}"
    );
}

/// A network of `sites` sites × `aps` APs with `n` circuits spread over the APs, each AP
/// oversubscribed by its minimums.
fn generate(n: usize, sites: usize, aps: usize) -> (String, String) {
    let mut net = String::from("{\n");
    for s in 0..sites {
        net.push_str(&format!("  \"Site_{s}\": {{ \"downloadBandwidthMbps\": 10000, \"uploadBandwidthMbps\": 2000, \"type\": \"Site\", \"children\": {{\n"));
        for a in 0..aps {
            let comma = if a + 1 < aps { "," } else { "" };
            net.push_str(&format!("    \"AP_{s}_{a}\": {{ \"downloadBandwidthMbps\": 1000, \"uploadBandwidthMbps\": 200, \"type\": \"AP\" }}{comma}\n"));
        }
        net.push_str(&format!(
            "  }} }}{}\n",
            if s + 1 < sites { "," } else { "" }
        ));
    }
    net.push('}');
    let mut csv = String::from("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm\n");
    for i in 0..n {
        let ap = i % (sites * aps);
        csv.push_str(&format!(
            "{i},Subscriber {i},{i},cpe{i},AP_{}_{},,100.{}.{}.{},2001:db8:{:x}::/56,{}.5,2,{},20,,{}\n",
            ap / aps,
            ap % aps,
            64 + i / 65536,
            (i / 256) % 256,
            i % 256,
            i,
            10 + i % 40,
            100 + i % 400,
            if i % 3 == 0 { "cake" } else { "" }
        ));
    }
    (net, csv)
}

#[test]
fn ten_thousand_circuits_import_and_check_in_seconds() {
    let (net, csv) = generate(10_000, 10, 10);
    let t0 = Instant::now();
    let imp = import(
        &net,
        "network.json",
        &csv,
        "ShapedDevices.csv",
        Direction::Download,
    )
    .unwrap();
    let t_import = t0.elapsed();
    let t1 = Instant::now();
    let p = Policy::parse(&imp.toml, "big.toml")
        .unwrap_or_else(|e| panic!("{:?}", &e.diagnostics[..3.min(e.diagnostics.len())]));
    let t_check = t1.elapsed();
    let t2 = Instant::now();
    let q = p.build::<linkshare_core::PacketMeta>().unwrap();
    let t_build = t2.elapsed();
    drop(q);
    eprintln!(
        "10,000 circuits: import {:.3} s ({} bytes of TOML, {} classes, {} filters, {} scaling warnings), parse+validate {:.3} s, build (classifier compiled) {:.3} s",
        t_import.as_secs_f64(),
        imp.toml.len(),
        p.classes().len(),
        p.filters().len(),
        imp.warnings.len(),
        t_check.as_secs_f64(),
        t_build.as_secs_f64()
    );
    assert_eq!(p.classes().len(), 10_000 + 110 + 2);
    assert_eq!(p.filters().len(), 20_000);
    assert!(
        p.warnings().is_empty(),
        "{:?}",
        &p.warnings()[..3.min(p.warnings().len())]
    );
    // Every AP holds 100 circuits of 10.5..49.5 Mbit/s minimums against 1000 Mbit/s: scaled.
    assert_eq!(imp.warnings.len(), 100);
}
