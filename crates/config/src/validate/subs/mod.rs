//! The subscriber table: plans in the policy, one subscriber per row of a CSV file.
//!
//! An ISP shapes each of 10^4–10^6 subscribers with one of a few plans, below sites and access
//! points that are few. So a policy keeps its sites and APs as `[[class]]` tables, defines
//! `[[plan]]`s (rate, ceil, burst, leaf, and the upload side), and names a CSV file
//! (`subscribers = "subscribers.csv"`, relative to the policy) with one row per subscriber:
//! `name, parent, plan, addresses` and optionally a circuit `id` (the label operators query
//! by: LibreQoS's Circuit ID) and explicit `rate, ceil, upload_rate, upload_ceil` — the shape
//! of LibreQoS's `ShapedDevices.csv`, whose users have exactly this.
//!
//! What it costs, and why: the table is read line by line ([`crate::csv`]: fields are slices of
//! the line, nothing is allocated per field); a row costs one string (its name) and fixed-size
//! records (parent, profile, line, addresses). Plans are *profiles* computed once (burst,
//! quantum, leaf), as librte_sched's pipe profiles; a row with explicit rates gets a profile of
//! its own, shared with every row of the same numbers. Names, parents and plans are looked up
//! in hash maps; duplicate names and duplicate or overlapping addresses are found by sorting
//! (`O(n log n)`), not by pairwise comparison. The checked subscribers become ordinary leaf
//! classes after the `[[class]]`es and filters (`dst` = each address; `src` on the upload
//! side) after the `[[filter]]`s, so everything that reads a policy works unchanged, and the
//! classifier compiles 10^6 host prefixes into one hash table.
//!
//! Every problem names the CSV file and line (both lines for a duplicate) and says what to
//! write instead; problems of the table as a whole (its capacity under a parent) are reported
//! at the parent in the policy.

mod overlap;
mod plan;
mod rows;

use std::path::{Path, PathBuf};
use std::rc::Rc;

use linkshare_core::classify::{ClassId, FilterSpec, IpPrefix};
use linkshare_core::htb::MAX_DEPTH;

use crate::diag::{Diagnostic, Severity};
use crate::raw::{PolicyDoc, Raw};
use crate::source::Sink;
use crate::{ClassInfo, FilterInfo, LeafKind, Policy, QdiscKind, Subscribers};

use super::read::get;
use super::tree::Shape;

pub(super) use plan::{read_plans, upload_pair, Profile};

/// Reads a table's file: the filesystem, or a map in tests.
pub type ReadTable<'a> = &'a dyn Fn(&Path) -> std::io::Result<String>;

/// The checked subscriber table, kept column-wise.
#[derive(Debug)]
pub(super) struct Table {
    pub(super) file: Rc<str>,
    /// Plans first (in file order), then the rows' own numbers.
    pub(super) profiles: Vec<Profile>,
    pub(super) plans: usize,
    pub(super) names: Vec<String>,
    pub(super) parent: Vec<u32>,
    pub(super) profile: Vec<u32>,
    pub(super) line: Vec<u32>,
    /// Every address with its subscriber, in file order.
    pub(super) prefixes: Vec<(IpPrefix, u32)>,
    /// Each row's circuit id (the `id` or `circuit_id` column; empty: none), by row; empty
    /// when the table has no such column.
    pub(super) ids: Vec<Box<str>>,
    /// The policy's, for the defaults of rows' own numbers.
    pub(super) mtu: Option<u32>,
    pub(super) r2q: Option<u32>,
}

/// Reads `[[plan]]`s and the `subscribers` table, records what it puts under each class in
/// `shape.subs`, and makes those classes inner ones. `None` without a table or when it could
/// not be read at all (reported).
pub(super) fn read(
    sink: &mut Sink,
    doc: &PolicyDoc,
    shape: &mut Shape,
    kind: QdiscKind,
    r2q: Option<u32>,
    mtu: Option<u32>,
    files: ReadTable,
) -> Option<Table> {
    let plans = read_plans(sink, doc, kind, r2q, mtu);
    let Some(v) = get(&doc.entries, "subscribers") else {
        if let Some(first) = plans.first() {
            sink.warn(
                &first.span,
                "`[[plan]]`s are used only by a subscriber table, and this policy has none",
                "add `subscribers = \"subscribers.csv\"` (a CSV of name,parent,plan,addresses), or remove the plans",
            );
        }
        return None;
    };
    let Raw::Str(rel) = v.get_ref() else {
        sink.error(
            &v.span(),
            format!(
                "`subscribers` must be a file name, found {}",
                v.get_ref().kind()
            ),
            "write `subscribers = \"subscribers.csv\"` (relative to the policy file)",
        );
        return None;
    };
    if kind != QdiscKind::Htb {
        sink.error(
            &v.span(),
            format!(
                "a subscriber table needs `qdisc = \"htb\"`, this policy is {}",
                kind.name()
            ),
            "write the policy with qdisc = \"htb\", or its subscribers as `[[class]]` tables",
        );
        return None;
    }
    let path = table_path(sink.origin(), rel);
    let file: Rc<str> = Rc::from(path.display().to_string());
    let text = match files(&path) {
        Ok(t) => t,
        Err(e) => {
            sink.error(
                &v.span(),
                format!("cannot read the subscriber table `{file}`: {e}"),
                "the path is relative to the policy file; check it and its permissions",
            );
            return None;
        }
    };
    let table = rows::read_rows(sink, &file, &text, shape, plans, (mtu, r2q));
    for (i, &p) in table.parent.iter().enumerate() {
        let agg = &mut shape.subs[p as usize];
        let prof = &table.profiles[table.profile[i] as usize];
        agg.count += 1;
        agg.rate = agg.rate.saturating_add(prof.rate.0);
        agg.upload = agg
            .upload
            .saturating_add(prof.upload.map_or(0, |(r, _)| r.0));
    }
    for (i, agg) in shape.subs.iter_mut().enumerate() {
        if agg.count > 0 {
            agg.file = file.clone();
            shape.is_leaf[i] = false;
        }
    }
    Some(table)
}

/// The table's path: as written when absolute, else beside the policy file.
pub(crate) fn table_path(origin: &str, rel: &str) -> PathBuf {
    let rel = Path::new(rel.trim());
    if rel.is_absolute() {
        return rel.to_path_buf();
    }
    match Path::new(origin).parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !origin.starts_with('<') => dir.join(rel),
        _ => rel.to_path_buf(),
    }
}

/// A diagnostic at a row of the table (column 1: the message names the field).
pub(super) fn row_diag(
    file: &str,
    line: usize,
    severity: Severity,
    message: String,
    help: String,
) -> Diagnostic {
    Diagnostic {
        severity,
        file: file.to_string(),
        line,
        col: 1,
        message,
        help: Some(help),
    }
}

impl Table {
    /// A parent's depth below which a subscriber still fits HTB's levels.
    pub(super) fn fits_depth(depth: Option<usize>) -> bool {
        depth.is_some_and(|d| d + 1 < MAX_DEPTH)
    }

    /// Appends the subscribers to a checked policy: one leaf class each after the
    /// `[[class]]`es, one `dst` filter per address after the `[[filter]]`s.
    pub(super) fn append(self, p: &mut Policy) {
        let first = p.classes.len();
        p.classes.reserve(self.names.len());
        p.filters.reserve(self.prefixes.len());
        let mut per_profile = vec![0usize; self.profiles.len()];
        for (i, name) in self.names.into_iter().enumerate() {
            let parent = self.parent[i] as usize;
            let prof = &self.profiles[self.profile[i] as usize];
            per_profile[self.profile[i] as usize] += 1;
            let id = (first + i) as ClassId;
            let depth = p.classes[parent].depth + 1;
            p.classes[parent].children.push(id);
            let parent_name = p.classes[parent].name.clone();
            p.classes.push(ClassInfo {
                id,
                name,
                parent: Some(parent_name),
                parent_id: Some(parent as ClassId),
                rate: prof.rate,
                ceil: prof.ceil,
                burst: prof.burst,
                cburst: prof.cburst,
                prio: prof.prio,
                quantum: prof.quantum,
                leaf: prof.leaf.clone(),
                is_leaf: true,
                depth,
                level: 0,
                children: Vec::new(),
                line: self.line[i] as usize,
                cbq: None,
                hfsc: None,
                // A subscriber's ceil (its row's or its plan's) stays when only its rate
                // changes; its bursts and quantum follow its rates, as a row's own rates do.
                written: crate::Written {
                    ceil: true,
                    ..Default::default()
                },
            });
        }
        let first_filter = p.filters.len();
        for (prefix, s) in self.prefixes {
            let c = &p.classes[first + s as usize];
            p.filters.push(FilterInfo {
                class: c.name.clone(),
                spec: FilterSpec {
                    class: c.id,
                    dst: Some(prefix),
                    ..FilterSpec::default()
                },
                line: self.line[s as usize] as usize,
            });
        }
        let mut plans: Vec<(String, usize)> = self.profiles[..self.plans]
            .iter()
            .zip(&per_profile)
            .map(|(pr, &n)| (pr.name.clone(), n))
            .collect();
        let own: usize = per_profile[self.plans..].iter().sum();
        if own > 0 {
            plans.push((String::new(), own));
        }
        p.subscribers = Some(Box::new(Subscribers {
            file: self.file.to_string(),
            first_class: first as ClassId,
            first_filter,
            plans,
            ids: self.ids,
        }));
    }
}

/// The leaf of a row without a plan.
pub(super) fn default_leaf() -> LeafKind {
    LeafKind::Pfifo {
        limit: linkshare_core::qdisc::fifo::DEFAULT_PFIFO_LIMIT,
    }
}

#[cfg(test)]
mod tests;
