//! A class's parameters and the qdisc's: quantum and burst limits and defaults (from core), burst
//! against the MTU, leaf qdiscs, the qdisc name, zero rates, prio range, the MTU's range.

use super::{edit, one_error, pos, EXAMPLE};
use linkshare_config::{LeafKind, Policy};
use linkshare_core::htb::{default_burst, default_quantum};
use linkshare_core::units::Rate;

/// Issue 13: a quantum above 2^31 passed `check` and overflowed HTB's deficit; a burst above what
/// a bucket holds was silently cut. Each is an error at the value that names the limit.
#[test]
fn quantum_and_burst_above_their_limits() {
    use linkshare_core::htb::{BURST_LIMIT, QUANTUM_LIMIT};
    use linkshare_core::units::Size;
    let q_max = Size(QUANTUM_LIMIT as u64).to_string();
    let b_max = Size(BURST_LIMIT as u64).to_string();
    for q in ["\"2g\"", "\"3g\"", "2147483649", "\"17m\""] {
        let text = edit(EXAMPLE, "prio = 1\n", &format!("prio = 1\nquantum = {q}\n"));
        one_error(
            &text,
            q,
            &["class `bulk`", "quantum", "too large"],
            &[&format!("at most {q_max}")],
        );
    }
    // The limit itself is accepted.
    let text = edit(
        EXAMPLE,
        "prio = 1\n",
        &format!("prio = 1\nquantum = \"{q_max}\"\n"),
    );
    assert!(Policy::parse(&text, "policy.toml").is_ok());
    for (key, from) in [("burst", "burst = \"15k\""), ("cburst", "cburst = \"3k\"")] {
        for v in ["\"300m\"", "\"1g\"", "\"257m\""] {
            let text = edit(EXAMPLE, from, &format!("{key} = {v}"));
            one_error(
                &text,
                v,
                &["class `bulk`", &format!("{key} "), "too large"],
                &[&format!("at most {b_max}")],
            );
        }
        let text = edit(EXAMPLE, from, &format!("{key} = \"{b_max}\""));
        assert!(
            Policy::parse(&text, "policy.toml").is_ok(),
            "{key} = {b_max}"
        );
    }
}

#[test]
fn burst_smaller_than_mtu() {
    let text = edit(EXAMPLE, "burst = \"15k\"", "burst = \"1k\"");
    one_error(
        &text,
        "\"1k\"",
        &[
            "class `bulk`",
            "burst 1k",
            "smaller than one MTU (1500 bytes)",
        ],
        &["at least \"1500b\"", "leave it out"],
    );
    // The MTU is the policy's own.
    let text = edit(
        EXAMPLE,
        "default = \"bulk\"",
        "default = \"bulk\"\nmtu = 9000",
    );
    // burst 15k (15360 bytes) still holds a 9000-byte frame; cburst 3k does not.
    one_error(
        &text,
        "\"3k\"",
        &[
            "class `bulk`",
            "cburst 3k",
            "smaller than one MTU (9000 bytes)",
        ],
        &["at least \"9000b\""],
    );
}

#[test]
fn defaults_come_from_core() {
    let p = Policy::parse(EXAMPLE, "x").unwrap();
    let inter = &p.classes()[1];
    assert_eq!(inter.burst, default_burst(Rate::mbit(2), 1500));
    assert_eq!(inter.cburst, default_burst(Rate::mbit(10), 1500));
    assert_eq!(inter.quantum, default_quantum(Rate::mbit(2), 10).0);
    assert_eq!(inter.quantum, 25_000);
    assert_eq!(p.htb_params().r2q, 10);
    assert_eq!(p.htb_params().mtu, 1500);

    // A slow leaf: rate/r2q = 150 bytes is clamped to 1000 with an actionable warning.
    let text = edit(EXAMPLE, "rate = \"2mbit\"", "rate = \"12kbit\"");
    let p = Policy::parse(&text, "policy.toml").unwrap();
    assert_eq!(p.classes()[1].quantum, 1000);
    assert_eq!(p.warnings().len(), 1, "{:?}", p.warnings());
    let w = &p.warnings()[0];
    assert_eq!(
        w.message,
        "class `interactive`: quantum 150 bytes (rate/r2q) is below 1000; using 1000"
    );
    assert_eq!(w.help.as_deref(), Some("set `quantum` or lower `r2q`"));
    assert_eq!((w.line, w.col), pos(&text, "\"12kbit\""));
    // Lowering r2q silences it and changes the quantum.
    let text2 = edit(&text, "qdisc = \"htb\"", "qdisc = \"htb\"\nr2q = 1");
    let p = Policy::parse(&text2, "policy.toml").unwrap();
    assert!(
        p.warnings()
            .iter()
            .all(|w| !w.message.contains("`interactive`")),
        "{:?}",
        p.warnings()
    );
    assert_eq!(p.classes()[1].quantum, 1500);
    // An explicit quantum is taken as is.
    let text3 = edit(&text, "prio = 0", "prio = 0\nquantum = 3000");
    let p = Policy::parse(&text3, "policy.toml").unwrap();
    assert_eq!(p.classes()[1].quantum, 3000);
    assert!(p.warnings().is_empty());
}

#[test]
fn leaf_on_inner_class_is_an_error() {
    let text = edit(
        EXAMPLE,
        "name = \"root\"\nrate = \"10mbit\"\n",
        "name = \"root\"\nrate = \"10mbit\"\nleaf = \"bfifo\"\n",
    );
    one_error(
        &text,
        "\"bfifo\"",
        &["class `root` has children", "not a leaf"],
        &["remove `leaf`"],
    );
}

#[test]
fn bfifo_limit_is_a_size() {
    let text = edit(
        EXAMPLE,
        "type = \"pfifo\"\nlimit = 1000",
        "type = \"bfifo\"\nlimit = \"30k\"",
    );
    let p = Policy::parse(&text, "x").unwrap();
    assert_eq!(p.classes()[2].leaf, LeafKind::Bfifo { limit: 30 * 1024 });
    let text = edit(EXAMPLE, "type = \"pfifo\"", "type = \"sfqq\"");
    one_error(
        &text,
        "\"sfqq\"",
        &["unknown leaf qdisc \"sfqq\""],
        &["pfifo", "bfifo"],
    );
}

#[test]
fn unknown_qdisc_lists_known_ones() {
    let text = edit(EXAMPLE, "qdisc = \"htb\"", "qdisc = \"hbt\"");
    one_error(
        &text,
        "\"hbt\"",
        &["unknown qdisc \"hbt\""],
        &["did you mean \"htb\"", "known qdiscs: htb"],
    );
}

#[test]
fn zero_rate_and_prio_range() {
    let text = edit(EXAMPLE, "rate = \"2mbit\"", "rate = \"0kbit\"");
    one_error(&text, "\"0kbit\"", &["rate is zero"], &["above zero"]);
    let text = edit(EXAMPLE, "prio = 1", "prio = 8");
    one_error(
        &text,
        "8\n",
        &["class `bulk`: `prio`", "8 is out of range"],
        &["0 to 7"],
    );
    let text = edit(EXAMPLE, "prio = 1", "prio = \"1\"");
    one_error(
        &text,
        "\"1\"",
        &["expected an integer"],
        &["remove the quotes"],
    );
}

#[test]
fn mtu_above_an_ip_packet_is_refused() {
    let base = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n";
    one_error(
        &format!("mtu = 65536\n{base}"),
        "65536",
        &["`mtu` 65536 bytes is out of range"],
        &["68 to 65535"],
    );
    assert!(Policy::parse(&format!("mtu = 65535\n{base}"), "x").is_ok());
}

#[test]
fn a_zero_rate_is_one_error_without_a_quantum_warning() {
    let text = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"0bit\"\n";
    let e = Policy::parse(text, "policy.toml").unwrap_err();
    assert_eq!(e.diagnostics.len(), 1, "{e}");
    assert!(e.diagnostics[0].message.contains("rate is zero"), "{e}");
}

/// CBQ's `minburst = 950` makes ALTQ's derived offtime run away (years): a warning on the class's
/// line with both figures, the bound by default and ALTQ's figure under `altq_compat`; ordinary
/// minbursts get none.
#[test]
fn cbq_runaway_offtime_is_warned_and_bounded() {
    let policy = |minburst: u32, compat: bool| {
        format!(
            "qdisc = \"cbq\"\n{}default = \"a\"\n\n[[class]]\nname = \"root\"\nrate = \"10mbit\"\n\n\
             [[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"1mbit\"\nborrow = false\n\
             maxburst = 1024\nminburst = {minburst}\n",
            if compat { "altq_compat = true\n" } else { "" }
        )
    };
    for compat in [false, true] {
        let text = policy(950, compat);
        let p = Policy::parse(&text, "p.toml").unwrap();
        assert_eq!(p.warnings().len(), 1, "{:?}", p.warnings());
        let w = &p.warnings()[0];
        assert_eq!(w.line, pos(&text, "[[class]]\nname = \"a\"").0);
        assert!(w.message.contains("minburst 950"), "{}", w.message);
        let help = w.help.as_deref().unwrap();
        assert!(help.contains("minburst"), "{help}");
        assert_eq!(w.message.contains("altq_compat"), compat, "{}", w.message);
        assert_eq!(
            w.message.contains("first-order term"),
            !compat,
            "{}",
            w.message
        );
        assert!(Policy::parse(&policy(16, compat), "p.toml")
            .unwrap()
            .warnings()
            .is_empty());
    }
}
