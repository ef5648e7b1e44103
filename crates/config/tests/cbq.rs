//! CBQ policies: the example of docs/policy-format.md, shares, CBQ-only keys, `altq_compat`.

use linkshare_config::{
    CbqGuideline, CbqOptions, CbqScheduler, Driver, OfftimeUnit, Policy, QdiscKind, Severity,
    UndertimeClock,
};
use linkshare_core::cbq;
use linkshare_core::units::{Duration, Rate};
use linkshare_core::{PacketMeta, Qdisc};

/// The CBQ example of docs/policy-format.md, with every top-level option written, plus a default
/// class.
const EXAMPLE: &str = r#"qdisc = "cbq"
default = "data"
scheduler = "prr"          # general scheduler: prr | wrr
guideline = "formal"       # link sharing: formal | ancestor-only | top-level
efficient = false
altq_compat = false        # every ALTQ behaviour below at once; or set them one by one:
undertime_clock = "actual" # actual | expected
offtime_unit = "bytes"     # bytes | packets

[[class]]
name = "root"
rate = "1.5mbit"

[[class]]
name = "agencyA"
parent = "root"
rate = "1050kbit"          # or share = "70%" (of the parent)
borrow = true

[[class]]
name = "video"
parent = "agencyA"
rate = "450kbit"
prio = 1                   # 0 is the highest, as in HTB; ALTQ's reversed scale is mapped on import
borrow = true
maxburst = 16
minburst = 2
avgpkt = 1000
leaf = "pfifo"

[[class]]
name = "data"
parent = "agencyA"
share = "50%"
borrow = false
maxidle = "20ms"
"#;

fn errors(text: &str) -> Vec<(usize, usize, String, String)> {
    match Policy::parse(text, "p.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e
            .diagnostics
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| (d.line, d.col, d.message, d.help.unwrap_or_default()))
            .collect(),
    }
}

#[test]
fn contract_example_is_accepted() {
    let p = Policy::parse(EXAMPLE, "p.toml").unwrap();
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    assert_eq!(p.kind(), QdiscKind::Cbq);
    assert_eq!(p.cbq_options(), Some(&CbqOptions::default()));
    let c = p.classes();
    assert_eq!(c[1].rate, Rate(1_050_000));
    // A share is a fraction of the parent's allocation.
    assert_eq!(c[3].rate, Rate(525_000));
    let video = c[2].cbq.as_ref().unwrap();
    assert!(video.borrow);
    assert_eq!(
        (video.maxburst, video.minburst, video.avgpkt),
        (16, 2, 1000)
    );
    let data = c[3].cbq.as_ref().unwrap();
    assert!(!data.borrow);
    assert_eq!(data.maxidle, Some(Duration::from_millis(20)));
    assert_eq!(data.offtime, None);
    assert_eq!(c[2].prio, 1);
    let tree = p.render_tree();
    assert!(tree.starts_with("cbq  default=data"), "{tree}");
    assert!(tree.contains("no-borrow"), "{tree}");
}

#[test]
fn altq_compat_turns_on_every_altq_behaviour_and_keys_still_override() {
    let text = EXAMPLE
        .replace("altq_compat = false", "altq_compat = true")
        .replace("undertime_clock = \"actual\" # actual | expected\n", "")
        .replace("offtime_unit = \"bytes\"     # bytes | packets\n", "")
        .replace(
            "scheduler = \"prr\"          # general scheduler: prr | wrr\n",
            "",
        );
    let p = Policy::parse(&text, "p.toml").unwrap();
    let o = p.cbq_options().unwrap();
    assert!(o.altq_compat);
    assert_eq!(o.undertime_clock, UndertimeClock::Expected);
    assert_eq!(o.offtime_unit, OfftimeUnit::Packets);
    assert_eq!(o.scheduler, CbqScheduler::Wrr);
    // Explicitly set: kept, where ALTQ would use its top-level heuristic.
    assert_eq!(o.guideline, CbqGuideline::Formal);

    // Built for a 100 Hz driver: ALTQ's two-tick minimum suspension comes with the switch.
    let params = p.cbq_params(&Driver { timer_hz: 100 }).unwrap();
    assert_eq!(params.link, Rate(1_500_000));
    assert_eq!(params.timer_hz, 100);
    assert_eq!(params.min_suspend_ticks, 2);
    assert!(params.clamp_ifnow);
    assert_eq!(params.guideline, cbq::Guideline::Formal);
    assert_eq!(params.scheduler, cbq::Scheduler::Wrr);
    assert_eq!(params.undertime_clock, cbq::UndertimeClock::Expected);
    assert_eq!(params.offtime_unit, cbq::OfftimeUnit::Packets);
    let q = p.build_on::<PacketMeta>(&Driver { timer_hz: 100 }).unwrap();
    assert_eq!(q.kind(), "cbq");
}

#[test]
fn contract_example_builds_with_the_fixed_behaviour_by_default() {
    let p = Policy::parse(EXAMPLE, "p.toml").unwrap();
    let params = p.cbq_params(&Driver::default()).unwrap();
    assert_eq!(params.min_suspend_ticks, 0);
    assert!(!params.clamp_ifnow);
    assert_eq!(params.undertime_clock, cbq::UndertimeClock::Actual);
    assert_eq!(params.offtime_unit, cbq::OfftimeUnit::Bytes);
    assert_eq!(params.guideline, cbq::Guideline::Formal);
    let q = p.build_cbq::<PacketMeta>(&Driver::default()).unwrap();
    let mut names = Vec::new();
    q.visit_classes(&mut |v| names.push((v.name.to_string(), v.rate, v.prio)));
    assert_eq!(names.len(), 4);
    assert!(
        names.contains(&("data".to_string(), Rate(525_000), 0)),
        "{names:?}"
    );
    assert!(
        names.contains(&("video".to_string(), Rate(450_000), 1)),
        "{names:?}"
    );
    // A policy of another kind has no CBQ parameters.
    let htb = Policy::parse(
        "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n",
        "h.toml",
    )
    .unwrap();
    assert!(htb.cbq_params(&Driver::default()).is_none());
    assert!(htb.build_cbq::<PacketMeta>(&Driver::default()).is_err());
}

#[test]
fn cbq_keys_are_checked() {
    let errs = errors(&EXAMPLE.replace("share = \"50%\"", "share = \"50%\"\nrate = \"1mbit\""));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].2.contains("both `rate` and `share`"), "{errs:?}");

    let errs = errors(&EXAMPLE.replace("rate = \"1.5mbit\"", "share = \"50%\""));
    assert!(
        errs.iter()
            .any(|e| e.2.contains("root class cannot have a `share`")),
        "{errs:?}"
    );

    // HTB keys are not CBQ keys, and the reverse.
    let errs = errors(&EXAMPLE.replace("maxburst = 16", "ceil = \"1mbit\""));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].2.contains("unknown key `ceil`"), "{errs:?}");
    let htb = "qdisc = \"htb\"\ndefault = \"a\"\nguideline = \"formal\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n";
    let errs = errors(htb);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!((errs[0].0, errs[0].1), (3, 1));
    assert!(errs[0].2.contains("CBQ option"), "{errs:?}");

    let errs = errors(&EXAMPLE.replace("guideline = \"formal\"", "guideline = \"formall\""));
    assert!(errs[0].3.contains("did you mean \"formal\""), "{errs:?}");
    let errs = errors(&EXAMPLE.replace("minburst = 2", "minburst = 20"));
    assert!(
        errs[0].2.contains("minburst 20 is above maxburst 16"),
        "{errs:?}"
    );
    let errs = errors(&EXAMPLE.replace("maxidle = \"20ms\"", "maxidle = 20"));
    assert!(errs[0].2.contains("has no unit"), "{errs:?}");
    // Children above the parent, with shares too.
    let errs = errors(&EXAMPLE.replace("share = \"50%\"", "share = \"80%\""));
    assert!(errs[0].2.contains("impossible capacity"), "{errs:?}");
}

#[test]
fn cbq_allows_sixteen_levels_and_names_itself_when_deeper() {
    let chain = |levels: usize| {
        let mut t = format!("qdisc = \"cbq\"\ndefault = \"c{}\"\n", levels - 1);
        for i in 0..levels {
            t.push_str(&format!("[[class]]\nname = \"c{i}\"\n"));
            if i > 0 {
                t.push_str(&format!("parent = \"c{}\"\n", i - 1));
            }
            t.push_str("rate = \"1mbit\"\n");
        }
        t
    };
    // The core's CBQ takes 16 levels: the checker must not stop at HTB's 8.
    let p = Policy::parse(&chain(16), "p.toml").unwrap();
    assert!(p.build_cbq::<PacketMeta>(&Driver::default()).is_ok());
    let errs = errors(&chain(17));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0]
            .2
            .contains("class `c16` is at level 17 of the tree; CBQ supports at most 16 levels"),
        "{errs:?}"
    );
}

#[test]
fn avgpkt_above_the_mtu_is_refused_by_the_checker_not_the_build() {
    let text = EXAMPLE.replace("avgpkt = 1000", "avgpkt = 2000");
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!((errs[0].0, errs[0].1), (28, 10));
    assert!(
        errs[0]
            .2
            .contains("class `video`: avgpkt 2000 bytes is above the mtu (1500 bytes)"),
        "{errs:?}"
    );
    assert!(errs[0].3.contains("raise `mtu`"), "{errs:?}");
    // Left out, avgpkt follows a small mtu down, and the tree builds.
    let small = format!("mtu = 576\n{}", EXAMPLE.replace("avgpkt = 1000\n", ""));
    let p = Policy::parse(&small, "p.toml").unwrap();
    assert!(p
        .classes()
        .iter()
        .all(|c| c.cbq.as_ref().unwrap().avgpkt == 576));
    assert!(p.build_cbq::<PacketMeta>(&Driver::default()).is_ok());
}

#[test]
fn cbq_has_no_quantum_so_no_quantum_warning() {
    // 32 kbit/s gives HTB a quantum of 400 bytes (clamped, with a warning naming `quantum`);
    // `quantum` is not a CBQ key, so CBQ must not ask for it.
    let text = "qdisc = \"cbq\"\ndefault = \"b\"\n[[class]]\nname = \"c\"\nrate = \"64kbit\"\n[[class]]\nname = \"b\"\nparent = \"c\"\nrate = \"32kbit\"\n";
    let p = Policy::parse(text, "p.toml").unwrap();
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    let htb = Policy::parse(&text.replace("\"cbq\"", "\"htb\""), "p.toml").unwrap();
    assert_eq!(htb.warnings().len(), 1, "{:?}", htb.warnings());
}
