//! tc's size tables (`stab`, tc-stab(8)) ↔ a policy's `overhead`, `mpu` and `linklayer`.
//!
//! Syntax of tc-stab(8) and iproute2's tc/tc_stab.c: `stab [mtu BYTES] [tsize SLOTS]
//! [mpu BYTES] [overhead BYTES] [linklayer ethernet|atm|adsl]` between the qdisc's handle and its
//! kind. The kernel (net/sched/sch_api.c, `qdisc_calculate_pkt_len`) adds the overhead and looks
//! the size up in a table tc computed with the mpu floor and ATM cell rounding, which is what
//! `linkshare_core::linklayer` computes directly. `mtu` and `tsize` only size that table (its
//! resolution), so they have no policy equivalent and are dropped on import. tc has no PTM
//! framing: a PTM policy is exported with its overhead and mpu and a note.

use linkshare_core::linklayer::{Framing, LinkLayer};

use crate::policy_writer::Field;

/// The words to put after `root handle 1: ` (empty for the identity), and a note when tc
/// cannot say everything.
pub fn export_words(link: LinkLayer) -> (String, Option<String>) {
    if link.is_identity() {
        return (String::new(), None);
    }
    let (layer, note) = match link.framing {
        Framing::Ethernet => ("ethernet", None),
        Framing::Atm => ("atm", None),
        Framing::Ptm => (
            "ethernet",
            Some(
                "# note: tc's size tables have no PTM (64b/65b) framing: the kernel charges \
                 length + overhead, 1/65 (1.5 %) less than linkshare"
                    .to_string(),
            ),
        ),
    };
    (
        format!(
            "stab overhead {} mpu {} linklayer {layer} ",
            link.overhead, link.mpu
        ),
        note,
    )
}

/// Reads `stab …` starting at `words[start]` (the word `stab`). Returns the link layer and the
/// index of the first word after it.
pub fn parse(words: &[String], start: usize) -> Result<(LinkLayer, usize), String> {
    let mut link = LinkLayer::default();
    let mut i = start + 1;
    while i < words.len() {
        let key = words[i].as_str();
        if !matches!(key, "mtu" | "tsize" | "mpu" | "overhead" | "linklayer") {
            break;
        }
        let Some(v) = words.get(i + 1) else {
            return Err(format!("stab: `{key}` needs a value"));
        };
        match key {
            "overhead" => {
                link.overhead = v
                    .parse::<i32>()
                    .ok()
                    .filter(|n| (-64..=256).contains(n))
                    .ok_or_else(|| {
                        format!("stab: overhead `{v}` is not a byte count from -64 to 256")
                    })?
            }
            "mpu" => {
                link.mpu = v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n <= 256)
                    .ok_or_else(|| format!("stab: mpu `{v}` is not a byte count up to 256"))?
            }
            "linklayer" => {
                link.framing = Framing::from_name(v).ok_or_else(|| {
                    format!("stab: unknown linklayer `{v}` (tc knows ethernet, atm, adsl)")
                })?
            }
            // The table's size and resolution: nothing to carry over.
            _ => {}
        }
        i += 2;
    }
    Ok((link, i))
}

/// The policy's top-level keys for a link layer (none for the identity).
pub fn fields(link: LinkLayer) -> Vec<Field> {
    let mut v = Vec::new();
    if link.overhead != 0 {
        v.push(Field::int("overhead", i64::from(link.overhead)));
    }
    if link.mpu != 0 {
        v.push(Field::int("mpu", i64::from(link.mpu)));
    }
    if link.framing != Framing::Ethernet {
        v.push(Field::str("linklayer", link.framing.name()));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn export_then_parse_gives_the_same_link_layer() {
        for link in [
            LinkLayer {
                overhead: 10,
                mpu: 0,
                framing: Framing::Atm,
            },
            LinkLayer {
                overhead: -4,
                mpu: 64,
                framing: Framing::Ethernet,
            },
        ] {
            let (w, note) = export_words(link);
            assert!(note.is_none());
            let ws = words(&format!("{w}htb default 1"));
            let (back, next) = parse(&ws, 0).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(back, link);
            assert_eq!(ws[next], "htb");
        }
    }

    #[test]
    fn adsl_is_atm_and_table_sizes_are_dropped() {
        let ws = words("stab mtu 2048 tsize 512 overhead 40 linklayer adsl sfq");
        let (l, next) = parse(&ws, 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.framing, Framing::Atm);
        assert_eq!(l.overhead, 40);
        assert_eq!(ws[next], "sfq");
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&words("stab overhead lots htb"), 0).is_err());
        assert!(parse(&words("stab linklayer docsis htb"), 0).is_err());
        assert!(parse(&words("stab mpu"), 0).is_err());
    }

    #[test]
    fn ptm_exports_with_a_note() {
        let (w, note) = export_words(LinkLayer {
            overhead: 22,
            mpu: 0,
            framing: Framing::Ptm,
        });
        assert!(w.contains("overhead 22"), "{w}");
        assert!(note.is_some_and(|n| n.starts_with("# note:")));
        assert!(export_words(LinkLayer::default()).0.is_empty());
    }
}
