//! `export tc` → `import tc` gives the same tree: same classes (names, parents, rates, ceils,
//! bursts, prios, quanta, leaves), default, r2q, filters and link layer (`stab`), on the repository's policies and
//! on a few written to exercise every leaf and filter shape the exporter writes.

use linkshare_config::Policy;
use linkshare_interop::tc::{export, import};

/// Everything `check` shows about a policy, in comparable form.
fn shape(p: &Policy) -> (String, Option<u32>, Vec<String>, Vec<String>, String) {
    let classes = p
        .classes()
        .iter()
        .map(|c| {
            format!(
                "{} parent={:?} rate={} ceil={} burst={} cburst={} prio={} quantum={} leaf={}",
                c.name,
                c.parent,
                c.rate.bits_per_sec(),
                c.ceil.bits_per_sec(),
                c.burst,
                c.cburst,
                c.prio,
                c.quantum,
                if c.is_leaf {
                    format!("{:?}", c.leaf)
                } else {
                    "-".into()
                }
            )
        })
        .collect();
    let filters = p
        .filters()
        .iter()
        .map(|f| format!("{} {:?}", f.class, f.spec))
        .collect();
    let r2q = (p.kind_name() == "htb").then(|| p.htb_params().r2q);
    let link = format!("{:?}", p.link_layer());
    (p.default_class().to_string(), r2q, classes, filters, link)
}

fn round_trip(name: &str, text: &str) {
    let p = Policy::parse(text, name).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    for shell in [false, true] {
        let script = export::tc_script(&p, "eth0").unwrap();
        let script = if shell {
            export::as_shell(&script, "eth0")
        } else {
            script
        };
        let imported = import::import_script(&script, "x.tc", None)
            .unwrap_or_else(|e| panic!("{name}: {}\n{script}", e.render(Some(&script))));
        let q = Policy::parse(&imported.toml, "imported.toml")
            .unwrap_or_else(|e| panic!("{name}: {e:?}\n{}", imported.toml));
        assert_eq!(
            shape(&p),
            shape(&q),
            "{name} (shell {shell}):\n{script}\n{}",
            imported.toml
        );
    }
}

#[test]
fn repository_policies_round_trip() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().and_then(|x| x.to_str()) != Some("toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let p = Policy::parse(&text, "p").unwrap();
        if p.kind_name() != "htb" {
            continue;
        }
        round_trip(&path.display().to_string(), &text);
        n += 1;
    }
    assert!(n >= 2, "only {n} HTB policies found in {dir}");
}

#[test]
fn every_leaf_and_filter_shape_round_trips() {
    for f in ["roundtrip-leaves.toml", "roundtrip-filters.toml"] {
        let path = format!("{}/tests/fixtures/{f}", env!("CARGO_MANIFEST_DIR"));
        round_trip(f, &std::fs::read_to_string(&path).unwrap());
    }
}

#[test]
fn link_layer_round_trips_as_a_size_table() {
    let tree = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n";
    for (keys, words) in [
        (
            "overhead = 10\nlinklayer = \"atm\"\n",
            "root handle 1: stab overhead 10 mpu 0 linklayer atm htb",
        ),
        (
            "overhead = -4\nmpu = 64\n",
            "root handle 1: stab overhead -4 mpu 64 linklayer ethernet htb",
        ),
    ] {
        let text = format!("{keys}{tree}");
        let p = Policy::parse(&text, "ll.toml").unwrap_or_else(|e| panic!("{e:?}"));
        let script = export::tc_script(&p, "eth0").unwrap_or_else(|e| panic!("{e}"));
        assert!(script.contains(words), "{script}");
        round_trip("ll.toml", &text);
    }
    // A classless root carries its size table too.
    let leaf = "qdisc = \"sfq\"\noverhead = 40\nmpu = 96\nlinklayer = \"atm\"\n";
    let p = Policy::parse(leaf, "leaf.toml").unwrap_or_else(|e| panic!("{e:?}"));
    let script = export::tc_script(&p, "eth0").unwrap_or_else(|e| panic!("{e}"));
    let imported = import::import_script(&script, "x.tc", None)
        .unwrap_or_else(|e| panic!("{}", e.render(Some(&script))));
    let q = Policy::parse(&imported.toml, "imported.toml")
        .unwrap_or_else(|e| panic!("{e:?}\n{}", imported.toml));
    assert_eq!(
        p.link_layer(),
        q.link_layer(),
        "{script}\n{}",
        imported.toml
    );
}
