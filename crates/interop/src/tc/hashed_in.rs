//! Import of u32 hash tables (tc-u32(8) "hashing filters", what `export tc` writes for runs of
//! single-address filters, `u32_hash.rs`): tables, the rules in their buckets and the links
//! that lead to them, flattened back into the one ordered list of rules linkshare has.
//!
//! Principles: a link rule stands for the rules of its table, at the link's place and priority
//! (cls_u32.c: a packet that finds nothing in the table goes on after the link). The rules of a
//! table are kept in the order they were added; that is first-match order only because each of
//! them can match in one bucket alone: its matches (with the link's) must fix every bit of the
//! hash key, and the bucket they hash to must be the rule's own — a rule that could be reached
//! from other buckets is refused with its line, one that hashes elsewhere can never match and is
//! left out with a note. Rules placed in a priority's own root table (`ht 800::`) are ordinary
//! rules.

use std::collections::HashMap;

use crate::diag::Diag;
use crate::tc::filter::{rule_of, ClassRef, Image, U32};
use crate::tc::import::FilterDef;

/// A hash-table command, as added.
#[derive(Clone, Debug)]
pub struct HashedDef {
    pub line: usize,
    pub prio: u32,
    /// The qdisc the filter is attached to (its major): each qdisc numbers its own tables.
    pub qdisc: u32,
    pub v6: bool,
    pub kind: HashedKind,
}

#[derive(Clone, Debug)]
pub enum HashedKind {
    /// `handle T: u32 divisor N`.
    Table { id: u32, divisor: u32 },
    /// `u32 … hashkey mask M at O link T:`.
    Link {
        table: u32,
        key: Option<(u32, i64)>,
        img: Image,
    },
    /// `u32 ht T:B: … flowid X`.
    Bucket {
        table: u32,
        bucket: u32,
        img: Image,
        flowid: Option<ClassRef>,
    },
}

/// Tables from this id up are the kernel's own root tables (one per priority).
const ROOT_TABLES: u32 = 0x800;

/// The hash-table form of a parsed u32 command, or `None` for an ordinary rule. `handle` is the
/// command's `handle` (the new table's id with `divisor`).
pub fn classify(u: &U32, handle: Option<u32>) -> Result<Option<HashedKind>, String> {
    if let Some(divisor) = u.divisor {
        let Some(id) = handle.filter(|h| (1..ROOT_TABLES).contains(h)) else {
            return Err("a u32 `divisor` needs `handle T:` (a table id 1-7ff) before `u32`".into());
        };
        return Ok(Some(HashedKind::Table { id, divisor }));
    }
    if let Some(table) = u.link {
        if u.ht.is_some_and(|(t, _)| t < ROOT_TABLES) {
            return Err(
                "a link from inside a hash table: nested u32 tables are not imported".into(),
            );
        }
        return Ok(Some(HashedKind::Link {
            table,
            key: u.hashkey,
            img: u.img.clone(),
        }));
    }
    match u.ht {
        Some((table, bucket)) if table < ROOT_TABLES => Ok(Some(HashedKind::Bucket {
            table,
            bucket,
            img: u.img.clone(),
            flowid: u.flowid,
        })),
        _ => Ok(None),
    }
}

/// Replace every link by its table's rules (as [`FilterDef::Rule`]s at the link's place and
/// priority); tables and bucket rules themselves go. Errors carry the line.
pub fn flatten(defs: Vec<FilterDef>, file: &str) -> Result<Vec<FilterDef>, Vec<Diag>> {
    let mut tables: HashMap<(u32, u32), (u32, usize)> = HashMap::new();
    let mut buckets: HashMap<(u32, u32), Vec<&HashedDef>> = HashMap::new();
    let mut linked: HashMap<(u32, u32), bool> = HashMap::new();
    for d in &defs {
        if let FilterDef::Hashed(h) = d {
            match &h.kind {
                HashedKind::Table { id, divisor } => {
                    tables.insert((h.qdisc, *id), (*divisor, h.line));
                }
                HashedKind::Bucket { table, .. } => {
                    buckets.entry((h.qdisc, *table)).or_default().push(h)
                }
                HashedKind::Link { .. } => {}
            }
        }
    }
    let mut out = Vec::with_capacity(defs.len());
    let mut errors = Vec::new();
    for d in &defs {
        let FilterDef::Hashed(h) = d else {
            out.push(d.clone());
            continue;
        };
        let HashedKind::Link { table, key, img } = &h.kind else {
            continue;
        };
        let Some((divisor, _)) = tables.get(&(h.qdisc, *table)) else {
            errors.push(
                Diag::new(
                    file,
                    h.line,
                    format!("the link goes to u32 table {table:x}:, which is not created"),
                )
                .help("create it first: `filter add … handle T: u32 divisor 256`"),
            );
            continue;
        };
        linked.insert((h.qdisc, *table), true);
        let key = match (key, divisor) {
            (Some(k), _) => Some(*k),
            (None, 1) => None,
            (None, _) => {
                errors.push(Diag::new(file, h.line, format!("the link to table {table:x}: of {divisor} buckets has no `hashkey mask M at O`")));
                continue;
            }
        };
        for r in buckets.get(&(h.qdisc, *table)).into_iter().flatten() {
            let HashedKind::Bucket {
                bucket,
                img: rimg,
                flowid,
                ..
            } = &r.kind
            else {
                continue;
            };
            let mut both = rimg.clone();
            both.and(img);
            if let Some((mask, off)) = key {
                let fold = |v: u32| (v >> mask.trailing_zeros().min(31)) & (divisor - 1);
                match both.pinned(mask, off) {
                    Some(v) if fold(v) == *bucket => {}
                    Some(v) => {
                        out.push(FilterDef::Skipped(r.line, format!(
                            "it sits in bucket {bucket:x} of table {table:x}: but its packets hash to bucket {:x}: it never matches",
                            fold(v)
                        )));
                        continue;
                    }
                    None => {
                        errors.push(Diag::new(file, r.line, format!(
                            "the rule in bucket {bucket:x} of table {table:x}: does not fix the hash key (mask {mask:#010x} at {off}): linkshare cannot say which packets reach it"
                        )).help("match the whole hashed field, e.g. `match ip dst 10.0.0.75/32` for `hashkey mask 0x000000ff at 16`"));
                        continue;
                    }
                }
            }
            match rule_of(&both, *flowid, r.v6, r.line, file, h.prio) {
                Ok(Some(rule)) => out.push(FilterDef::Rule(rule)),
                Ok(None) => out.push(FilterDef::Skipped(
                    r.line,
                    "its matches and its link's contradict each other: it matches nothing".into(),
                )),
                Err(e) => errors.push(e),
            }
        }
    }
    // (line, table) of every table nothing links to, in file order.
    let mut unlinked: Vec<(usize, u32)> = tables
        .iter()
        .filter(|(k, _)| !linked.contains_key(k))
        .map(|((_, t), (_, line))| (*line, *t))
        .collect();
    unlinked.sort_unstable();
    for (line, t) in unlinked {
        out.push(FilterDef::Skipped(
            line,
            format!("u32 table {t:x}: is never linked to: its rules never match"),
        ));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use crate::tc::import::import_script;

    const HEAD: &str = "qdisc replace dev e root handle 1: htb default 2\n\
        class add dev e parent 1: classid 1:1 htb rate 10mbit  # a\n\
        class add dev e parent 1: classid 1:2 htb rate 10mbit  # b\n\
        filter add dev e parent 1: protocol ip prio 1 handle 2: u32 divisor 256\n";
    const LINK: &str =
        "filter add dev e parent 1: protocol ip prio 1 u32 match u32 0 0 hashkey mask 0x000000ff at 16 link 2:\n";

    #[test]
    fn rules_must_fix_the_hash_key_and_sit_in_their_bucket() {
        // In its bucket: imported.
        let ok = format!("{HEAD}{LINK}filter add dev e parent 1: protocol ip prio 1 u32 ht 2:4b: match ip dst 10.0.0.75/32 flowid 1:1\n");
        let t = import_script(&ok, "t.tc", None).unwrap().toml;
        assert!(t.contains("dst = \"10.0.0.75/32\""), "{t}");
        // In another bucket: it can never match, left out with a note.
        let wrong = ok.replace("ht 2:4b:", "ht 2:4c:");
        let t = import_script(&wrong, "t.tc", None).unwrap().toml;
        assert!(!t.contains("dst = \"10.0.0.75/32\""), "{t}");
        assert!(t.contains("hash to bucket 4b"), "{t}");
        // A /16 does not fix the last byte: refused with its line.
        let loose = ok.replace("10.0.0.75/32", "10.0.0.0/16");
        let e = import_script(&loose, "t.tc", None).unwrap_err();
        assert!(e.render(None).contains("t.tc:6"), "{}", e.render(None));
        // A table nobody links to: its rules are left out.
        let t = import_script(&ok.replace(LINK, ""), "t.tc", None)
            .unwrap()
            .toml;
        assert!(t.contains("never linked"), "{t}");
        assert!(!t.contains("10.0.0.75"), "{t}");
    }
}
