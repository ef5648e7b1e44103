//! The policy's link layer: `overhead`, `mpu` and `linklayer` at the top of a policy.
//!
//! Semantics of tc-stab(8) (Linux net/sched/sch_api.c, `qdisc_calculate_pkt_len`), computed by
//! [`linkshare_core::linklayer::LinkLayer::size`]. The ranges are CAKE's (tc-cake(8):
//! `overhead` -64..256, `mpu` 0..256), wide enough for every encapsulation sqm-scripts lists.

use linkshare_core::linklayer::{Framing, LinkLayer};
use toml::Spanned;

use crate::raw::Raw;
use crate::source::Sink;
use crate::values;

/// Reads the three keys from the top-level entries; `None` if any is invalid (reported).
pub(crate) fn read(
    sink: &mut Sink,
    entries: &[(Spanned<String>, Spanned<Raw>)],
) -> Option<LinkLayer> {
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(_, v)| v)
    };
    let mut ok = true;
    let mut link = LinkLayer::default();
    if let Some(v) = get("overhead") {
        match values::int(
            sink,
            "`overhead` (bytes added to every packet)",
            v,
            -64,
            256,
        ) {
            Some(n) => link.overhead = n as i32,
            None => ok = false,
        }
    }
    if let Some(v) = get("mpu") {
        match values::int(sink, "`mpu` (minimum packet unit, bytes)", v, 0, 256) {
            Some(n) => link.mpu = n as u32,
            None => ok = false,
        }
    }
    if let Some(v) = get("linklayer") {
        match values::word(sink, "`linklayer`", v, Framing::KNOWN) {
            Some(f) => link.framing = f,
            None => ok = false,
        }
    }
    ok.then_some(link)
}

#[cfg(test)]
mod tests {
    use crate::Policy;
    use linkshare_core::linklayer::{Framing, LinkLayer};

    const TREE: &str =
        "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n";

    #[test]
    fn keys_parse_into_the_link_layer() {
        let text = format!("overhead = -4\nmpu = 64\nlinklayer = \"ATM\"\n{TREE}");
        let p = match Policy::parse(&text, "p.toml") {
            Ok(p) => p,
            Err(e) => panic!("rejected: {e}"),
        };
        assert_eq!(
            p.link_layer(),
            LinkLayer {
                overhead: -4,
                mpu: 64,
                framing: Framing::Atm
            }
        );
    }

    #[test]
    fn check_shows_the_link_layer_and_a_full_packet_s_charge() {
        let text = format!("overhead = 10\nlinklayer = \"atm\"\n{TREE}");
        let p = match Policy::parse(&text, "p.toml") {
            Ok(p) => p,
            Err(e) => panic!("rejected: {e}"),
        };
        let t = p.render_tree();
        let second = t.lines().nth(1).unwrap_or_default();
        // 1500 + 10 = 1510 bytes = 32 cells of 53.
        assert_eq!(
            second,
            "link layer atm  overhead=10  mpu=0  (a 1500-byte packet is charged 1696 bytes)"
        );
        assert!(!Policy::parse(TREE, "p.toml")
            .map(|p| p.render_tree())
            .unwrap_or_default()
            .contains("link layer"));
    }

    #[test]
    fn absent_keys_are_the_identity() {
        let p = match Policy::parse(TREE, "p.toml") {
            Ok(p) => p,
            Err(e) => panic!("rejected: {e}"),
        };
        assert!(p.link_layer().is_identity());
    }

    #[test]
    fn bad_values_point_at_their_line() {
        let text = format!("overhead = 300\nmpu = \"64\"\nlinklayer = \"atn\"\n{TREE}");
        let Err(e) = Policy::parse(&text, "p.toml") else {
            panic!("accepted bad link-layer keys")
        };
        let d = &e.diagnostics;
        let at = |line: usize| d.iter().find(|x| x.line == line);
        let over = at(1).map(|x| x.message.clone()).unwrap_or_default();
        assert!(
            over.contains("overhead") && over.contains("out of range"),
            "{d:?}"
        );
        let mpu = at(2).map(|x| x.message.clone()).unwrap_or_default();
        assert!(mpu.contains("mpu"), "{d:?}");
        let ll = at(3).and_then(|x| x.help.clone()).unwrap_or_default();
        assert!(ll.contains("did you mean \"atm\""), "{d:?}");
        assert!(d.iter().all(|x| x.file == "p.toml"));
    }
}
