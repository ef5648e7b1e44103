//! tc qdisc options → a linkshare leaf (docs/leaves.md), for the qdiscs of tc(8) that linkshare
//! has: pfifo/bfifo (tc-pfifo(8)), sfq (tc-sfq(8)), tbf (tc-tbf(8)), red (tc-red(8)), prio
//! (tc-prio(8)), codel (tc-codel(8)), fq_codel (tc-fq_codel(8)) and cake (tc-cake(8), read in
//! `cake.rs`).
//!
//! Principles: tc's units are read as tc reads them (a bare time is microseconds, sizes are
//! 1024-based, `8mbps` is bytes) with `linkshare_core::units`; every option linkshare has is
//! carried over explicitly, every option it lacks becomes a note on the leaf, and an unknown
//! option is an error (a typo in the script must not silently change the leaf). The same
//! reader takes the words of `tc qdisc show` (`limit 1000p`, `lat 50ms`, `32Mb`).

use linkshare_core::units::{Duration, Rate, Size};

use crate::policy_writer::{Field, Leaf};

fn strip_show_suffix(s: &str) -> &str {
    // `tc qdisc show` prints packet limits as `1000p`.
    s.strip_suffix('p')
        .filter(|t| t.parse::<u64>().is_ok())
        .unwrap_or(s)
}

fn count(s: &str) -> Result<i64, String> {
    strip_show_suffix(s)
        .parse::<u32>()
        .map(i64::from)
        .map_err(|_| format!("`{s}` is not a count"))
}

pub(super) fn size(s: &str) -> Result<u64, String> {
    // `burst 10kb/8`: the cell size after the slash is tc's rate table detail.
    let s = s.split('/').next().unwrap_or(s);
    Size::parse(s)
        .map(|z| z.bytes())
        .map_err(|e| format!("`{s}`: {e}"))
}

pub(super) fn rate(s: &str) -> Result<u64, String> {
    Rate::parse(s)
        .map(|r| r.bits_per_sec())
        .map_err(|e| format!("`{s}`: {e}"))
}

pub(super) fn time(s: &str) -> Result<u64, String> {
    Duration::parse(s)
        .map(|d| d.as_nanos())
        .map_err(|e| format!("`{s}`: {e}"))
}

/// The leaf for qdisc `kind` with options `opts`, or why it cannot be imported.
pub fn leaf(kind: &str, opts: &[String]) -> Result<Leaf, String> {
    let mut l = Leaf::new(kind);
    let mut i = 0;
    let val = |i: usize| -> Result<&str, String> {
        opts.get(i + 1)
            .map(|s| s.as_str())
            .ok_or_else(|| format!("{kind}: `{}` needs a value", opts[i]))
    };
    match kind {
        "pfifo" | "bfifo" | "pfifo_fast" | "fq_codel" | "codel" | "sfq" | "tbf" | "red" | "prio" => {}
        "cake" => return super::cake::leaf(opts),
        "fq" => {
            l.kind = "fq_codel".into();
            l.notes.push("fq imported as fq_codel: per-flow fairness, without fq's pacing".into());
        }
        other => {
            return Err(format!(
                "qdisc `{other}` has no linkshare leaf: use pfifo, bfifo, sfq, tbf, red, prio, codel, fq_codel, cake (or fq, imported as fq_codel)"
            ))
        }
    }
    if kind == "pfifo_fast" {
        l.kind = "prio".into();
        l.notes
            .push("pfifo_fast imported as prio with its three bands".into());
        return Ok(l);
    }
    while i < opts.len() {
        let k = opts[i].as_str();
        let mut used = 2;
        match (l.kind.as_str(), kind, k) {
            // Flags that take no value.
            (_, _, "ecn") => {
                used = 1;
                if l.kind != "red" && l.kind != "codel" && l.kind != "fq_codel" {
                    return Err(format!("{kind}: `ecn` is not an option"));
                }
                l.fields.push(Field::bool("ecn", true));
            }
            (_, _, "noecn") if l.kind == "codel" || l.kind == "fq_codel" => {
                used = 1;
                l.fields.push(Field::bool("ecn", false));
            }
            ("red", _, "harddrop") => {
                used = 1;
                l.fields.push(Field::bool("harddrop", true));
            }
            ("red", _, "adaptive" | "nodrop" | "qevent") => {
                used = 1;
                l.notes.push(format!(
                    "red `{k}` is not in linkshare's red and is left out"
                ));
            }
            ("sfq", _, "headdrop") => {
                used = 1;
                l.notes.push(
                    "sfq headdrop: linkshare's sfq drops from the tail of the longest flow".into(),
                );
            }
            ("pfifo", _, "limit") => l.fields.push(Field::int("limit", count(val(i)?)?)),
            ("bfifo", _, "limit") => l.fields.push(Field::size("limit", size(val(i)?)?)),
            ("sfq", _, "limit" | "depth" | "flows" | "divisor") => {
                l.fields.push(Field::int(k, count(val(i)?)?))
            }
            ("sfq", _, "quantum") => l.fields.push(Field::size("quantum", size(val(i)?)?)),
            ("sfq", _, "perturb") => {
                let secs: u64 = val(i)?
                    .trim_end_matches("sec")
                    .trim_end_matches('s')
                    .parse()
                    .map_err(|_| {
                        format!(
                            "sfq: perturb `{}` is not whole seconds",
                            val(i).unwrap_or("")
                        )
                    })?;
                l.fields.push(Field::time("perturb", secs * 1_000_000_000));
            }
            ("sfq", _, "redflowlimit" | "min" | "max" | "probability" | "avpkt" | "burst") => {
                l.notes.push(format!(
                    "sfq's RED options (`{k}`) are not in linkshare's sfq and are left out"
                ));
            }
            ("tbf", _, "rate") => l.fields.push(Field::rate("rate", rate(val(i)?)?)),
            ("tbf", _, "peakrate") => l.fields.push(Field::rate("peakrate", rate(val(i)?)?)),
            ("tbf", _, "burst" | "buffer" | "maxburst") => {
                l.fields.push(Field::size("burst", size(val(i)?)?))
            }
            ("tbf", _, "mtu" | "minburst") => l.fields.push(Field::size("mtu", size(val(i)?)?)),
            ("tbf", _, "limit") => l.fields.push(Field::size("limit", size(val(i)?)?)),
            ("tbf", _, "latency" | "lat") => l.fields.push(Field::time("latency", time(val(i)?)?)),
            ("red", _, "limit" | "min" | "max" | "avpkt") => {
                l.fields.push(Field::size(k, size(val(i)?)?))
            }
            ("red", _, "burst") => l.fields.push(Field::int("burst", count(val(i)?)?)),
            ("red", _, "probability") => {
                let p: f64 = val(i)?
                    .parse()
                    .map_err(|_| "red: probability is not a number".to_string())?;
                l.fields.push(Field::float("max_p", p));
            }
            ("red", _, "bandwidth") => l.fields.push(Field::rate("bandwidth", rate(val(i)?)?)),
            ("prio", _, "bands") => l.fields.push(Field::int("bands", count(val(i)?)?)),
            ("prio", _, "priomap") => {
                let map: Vec<i64> = opts[i + 1..]
                    .iter()
                    .take(16)
                    .map(|s| s.parse::<i64>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| "prio: priomap takes 16 band numbers".to_string())?;
                if map.len() != 16 {
                    return Err("prio: priomap takes 16 band numbers".into());
                }
                used = 17;
                l.fields
                    .push(Field::new("priomap", crate::policy_writer::Val::Ints(map)));
            }
            ("codel" | "fq_codel", _, "limit") => {
                l.fields.push(Field::int("limit", count(val(i)?)?))
            }
            ("codel" | "fq_codel", _, "target" | "interval" | "ce_threshold") => {
                l.fields.push(Field::time(k, time(val(i)?)?))
            }
            ("fq_codel", _, "flows") => l.fields.push(Field::int("flows", count(val(i)?)?)),
            ("fq_codel", _, "quantum") => l.fields.push(Field::size("quantum", size(val(i)?)?)),
            ("fq_codel", _, "memory_limit") => {
                l.fields.push(Field::size("memory_limit", size(val(i)?)?))
            }
            ("fq_codel", _, "drop_batch") => l
                .fields
                .push(Field::int("drop_batch_size", count(val(i)?)?)),
            ("fq", _, _) => {
                if !l.notes.iter().any(|n| n.starts_with("fq options")) {
                    l.notes.push("fq options are left out".into());
                }
            }
            (_, _, other) => return Err(format!("{kind}: unknown option `{other}`")),
        }
        i += used;
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_and_show_forms() {
        let l = leaf("tbf", &w("rate 1mbit burst 10kb/8 latency 50ms")).unwrap();
        assert_eq!(l.fields[0], Field::str("rate", "1mbit"));
        assert_eq!(l.fields[1], Field::str("burst", "10k"));
        let l = leaf("pfifo", &w("limit 1000p")).unwrap();
        assert_eq!(l.fields[0], Field::int("limit", 1000));
        let l = leaf("cake", &w("bandwidth 100mbit diffserv4 nat")).unwrap();
        assert_eq!(l.kind, "cake");
        assert_eq!(l.fields.len(), 2);
        assert!(leaf("hfsc", &[]).unwrap_err().contains("hfsc"));
        assert!(leaf("sfq", &w("perturb"))
            .unwrap_err()
            .contains("needs a value"));
        assert!(leaf("sfq", &w("bogus 1")).unwrap_err().contains("bogus"));
    }
}
