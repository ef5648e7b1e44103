//! `linkshare import`: the command prints a policy `check` accepts and `check`'s diagnostics;
//! bad input exits 1 with `file:line`; and `import tc --dev` reads back what `export tc` put in
//! the kernel (a veth in a network namespace, as root).
//!
//! The namespace test skips when namespaces cannot be made, except under
//! `LINKSHARE_REQUIRE_NETNS=1`, where it fails instead (CI sets it, so that it cannot pass by
//! skipping).

use std::process::Command;

use linkshare_config::Policy;

mod common;
use common::{linkshare, run, Ns, BIN};

fn fixture(p: &str) -> String {
    format!(
        "{}/../interop/tests/fixtures/{p}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn import_prints_a_checked_policy_and_its_notes() {
    for args in [
        vec!["import", "tc", &fixture("tc/shell.sh")],
        vec!["import", "pf", &fixture("pf/freebsd-cbq.conf")],
    ]
    .iter()
    {
        let (code, out, err) = linkshare(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        Policy::parse(&out, "stdout.toml").unwrap_or_else(|e| panic!("{args:?}: {e:?}"));
        assert!(err.contains("note: "), "{args:?}: {err}");
    }
    // libreqos writes the policy and its subscriber table beside it; the scaling warning names
    // the node, the direction and the factor.
    let dir = std::env::temp_dir().join(format!("lsimport{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("p.toml");
    let (code, stdout, err) = linkshare(&[
        "import",
        "libreqos",
        &fixture("libreqos/network.json"),
        &fixture("libreqos/ShapedDevices.csv"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.is_empty());
    assert!(err.contains("warning: node `AP_A`: the download minimums under `AP_A` add up to 120mbit, above its rate 100mbit: scaled by 0.8333"), "{err}");
    let table = std::fs::read_to_string(dir.join("p.subscribers.csv")).unwrap();
    assert!(table.starts_with("name,parent,plan,addresses,"), "{table}");
    let (code, tree, err) = linkshare(&["check", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(tree.contains("subscribers: 6 from "), "{tree}");
    assert!(tree.contains("upload side"), "{tree}");
    // Without --out there is nowhere to put the table.
    let (code, _, err) = linkshare(&[
        "import",
        "libreqos",
        &fixture("libreqos/network.json"),
        &fixture("libreqos/ShapedDevices.csv"),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("give `--out FILE`"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_synthetic_export_imports_below_its_uplink_and_checks() {
    let dir = std::env::temp_dir().join(format!("lssynth{}", std::process::id()));
    let export = dir.join("export");
    let (code, _, err) = linkshare(&[
        "import",
        "libreqos",
        "--synthetic",
        "2000",
        "--ipv6",
        "--out",
        export.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let net = export.join("network.json");
    let dev = export.join("ShapedDevices.csv");
    let conf = dir.join("lqos.conf");
    std::fs::write(
        &conf,
        "[queues]\ndownlink_bandwidth_mbps = 20000\nuplink_bandwidth_mbps = 4000\n",
    )
    .unwrap();
    let out = dir.join("isp.toml");
    let (code, _, err) = linkshare(&[
        "import",
        "libreqos",
        net.to_str().unwrap(),
        dev.to_str().unwrap(),
        "--lqos-conf",
        conf.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let p = Policy::load(&out).unwrap_or_else(|e| panic!("{e:?}"));
    let root = &p.classes()[0];
    assert_eq!(
        (root.name.as_str(), root.rate.0, root.ceil.0),
        ("root", 20_000_000_000, 20_000_000_000)
    );
    assert_eq!(p.upload().unwrap().classes()[0].rate.0, 4_000_000_000);
    assert_eq!(
        p.classes().len() - p.subscribers().unwrap().first_class as usize,
        2000
    );
    assert_eq!(
        p.filters().len(),
        4000,
        "an IPv4 address and an IPv6 /64 each"
    );
    // The same from --downlink/--uplink; a bad rate is refused.
    let (code, _, err) = linkshare(&[
        "import",
        "libreqos",
        net.to_str().unwrap(),
        dev.to_str().unwrap(),
        "--downlink",
        "20gbit",
        "--uplink",
        "4gbit",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        Policy::load(&out).unwrap().classes()[0].rate.0,
        20_000_000_000
    );
    let (code, _, err) = linkshare(&[
        "import",
        "libreqos",
        net.to_str().unwrap(),
        dev.to_str().unwrap(),
        "--downlink",
        "fast",
        "--uplink",
        "4gbit",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--downlink `fast` is not a rate"), "{err}");
    // A subscriber table with a bad row: check names the CSV file and line.
    let table = dir.join("isp.subscribers.csv");
    let text = std::fs::read_to_string(&table).unwrap();
    let broken = text
        .replacen("\nSubscriber 7,", "\nSubscriber 7,NoSuchAP,", 1)
        .replacen(",AP_0_6,", ",", 1);
    std::fs::write(&table, broken).unwrap();
    let (code, _, err) = linkshare(&["check", out.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains(
            "isp.subscribers.csv:8:1: error: subscriber `Subscriber 7`: unknown parent `NoSuchAP`"
        ),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn import_errors_are_located_and_exit_1() {
    let (code, out, err) = linkshare(&["import", "tc", &fixture("tc/bad.tc")]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(err.contains("bad.tc:5: error: `match ip ttl`"), "{err}");
    assert!(err.contains("5 | filter add dev eth1"), "{err}");
    let (code, _, err) = linkshare(&["import", "pf", &fixture("pf/hfsc.conf")]);
    assert_eq!(code, 1);
    assert!(
        err.contains(
            "hfsc.conf:3: error: queue `b` is a hfsc queue under `altq on em0 cbq`: one scheduler per interface"
        ),
        "{err}"
    );
    let (code, _, err) = linkshare(&["import", "tc", "/nonexistent/x.tc"]);
    assert_eq!(code, 2, "{err}");
    // A script that imports but is not a valid policy: check's diagnostics, exit 1.
    let dir = std::env::temp_dir().join(format!("lsimportbad{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("over.tc");
    std::fs::write(&f, "qdisc add dev x root handle 1: htb default 2\nclass add dev x parent 1: classid 1:1 htb rate 1mbit\nclass add dev x parent 1:1 classid 1:2 htb rate 2mbit\n").unwrap();
    let (code, out, err) = linkshare(&["import", "tc", f.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("[[class]]"));
    assert!(
        err.contains("<imported policy>:") && err.contains("policy is invalid: 1 error"),
        "{err}"
    );
}

/// Why namespaces cannot be used here, if they cannot.
fn netns_unavailable() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root");
    }
    if !run("tc", &["-V"]) {
        return Some("no `tc` binary (apt-get install iproute2)");
    }
    None
}

fn skip_or_fail(why: &str) {
    if std::env::var("LINKSHARE_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("LINKSHARE_REQUIRE_NETNS=1 but the namespace test cannot run: {why}");
    }
    eprintln!("SKIP: {why}");
}

/// Leaves and filters this kernel build has (htb, pfifo, bfifo, tbf, u32 — the smallest set
/// every kernel with HTB has).
const POLICY: &str = r#"
qdisc = "htb"
default = "bulk"
r2q = 12
overhead = 10
linklayer = "atm"

[[class]]
name = "root"
rate = "100mbit"

[[class]]
name = "site"
parent = "root"
rate = "60mbit"
ceil = "100mbit"

[[class]]
name = "voice"
parent = "site"
rate = "10mbit"
ceil = "20mbit"
prio = 0
quantum = 3000

[[class]]
name = "video"
parent = "site"
rate = "30mbit"
ceil = "60mbit"
prio = 1
leaf = { type = "tbf", rate = "30mbit", burst = "20kb", limit = "100kb" }

[[class]]
name = "bulk"
parent = "root"
rate = "40mbit"
ceil = "100mbit"
burst = "15k"
prio = 3
leaf = { type = "bfifo", limit = "200kb" }

[[filter]]
dscp = ["ef", "cs5"]
class = "voice"

[[filter]]
protocol = "udp"
dst = "10.78.0.0/16"
dst_port = "5000-5010"
class = "video"

[[filter]]
dst_port = "8000-8999"
class = "bulk"

[[filter]]
src = "2001:db8::/32"
class = "video"
"#;

#[test]
fn import_dev_reads_back_what_export_put_in_the_kernel() {
    if let Some(why) = netns_unavailable() {
        return skip_or_fail(why);
    }
    let tag = std::process::id() % 100000;
    let ns = Ns(format!("lsimp{tag}"));
    if !run("ip", &["netns", "add", &ns.0]) {
        return skip_or_fail("`ip netns add` does not work here");
    }
    let dev = format!("im{tag}");
    assert!(run(
        "ip",
        &[
            "-n",
            &ns.0,
            "link",
            "add",
            &dev,
            "type",
            "veth",
            "peer",
            "name",
            &format!("ip{tag}")
        ]
    ));
    assert!(run("ip", &["-n", &ns.0, "link", "set", &dev, "up"]));
    let dir = std::env::temp_dir().join(format!("lsimpdev{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let pol = dir.join("p.toml");
    std::fs::write(&pol, POLICY).unwrap();
    let (code, script, err) = linkshare(&["export", "tc", pol.to_str().unwrap(), "--dev", &dev]);
    assert_eq!(code, 0, "{err}");
    let tcf = dir.join("p.tc");
    std::fs::write(&tcf, &script).unwrap();
    let st = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.0,
            "tc",
            "-batch",
            tcf.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "tc -batch: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, BIN, "import", "tc", "--dev", &dev])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{stdout}");
    let back = Policy::parse(&stdout, "back.toml").unwrap_or_else(|e| panic!("{e:?}\n{stdout}"));
    let orig = Policy::parse(POLICY, "p.toml").unwrap();
    // The kernel has no names: class i of the file is 1:<i+1> (hex), as export writes it.
    let id = |i: usize| format!("1:{:x}", i + 1);
    assert_eq!(back.classes().len(), orig.classes().len());
    assert_eq!(back.htb_params().r2q, 12);
    // The root's size table (`stab`) comes back as the link layer.
    assert_eq!(back.link_layer(), orig.link_layer(), "{stdout}");
    assert_eq!(back.default_class(), id(orig.default_class_id() as usize));
    for (i, c) in orig.classes().iter().enumerate() {
        let b = back
            .classes()
            .iter()
            .find(|x| x.name == id(i))
            .unwrap_or_else(|| panic!("no {}\n{stdout}", id(i)));
        assert_eq!(b.parent, c.parent_id.map(|p| id(p as usize)), "{}", c.name);
        assert_eq!(
            (b.rate, b.ceil, b.prio, b.quantum, b.is_leaf),
            (c.rate, c.ceil, c.prio, c.quantum, c.is_leaf),
            "{}",
            c.name
        );
        // The kernel keeps bursts as transmission times in ticks: within 1 %.
        for (x, y) in [(b.burst, c.burst), (b.cburst, c.cburst)] {
            assert!(x.abs_diff(y) * 100 <= y, "{}: burst {x} vs {y}", c.name);
        }
        if c.is_leaf {
            assert_eq!(b.leaf.name(), c.leaf.name(), "{}", c.name);
        }
    }
    let name_of = |p: &Policy, k: usize| p.classes()[k].name.clone();
    let f = |p: &Policy, names: bool| -> Vec<String> {
        p.filters()
            .iter()
            .map(|f| {
                let mut s = f.spec.clone();
                s.class = 0;
                let cls = if names {
                    id(p.class_id(&f.class).unwrap() as usize)
                } else {
                    name_of(p, p.class_id(&f.class).unwrap() as usize)
                };
                format!("{cls} {s:?}")
            })
            .collect()
    };
    assert_eq!(f(&orig, true), f(&back, false), "{stdout}");
}
