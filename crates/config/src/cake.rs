//! The keys of a `cake` leaf or root (`qdisc = { type = "cake", bandwidth = "100mbit", … }`),
//! named as tc-cake(8)'s keywords; [`CakeParams`] documents each and checks the ranges.
//!
//! | key | value | default |
//! |-----|-------|---------|
//! | `bandwidth` | the shaper's rate, e.g. `"100mbit"` | unlimited |
//! | `rtt` | a preset (`datacentre` 100us, `lan` 1ms, `metro` 10ms, `regional` 30ms, `internet` 100ms, `oceanic` 300ms, `satellite` 1s, `interplanetary` 1000s) or a time; sets target to rtt/20 | `"internet"` |
//! | `target` | COBALT's target, overriding rtt/20 | 5ms |
//! | `diffserv` | `besteffort`, `diffserv3`, `diffserv4`, `diffserv8`, `precedence` | `diffserv3` |
//! | `isolation` | `flowblind`, `srchost`, `dsthost`, `hosts`, `flows`, `dual-srchost`, `dual-dsthost`, `triple-isolate` | `triple-isolate` |
//! | `nat` | accepted with a warning: hosts are the addresses seen, no conntrack lookup | false |
//! | `wash` | clear DSCP after choosing the tin | false |
//! | `ack_filter` | `off`, `on`, `aggressive` | `off` |
//! | `overhead` | bytes (-64..=256), or tc-cake keywords (`"pppoe-ptm"`, `"ethernet ether-vlan"`, `"44 atm"`) | `raw` |
//! | `mpu` | smallest size charged, 0..=256 bytes | 0 (or the keyword's) |
//! | `memlimit` | bytes held at most | 4 × bandwidth × rtt, ≥ 4m |
//! | `ingress` | drops count against the shaper | false |
//! | `seed` | hash key and random stream | 1 |

use linkshare_core::qdisc::cake::ack_filter::AckFilter;
use linkshare_core::qdisc::cake::hash::FlowMode;
use linkshare_core::qdisc::cake::overhead::{keyword_names, CakeOverhead};
use linkshare_core::qdisc::cake::tins::DiffservMode;
use linkshare_core::qdisc::cake::{CakeParams, RTT_PRESETS};
use toml::Spanned;

use crate::diag::suggest;
use crate::params::Params;
use crate::raw::Raw;
use crate::source::Sink;
use crate::values;

/// Read a `cake` table's keys (the leaf module wraps them as `LeafKind::Cake`).
pub(crate) fn read(mut p: Params) -> Option<CakeParams> {
    let mut q = CakeParams::default();
    let mut bw = None;
    p.opt_rate("bandwidth", &mut bw);
    q.bandwidth = bw;
    let mut rtt = (q.rtt, q.target);
    p.custom("rtt", &mut rtt, read_rtt);
    (q.rtt, q.target) = rtt;
    let mut target = None;
    p.opt_time("target", &mut target);
    if let Some(t) = target {
        q.target = t;
    }
    p.word("diffserv", &mut q.diffserv, DiffservMode::KNOWN);
    p.word("isolation", &mut q.isolation, FlowMode::KNOWN);
    let mut nat = false;
    p.custom("nat", &mut nat, |sink, ctx, v| {
        let on = values::boolean(sink, ctx, v)?;
        if on {
            sink.warn(
                &v.span(),
                format!("{ctx}: linkshare does not look addresses up in conntrack"),
                "hosts are the addresses seen where CAKE runs: shape on the LAN side of the NAT \
                 for per-host fairness, or leave `nat` out",
            );
        }
        Some(on)
    });
    p.bool("wash", &mut q.wash);
    p.word("ack_filter", &mut q.ack_filter, AckFilter::KNOWN);
    p.custom("overhead", &mut q.overhead, read_overhead);
    let mut mpu = None;
    p.custom("mpu", &mut mpu, |sink, ctx, v| {
        values::int(sink, ctx, v, 0, 256).map(|n| Some(n as u32))
    });
    if let Some(m) = mpu {
        q.overhead.mpu = m;
    }
    let mut mem = 0u32;
    p.size("memlimit", &mut mem, 1, u32::MAX as u64);
    if mem != 0 {
        q.memlimit = Some(mem);
    }
    p.bool("ingress", &mut q.ingress);
    let mut autorate = false;
    p.custom("autorate_ingress", &mut autorate, |sink, ctx, v| {
        let on = values::boolean(sink, ctx, v)?;
        if on {
            sink.error(
                &v.span(),
                format!("{ctx}: is not implemented"),
                "set `bandwidth` to the measured link rate, or leave `autorate_ingress` out",
            );
            return None;
        }
        Some(false)
    });
    p.int("seed", &mut q.seed, 0, i64::MAX);
    let check = q.validate();
    p.finish(q, check)
}

/// `rtt`: a preset name or a time; `(rtt, target)`.
fn read_rtt(
    sink: &mut Sink,
    ctx: &str,
    v: &Spanned<Raw>,
) -> Option<(linkshare_core::Duration, linkshare_core::Duration)> {
    let text = values::string(sink, ctx, v, "\"internet\"")?;
    let mut q = CakeParams::default();
    match q.set_rtt(text) {
        Ok(()) => Some((q.rtt, q.target)),
        Err(_) => {
            let names: Vec<&str> = RTT_PRESETS.iter().map(|p| p.0).collect();
            let help = match suggest(&text.trim().to_ascii_lowercase(), names.iter().copied()) {
                Some(s) => format!(
                    "did you mean \"{s}\"? presets: {}; or a time such as \"50ms\"",
                    names.join(", ")
                ),
                None => format!("a preset ({}) or a time such as \"50ms\"", names.join(", ")),
            };
            sink.error(
                &v.span(),
                format!("{ctx}: \"{text}\" is neither a preset nor a time"),
                help,
            );
            None
        }
    }
}

/// `overhead`: bytes, or tc-cake keywords (with numbers) in a string.
fn read_overhead(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<CakeOverhead> {
    if let Raw::Int(_) = v.get_ref() {
        let n = values::int(sink, ctx, v, -64, 256)?;
        return Some(CakeOverhead {
            enabled: true,
            overhead: n as i32,
            ..CakeOverhead::default()
        });
    }
    let text = values::string(sink, ctx, v, "\"ethernet\"")?;
    match CakeOverhead::keywords(text) {
        Ok(o) => Some(o),
        Err(word) => {
            let names: Vec<&str> = keyword_names().collect();
            let help = match suggest(&word.to_ascii_lowercase(), names.iter().copied()) {
                Some(s) => format!("did you mean \"{s}\"? keywords: {}", names.join(", ")),
                None => format!("bytes (-64 to 256), or keywords: {}", names.join(", ")),
            };
            sink.error(
                &v.span(),
                format!("{ctx}: unknown overhead keyword \"{word}\""),
                help,
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;
    use linkshare_core::linklayer::Framing;
    use linkshare_core::units::{Duration, Rate};
    use linkshare_core::PacketMeta;

    fn errors(text: &str) -> Vec<(usize, usize, String, String)> {
        match Policy::parse(text, "p.toml") {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e
                .diagnostics
                .into_iter()
                .map(|d| (d.line, d.col, d.message, d.help.unwrap_or_default()))
                .collect(),
        }
    }

    fn root(text: &str) -> CakeParams {
        let p = Policy::parse(text, "p.toml").unwrap();
        assert_eq!(p.build::<PacketMeta>().unwrap().kind(), "cake");
        match p.root_leaf() {
            Some(crate::LeafKind::Cake(q)) => q.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn root_with_its_shaper_and_every_key() {
        assert_eq!(root("qdisc = \"cake\"\n"), CakeParams::default());
        let q = root(
            "qdisc = { type = \"cake\", bandwidth = \"100mbit\", rtt = \"metro\", \
             diffserv = \"diffserv4\", isolation = \"dual-srchost\", wash = true, \
             ack_filter = \"aggressive\", overhead = \"pppoe-ptm\", mpu = 64, \
             memlimit = \"8m\", ingress = true, seed = 7 }\n",
        );
        assert_eq!(q.bandwidth, Some(Rate::mbit(100)));
        assert_eq!(
            (q.rtt, q.target),
            (Duration::from_millis(10), Duration::from_micros(500))
        );
        assert_eq!(q.diffserv, DiffservMode::Diffserv4);
        assert_eq!(q.isolation, FlowMode::DualSrchost);
        assert!(q.wash && q.ingress);
        assert_eq!(q.ack_filter, AckFilter::Aggressive);
        assert_eq!(
            (q.overhead.overhead, q.overhead.mpu, q.overhead.framing),
            (30, 64, Framing::Ptm)
        );
        assert_eq!(q.memlimit, Some(8 << 20));
        assert_eq!(q.seed, 7);
        let q =
            root("qdisc = { type = \"cake\", rtt = \"40ms\", target = \"3ms\", overhead = -4 }\n");
        assert_eq!(
            (q.rtt, q.target),
            (Duration::from_millis(40), Duration::from_millis(3))
        );
        assert_eq!(q.overhead.overhead, -4);
    }

    #[test]
    fn as_a_leaf_of_htb() {
        let text = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"10mbit\"\n\
                    leaf = { type = \"cake\", diffserv = \"besteffort\", isolation = \"dual-dsthost\" }\n";
        let p = Policy::parse(text, "p.toml").unwrap();
        assert_eq!(p.classes()[0].leaf.name(), "cake");
        p.build::<PacketMeta>().unwrap();
    }

    #[test]
    fn bad_values_point_at_the_value_with_help() {
        let e = errors("qdisc = { type = \"cake\", rtt = \"intenet\" }\n");
        assert_eq!((e[0].0, e[0].1), (1, 32), "{e:?}");
        assert!(
            e[0].2.contains("rtt") && e[0].3.contains("internet"),
            "{e:?}"
        );
        let e = errors("qdisc = { type = \"cake\", overhead = \"pppoe-ptn\" }\n");
        assert!(e[0].3.contains("pppoe-ptm"), "{e:?}");
        let e = errors("qdisc = { type = \"cake\", overhead = 300 }\n");
        assert!(e[0].2.contains("overhead"), "{e:?}");
        let e = errors("qdisc = { type = \"cake\", isolation = \"tripple-isolate\" }\n");
        assert!(e[0].3.contains("triple-isolate"), "{e:?}");
        let e = errors("qdisc = { type = \"cake\", diffserv = \"diffserv5\" }\n");
        assert!(e[0].2.contains("diffserv"), "{e:?}");
        let e = errors("qdisc = { type = \"cake\", ack_filter = \"yes\" }\n");
        assert!(e[0].3.contains("aggressive"), "{e:?}");
        let e = errors("qdisc = { type = \"cake\", autorate_ingress = true }\n");
        assert!(e[0].2.contains("not implemented"), "{e:?}");
        let e = errors("qdisc = { type = \"cake\", memlimit = 100 }\n");
        assert!(e[0].2.contains("memlimit"), "{e:?}");
        let e = errors("qdisc = { type = \"cake\", flows = 8 }\n");
        assert!(e[0].2.contains("unknown key"), "{e:?}");
    }

    #[test]
    fn nat_is_accepted_with_a_warning() {
        let p = Policy::parse("qdisc = { type = \"cake\", nat = true }\n", "p.toml").unwrap();
        assert_eq!(p.build::<PacketMeta>().unwrap().kind(), "cake");
    }
}
