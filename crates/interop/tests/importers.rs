//! `import tc` on hand-written scripts (both forms), `import pf` on OpenBSD and FreeBSD files,
//! and bad inputs with their `file:line` messages. Every accepted import is checked with
//! linkshare_config, the parser `linkshare check` uses.

use linkshare_config::Policy;
use linkshare_core::hfsc::ServiceCurve;
use linkshare_interop::{pf, tc::import, Imported};

fn fixture(p: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/{p}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn checked(i: &Imported) -> Policy {
    let p = Policy::parse(&i.toml, "imported.toml").unwrap_or_else(|e| panic!("{e:?}\n{}", i.toml));
    assert!(p.warnings().is_empty(), "{:?}\n{}", p.warnings(), i.toml);
    p
}

fn class<'a>(p: &'a Policy, name: &str) -> &'a linkshare_config::ClassInfo {
    p.classes()
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no class {name}"))
}

#[test]
fn tc_shell_and_batch_forms_give_the_same_policy() {
    let sh = import::import_script(&fixture("tc/shell.sh"), "shell.sh", None).unwrap();
    let bt = import::import_script(&fixture("tc/batch.tc"), "batch.tc", None).unwrap();
    let (a, b) = (checked(&sh), checked(&bt));
    assert_eq!(a.render_tree(), b.render_tree());
    assert_eq!(a.filter_descriptions(), b.filter_descriptions());
    assert_eq!(a.default_class(), "1:30");
    let c = class(&a, "1:20");
    assert_eq!(
        (c.rate.bits_per_sec(), c.ceil.bits_per_sec(), c.burst),
        (3_000_000, 6_000_000, 15 * 1024)
    );
    assert_eq!(c.leaf.name(), "fq_codel");
    assert_eq!(class(&a, "1:10").leaf.name(), "sfq");
    assert_eq!(class(&a, "1:30").prio, 7);
    let f = a.filters();
    assert_eq!(f.len(), 4);
    assert_eq!(
        (f[0].class.as_str(), f[0].spec.dst_port),
        ("1:10", Some((80, 80)))
    );
    assert_eq!(
        (f[1].class.as_str(), f[1].spec.src_port),
        ("1:20", Some((25, 25)))
    );
    assert_eq!(
        (f[2].spec.tos, f[2].spec.protocol),
        (Some((0x10, 0xff)), Some(6))
    );
    assert_eq!(f[3].spec.dst_port, Some((5000, 5100)));
    // cake keeps its options.
    match &class(&a, "1:30").leaf {
        linkshare_config::LeafKind::Cake(q) => assert_eq!(
            (q.bandwidth.map(|r| r.bits_per_sec()), q.diffserv.name()),
            (Some(6_000_000), "diffserv4")
        ),
        other => panic!("{other:?}"),
    }
    // Notes: ports without protocol, the shell lines that are not tc.
    assert!(sh.toml.contains("# note: u32 reads ports of any protocol"));
    assert!(
        sh.toml
            .contains("# note: lines that are not tc commands were ignored: 3 (set), 21 (ip)"),
        "{}",
        sh.toml
    );
}

#[test]
fn tc_bad_input_gets_file_and_line() {
    let e = import::import_script(&fixture("tc/bad.tc"), "bad.tc", None).unwrap_err();
    let m: Vec<String> = e.errors.iter().map(|d| d.to_string()).collect();
    assert!(
        m.iter()
            .any(|x| x.starts_with("bad.tc:5: error: `match ip ttl`")),
        "{m:?}"
    );
    let e = import::import_script(
        &fixture("tc/bad.tc").replace("match ip ttl 1 0xff", "match ip dport 22 0xffff"),
        "bad.tc",
        None,
    )
    .unwrap_err();
    let m: Vec<String> = e.errors.iter().map(|d| d.to_string()).collect();
    assert!(
        m.iter()
            .any(|x| x.starts_with("bad.tc:3: error: class 1:10: its parent 1:5 does not exist")),
        "{m:?}"
    );
    assert!(
        m.iter()
            .any(|x| x.starts_with("bad.tc:4: error: htb: unknown class option `ceill`")),
        "{m:?}"
    );
    assert!(
        m.iter()
            .any(|x| x.starts_with("bad.tc:6: error: the filter sends packets to class 1:99")),
        "{m:?}"
    );
    for (text, want) in [
        (
            "qdisc add dev x root handle 1: hfsc default 1\nclass add dev x parent 1: classid 1:1 hfsc rt m1 1mbit d 10ms\n",
            "2: error: hfsc: the curve has no `m2`",
        ),
        (
            "qdisc add dev x root handle 1: hfsc default 1 r2q 10\nclass add dev x parent 1: classid 1:1 hfsc sc rate 1mbit\n",
            "1: error: hfsc: unknown qdisc option `r2q`",
        ),
        (
            "tc qdisc add dev x root sfq perturb\n",
            "1: error: sfq: `perturb` needs a value",
        ),
        (
            "tc qdisc add dev x root handle 1: htb\ntc frobnicate\n",
            "2: error: unknown tc command",
        ),
        (
            "tc qdisc add dev 'x root sfq\n",
            "1: error: unterminated ' quote",
        ),
        (
            "tc filter add dev x parent 1: u32 match ip src 10.0.0.0/8 classid 1:1 action drop\n",
            "1: error: `action`",
        ),
    ] {
        let e = import::import_script(text, "t.sh", None).unwrap_err();
        assert!(
            e.errors
                .iter()
                .any(|d| d.to_string().starts_with(&format!("t.sh:{want}"))),
            "{want}: {e}"
        );
    }
}

#[test]
fn pf_openbsd_queues_and_rules() {
    let i = pf::import(&fixture("pf/openbsd.conf"), "pf.conf", None).unwrap();
    let p = checked(&i);
    assert_eq!(p.kind_name(), "hfsc");
    assert_eq!(p.hfsc_compat(), Some(linkshare_config::HfscCompat::OpenBsd));
    assert_eq!(p.default_class(), "qdef");
    let curves = |n: &str| {
        class(&p, n)
            .hfsc
            .unwrap_or_else(|| panic!("{n} has no curves"))
    };
    let rate = |m: u64| Some(ServiceCurve::rate(m));
    // bandwidth = ls, min = rt, max = ul.
    let root = curves("rootq");
    assert_eq!(
        (root.rt, root.ls, root.ul),
        (None, rate(20_000_000), rate(20_000_000))
    );
    let web = curves("qweb");
    assert_eq!(
        (web.rt, web.ls, web.ul),
        (rate(4_000_000), rate(6_000_000), rate(18_000_000))
    );
    assert_eq!(class(&p, "qweb").leaf.name(), "fq_codel");
    assert_eq!(
        (curves("qssh").rt, curves("qssh").ul),
        (None, rate(4_000_000))
    );
    assert_eq!(class(&p, "qdef").leaf.to_string(), "pfifo(limit 200)");
    // `min 500K burst 3M for 200ms`: the real-time curve's first segment.
    let dns = curves("qdns");
    assert_eq!(dns.ls, rate(1_000_000));
    assert_eq!(
        dns.rt,
        Some(ServiceCurve {
            m1: 3_000_000,
            d: 200_000_000,
            m2: 500_000
        })
    );
    assert!(curves("main").rt.is_none());
    // Filters: quick rule first, then the others from last to first; lists expanded; the
    // `in` rule swapped; the table rule left out.
    let f: Vec<(String, String)> = p
        .filters()
        .iter()
        .zip(p.filter_descriptions())
        .map(|(f, d)| (f.class.clone(), d))
        .collect();
    assert_eq!(f[0].0, "qdns");
    assert_eq!(f.iter().filter(|x| x.0 == "qdns").count(), 2, "{f:?}");
    assert_eq!(f[2].0, "qssh", "{f:?}");
    assert!(f[2].1.contains("6000-6010"), "{f:?}");
    let ssh = p
        .filters()
        .iter()
        .find(|x| x.class == "qssh" && x.spec.src.is_some())
        .unwrap();
    assert_eq!(ssh.spec.src_port, Some((22, 22)));
    assert_eq!(ssh.spec.src.unwrap().to_string(), "192.168.1.0/24");
    assert_eq!(p.filters().iter().filter(|x| x.class == "qweb").count(), 2);
    assert!(!p
        .filters()
        .iter()
        .any(|x| x.class == "spamd" && x.spec.src.is_some()));
    assert!(i.toml.contains("the rule at line 19 was left out: no address of `from` can be matched (table <spammers> left out"), "{}", i.toml);
    assert!(i.toml.contains("second queue `qdns`"));
}

#[test]
fn pf_freebsd_cbq_and_priq() {
    let i = pf::import(&fixture("pf/freebsd-cbq.conf"), "pf.conf", None).unwrap();
    let p = checked(&i);
    assert_eq!(p.kind_name(), "cbq");
    assert_eq!(p.default_class(), "std");
    assert_eq!(class(&p, "root").rate.bits_per_sec(), 10_000_000);
    assert_eq!(class(&p, "http").rate.bits_per_sec(), 6_000_000);
    assert_eq!(class(&p, "developers").rate.bits_per_sec(), 4_500_000);
    assert_eq!(class(&p, "ssh_interactive").prio, 0);
    assert_eq!(class(&p, "mail").prio, 7);
    assert!(class(&p, "developers").cbq.as_ref().unwrap().borrow);
    assert!(!class(&p, "employees").cbq.as_ref().unwrap().borrow);
    assert_eq!(class(&p, "mail").leaf.name(), "red");
    assert_eq!(
        p.filters()[0].spec.dst_port,
        Some((1025, 1999)),
        "quick rule first, >< exclusive"
    );
    assert_eq!(p.filters()[0].class, "ssh_interactive");

    let i = pf::import(&fixture("pf/freebsd-priq.conf"), "pf.conf", None).unwrap();
    let p = checked(&i);
    assert_eq!(p.kind_name(), "htb");
    let prios: Vec<(String, u8)> = ["voip", "web", "bulk"]
        .iter()
        .map(|n| (n.to_string(), class(&p, n).prio))
        .collect();
    assert_eq!(
        prios,
        [("voip".into(), 0), ("web".into(), 1), ("bulk".into(), 2)]
    );
    assert_eq!(class(&p, "web").ceil.bits_per_sec(), 100_000_000);
}

#[test]
fn pf_bad_input_gets_file_and_line() {
    let e = pf::import(&fixture("pf/hfsc.conf"), "hfsc.conf", None).unwrap_err();
    assert_eq!(
        e.errors[0].to_string(),
        "hfsc.conf:3: error: queue `b` is a hfsc queue under `altq on em0 cbq`: one scheduler per interface"
    );
    let e = pf::import(
        "altq on em0 hfsc bandwidth 10Mb queue { a }\nqueue a bandwidth 50% hfsc(default, realtime(1Mb, x, 2Mb))\n",
        "p",
        None,
    )
    .unwrap_err();
    assert!(
        e.errors[0]
            .to_string()
            .starts_with("p:2: error: queue `a`: `x` is not a time in ms"),
        "{e}"
    );
    for (text, want) in [
        ("queue q on em0 bandwidth fast\n", "p:1: error: `fast` is not a bandwidth"),
        ("queue r on em0 bandwidth 1M\nqueue q parent nope bandwidth 1M\n", "p:2: error: queue `q`: its parent `nope` is not defined"),
        ("queue r on $if bandwidth 1M\n", "p:1: error: macro `$if` is not defined"),
        ("altq on em0 cbq bandwidth 1Mb queue { a }\nqueue a bandwidth 100% cbq(default)\npass out proto tcp to port nonsense queue a\n", "p:3: error: unknown port or service `nonsense`"),
        ("altq on em0 cbq bandwidth 1Mb queue { a, b }\nqueue a bandwidth 50% cbq(default)\n", "p:1: error: queue `b` is listed but not defined"),
        ("queue r on em0 bandwidth 1M flavour 3\n", "p:1: error: unknown queue keyword `flavour`"),
    ] {
        let e = pf::import(text, "p", None).unwrap_err();
        assert!(e.errors.iter().any(|d| d.to_string().starts_with(want)), "{want}: {e}");
    }
}

#[test]
fn pf_altq_hfsc_queues_keep_their_curves() {
    let i = pf::import(&fixture("pf/freebsd-hfsc.conf"), "pf.conf", None).unwrap();
    let p = checked(&i);
    assert_eq!(p.kind_name(), "hfsc");
    assert_eq!(p.hfsc_compat(), Some(linkshare_config::HfscCompat::OpenBsd));
    assert_eq!(p.default_class(), "bulk");
    let curves = |n: &str| {
        class(&p, n)
            .hfsc
            .unwrap_or_else(|| panic!("{n} has no curves"))
    };
    let rate = |m: u64| Some(ServiceCurve::rate(m));
    // The root class is the interface's bandwidth.
    assert_eq!(
        (curves("root").ls, curves("root").ul),
        (rate(10_000_000), rate(10_000_000))
    );
    // realtime (m1, d ms, m2); linkshare 10% of the parent (the link).
    let voip = curves("voip");
    assert_eq!(
        voip.rt,
        Some(ServiceCurve {
            m1: 400_000,
            d: 30_000_000,
            m2: 100_000
        })
    );
    assert_eq!(voip.ls, rate(1_000_000));
    assert_eq!(class(&p, "voip").leaf.to_string(), "pfifo(limit 50)");
    // An inner queue's realtime is left out with a note; bandwidth is the link share.
    let inter = curves("interactive");
    assert_eq!(
        (inter.rt, inter.ls, inter.ul),
        (None, rate(3_000_000), rate(8_000_000))
    );
    assert!(
        i.toml
            .contains("realtime on a queue with children is not used"),
        "{}",
        i.toml
    );
    assert_eq!(
        curves("ssh").ls,
        Some(ServiceCurve {
            m1: 1_500_000,
            d: 50_000_000,
            m2: 1_000_000
        })
    );
    let dns = curves("dns");
    assert_eq!((dns.rt, dns.ls), (rate(200_000), rate(1_500_000)));
    let bulk = curves("bulk");
    assert_eq!((bulk.ls, bulk.ul), (rate(6_000_000), rate(9_500_000)));
    assert_eq!(class(&p, "bulk").leaf.name(), "red");
    let classes: Vec<&str> = p.filters().iter().map(|f| f.class.as_str()).collect();
    assert!(
        classes.contains(&"voip") && classes.contains(&"ssh"),
        "{classes:?}"
    );
}

/// pf expands a rule's `{ lists }` into their cross product: a 771-byte rule with four lists of
/// twenty made 320,000 filters (43 MB, 5 s) before the bound; now it is an error on its line, and
/// a rule just under the bound still imports.
#[test]
fn pf_rule_expansion_is_bounded() {
    let list = |n: usize, f: &dyn Fn(usize) -> String| (0..n).map(f).collect::<Vec<_>>().join(" ");
    let rule = |n: usize| {
        let ips = list(n, &|i| format!("10.0.0.{}", i + 1));
        let ports = list(n, &|i| (1000 + i).to_string());
        format!(
            "queue root on em0 bandwidth 100M\nqueue a parent root bandwidth 50M default\n\
             queue b parent root bandwidth 50M\n\
             pass out on em0 proto {{ tcp udp }} from {{ {ips} }} port {{ {ports} }} \
             to {{ {ips} }} port {{ {ports} }} set queue b\n"
        )
    };
    let e = pf::import(&rule(20), "big.conf", None).unwrap_err();
    assert!(
        e.errors[0].to_string().starts_with(
            "big.conf:4: error: this rule expands to 320000 filters (2 protocols × 20 sources"
        ),
        "{e}"
    );
    // 2 × 6^4 = 2592 filters: under the bound, imported and valid.
    let i = pf::import(&rule(6), "ok.conf", None).unwrap();
    let p = Policy::parse(&i.toml, "ok.toml").unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(p.filters().len(), 2592);
}
