//! `export tc` → `import tc` gives the same tree: same classes (names, parents, rates, ceils,
//! bursts, prios, quanta, HFSC curves, leaves), default, r2q, filters and link layer (`stab`), on the repository's policies and
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
                "{} parent={:?} rate={} ceil={} burst={} cburst={} prio={} quantum={} hfsc={:?} leaf={}",
                c.name,
                c.parent,
                c.rate.bits_per_sec(),
                c.ceil.bits_per_sec(),
                c.burst,
                c.cburst,
                c.prio,
                c.quantum,
                c.hfsc,
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
        if !matches!(p.kind_name(), "htb" | "hfsc") {
            continue;
        }
        round_trip(&path.display().to_string(), &text);
        n += 1;
    }
    assert!(n >= 3, "only {n} HTB and HFSC policies found in {dir}");
}

/// Every curve form and key of HFSC: two-piece, umax/dmax (a slope tc cannot hold in whole
/// bytes: noted, yet read back exactly from the script's bits), `sc`, `ul`, an inner class.
#[test]
fn hfsc_curves_round_trip() {
    let text = r#"
qdisc = "hfsc"
default = "bulk"

[[class]]
name = "up"
ls = "10mbit"
ul = "10mbit"

[[class]]
name = "voip"
parent = "up"
rt = { m1 = "400kbit", d = "30ms", m2 = "100kbit" }
ls = "100kbit"

[[class]]
name = "video"
parent = "up"
rt = { umax = "1500b", dmax = "21ms", rate = "400kbit" }
ls = { m1 = "2mbit", d = "10ms", m2 = "1mbit" }
ul = "5mbit"
leaf = "fq_codel"

[[class]]
name = "bulk"
parent = "up"
sc = "8900kbit"

[[filter]]
class = "voip"
dscp = "ef"
"#;
    round_trip("hfsc", text);
    let p = Policy::parse(text, "h").unwrap();
    let script = export::tc_script(&p, "eth0").unwrap();
    assert!(
        script.contains("qdisc replace dev eth0 root handle 1: hfsc default 4"),
        "{script}"
    );
    assert!(
        script.contains(
            "classid 1:2 hfsc rt m1 400000bit d 30000us m2 100000bit ls m2 100000bit  # voip"
        ),
        "{script}"
    );
    assert!(
        script.contains("classid 1:4 hfsc sc m2 8900000bit  # bulk"),
        "{script}"
    );
    assert!(
        script.contains("# note: class `video`: tc keeps curve slopes in whole bytes/s"),
        "{script}"
    );
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

#[test]
fn a_cake_root_round_trips_with_its_options() {
    for text in [
        "qdisc = \"cake\"\n",
        "qdisc = { type = \"cake\", bandwidth = \"20mbit\", diffserv = \"diffserv8\", \
         isolation = \"dual-srchost\", ack_filter = \"on\", overhead = \"ethernet ether-vlan\", \
         rtt = \"lan\", memlimit = \"4m\", ingress = true }\n",
        "qdisc = { type = \"cake\", overhead = \"44 atm\", mpu = 96, rtt = \"40ms\" }\n",
    ] {
        let p = Policy::parse(text, "cake.toml").unwrap_or_else(|e| panic!("{e:?}"));
        let script = export::tc_script(&p, "eth0").unwrap_or_else(|e| panic!("{e}"));
        let imported = import::import_script(&script, "x.tc", None)
            .unwrap_or_else(|e| panic!("{}", e.render(Some(&script))));
        let q = Policy::parse(&imported.toml, "imported.toml")
            .unwrap_or_else(|e| panic!("{e:?}\n{}", imported.toml));
        assert_eq!(p.root_leaf(), q.root_leaf(), "{script}\n{}", imported.toml);
        assert!(q.warnings().is_empty(), "{:?}", q.warnings());
    }
}

/// A subscriber policy: `n` classes under two parents, one single-address filter each
/// (`side` = "dst" or "src"), IPv4 first then `v6` IPv6 subscribers, between two other filters.
fn subscribers(n: usize, v6: usize, side: &str) -> String {
    let mut s = String::from(
        "qdisc = \"htb\"\ndefault = \"other\"\n[[class]]\nname = \"up\"\nrate = \"1gbit\"\n\
         [[class]]\nname = \"site1\"\nparent = \"up\"\nrate = \"499mbit\"\n\
         [[class]]\nname = \"site2\"\nparent = \"up\"\nrate = \"499mbit\"\n\
         [[class]]\nname = \"other\"\nparent = \"up\"\nrate = \"1mbit\"\n",
    );
    for k in 0..n + v6 {
        let parent = if k % 2 == 0 { "site1" } else { "site2" };
        s.push_str(&format!(
            "[[class]]\nname = \"sub{k}\"\nparent = \"{parent}\"\nrate = \"1mbit\"\nceil = \"20mbit\"\n\
             leaf = {{ type = \"fq_codel\" }}\n"
        ));
    }
    s.push_str("[[filter]]\ndscp = \"ef\"\nclass = \"other\"\n");
    for k in 0..n {
        s.push_str(&format!(
            "[[filter]]\n{side} = \"10.{}.{}.{}/32\"\nclass = \"sub{k}\"\n",
            k / 65536,
            (k / 256) % 256,
            k % 256
        ));
    }
    for k in n..n + v6 {
        s.push_str(&format!(
            "[[filter]]\n{side} = \"fd00::{:x}/128\"\nclass = \"sub{k}\"\n",
            k
        ));
    }
    s.push_str("[[filter]]\nprotocol = \"udp\"\ndst_port = \"5000-5003\"\nclass = \"other\"\n");
    s
}

#[test]
fn address_filters_export_as_hash_tables_and_import_back() {
    for side in ["dst", "src"] {
        let text = subscribers(600, 40, side);
        round_trip(&format!("subscribers-{side}"), &text);
        let p = Policy::parse(&text, "s.toml").unwrap();
        let script = export::tc_script(&p, "eth0").unwrap();
        // One table per family, not one priority per subscriber.
        assert_eq!(script.matches("divisor 256").count(), 2, "{side}");
        let at = if side == "dst" {
            "at 16 link"
        } else {
            "at 12 link"
        };
        assert!(script.contains(at), "{side}");
        let at6 = if side == "dst" {
            "at 36 link"
        } else {
            "at 20 link"
        };
        assert!(script.contains(at6), "{side}");
        // 10.0.1.44 (subscriber 300) sits in bucket 0x2c.
        assert!(
            script.contains(&format!("ht 2:2c: match ip {side} 10.0.1.44/32 flowid 1:")),
            "{side}"
        );
        let top = script
            .lines()
            .filter_map(|l| l.split(" prio ").nth(1))
            .filter_map(|r| r.split(' ').next())
            .filter_map(|p| p.parse::<u32>().ok())
            .max();
        // ef (v4, v6), the v4 table, the v6 table, the port rule (v4, v6): 6 priorities.
        assert_eq!(top, Some(6), "{side}");
    }
}

#[test]
fn a_repeated_address_is_left_out_of_the_table_as_it_never_matches() {
    let mut text = subscribers(40, 0, "dst");
    // A second filter for subscriber 3's address, to another class, inside the run.
    text = text.replace(
        "[[filter]]\ndst = \"10.0.0.5/32\"",
        "[[filter]]\ndst = \"10.0.0.3/32\"\nclass = \"sub7\"\n[[filter]]\ndst = \"10.0.0.5/32\"",
    );
    let p = Policy::parse(&text, "d.toml").unwrap();
    let script = export::tc_script(&p, "eth0").unwrap();
    assert_eq!(script.matches("match ip dst 10.0.0.3/32").count(), 1);
    assert!(script.contains("repeat an earlier address"), "{script}");
    let imported = import::import_script(&script, "d.tc", None).unwrap();
    let q = Policy::parse(&imported.toml, "i.toml").unwrap();
    let to3: Vec<&str> = q
        .filters()
        .iter()
        .filter(|f| f.spec.dst.is_some_and(|d| d.addr.to_string() == "10.0.0.3"))
        .map(|f| f.class.as_str())
        .collect();
    assert_eq!(to3, vec!["sub3"]);
}

#[test]
fn a_tree_over_the_class_limit_is_split_over_mq_and_reads_back() {
    // A limit of 300 classes per HTB stands in for 65,533: two top-level classes of ~320 each.
    let mut text = String::from("qdisc = \"htb\"\ndefault = \"a-other\"\n");
    for top in ["a", "b", "c"] {
        text.push_str(&format!(
            "[[class]]\nname = \"{top}\"\nrate = \"100mbit\"\n"
        ));
        text.push_str(&format!(
            "[[class]]\nname = \"{top}-other\"\nparent = \"{top}\"\nrate = \"1mbit\"\n"
        ));
        for k in 0..(if top == "c" { 20 } else { 250 }) {
            text.push_str(&format!(
                "[[class]]\nname = \"{top}{k}\"\nparent = \"{top}\"\nrate = \"100kbit\"\nleaf = \"sfq\"\n"
            ));
        }
    }
    for (n, top) in ["a", "b", "c"].iter().enumerate() {
        for k in 0..(if *top == "c" { 20 } else { 250 }) {
            text.push_str(&format!(
                "[[filter]]\ndst = \"10.{n}.{}.{}/32\"\nclass = \"{top}{k}\"\n",
                k / 256,
                k % 256
            ));
        }
    }
    let p = Policy::parse(&text, "mq.toml").unwrap();
    let opts = export::ExportOptions {
        htb_class_limit: 300,
        ..Default::default()
    };
    let script = export::tc_script_with(&p, "eth0", &opts).unwrap();
    assert!(script.contains("root handle 1: mq"), "{script}");
    // a (252 classes) fills queue 1 and has the default (its second class); b and c
    // (252 + 22) share queue 2.
    assert!(script.contains("qdisc add dev eth0 parent 1:1 handle 2: htb default 2 "));
    assert!(script.contains("qdisc add dev eth0 parent 1:2 handle 3: htb r2q"));
    assert!(!script.contains("parent 1:3 "));
    assert!(script.contains("class add dev eth0 parent 3: classid 3:1 htb"));
    assert_eq!(script.matches("divisor 256").count(), 2);
    let imported = import::import_script(&script, "mq.tc", None)
        .unwrap_or_else(|e| panic!("{}", e.render(Some(&script))));
    let q = Policy::parse(&imported.toml, "i.toml").unwrap();
    assert_eq!(shape(&p), shape(&q));

    // One top-level class with more classes beneath it than one HTB can number: the error says
    // which, the limit and what to do.
    let opts = export::ExportOptions {
        htb_class_limit: 200,
        ..Default::default()
    };
    let e = export::tc_script_with(&p, "eth0", &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("class `a`") && e.contains("252 classes") && e.contains("200"),
        "{e}"
    );
    assert!(e.contains("split it into top-level classes"), "{e}");
}

#[test]
fn more_u32_priorities_than_the_kernel_takes_is_an_error_that_says_what_to_do() {
    // 1,100 port filters without an address: an IPv4 and an IPv6 priority each, 2,200 in all.
    let mut text = String::from(
        "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n",
    );
    for k in 0..1100 {
        text.push_str(&format!(
            "[[filter]]\nprotocol = \"udp\"\ndst_port = {}\nclass = \"a\"\n",
            10000 + k
        ));
    }
    let p = Policy::parse(&text, "many.toml").unwrap();
    let e = export::tc_script(&p, "eth0").unwrap_err().to_string();
    assert!(e.contains("2047") && e.contains("hash table"), "{e}");
}
