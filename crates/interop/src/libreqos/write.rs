//! Writing the imported network: the policy (nodes as classes, plans) and the subscriber table.
//!
//! The table is written row by row into one string: a row costs its name, parent, plan,
//! addresses and circuit id (`circuit_id`: the label `stat` and `/metrics` carry), plus
//! `rate`/`ceil` only where the fit changed the plan's (a scaled guarantee, a ceil lowered to
//! the parent's).

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::diag::Diag;
use crate::policy_writer::{rate_text, ClassDraft, Draft, Field, Root, Val};

use super::fit::{fit, Fit, Kids};
use super::sqm::{leaf, SqmDefaults};
use super::{Circuit, Import, Node, Options};

/// The guarantee of the class for traffic of no circuit (LibreQoS passes it unshaped).
const UNSHAPED: u64 = 1_000_000;
const ROOT: &str = "root";
const COLUMNS: &str = "name,parent,plan,addresses,rate,ceil,upload_rate,upload_ceil,circuit_id\n";

fn quantum(bits: u64) -> u64 {
    (bits / 8 / 10).clamp(1000, 200_000)
}

/// A plan: the circuits' own numbers, both directions, before any fit.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PlanKey {
    min: [u64; 2],
    max: [u64; 2],
    sqm: [String; 2],
}

pub(super) fn write(
    nodes: &[Node],
    circuits: &[Circuit],
    nf: &str,
    df: &str,
    opts: &Options,
) -> Import {
    let kids = Kids::new(nodes, circuits);
    let fits: [Fit; 2] = [0, 1].map(|d| {
        fit(
            nodes,
            circuits,
            &kids,
            d,
            opts.uplink.map(|u| [u.0, u.1][d]),
            UNSHAPED,
            nf,
        )
    });
    let mut warnings: Vec<Diag> = Vec::new();
    for f in &fits {
        warnings.extend(f.warnings.iter().cloned());
    }
    let table = if opts.table.is_empty() {
        "subscribers.csv"
    } else {
        opts.table.as_str()
    };
    let mut d = Draft::new(Root::Htb);
    d.title.push(format!("linkshare import libreqos {nf} {df}"));
    d.title.push(format!(
        "{} nodes, {} circuits; both directions: `rate`/`ceil` download, `upload_rate`/`upload_ceil` upload",
        nodes.len(),
        circuits.len()
    ));
    if opts.uplink.is_none() {
        d.notes.push("no uplink given (lqos.conf's downlink_bandwidth_mbps/uplink_bandwidth_mbps, or --downlink/--uplink): the root's rate is the sum of what sits below it; set it to your link's rate".into());
    }
    d.notes.push("plans' quantum is written as rate/10 clamped to 1000-200000 bytes (tc's r2q rule, without a warning per plan)".into());
    d.top.push(Field::str("default", "unshaped"));
    d.top.push(Field::str("subscribers", table));
    classes(&mut d, nodes, &kids, &fits, nf);

    // Plans by their numbers; rows name them.
    let mut plan_of: HashMap<PlanKey, usize> = HashMap::new();
    let mut plan_names: HashMap<String, usize> = HashMap::new();
    let mut plan_ids: Vec<usize> = Vec::with_capacity(circuits.len());
    for c in circuits {
        let key = PlanKey {
            min: c.min,
            max: c.max,
            sqm: c.sqm.clone(),
        };
        let next = plan_of.len();
        let id = *plan_of.entry(key.clone()).or_insert_with(|| {
            let base = format!("{}/{}", rate_text(key.max[0]), rate_text(key.max[1]));
            let n = plan_names.entry(base.clone()).or_default();
            *n += 1;
            let name = if *n == 1 {
                base
            } else {
                format!("{base} #{n}")
            };
            d.plans.push(plan(&name, &key, &opts.sqm));
            next
        });
        plan_ids.push(id);
    }

    let names = circuit_names(nodes, circuits);
    let mut csv = String::with_capacity(circuits.len() * 64 + COLUMNS.len());
    csv.push_str(COLUMNS);
    let plan_name: Vec<&str> = d.plans.iter().map(|p| p.name.as_str()).collect();
    for (i, c) in circuits.iter().enumerate() {
        if c.prefixes.is_empty() {
            warnings.push(Diag::new(
                df,
                c.line,
                format!(
                    "circuit `{}` has no IPv4 or IPv6 address: no filter sends traffic to it",
                    c.id
                ),
            ));
        }
        let parent = c.parent.map_or(ROOT, |p| nodes[p].name.as_str());
        write_field(&mut csv, &names[i]);
        csv.push(',');
        write_field(&mut csv, parent);
        csv.push(',');
        write_field(&mut csv, plan_name[plan_ids[i]]);
        csv.push(',');
        csv.push_str(&c.prefixes.join(" "));
        for (dir, f) in fits.iter().enumerate() {
            csv.push(',');
            if f.circ_rate[i] != c.min[dir] {
                csv.push_str(&rate_text(f.circ_rate[i]));
            }
            csv.push(',');
            if f.circ_ceil[i] != c.max[dir] {
                csv.push_str(&rate_text(f.circ_ceil[i]));
            }
        }
        csv.push(',');
        write_field(&mut csv, &c.id);
        csv.push('\n');
    }
    Import {
        toml: d.to_toml(),
        subscribers: csv,
        warnings,
    }
}

/// A CSV field, quoted when it must be.
fn write_field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n']) || s.trim() != s {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// The root, `unshaped` and every node, top-down.
fn classes(d: &mut Draft, nodes: &[Node], kids: &Kids, fits: &[Fit; 2], nf: &str) {
    let [down, up] = fits;
    let mut rc = ClassDraft::new(ROOT, None);
    rc.fields.push(Field::rate("rate", down.root_rate));
    rc.fields.push(Field::rate("ceil", down.root_ceil));
    rc.fields.push(Field::rate("upload_rate", up.root_rate));
    rc.fields.push(Field::rate("upload_ceil", up.root_ceil));
    d.classes.push(rc);
    let mut un = ClassDraft::new("unshaped", None);
    un.notes.push("traffic of no circuit: LibreQoS passes it unshaped; here it gets 1mbit and may borrow up to the root".into());
    un.fields.push(Field::str("parent", ROOT));
    un.fields.push(Field::rate("rate", UNSHAPED));
    un.fields.push(Field::rate("ceil", down.root_ceil));
    un.fields.push(Field::rate("upload_rate", UNSHAPED));
    un.fields.push(Field::rate("upload_ceil", up.root_ceil));
    un.fields.push(Field::size("quantum", 1514));
    d.classes.push(un);
    for &i in &kids.order()[1..] {
        let n = &nodes[i];
        let mut c = ClassDraft::new(&n.name, Some(format!("{nf}:{}", n.line)));
        c.fields.push(Field::str(
            "parent",
            n.parent.map_or(ROOT, |p| nodes[p].name.as_str()),
        ));
        c.fields.push(Field::rate("rate", down.node_rate[i]));
        c.fields.push(Field::rate("ceil", down.node_ceil[i]));
        c.fields.push(Field::rate("upload_rate", up.node_rate[i]));
        c.fields.push(Field::rate("upload_ceil", up.node_ceil[i]));
        c.notes = down.node_notes[i].clone();
        c.notes.extend(up.node_notes[i].iter().cloned());
        if kids.nodes[i].is_empty() && kids.circuits[i].is_empty() {
            c.notes.push("a node without circuits: a leaf here".into());
            c.fields
                .push(Field::size("quantum", quantum(down.node_rate[i])));
        }
        d.classes.push(c);
    }
}

fn plan(name: &str, k: &PlanKey, sqm: &SqmDefaults) -> ClassDraft {
    let mut p = ClassDraft::new(name, None);
    p.fields.push(Field::rate("rate", k.min[0]));
    p.fields.push(Field::rate("ceil", k.max[0]));
    p.fields.push(Field::size("quantum", quantum(k.min[0])));
    p.fields.push(Field::rate("upload_rate", k.min[1]));
    p.fields.push(Field::rate("upload_ceil", k.max[1]));
    let (down, up) = (
        leaf(&k.sqm[0], k.max[0], sqm),
        leaf(&k.sqm[1], k.max[1], sqm),
    );
    if (&up.kind, &up.fields) != (&down.kind, &down.fields) {
        p.notes
            .extend(up.notes.iter().map(|n| format!("upload: {n}")));
        let val = if up.fields.is_empty() {
            Val::Str(up.kind.clone())
        } else {
            Val::Leaf(Box::new(up))
        };
        p.fields.push(Field::new("upload_leaf", val));
    }
    p.leaf = Some(down);
    p
}

/// Circuits by name when unique, else `name [id]`; `circuit ID` without a name.
fn circuit_names(nodes: &[Node], circuits: &[Circuit]) -> Vec<String> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for n in nodes {
        *seen.entry(n.name.as_str()).or_default() += 1;
    }
    for c in circuits {
        *seen.entry(c.name.as_str()).or_default() += 1;
    }
    circuits
        .iter()
        .map(|c| {
            if !c.name.is_empty()
                && seen.get(c.name.as_str()) == Some(&1)
                && c.name != ROOT
                && c.name != "unshaped"
            {
                c.name.clone()
            } else if c.name.is_empty() {
                let mut s = String::from("circuit ");
                let _ = write!(s, "{}", c.id);
                s
            } else {
                format!("{} [{}]", c.name, c.id)
            }
        })
        .collect()
}
