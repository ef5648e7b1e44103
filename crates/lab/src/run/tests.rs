//! Tests of a lab run's setup and result, which need no namespace: the scenario's policy, the
//! router's options, the flows' addresses, route metrics and classes, as `execute` derives them.

use linkshare_sim::Scenario;

use super::result::class_of;
use super::*;

#[test]
fn embedded_default_parses_and_has_three_classes() {
    let sc = Scenario::parse_with(
        DEFAULT_SCENARIO,
        DEFAULT_ORIGIN,
        Path::new("scenarios"),
        "lab-default",
    )
    .unwrap();
    let (text, notes) = policy_text(&sc, DEFAULT_SCENARIO, Path::new("scenarios")).unwrap();
    assert!(notes.is_empty());
    let p = linkshare_config::Policy::parse(&text, "inline").unwrap();
    let leaves = p.classes().iter().filter(|c| c.parent.is_some()).count();
    assert_eq!(leaves, 3, "{text}");
    assert!(sc.duration.as_secs_f64() <= 20.0);
}

#[test]
fn no_policy_becomes_one_class_at_link_rate() {
    let text = "[link]\nrate = \"2mbit\"\nqueue = 100\n[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\n";
    let sc = Scenario::parse(text, "t.toml").unwrap();
    let (p, notes) = policy_text(&sc, text, Path::new("")).unwrap();
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("pfifo of 100 packets"), "{notes:?}");
    let pol = linkshare_config::Policy::parse(&p, "gen").unwrap();
    assert_eq!(pol.classes().len(), 1);
    // The leaf holds `[link] queue` packets, as the simulator's pfifo.
    let tc = linkshare_interop::tc::export::tc_script(&pol, "eth0").unwrap();
    assert!(tc.contains("pfifo limit 100"), "{tc}");
    assert_eq!(
        class_of(&sc, &Plan::new(&sc.flows[0], 10.0, 1, 0.0).unwrap()),
        "link"
    );
}

#[test]
fn a_classless_root_runs_under_one_htb_class_at_link_rate() {
    let text = "[link]\nrate = \"10mbit\"\noverhead = 14\n[policy]\nqdisc = { type = \"pfifo\", limit = 100 }\n[[flow]]\nname = \"t\"\nkind = \"tcp\"\n";
    let sc = Scenario::parse(text, "t.toml").unwrap();
    let (p, notes) = policy_text(&sc, text, Path::new("")).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let pol = linkshare_config::Policy::parse(&p, "gen").unwrap();
    assert_eq!(pol.kind_name(), "htb", "{p}");
    let classes = pol.classes();
    assert_eq!(classes.len(), 1, "{p}");
    assert_eq!(
        classes[0].name, "pfifo",
        "named as the simulator's one class"
    );
    assert_eq!(
        classes[0].leaf,
        linkshare_config::LeafKind::Pfifo { limit: 100 }
    );
    assert_eq!(
        class_of(&sc, &Plan::new(&sc.flows[0], 10.0, 1, 0.0).unwrap()),
        "pfifo"
    );
    // CAKE shapes by itself: run as written.
    let cake = text.replace(
        "qdisc = { type = \"pfifo\", limit = 100 }",
        "qdisc = { type = \"cake\", bandwidth = \"8mbit\" }",
    );
    let sc = Scenario::parse(&cake, "t.toml").unwrap();
    let (p, notes) = policy_text(&sc, &cake, Path::new("")).unwrap();
    assert!(notes.is_empty());
    assert!(p.contains("cake"), "{p}");
}

#[test]
fn link_delay_and_buffer_become_run_options() {
    let text = "[link]\nrate = \"2mbit\"\ndelay = \"20ms\"\ndevice_buffer = 3000\n";
    let sc = Scenario::parse(text, "t.toml").unwrap();
    assert_eq!(
        router_args(&sc, &[]),
        [
            "--emulate",
            "rate=2000000bit,delay=20000000ns,reverse_delay=20000000ns",
            "--device-buffer",
            "3000"
        ]
    );
}

fn plans(sc: &Scenario) -> Vec<Plan> {
    let d = sc.link.delay.as_secs_f64();
    sc.flows
        .iter()
        .map(|f| Plan::new(f, 10.0, 1, d).unwrap())
        .collect()
}

/// A 10 Mbit/s link (with `delay`) whose HTB sends `filter_src` to class `low`, the rest to
/// `other`, followed by `flows`.
fn two_class_scenario(delay: &str, filter_src: &str, flows: &str) -> Scenario {
    let text = format!(
        r#"
[link]
rate = "10mbit"
delay = "{delay}"
[policy]
qdisc = "htb"
default = "other"
[[policy.class]]
name = "root"
rate = "10mbit"
[[policy.class]]
name = "low"
parent = "root"
rate = "5mbit"
[[policy.class]]
name = "other"
parent = "root"
rate = "5mbit"
[[policy.filter]]
class = "low"
src = "{filter_src}"
{flows}"#
    );
    match Scenario::parse(&text, "t.toml") {
        Ok(sc) => sc,
        Err(e) => panic!("{e}\n{text}"),
    }
}

/// Flows that share a source but not an extra delay get their own source address, chosen so
/// that the policy's address filter still classifies them the same; each source's extra
/// delay becomes one `--path-delay`.
#[test]
fn extra_delays_become_path_delays_on_separate_sources() {
    let sc = two_class_scenario(
        "10ms",
        "10.5.0.0/30",
        r#"
[[flow]]
name = "near"
kind = "udp"
rate = "1mbit"
src = "10.5.0.1"
[[flow]]
name = "far"
kind = "udp"
rate = "1mbit"
src = "10.5.0.1"
extra_delay = "5ms"
[[flow]]
name = "ping"
kind = "ping"
src = "10.5.0.1"
extra_delay = "5ms"
"#,
    );
    let mut ps = plans(&sc);
    let notes = separate_sources(&sc, &mut ps).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    // 10.5.0.2 is the first free address in the filter's /30.
    let moved = std::net::Ipv4Addr::new(10, 5, 0, 2);
    assert_eq!(ps[0].src, std::net::Ipv4Addr::new(10, 5, 0, 1));
    assert_eq!((ps[1].src, ps[2].src), (moved, moved));
    for p in &ps {
        assert_eq!(class_of(&sc, p), "low", "{}", p.spec.name);
    }
    assert_eq!(
        router_args(&sc, &ps),
        [
            "--emulate",
            "rate=10000000bit,delay=10000000ns,reverse_delay=10000000ns",
            "--path-delay",
            "10.5.0.2=5000000ns",
            "--device-buffer",
            "0"
        ]
    );
    // Base RTT 2·(10 + 5) ms; receivers drain for twice that, at least 0.5 s.
    assert!((ps[1].base_rtt - 0.030).abs() < 1e-12);
    assert_eq!(ps[1].drain(), 0.5);
}

/// No free address classifies the same: a clear error instead of a silent change of class.
#[test]
fn separate_sources_refuses_to_change_a_class() {
    let sc = two_class_scenario(
        "0ms",
        "10.5.0.1/32",
        r#"
[[flow]]
name = "a"
kind = "udp"
rate = "1mbit"
src = "10.5.0.1"
[[flow]]
name = "b"
kind = "udp"
rate = "1mbit"
src = "10.5.0.1"
extra_delay = "5ms"
"#,
    );
    let mut ps = plans(&sc);
    let e = separate_sources(&sc, &mut ps).unwrap_err().to_string();
    assert!(e.contains("flows b") && e.contains("own `src`"), "{e}");
}

#[test]
fn tcp_knobs_become_one_route_per_destination() {
    let text = r#"
[link]
rate = "10mbit"
[[flow]]
name = "a"
kind = "tcp"
dst = "10.9.0.1"
init_cwnd = 4
min_rto = "50ms"
[[flow]]
name = "b"
kind = "tcp"
dst = "10.9.0.1"
[[flow]]
name = "c"
kind = "tcp"
dst = "10.9.0.2"
ecn = true
"#;
    let sc = Scenario::parse(text, "t.toml").unwrap();
    let (routes, notes) = tcp_routes(&plans(&sc));
    let d1 = std::net::Ipv4Addr::new(10, 9, 0, 1);
    let d2 = std::net::Ipv4Addr::new(10, 9, 0, 2);
    let r = |dst, init_cwnd, rto_min_ms, ecn| crate::testbed::TcpRoute {
        dst,
        init_cwnd,
        rto_min_ms,
        ecn,
    };
    assert_eq!(routes, [r(d1, 4, 50, false), r(d2, 10, 200, true)]);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("`b`") && notes[0].contains("`a`"),
        "{notes:?}"
    );
}

#[test]
fn path_impairments_become_emulate_keys() {
    let text = "seed = 7\n[link]\nrate = \"2mbit\"\ndelay = \"20ms\"\n[path]\njitter = \"3ms\"\nloss_model = \"gilbert-elliott\"\nge_p = 0.01\nge_r = 0.25\nreorder = \"1%\"\n";
    let sc = Scenario::parse(text, "t.toml").unwrap();
    let args = router_args(&sc, &[]);
    assert_eq!(args[0], "--emulate");
    // The router parses what the lab writes into the very spec the simulator runs.
    let spec = linkshare_router::emulate::EmulateSpec::parse(&args[1]).unwrap();
    assert_eq!(Some(spec.impair), sc.path);
    assert_eq!(spec.seed, 7);
    assert_eq!(spec.delay.0, 20_000_000);
    // The wire serialises at the link's rate, as the simulator's does.
    assert_eq!(spec.rate, Some(sc.link.rate));
}

/// `[uplink]` runs in the router as `--reverse-policy` (its file in the testbed's directory),
/// paced at the uplink's rate: a CAKE without `bandwidth` under one HTB class at that rate, no
/// policy a pfifo of `[uplink] queue` under one HTB class at that rate.
#[test]
fn the_uplink_is_the_reverse_policy_at_its_rate() {
    let head =
        "[link]\nrate = \"20mbit\"\ndelay = \"10ms\"\n[[flow]]\nname = \"d\"\nkind = \"tcp\"\n";
    let cake = format!(
        "{head}[uplink]\nrate = \"100kbit\"\npolicy = {{ qdisc = {{ type = \"cake\", ack_filter = \"on\" }} }}\n"
    );
    let sc = Scenario::parse(&cake, "t.toml").unwrap();
    let plans = vec![Plan::new(&sc.flows[0], 8.0, 1, 0.01).unwrap()];
    let args = router_args(&sc, &plans);
    let at = args.iter().position(|a| a == "--reverse-policy").unwrap();
    assert_eq!(args[at + 1], setup::UPLINK_FILE, "{args:?}");
    assert!(
        args.iter().any(|a| a.contains("reverse_delay=10000000ns")),
        "the return path keeps its delay after the uplink: {args:?}"
    );
    let (text, notes) = uplink_policy_text(&sc, &cake, Path::new(""))
        .unwrap()
        .unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    // CAKE without `bandwidth` stays unlimited (COBALT's target as configured, as the
    // simulator's CAKE pulled by its line), the leaf of one HTB class at the uplink's rate.
    let pol = linkshare_config::Policy::parse(&text, "uplink").unwrap();
    assert_eq!(pol.kind_name(), "htb", "{text}");
    let classes = pol.classes();
    assert_eq!(classes.len(), 1, "{text}");
    assert_eq!(classes[0].rate.bits_per_sec(), 100_000, "{text}");
    match &classes[0].leaf {
        linkshare_config::LeafKind::Cake(c) => {
            assert_eq!(c.bandwidth, None, "{text}");
            assert_eq!(
                c.ack_filter,
                linkshare_core::qdisc::cake::ack_filter::AckFilter::On,
                "{text}"
            );
        }
        other => panic!("{other:?}: {text}"),
    }
    // With `bandwidth` it shapes by itself and runs as written.
    let shaped = cake.replace(
        "ack_filter = \"on\"",
        "ack_filter = \"on\", bandwidth = \"100kbit\"",
    );
    let sc2 = Scenario::parse(&shaped, "t.toml").unwrap();
    let (text, notes) = uplink_policy_text(&sc2, &shaped, Path::new(""))
        .unwrap()
        .unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    let pol = linkshare_config::Policy::parse(&text, "uplink").unwrap();
    assert!(
        matches!(pol.root_leaf(), Some(linkshare_config::LeafKind::Cake(c)) if c.bandwidth.is_some()),
        "{text}"
    );

    let bare = format!("{head}[uplink]\nrate = \"1mbit\"\nqueue = 20\n");
    let sc = Scenario::parse(&bare, "t.toml").unwrap();
    let (text, _) = uplink_policy_text(&sc, &bare, Path::new(""))
        .unwrap()
        .unwrap();
    let pol = linkshare_config::Policy::parse(&text, "uplink").unwrap();
    let tc = linkshare_interop::tc::export::tc_script(&pol, "eth0").unwrap();
    assert!(
        tc.contains("rate 1000000bit") && tc.contains("pfifo limit 20"),
        "{tc}"
    );

    // Without `[uplink]` the reverse direction runs no policy.
    let sc = Scenario::parse(head, "t.toml").unwrap();
    assert!(uplink_policy_text(&sc, head, Path::new(""))
        .unwrap()
        .is_none());
    assert!(!router_args(&sc, &plans).contains(&"--reverse-policy".to_string()));
}

/// The kernel's side runs `[uplink]` too: its policy is exported beside the link's, so a
/// kernel without the uplink's qdisc (sch_cake here) sends the side into a user-mode Linux
/// guest even where the link's policy is only HTB.
#[test]
fn the_kernels_side_needs_the_uplinks_qdiscs_too() {
    let head =
        "[link]\nrate = \"20mbit\"\ndelay = \"10ms\"\n[[flow]]\nname = \"d\"\nkind = \"tcp\"\n";
    let text = format!(
        "{head}[uplink]\nrate = \"100kbit\"\npolicy = {{ qdisc = {{ type = \"cake\", ack_filter = \"on\" }} }}\n"
    );
    let sc = Scenario::parse(&text, "t.toml").unwrap();
    let (policy, _) = policy_text(&sc, &text, Path::new("")).unwrap();
    let (uplink, _) = uplink_policy_text(&sc, &text, Path::new(""))
        .unwrap()
        .unwrap();
    let alone = kernel_script("t.toml", &policy, None).unwrap();
    assert!(
        !uml::qdisc_kinds(&alone).contains(&"cake".to_string()),
        "{alone}"
    );
    let both = kernel_script("t.toml", &policy, Some(&uplink)).unwrap();
    let kinds = uml::qdisc_kinds(&both);
    assert!(kinds.contains(&"htb".to_string()), "{both}");
    assert!(kinds.contains(&"cake".to_string()), "{both}");
    assert!(
        both.contains(" ack-filter "),
        "the filter is the kernel's too: {both}"
    );
    // An uplink the kernel cannot run is refused with the reason, before anything is built.
    let cbq = "qdisc = \"cbq\"\ndefault = \"a\"\n[[class]]\nname = \"root\"\nrate = \"1mbit\"\n\
               [[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"1mbit\"\n";
    let err = format!(
        "{:#}",
        kernel_script("t.toml", &policy, Some(cbq)).unwrap_err()
    );
    assert!(err.contains("[uplink]") && err.contains("CBQ"), "{err}");
}
