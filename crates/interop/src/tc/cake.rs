//! tc-cake(8)'s options → a linkshare `cake` leaf (docs/cake.md), as `tc qdisc add … cake …`
//! writes them and as `tc qdisc show` prints them (`bandwidth 20Mbit diffserv4 dual-srchost
//! nonat nowash no-ack-filter split-gso rtt 100ms noatm overhead 18 mpu 64 memlimit 32Mb`).
//!
//! Principles: every option linkshare's CAKE has is carried over, written only where it differs
//! from the default (the words tc prints for defaults — `nowash`, `egress`, `unlimited` — add
//! nothing); the overhead words are applied in order as iproute2's q_cake.c applies them, `raw`
//! winning wherever it stands (tc sends it as its own attribute); options linkshare lacks
//! (`nat`'s conntrack lookup, `autorate-ingress`, `fwmark`, GSO splitting) become notes; an
//! unknown word is an error.

use linkshare_core::linklayer::Framing;
use linkshare_core::qdisc::cake::hash::FlowMode;
use linkshare_core::qdisc::cake::overhead::CakeOverhead;
use linkshare_core::qdisc::cake::tins::DiffservMode;
use linkshare_core::qdisc::cake::RTT_PRESETS;

use super::leaf::{rate, size, time};
use crate::policy_writer::{Field, Leaf};

/// The `cake` leaf for tc-cake options `opts`, or why they cannot be imported.
pub fn leaf(opts: &[String]) -> Result<Leaf, String> {
    let mut l = Leaf::new("cake");
    let mut overhead_words: Vec<String> = Vec::new();
    let mut raw = false;
    // An explicit `mpu N` and how many overhead words came before it.
    let mut mpu: Option<(u32, usize)> = None;
    let note = |l: &mut Leaf, n: String| {
        if !l.notes.contains(&n) {
            l.notes.push(n);
        }
    };
    let mut i = 0;
    while i < opts.len() {
        let k = opts[i].as_str();
        let val = || {
            opts.get(i + 1)
                .map(|s| s.as_str())
                .ok_or_else(|| format!("cake: `{k}` needs a value"))
        };
        let mut used = 1;
        match k {
            "bandwidth" => {
                // `tc qdisc show` prints an unshaped cake as `bandwidth unlimited`.
                let v = val()?;
                if v != "unlimited" {
                    l.fields.push(Field::rate("bandwidth", rate(v)?));
                }
                used = 2;
            }
            "unlimited" | "nonat" | "nowash" | "no-ack-filter" | "egress" | "split-gso"
            | "no-split-gso" => {}
            "autorate-ingress" | "autorate_ingress" => note(
                &mut l,
                "cake autorate-ingress is not implemented in linkshare: set `bandwidth` to the measured rate".into(),
            ),
            "rtt" => {
                let v = val()?;
                used = 2;
                l.fields.push(Field::time("rtt", time(v)?));
            }
            "nat" => note(
                &mut l,
                "cake nat: linkshare does not read conntrack, hosts are the addresses seen; shape on the LAN side of the NAT for per-host fairness".into(),
            ),
            "wash" => l.fields.push(Field::bool("wash", true)),
            "ack-filter" => l.fields.push(Field::str("ack_filter", "on")),
            "ack-filter-aggressive" => l.fields.push(Field::str("ack_filter", "aggressive")),
            "ingress" => l.fields.push(Field::bool("ingress", true)),
            "memlimit" => {
                l.fields.push(Field::size("memlimit", size(val()?)?));
                used = 2;
            }
            "fwmark" => {
                used = 2;
                note(
                    &mut l,
                    "cake fwmark (tin by firewall mark) is not in linkshare's cake and is left out".into(),
                );
            }
            "overhead" => {
                let v = val()?;
                v.parse::<i32>()
                    .ok()
                    .filter(|n| (-64..=256).contains(n))
                    .ok_or_else(|| format!("cake: overhead `{v}` is not a number from -64 to 256"))?;
                overhead_words.push(v.to_string());
                used = 2;
            }
            "mpu" => {
                let v = val()?;
                let n = v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n <= 256)
                    .ok_or_else(|| format!("cake: mpu `{v}` is not a number from 0 to 256"))?;
                mpu = Some((n, overhead_words.len()));
                used = 2;
            }
            "via-ethernet" => {}
            w if RTT_PRESETS.iter().any(|p| p.0 == w) => l.fields.push(Field::str("rtt", w)),
            w if DiffservMode::KNOWN.iter().any(|m| m.0 == w) => {
                l.fields.retain(|f| f.key != "diffserv");
                if w != DiffservMode::default().name() {
                    l.fields.push(Field::str("diffserv", w));
                }
            }
            w if FlowMode::KNOWN.iter().any(|m| m.0 == w) => {
                l.fields.retain(|f| f.key != "isolation");
                if w != FlowMode::default().name() {
                    l.fields.push(Field::str("isolation", w));
                }
            }
            w if CakeOverhead::keyword(w).is_some() => {
                raw |= w == "raw";
                overhead_words.push(w.to_string());
            }
            other => return Err(format!("cake: unknown option `{other}`")),
        }
        i += used;
    }
    let mut o = CakeOverhead::keywords(&overhead_words.join(" "))
        .map_err(|w| format!("cake: unknown option `{w}`"))?;
    if let Some((n, before)) = mpu {
        // A later keyword with its own minimum (`ethernet`, `docsis`) overrides `mpu N`.
        let later = overhead_words[before..]
            .iter()
            .any(|w| CakeOverhead::keyword(w).is_some_and(|k| k.mpu != 0));
        if !later {
            o.mpu = n;
        }
    }
    if raw {
        o.enabled = false;
    }
    overhead_fields(&o, &mut l.fields);
    Ok(l)
}

/// `overhead` (as linkshare reads it: `"30 ptm"`) and `mpu` for `o`; nothing for `raw`.
fn overhead_fields(o: &CakeOverhead, fields: &mut Vec<Field>) {
    let framing = match o.framing {
        Framing::Ethernet => "noatm",
        Framing::Atm => "atm",
        Framing::Ptm => "ptm",
    };
    if o.enabled || o.overhead != 0 {
        fields.push(Field::str("overhead", format!("{} {framing}", o.overhead)));
    } else if o.framing != Framing::Ethernet {
        fields.push(Field::str("overhead", framing));
    }
    if o.mpu != 0 {
        fields.push(Field::int("mpu", i64::from(o.mpu)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy_writer::Val;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn get<'a>(l: &'a Leaf, key: &str) -> Option<&'a Val> {
        l.fields.iter().find(|f| f.key == key).map(|f| &f.val)
    }

    fn s(v: &str) -> Option<Val> {
        Some(Val::Str(v.into()))
    }

    #[test]
    fn script_words_become_keys() {
        let l = leaf(&w(
            "bandwidth 6mbit diffserv4 dual-srchost nat wash ack-filter-aggressive \
             pppoe-ptm mpu 64 memlimit 8mb metro ingress fwmark 0xff",
        ))
        .unwrap();
        assert_eq!(l.kind, "cake");
        assert_eq!(get(&l, "bandwidth").cloned(), s("6mbit"));
        assert_eq!(get(&l, "diffserv").cloned(), s("diffserv4"));
        assert_eq!(get(&l, "isolation").cloned(), s("dual-srchost"));
        assert_eq!(get(&l, "wash").cloned(), Some(Val::Bool(true)));
        assert_eq!(get(&l, "ack_filter").cloned(), s("aggressive"));
        assert_eq!(get(&l, "overhead").cloned(), s("30 ptm"));
        assert_eq!(get(&l, "mpu").cloned(), Some(Val::Int(64)));
        assert_eq!(get(&l, "memlimit").cloned(), s("8m"));
        assert_eq!(get(&l, "rtt").cloned(), s("metro"));
        assert_eq!(get(&l, "ingress").cloned(), Some(Val::Bool(true)));
        // nat and fwmark: notes, not keys.
        assert_eq!(l.notes.len(), 2, "{:?}", l.notes);
        assert!(get(&l, "nat").is_none());
    }

    #[test]
    fn show_output_and_defaults() {
        // `tc qdisc show` of a default cake: nothing but the type.
        let l = leaf(&w(
            "bandwidth 20Mbit diffserv3 triple-isolate nonat nowash no-ack-filter split-gso \
             rtt 100ms raw overhead 0",
        ))
        .unwrap();
        let keys: Vec<&str> = l.fields.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["bandwidth", "rtt"]);
        assert!(l.notes.is_empty());
        // docsis as show prints it.
        let l = leaf(&w(
            "bandwidth unlimited besteffort noatm overhead 18 mpu 64 memlimit 32Mb",
        ))
        .unwrap();
        assert!(get(&l, "bandwidth").is_none());
        assert_eq!(get(&l, "overhead").cloned(), s("18 noatm"));
        assert_eq!(get(&l, "mpu").cloned(), Some(Val::Int(64)));
        assert_eq!(get(&l, "memlimit").cloned(), s("32m"));
        // A later `ethernet` sets its own minimum over an earlier `mpu`.
        let l = leaf(&w("mpu 100 ethernet")).unwrap();
        assert_eq!(get(&l, "mpu").cloned(), Some(Val::Int(84)));
        assert_eq!(get(&l, "overhead").cloned(), s("38 noatm"));
    }

    #[test]
    fn bad_words_are_errors() {
        assert!(leaf(&w("diffserv5")).unwrap_err().contains("diffserv5"));
        assert!(leaf(&w("bandwidth")).unwrap_err().contains("needs a value"));
        assert!(leaf(&w("overhead 300")).unwrap_err().contains("-64 to 256"));
        assert!(leaf(&w("rtt soon")).is_err());
    }
}
