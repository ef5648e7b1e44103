//! The rows of a subscriber table, read one line at a time and checked as a whole.
//!
//! A row's fields are looked up by the header's column order; its parent and plan by name in
//! hash maps. Checks that involve two rows (a name or an address used twice, two prefixes that
//! overlap) sort the rows' keys once and compare neighbours, so that 10^6 rows cost
//! `O(n log n)`; such errors name both lines.

use std::borrow::Cow;
use std::collections::HashMap;

use linkshare_core::classify::IpPrefix;
use linkshare_core::units::Rate;

use crate::csv;
use crate::diag::{suggest, Severity};
use crate::source::Sink;

use super::super::tree::{unknown_class_help, Shape};
use super::plan::{own_profile, Profile};
use super::{row_diag, Table};

/// The columns a table may have.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Col {
    Name,
    Id,
    Parent,
    Plan,
    Addresses,
    Rate,
    Ceil,
    UploadRate,
    UploadCeil,
    Comment,
}

const COLUMNS: &[(&str, Col)] = &[
    ("name", Col::Name),
    ("id", Col::Id),
    ("circuit_id", Col::Id),
    ("parent", Col::Parent),
    ("plan", Col::Plan),
    ("addresses", Col::Addresses),
    ("rate", Col::Rate),
    ("ceil", Col::Ceil),
    ("upload_rate", Col::UploadRate),
    ("upload_ceil", Col::UploadCeil),
    ("comment", Col::Comment),
];
const HEADER_HELP: &str = "the first row names the columns: name,parent,plan,addresses \
    (and optionally id,rate,ceil,upload_rate,upload_ceil,comment)";

/// Where each column is in a row.
#[derive(Default)]
struct Layout {
    at: [Option<usize>; 10],
    width: usize,
}

impl Layout {
    fn get<'f>(&self, c: Col, fields: &'f [Cow<'f, str>]) -> &'f str {
        self.at[c as usize]
            .and_then(|k| fields.get(k))
            .map_or("", |f| f.as_ref())
    }
}

/// Reads the header; `None` when it is unusable (reported).
fn header(sink: &mut Sink, file: &str, line: usize, fields: &[Cow<str>]) -> Option<Layout> {
    let mut l = Layout {
        width: fields.len(),
        ..Layout::default()
    };
    let mut ok = true;
    for (k, f) in fields.iter().enumerate() {
        let name = f.to_ascii_lowercase();
        match COLUMNS.iter().find(|(n, _)| *n == name) {
            Some(&(_, c)) if l.at[c as usize].is_none() => l.at[c as usize] = Some(k),
            Some(_) => {
                sink.diags.push(row_diag(
                    file,
                    line,
                    Severity::Error,
                    format!("column `{name}` appears twice in the header"),
                    "name each column once (`id` and `circuit_id` are one column)".to_string(),
                ));
                ok = false;
            }
            None => {
                let known = COLUMNS.iter().map(|(n, _)| *n);
                let help = match suggest(&name, known) {
                    Some(s) => format!("did you mean `{s}`? {HEADER_HELP}"),
                    None => HEADER_HELP.to_string(),
                };
                sink.diags.push(row_diag(
                    file,
                    line,
                    Severity::Error,
                    format!("unknown column `{f}` in the header"),
                    help,
                ));
                ok = false;
            }
        }
    }
    let missing: Vec<&str> = [("name", Col::Name), ("parent", Col::Parent)]
        .into_iter()
        .chain([("addresses", Col::Addresses)])
        .filter(|(_, c)| l.at[*c as usize].is_none())
        .map(|(n, _)| n)
        .collect();
    if !missing.is_empty() {
        sink.diags.push(row_diag(
            file,
            line,
            Severity::Error,
            format!("the header lacks column(s): {}", missing.join(", ")),
            HEADER_HELP.to_string(),
        ));
        ok = false;
    }
    if l.at[Col::Plan as usize].is_none() && l.at[Col::Rate as usize].is_none() {
        sink.diags.push(row_diag(
            file,
            line,
            Severity::Error,
            "the header has neither `plan` nor `rate`: subscribers would have no rate".into(),
            HEADER_HELP.to_string(),
        ));
        ok = false;
    }
    ok.then_some(l)
}

/// A rate written in a row, with tc's units.
fn row_rate(text: &str) -> Result<Rate, String> {
    Rate::parse(text).map_err(|e| e.to_string())
}

/// Reads every row. Rows with problems are reported and left out.
pub(super) fn read_rows(
    sink: &mut Sink,
    file: &str,
    text: &str,
    shape: &Shape,
    plans: Vec<Profile>,
    (mtu, r2q): (Option<u32>, Option<u32>),
) -> Table {
    let n_plans = plans.len();
    let plan_at: HashMap<String, u32> = plans
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.clone(), i as u32))
        .collect();
    let mut t = Table {
        file: file.into(),
        profiles: plans,
        plans: n_plans,
        names: Vec::new(),
        parent: Vec::new(),
        profile: Vec::new(),
        line: Vec::new(),
        prefixes: Vec::new(),
        ids: Vec::new(),
        mtu,
        r2q,
    };
    let mut own: HashMap<(u32, u64, u64, u64, u64), u32> = HashMap::new();
    let mut layout: Option<Layout> = None;
    let mut fields: Vec<Cow<str>> = Vec::new();
    let err = |sink: &mut Sink, line: usize, message: String, help: String| {
        sink.diags
            .push(row_diag(file, line, Severity::Error, message, help));
    };
    let mut saw_header = false;
    for (line, raw) in csv::records(text) {
        if let Err(e) = csv::split(raw, &mut fields) {
            err(
                sink,
                line,
                format!("malformed row: {e}"),
                e.help().to_string(),
            );
            continue;
        }
        let Some(l) = &layout else {
            if saw_header {
                break; // the header was unusable (reported); rows cannot be read
            }
            saw_header = true;
            layout = header(sink, file, line, &fields);
            continue;
        };
        if fields.len() != l.width {
            err(
                sink,
                line,
                format!(
                    "malformed row: {} fields, the header has {}",
                    fields.len(),
                    l.width
                ),
                format!("write one field per column ({HEADER_HELP}); put a field holding commas in double quotes, e.g. \"10.0.0.1, 10.0.0.2\""),
            );
            continue;
        }
        let name = l.get(Col::Name, &fields);
        if name.is_empty() {
            err(
                sink,
                line,
                "the row has no name".into(),
                "give every subscriber a unique name (e.g. its circuit id)".into(),
            );
            continue;
        }
        let parent_name = l.get(Col::Parent, &fields);
        let parent = match shape.by_name.get(parent_name) {
            Some(&p) if !shape.unresolved[p] && !shape.in_cycle[p] => {
                if !Table::fits_depth(shape.depth[p]) {
                    err(sink, line, format!("subscriber `{name}`: parent `{parent_name}` is at the deepest level of the tree, so a subscriber below it would be one too many"), "attach the subscriber to a class higher up".into());
                    continue;
                }
                p
            }
            Some(_) => continue, // the parent's own problem is reported in the policy
            None if parent_name.is_empty() => {
                err(
                    sink,
                    line,
                    format!("subscriber `{name}` has no parent"),
                    format!(
                        "name the `[[class]]` it belongs under: {}",
                        unknown_class_help("", &shape.names)
                    ),
                );
                continue;
            }
            None => {
                err(
                    sink,
                    line,
                    format!("subscriber `{name}`: unknown parent `{parent_name}`"),
                    format!(
                        "the parent is a `[[class]]` of the policy: {}",
                        unknown_class_help(parent_name, &shape.names)
                    ),
                );
                continue;
            }
        };
        let Some(profile) = row_profile(
            sink, file, line, name, l, &fields, &plan_at, &mut t, &mut own,
        ) else {
            continue;
        };
        let me = t.names.len() as u32;
        let before = t.prefixes.len();
        let mut bad = false;
        for a in l
            .get(Col::Addresses, &fields)
            .split([',', ' ', ';', '\t'])
            .filter(|a| !a.is_empty())
        {
            match IpPrefix::parse_report(a) {
                Ok(p) => {
                    if p.host_bits_cleared {
                        sink.diags.push(row_diag(
                            file,
                            line,
                            Severity::Warning,
                            format!(
                                "subscriber `{name}`: prefix {a} has host bits set; it matches {}",
                                p.prefix
                            ),
                            format!("write {}", p.prefix),
                        ));
                    }
                    t.prefixes.push((p.prefix, me));
                }
                Err(e) => {
                    err(sink, line, format!("subscriber `{name}`: `{a}` is not an address or prefix: {e}"), "write IPv4 or IPv6 addresses or prefixes, separated by spaces (or commas inside quotes): 100.64.0.1 2001:db8:1::/56".into());
                    bad = true;
                }
            }
        }
        if bad {
            t.prefixes.truncate(before);
            continue;
        }
        if t.prefixes.len() == before {
            sink.diags.push(row_diag(
                file,
                line,
                Severity::Warning,
                format!("subscriber `{name}` has no address: no traffic reaches it"),
                "list its IPv4 and IPv6 addresses or prefixes in `addresses`".into(),
            ));
        }
        if l.at[Col::Id as usize].is_some() {
            t.ids.push(l.get(Col::Id, &fields).into());
        }
        t.names.push(name.to_string());
        t.parent.push(parent as u32);
        t.profile.push(profile);
        t.line.push(line as u32);
    }
    if layout.is_none() && !saw_header {
        err(
            sink,
            1,
            "the subscriber table is empty".into(),
            HEADER_HELP.to_string(),
        );
    }
    check_names(sink, &t, shape);
    check_ids(sink, &t);
    super::overlap::check(sink, &t);
    t
}

/// A circuit id used by two rows: both lines named (an empty id is no id).
fn check_ids(sink: &mut Sink, t: &Table) {
    let mut order: Vec<u32> = (0..t.ids.len() as u32)
        .filter(|&i| !t.ids[i as usize].is_empty())
        .collect();
    order.sort_unstable_by(|&a, &b| t.ids[a as usize].cmp(&t.ids[b as usize]).then(a.cmp(&b)));
    for w in order.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        if t.ids[a] == t.ids[b] {
            sink.diags.push(row_diag(
                &t.file,
                t.line[b] as usize,
                Severity::Error,
                format!(
                    "circuit id `{}` is used twice: subscribers `{}` (line {}) and `{}` (line {})",
                    t.ids[b], t.names[a], t.line[a], t.names[b], t.line[b]
                ),
                "a circuit id names one subscriber: give each row its own, or leave it empty"
                    .to_string(),
            ));
        }
    }
}

/// The row's profile: its plan, or its own numbers when it writes rates.
#[allow(clippy::too_many_arguments)]
fn row_profile(
    sink: &mut Sink,
    file: &str,
    line: usize,
    name: &str,
    l: &Layout,
    fields: &[Cow<str>],
    plan_at: &HashMap<String, u32>,
    t: &mut Table,
    own: &mut HashMap<(u32, u64, u64, u64, u64), u32>,
) -> Option<u32> {
    let mut err = |message: String, help: String| {
        sink.diags
            .push(row_diag(file, line, Severity::Error, message, help));
    };
    let plan_name = l.get(Col::Plan, fields);
    let plan = if plan_name.is_empty() {
        None
    } else {
        match plan_at.get(plan_name) {
            Some(&p) => Some(p),
            None => {
                let names: Vec<&str> = t.profiles[..t.plans]
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect();
                let help = match suggest(plan_name, names.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`? plans: {}", names.join(", ")),
                    None if names.is_empty() => {
                        "define it as a `[[plan]]` in the policy, or give the row its own `rate`"
                            .into()
                    }
                    None => format!("plans: {}", names.join(", ")),
                };
                err(
                    format!("subscriber `{name}`: unknown plan `{plan_name}`"),
                    help,
                );
                return None;
            }
        }
    };
    let mut read = |col: Col, key: &str| -> Result<Option<Rate>, ()> {
        let s = l.get(col, fields);
        if s.is_empty() {
            return Ok(None);
        }
        row_rate(s).map(Some).map_err(|e| {
            err(
                format!("subscriber `{name}`: {key} `{s}` is not a rate: {e}"),
                format!(
                    "write a rate with a unit, e.g. 25mbit, or leave {key} empty for the plan's"
                ),
            )
        })
    };
    let (Ok(rate), Ok(ceil), Ok(urate), Ok(uceil)) = (
        read(Col::Rate, "rate"),
        read(Col::Ceil, "ceil"),
        read(Col::UploadRate, "upload_rate"),
        read(Col::UploadCeil, "upload_ceil"),
    ) else {
        return None;
    };
    let base = plan.map(|p| &t.profiles[p as usize]);
    if rate.is_none() && ceil.is_none() && urate.is_none() && uceil.is_none() {
        if plan.is_none() {
            err(
                format!("subscriber `{name}` has neither a plan nor a rate"),
                "name a `[[plan]]` in `plan`, or write the row's own `rate` (and `ceil`)".into(),
            );
        }
        return plan;
    }
    let Some(rate) = rate.or(base.map(|b| b.rate)) else {
        err(
            format!("subscriber `{name}` has a ceil but no rate"),
            "write its `rate` too, or name a plan".into(),
        );
        return None;
    };
    if rate == Rate(0) {
        err(
            format!("subscriber `{name}`: rate is zero"),
            "give a guaranteed rate above zero, e.g. 1mbit".into(),
        );
        return None;
    }
    let ceil = ceil.or(base.map(|b| b.ceil.max(rate))).unwrap_or(rate);
    if ceil < rate {
        err(
            format!("subscriber `{name}`: ceil {ceil} is below rate {rate}"),
            format!("raise ceil to at least {rate} or lower rate"),
        );
        return None;
    }
    let up_base = base.and_then(|b| b.upload);
    let upload = match (urate.or(up_base.map(|u| u.0)), uceil) {
        (None, None) => None,
        (None, Some(_)) => {
            err(
                format!("subscriber `{name}` has an upload_ceil but no upload_rate"),
                "write its upload_rate too, or name a plan that has one".into(),
            );
            return None;
        }
        (Some(ur), uc) => {
            let uc = uc.or(up_base.map(|u| u.1.max(ur))).unwrap_or(ur);
            if ur == Rate(0) || uc < ur {
                err(
                    format!(
                        "subscriber `{name}`: upload_rate {ur} and upload_ceil {uc} do not fit"
                    ),
                    "the upload rate must be above zero and at most the upload ceil".into(),
                );
                return None;
            }
            Some((ur, uc))
        }
    };
    let key = (
        plan.unwrap_or(u32::MAX),
        rate.0,
        ceil.0,
        upload.map_or(u64::MAX, |u| u.0 .0),
        upload.map_or(u64::MAX, |u| u.1 .0),
    );
    if let Some(&p) = own.get(&key) {
        return Some(p);
    }
    let p = own_profile(base, rate, Some(ceil), upload, t.mtu, t.r2q);
    t.profiles.push(p);
    let id = (t.profiles.len() - 1) as u32;
    own.insert(key, id);
    Some(id)
}

/// A name used by two rows, or by a row and a `[[class]]`: both places named.
fn check_names(sink: &mut Sink, t: &Table, shape: &Shape) {
    let mut order: Vec<u32> = (0..t.names.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        t.names[a as usize]
            .cmp(&t.names[b as usize])
            .then(a.cmp(&b))
    });
    for w in order.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        if t.names[a] == t.names[b] {
            sink.diags.push(row_diag(
                &t.file,
                t.line[b] as usize,
                Severity::Error,
                format!(
                    "subscriber `{}` is listed twice: lines {} and {}",
                    t.names[b], t.line[a], t.line[b]
                ),
                format!(
                    "names must be unique: rename or remove one (the first is at line {})",
                    t.line[a]
                ),
            ));
        }
    }
    for (i, n) in t.names.iter().enumerate() {
        if let Some(&c) = shape.by_name.get(n.as_str()) {
            let at = shape.classes[c]
                .name
                .as_ref()
                .map_or(0, |x| sink.line_col(x.span.start).0);
            sink.diags.push(row_diag(
                &t.file,
                t.line[i] as usize,
                Severity::Error,
                format!("subscriber `{n}` has the name of a `[[class]]` of the policy (line {at})"),
                "subscribers and classes share one namespace: rename the subscriber".into(),
            ));
        }
    }
}
