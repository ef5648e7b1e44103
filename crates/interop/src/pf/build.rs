//! pf queues and rules → a policy draft: ALTQ CBQ as CBQ, ALTQ PRIQ as strict priority under
//! HTB, ALTQ HFSC and the OpenBSD tree as HFSC (`hfsc.rs`), rules as filters (the mapping is in
//! `pf/mod.rs`).

use super::{Altq, Bw, PfRule, Queue};
use crate::diag::{Diag, ImportError};
use crate::policy_writer::{ClassDraft, Draft, Field, FilterDraft, Leaf, Root};

pub(super) fn leaf_of(q: &Queue) -> Option<Leaf> {
    let mut l = if q.opts.iter().any(|o| o == "rio") {
        Leaf::new("rio")
    } else if q.opts.iter().any(|o| o == "red" || o == "ecn") {
        let mut l = Leaf::new("red");
        if q.opts.iter().any(|o| o == "ecn") {
            l.fields.push(Field::bool("ecn", true));
        }
        l
    } else if let Some(f) = q.flows {
        let mut l = Leaf::new("fq_codel");
        l.fields.push(Field::int("flows", i64::from(f)));
        l
    } else if q.qlimit.is_some() {
        Leaf::new("pfifo")
    } else {
        return None;
    };
    if let Some(n) = q.qlimit {
        match l.kind.as_str() {
            "pfifo" | "fq_codel" => l.fields.push(Field::int("limit", i64::from(n))),
            _ => l.notes.push(format!(
                "qlimit {n} packets: red/rio limits are in bytes here; left at the default"
            )),
        }
    }
    if q.opts.iter().any(|o| o == "cleardscp") {
        l.notes
            .push("cleardscp is not done: linkshare does not rewrite packets".into());
    }
    Some(l)
}

pub(crate) fn altq(
    altqs: &[Altq],
    queues: &[Queue],
    on: &str,
    file: &str,
) -> Result<Draft, ImportError> {
    let Some(a) = altqs.iter().find(|a| a.iface == on) else {
        return Err(Diag::new(file, 0, format!("no `altq on {on}` line")).into());
    };
    let Bw::Bits(link) = a.bw else {
        return Err(Diag::new(
            file,
            a.line,
            "the interface's bandwidth must be absolute (e.g. 10Mb)",
        )
        .into());
    };
    let mut errors = Vec::new();
    let find = |n: &str| {
        queues
            .iter()
            .find(|q| q.name == n && q.iface.as_deref().is_none_or(|i| i == on))
    };
    // (queue, parent) in tree order.
    let mut tree: Vec<(&Queue, Option<String>)> = Vec::new();
    let mut stack: Vec<(String, Option<String>, usize)> = a
        .queues
        .iter()
        .rev()
        .map(|n| (n.clone(), None, a.line))
        .collect();
    while let Some((n, parent, line)) = stack.pop() {
        match find(&n) {
            Some(q) => {
                if tree.iter().any(|(x, _)| x.name == q.name) || tree.len() > 10_000 {
                    errors.push(Diag::new(
                        file,
                        q.line,
                        format!("queue `{n}` is listed twice"),
                    ));
                    continue;
                }
                tree.push((q, parent));
                for c in q.children.iter().rev() {
                    stack.push((c.clone(), Some(n.clone()), q.line));
                }
            }
            None => errors.push(
                Diag::new(file, line, format!("queue `{n}` is listed but not defined"))
                    .help("add a `queue NAME …` line"),
            ),
        }
    }
    for (q, _) in &tree {
        if let Some(s) = q.sched.as_deref().filter(|s| *s != a.sched) {
            errors.push(Diag::new(
                file,
                q.line,
                format!(
                    "queue `{}` is a {s} queue under `altq on {on} {}`: one scheduler per interface",
                    q.name, a.sched
                ),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    let default = tree
        .iter()
        .find(|(q, _)| q.default && q.children.is_empty())
        .map(|(q, _)| q.name.clone());
    let Some(default) = default else {
        return Err(Diag::new(file, a.line, "no leaf queue has `default`")
            .help("ALTQ requires one default queue: add cbq(default), priq(default) or hfsc(default) to one")
            .into());
    };
    if a.sched == "hfsc" {
        return super::hfsc::altq(a, &tree, link, default, file);
    }
    let mut d;
    if a.sched == "cbq" {
        d = Draft::new(Root::Cbq);
        d.top.push(Field::str("default", default));
        d.top.push(Field::bool("altq_compat", true).note(
            "imported from ALTQ: its scheduler, guideline and estimator behaviours (docs/cbq.md)",
        ));
        let mut root = ClassDraft::new("root", Some(format!("{file}:{} (altq on {on})", a.line)));
        root.fields.push(Field::rate("rate", link));
        d.classes.push(root);
        for (q, parent) in &tree {
            let mut c = ClassDraft::new(&q.name, Some(format!("{file}:{}", q.line)));
            c.fields.push(Field::str(
                "parent",
                parent.clone().unwrap_or_else(|| "root".into()),
            ));
            match &q.bw {
                Some(Bw::Percent(p)) => c.fields.push(Field::str("share", format!("{p}%"))),
                Some(Bw::Bits(b)) => c.fields.push(Field::rate("rate", *b)),
                None => {
                    errors.push(Diag::new(
                        file,
                        q.line,
                        format!("queue `{}` has no bandwidth", q.name),
                    ));
                    continue;
                }
            }
            let pr = q.priority.unwrap_or(1).min(7);
            c.fields
                .push(Field::int("prio", i64::from(7 - pr)).note(format!(
                    "ALTQ priority {pr} (higher first) is linkshare prio {} (lower first)",
                    7 - pr
                )));
            c.fields
                .push(Field::bool("borrow", q.opts.iter().any(|o| o == "borrow")));
            if q.children.is_empty() {
                c.leaf = leaf_of(q);
            }
            d.classes.push(c);
        }
    } else {
        d = Draft::new(Root::Htb);
        d.top.push(Field::str("default", default));
        d.notes.push("PRIQ imported as strict priority between HTB classes: each guaranteed 1/1000 of the link, all may borrow the whole link, served by prio".into());
        let mut root = ClassDraft::new(
            "root",
            Some(format!("{file}:{} (altq on {on} priq)", a.line)),
        );
        root.fields.push(Field::rate("rate", link));
        d.classes.push(root);
        let mut prios: Vec<u8> = tree.iter().map(|(q, _)| q.priority.unwrap_or(1)).collect();
        prios.sort_unstable_by(|x, y| y.cmp(x));
        prios.dedup();
        if prios.len() > 8 {
            d.notes.push(format!(
                "{} PRIQ priorities but HTB has 8: the lowest share prio 7",
                prios.len()
            ));
        }
        let guarantee = (link / 1000).max(8000);
        for (q, parent) in &tree {
            if parent.is_some() {
                errors.push(
                    Diag::new(file, q.line, "PRIQ queues have no children")
                        .help("list every queue on the altq line"),
                );
                continue;
            }
            let pr = q.priority.unwrap_or(1);
            let rank = prios.iter().position(|x| *x == pr).unwrap_or(7).min(7);
            let mut c = ClassDraft::new(&q.name, Some(format!("{file}:{}", q.line)));
            c.fields.push(Field::str("parent", "root"));
            c.fields.push(Field::rate("rate", guarantee));
            c.fields.push(Field::rate("ceil", link));
            c.fields
                .push(Field::int("prio", rank as i64).note(format!("PRIQ priority {pr}")));
            c.fields.push(Field::size("quantum", 1514));
            if q.bw.is_some() {
                c.notes
                    .push("PRIQ ignores bandwidth; so does this import".into());
            }
            c.leaf = leaf_of(q);
            d.classes.push(c);
        }
    }
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    Ok(d)
}

/// The most filters one `pass`/`match` rule may expand to. pf expands every `{ list }` of a rule
/// into the cross product of its lists, so a few lists of twenty entries make hundreds of
/// thousands of rules (a 771-byte file made 320,000 filters and 43 MB of policy in 5 s): past
/// this bound the import stops with an error naming the rule rather than writing a policy no one
/// can read and every packet must walk.
pub(crate) const MAX_FILTERS_PER_RULE: usize = 4096;

/// The most filters one import may write in all.
pub(crate) const MAX_FILTERS: usize = 100_000;

pub(crate) fn filters(
    d: &mut Draft,
    rules: &[PfRule],
    on: &str,
    file: &str,
) -> Result<(), ImportError> {
    // One pass over the classes for the parents, so finding the leaves is linear in classes.
    let parents: std::collections::HashSet<&str> = d
        .classes
        .iter()
        .flat_map(|c| c.fields.iter())
        .filter(|f| f.key == "parent")
        .filter_map(|f| match &f.val {
            crate::policy_writer::Val::Str(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    let leaves: std::collections::HashSet<&str> = d
        .classes
        .iter()
        .filter(|c| c.leaf.is_some() || !parents.contains(c.name.as_str()))
        .map(|c| c.name.as_str())
        .collect();
    let ordered: Vec<&PfRule> = rules
        .iter()
        .filter(|r| r.quick)
        .chain(rules.iter().filter(|r| !r.quick).rev())
        .collect();
    if ordered.len() > 1 {
        d.notes.push("pf's last matching rule wins unless `quick`: filters are quick rules first, then the others from last to first".into());
    }
    for r in ordered {
        if r.iface.as_deref().is_some_and(|i| i != on && i != "egress") {
            continue;
        }
        if let Some(why) = &r.skip {
            d.notes.push(format!(
                "the rule at line {} was left out: {why} ({})",
                r.line,
                r.notes.join("; ")
            ));
            continue;
        }
        if !leaves.contains(r.queue.as_str()) {
            d.notes.push(format!(
                "the rule at line {} names queue `{}`, which is not a leaf queue on {on}: left out",
                r.line, r.queue
            ));
            continue;
        }
        let lists = [
            r.protos.len(),
            r.from.len(),
            r.from_ports.len(),
            r.to.len(),
            r.to_ports.len(),
        ];
        let n = lists.iter().fold(1usize, |a, b| a.saturating_mul(*b));
        if n > MAX_FILTERS_PER_RULE || d.filters.len().saturating_add(n) > MAX_FILTERS {
            return Err(ImportError::one(
                Diag::new(
                    file,
                    r.line,
                    format!(
                        "this rule expands to {n} filters ({} protocols × {} sources × {} source ports × {} destinations × {} destination ports); an import writes at most {MAX_FILTERS_PER_RULE} per rule and {MAX_FILTERS} in all",
                        lists[0], lists[1], lists[2], lists[3], lists[4]
                    ),
                )
                .help("split the rule, or write address prefixes and port ranges (`port 1000:1019`) instead of long { lists }"),
            ));
        }
        for proto in &r.protos {
            for from in &r.from {
                for fp in &r.from_ports {
                    for to in &r.to {
                        for tp in &r.to_ports {
                            let mut fields = Vec::new();
                            if let Some(p) = proto {
                                fields.push(Field::int("protocol", i64::from(*p)));
                            }
                            if let Some(a) = from {
                                fields.push(Field::str("src", a.clone()));
                            }
                            if let Some(a) = to {
                                fields.push(Field::str("dst", a.clone()));
                            }
                            for (k, p) in [("src_port", fp), ("dst_port", tp)] {
                                match p {
                                    Some((a, b)) if a == b => {
                                        fields.push(Field::int(k, i64::from(*a)))
                                    }
                                    Some((a, b)) => fields.push(Field::str(k, format!("{a}-{b}"))),
                                    None => {}
                                }
                            }
                            d.filters.push(FilterDraft {
                                class: r.queue.clone(),
                                source: Some(format!("{file}:{}", r.line)),
                                fields,
                                notes: r.notes.clone(),
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(())
}
