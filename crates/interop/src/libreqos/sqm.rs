//! Which queue LibreQoS puts on a circuit, per direction, as a linkshare leaf.
//!
//! LibreQoS (its `sqm_tokens_for` / `sqm_rate_fixup`, and LibreQoS.py's `effective_sqm_str`)
//! decides from the circuit's `sqm` column, lqos.conf's `[queues]` `default_sqm` (default
//! `"cake diffserv4"`) and `fast_queues_fq_codel` (default 1000 Mbps), and the circuit's
//! maximum rate in that direction:
//! * no `sqm`: fq_codel at or above `fast_queues_fq_codel`, else `default_sqm`;
//! * `cake`: `default_sqm` if it is a cake, else `cake diffserv4`;
//! * `fq_codel`: fq_codel; `none`: no qdisc (the kernel's default FIFO: pfifo here);
//! * a cake without an explicit `rtt` gets a longer one on slow circuits, so that one MTU's
//!   serialisation fits CoDel's target: 300 ms up to 1 Mbps, 180 ms up to 2, 140 ms up to 3,
//!   120 ms up to 4.
//!
//! The cake and fq_codel words are read by the tc importer's readers (`tc::leaf`), so every
//! option a `default_sqm` may carry (`ack-filter`, `memlimit`, overhead keywords) is kept.

use crate::policy_writer::Leaf;
use crate::tc::leaf::leaf as tc_leaf;

/// lqos.conf's queue settings that choose a circuit's qdisc.
#[derive(Clone, Debug, PartialEq)]
pub struct SqmDefaults {
    /// `default_sqm`: a tc qdisc with its options (`"cake diffserv4"`).
    pub default_sqm: String,
    /// `fast_queues_fq_codel`, Mbps: circuits this fast get fq_codel unless `sqm` says otherwise.
    pub fast_fq_codel_mbps: f64,
}

impl Default for SqmDefaults {
    fn default() -> Self {
        SqmDefaults {
            default_sqm: "cake diffserv4".into(),
            fast_fq_codel_mbps: 1000.0,
        }
    }
}

impl SqmDefaults {
    /// The settings of lqos.conf's `[queues]` (`key = value` lines; missing keys keep the
    /// defaults).
    pub fn read(text: &str) -> SqmDefaults {
        let mut d = SqmDefaults::default();
        for raw in text.lines() {
            let line = raw.split('#').next().unwrap_or("").trim();
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let v = value.trim().trim_matches('"').trim();
            match key.trim() {
                "default_sqm" if !v.is_empty() => d.default_sqm = v.to_string(),
                "fast_queues_fq_codel" => {
                    if let Ok(x) = v.parse::<f64>() {
                        if x > 0.0 {
                            d.fast_fq_codel_mbps = x;
                        }
                    }
                }
                _ => {}
            }
        }
        d
    }
}

/// LibreQoS's longer CAKE rtt for a slow circuit (`max_bits` per second), if any.
fn rtt_fixup(max_bits: u64) -> Option<&'static str> {
    match max_bits {
        0..=1_000_000 => Some("300ms"),
        1_000_001..=2_000_000 => Some("180ms"),
        2_000_001..=3_000_000 => Some("140ms"),
        3_000_001..=4_000_000 => Some("120ms"),
        _ => None,
    }
}

/// A tc qdisc with options (`"cake diffserv4 rtt 300ms"`) as a leaf; fq_codel with a note when
/// linkshare cannot read it.
fn words_leaf(text: &str) -> Leaf {
    let words: Vec<String> = text.split_whitespace().map(String::from).collect();
    let Some((kind, opts)) = words.split_first() else {
        return Leaf::new("fq_codel");
    };
    match tc_leaf(kind, opts) {
        Ok(l) => l,
        Err(e) => {
            let mut l = Leaf::new("fq_codel");
            l.notes.push(format!("sqm `{text}`: {e}; fq_codel instead"));
            l
        }
    }
}

/// The leaf of a circuit whose `sqm` for this direction is `sqm` (lower case, maybe empty) and
/// whose maximum rate in it is `max_bits`.
pub(super) fn leaf(sqm: &str, max_bits: u64, d: &SqmDefaults) -> Leaf {
    let cake_default = d.default_sqm.split_whitespace().next() == Some("cake");
    let base = match sqm {
        "fq_codel" => return Leaf::new("fq_codel"),
        "none" => {
            let mut l = Leaf::new("pfifo");
            l.notes.push("sqm none: a plain FIFO".into());
            return l;
        }
        "cake" if cake_default => d.default_sqm.clone(),
        "cake" => "cake diffserv4".to_string(),
        "" if max_bits as f64 >= d.fast_fq_codel_mbps * 1e6 => {
            let mut l = Leaf::new("fq_codel");
            l.notes.push(format!(
                "fq_codel: LibreQoS's choice for circuits of {} Mbps and more (fast_queues_fq_codel)",
                d.fast_fq_codel_mbps
            ));
            return l;
        }
        "" => d.default_sqm.clone(),
        other => {
            let mut l = leaf("", max_bits, d);
            l.notes
                .push(format!("sqm `{other}` is unknown here: the default queue"));
            return l;
        }
    };
    let mut words = base;
    let is_cake = words.split_whitespace().next() == Some("cake");
    if is_cake && !words.split_whitespace().any(|w| w == "rtt") {
        if let Some(rtt) = rtt_fixup(max_bits) {
            words.push_str(" rtt ");
            words.push_str(rtt);
        }
    }
    words_leaf(&words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy_writer::{Field, Val};

    fn field<'a>(l: &'a Leaf, k: &str) -> Option<&'a Val> {
        l.fields.iter().find(|f| f.key == k).map(|f| &f.val)
    }

    #[test]
    fn libreqos_defaults_give_cake_diffserv4_with_slow_rtts() {
        let d = SqmDefaults::default();
        let l = leaf("", 100_000_000, &d);
        assert_eq!(l.kind, "cake");
        assert_eq!(l.fields, vec![Field::str("diffserv", "diffserv4")]);
        // 1.5 Mbps: rtt 180ms; 1 Mbps: 300ms; 4 Mbps: 120ms; 4.5: the default.
        assert_eq!(
            field(&leaf("", 1_500_000, &d), "rtt"),
            Some(&Val::Str("180ms".into()))
        );
        assert_eq!(
            field(&leaf("cake", 1_000_000, &d), "rtt"),
            Some(&Val::Str("300ms".into()))
        );
        assert_eq!(
            field(&leaf("", 4_000_000, &d), "rtt"),
            Some(&Val::Str("120ms".into()))
        );
        assert_eq!(field(&leaf("", 4_500_000, &d), "rtt"), None);
        // Fast circuits: fq_codel unless the column asks for cake.
        assert_eq!(leaf("", 1_000_000_000, &d).kind, "fq_codel");
        assert_eq!(leaf("cake", 1_000_000_000, &d).kind, "cake");
        assert_eq!(leaf("fq_codel", 10_000_000, &d).kind, "fq_codel");
        assert_eq!(leaf("none", 10_000_000, &d).kind, "pfifo");
    }

    #[test]
    fn lqos_conf_settings_are_followed() {
        let d = SqmDefaults::read(
            "[queues]\ndefault_sqm = \"cake diffserv4 ack-filter rtt 50ms\" # x\n\
             fast_queues_fq_codel = 500\n",
        );
        assert_eq!(d.fast_fq_codel_mbps, 500.0);
        let l = leaf("", 2_000_000, &d);
        // An explicit rtt is kept; the options carried over.
        assert_eq!(field(&l, "rtt"), Some(&Val::Str("50ms".into())));
        assert_eq!(field(&l, "ack_filter"), Some(&Val::Str("on".into())));
        assert_eq!(leaf("", 600_000_000, &d).kind, "fq_codel");
        // A fq_codel default: cake in the column still means cake diffserv4.
        let f = SqmDefaults {
            default_sqm: "fq_codel".into(),
            ..SqmDefaults::default()
        };
        assert_eq!(leaf("", 10_000_000, &f).kind, "fq_codel");
        let c = leaf("cake", 10_000_000, &f);
        assert_eq!(field(&c, "diffserv"), Some(&Val::Str("diffserv4".into())));
        // Something linkshare cannot read: fq_codel with a note.
        let bad = SqmDefaults {
            default_sqm: "cake diffserv9".into(),
            ..SqmDefaults::default()
        };
        let l = leaf("", 10_000_000, &bad);
        assert_eq!(l.kind, "fq_codel");
        assert!(l.notes[0].contains("diffserv9"), "{:?}", l.notes);
    }
}
