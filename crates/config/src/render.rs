//! The human-readable view of a policy that `linkshare check` prints: the class tree with every
//! (defaulted) parameter in aligned columns, then the filters in match order.

use linkshare_core::classify::ClassId;
use linkshare_core::classify::FilterSpec;
use linkshare_core::units::{Rate, Size};

use crate::source::thousands;
use crate::values::{fmt_prefix, protocol_name};
use crate::Policy;

/// Pads every column to its widest cell and drops trailing spaces.
fn align(rows: &[Vec<String>]) -> Vec<String> {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                line.push_str(cell);
                if c + 1 < r.len() {
                    let pad = widths[c] - cell.chars().count() + 2;
                    line.push_str(&" ".repeat(pad));
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

fn ports(p: (u16, u16)) -> String {
    if p.0 == p.1 {
        p.0.to_string()
    } else {
        format!("{}-{}", p.0, p.1)
    }
}

/// One filter as a short line: `udp dst 10.0.0.0/8 dport 5000-5010`.
pub(crate) fn filter_text(f: &FilterSpec) -> String {
    let mut parts = Vec::new();
    if let Some(p) = f.protocol {
        parts.push(
            protocol_name(p)
                .map(str::to_string)
                .unwrap_or_else(|| format!("proto {p}")),
        );
    }
    if let Some(s) = &f.src {
        parts.push(format!("src {}", fmt_prefix(s)));
    }
    if let Some(p) = f.src_port {
        parts.push(format!("sport {}", ports(p)));
    }
    if let Some(d) = &f.dst {
        parts.push(format!("dst {}", fmt_prefix(d)));
    }
    if let Some(p) = f.dst_port {
        parts.push(format!("dport {}", ports(p)));
    }
    if let Some(d) = &f.dscp {
        let names: Vec<String> = d
            .iter()
            .map(|v| {
                linkshare_core::dscp::name(*v)
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .collect();
        parts.push(format!("dscp {}", names.join(",")));
    }
    if let Some((v, m)) = f.tos {
        if m == 0xff {
            parts.push(format!("tos {v:#04x}"));
        } else {
            parts.push(format!("tos {v:#04x}/{m:#04x}"));
        }
    }
    if parts.is_empty() {
        "(every packet)".to_string()
    } else {
        parts.join(" ")
    }
}

pub(crate) fn tree(p: &Policy) -> String {
    if let Some(leaf) = p.root_leaf() {
        return format!("{leaf}  (root, no classes)  mtu={}\n", p.mtu);
    }
    if p.kind == crate::QdiscKind::Drr {
        return drr_tree(p);
    }
    let mut out = match p.cbq_options() {
        Some(o) => format!(
            "cbq  default={}  mtu={}  scheduler={}  guideline={}  efficient={}  undertime_clock={}  offtime_unit={}{}\n",
            p.default,
            p.mtu,
            o.scheduler.name(),
            o.guideline.name(),
            o.efficient,
            o.undertime_clock.name(),
            o.offtime_unit.name(),
            if o.altq_compat { "  altq_compat" } else { "" }
        ),
        None => format!(
            "{}  default={}  r2q={}  mtu={}\n",
            p.kind.name(),
            p.default,
            p.r2q,
            p.mtu
        ),
    };
    let classes = p.classes();
    let mut rows: Vec<Vec<String>> = Vec::new();
    // Depth-first from each root, children in file order.
    let mut stack: Vec<(usize, String, String)> = Vec::new(); // (class, prefix for its name, prefix for its children)
    for c in classes.iter().rev().filter(|c| c.parent_id.is_none()) {
        stack.push((c.id as usize, String::new(), String::new()));
    }
    while let Some((i, own, kids_prefix)) = stack.pop() {
        let c = &classes[i];
        let mut row = match (&c.cbq, &c.hfsc) {
            (_, Some(h)) => {
                let mut r = vec![format!("{own}{}", c.name)];
                for (k, curve) in [("rt", h.rt), ("ls", h.ls), ("ul", h.ul)] {
                    if let Some(x) = curve {
                        r.push(format!("{k} {}", curve_text(&x)));
                    }
                }
                r
            }
            (Some(q), None) => vec![
                format!("{own}{}", c.name),
                format!("rate {}", c.rate),
                format!("prio {}", c.prio),
                if q.borrow { "borrow" } else { "no-borrow" }.to_string(),
                format!("maxburst {}", q.maxburst),
                format!("minburst {}", q.minburst),
                format!("avgpkt {}", q.avgpkt),
            ],
            (None, None) => vec![
                format!("{own}{}", c.name),
                format!("rate {}", c.rate),
                format!("ceil {}", c.ceil),
                format!("burst {}", Size(c.burst as u64)),
                format!("cburst {}", Size(c.cburst as u64)),
            ],
        };
        if c.is_leaf {
            if c.cbq.is_none() && c.hfsc.is_none() {
                row.push(format!("prio {}", c.prio));
                row.push(format!("quantum {}", c.quantum));
            }
            row.push(c.leaf.to_string());
        }
        rows.push(row);
        // Subscribers are summed up under their parent, one row, not listed.
        let subs_from = p.subscribers().map_or(ClassId::MAX, |s| s.first_class);
        let kids: Vec<ClassId> = c
            .children
            .iter()
            .copied()
            .filter(|&k| k < subs_from)
            .collect();
        let n_subs = c.children.len() - kids.len();
        if n_subs > 0 {
            let (mut sum, mut top) = (0u64, Rate(0));
            for &k in &c.children[kids.len()..] {
                let s = &classes[k as usize];
                sum = sum.saturating_add(s.rate.0);
                top = top.max(s.ceil);
            }
            let last = kids.is_empty();
            rows.push(vec![
                format!(
                    "{kids_prefix}{}{} subscribers",
                    if last { "└─ " } else { "├─ " },
                    thousands(n_subs)
                ),
                format!("rate {} in all", Rate(sum)),
                format!("ceil up to {top}"),
            ]);
        }
        let n = kids.len();
        for (k, &child) in kids.iter().enumerate().rev() {
            let last = k + 1 == n;
            let own = format!("{kids_prefix}{}", if last { "└─ " } else { "├─ " });
            let next = format!("{kids_prefix}{}", if last { "   " } else { "│  " });
            stack.push((child as usize, own, next));
        }
    }
    for line in align(&rows) {
        out.push_str(&line);
        out.push('\n');
    }
    filters(p, &mut out);
    out
}

/// The classful DRR: flat classes with their quanta and leaves.
fn drr_tree(p: &Policy) -> String {
    let mut out = format!("drr  default={}  mtu={}\n", p.default, p.mtu);
    let rows: Vec<Vec<String>> = p
        .classes()
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                format!("quantum {}", c.quantum),
                c.leaf.to_string(),
            ]
        })
        .collect();
    for line in align(&rows) {
        out.push_str(&line);
        out.push('\n');
    }
    filters(p, &mut out);
    out
}

fn filters(p: &Policy, out: &mut String) {
    out.push_str("filters (first match wins):\n");
    let table = p.subscribers();
    let own = table.map_or(p.filters().len(), |s| s.first_filter);
    let mut frows: Vec<Vec<String>> = p.filters()[..own]
        .iter()
        .enumerate()
        .map(|(i, f)| {
            vec![
                format!("  {}", i + 1),
                filter_text(&f.spec),
                format!("-> {}", f.class),
            ]
        })
        .collect();
    if let Some(t) = table {
        let n = p.filters().len() - own;
        let side = if p.filters()[own..].iter().any(|f| f.spec.src.is_some()) {
            "src"
        } else {
            "dst"
        };
        frows.push(vec![
            format!("  {}-{}", own + 1, own + n),
            format!(
                "{side} = each address of {} ({} filters)",
                t.file,
                thousands(n)
            ),
            "-> its subscriber".to_string(),
        ]);
    }
    frows.push(vec![
        "  *".to_string(),
        "(no filter matched)".to_string(),
        format!("-> {} (default)", p.default),
    ]);
    for line in align(&frows) {
        out.push_str(&line);
        out.push('\n');
    }
}

/// The subscriber table's line: how many subscribers of each plan.
pub(crate) fn plans_line(p: &Policy) -> Option<String> {
    let t = p.subscribers()?;
    let total: usize = t.plans.iter().map(|(_, n)| n).sum();
    let each: Vec<String> = t
        .plans
        .iter()
        .map(|(name, n)| {
            if name.is_empty() {
                format!("own rates {}", thousands(*n))
            } else {
                format!("{name} {}", thousands(*n))
            }
        })
        .collect();
    Some(format!(
        "subscribers: {} from {} ({})\n",
        thousands(total),
        t.file,
        each.join(", ")
    ))
}

/// An HFSC curve as tc writes it: `m1 400kbit d 30ms m2 100kbit`, or the rate of a linear one.
fn curve_text(c: &linkshare_core::hfsc::ServiceCurve) -> String {
    use linkshare_core::units::{Duration, Rate};
    if c.d == 0 {
        format!("{}", Rate(c.m2))
    } else {
        format!("m1 {} d {} m2 {}", Rate(c.m1), Duration(c.d), Rate(c.m2))
    }
}

impl Policy {
    /// The class tree, rates and filters as `linkshare check` prints them.
    pub fn render_tree(&self) -> String {
        let mut out = self.render_one();
        if let Some(line) = plans_line(self) {
            out.push_str(&line);
        }
        if let Some(u) = &self.upload {
            out.push_str("\nupload side (the same classes; filters match the source):\n");
            out.push_str(&u.render_one());
        }
        out
    }

    /// One direction's tree and filters, with the link layer.
    fn render_one(&self) -> String {
        let tree = tree(self);
        let mut line = String::new();
        if !self.link.is_identity() {
            // The link layer on the line after the root's, with what it does to a full packet.
            let l = self.link;
            line = format!(
                "link layer {}  overhead={}  mpu={}  (a {}-byte packet is charged {} bytes)\n",
                l.framing.name(),
                l.overhead,
                l.mpu,
                self.mtu,
                l.size(self.mtu)
            );
        }
        let t = self.dscp;
        if !t.trust || t.wash {
            line.push_str(&format!(
                "dscp {}{}\n",
                if t.trust {
                    "trusted"
                } else {
                    "not trusted (classified as 0)"
                },
                if t.wash { ", washed to 0" } else { "" }
            ));
        }
        if line.is_empty() {
            return tree;
        }
        match tree.find('\n') {
            Some(i) => format!("{}{line}{}", &tree[..=i], &tree[i + 1..]),
            None => format!("{tree}\n{line}"),
        }
    }

    /// The filters as one-line descriptions (`udp dst 10.0.0.0/8 dport 5000-5010`), in order.
    pub fn filter_descriptions(&self) -> Vec<String> {
        self.filters.iter().map(|f| filter_text(&f.spec)).collect()
    }
}
