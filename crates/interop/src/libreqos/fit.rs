//! Fitting one direction's rates into the tree, the way LibreQoS does.
//!
//! LibreQoS caps every node's and circuit's maximum at what sits above it, up to the upstream
//! capacity (ispConfig's `upstreamBandwidthCapacity*Mbps`, lqos.conf's `uplink_bandwidth_mbps`
//! / `downlink_bandwidth_mbps`: "any circuits, generated nodes, or network.json nodes will all
//! be capped at no more than this amount"), and its minimums are sold with oversubscription.
//! HTB's guarantees must add up, so here, top-down from the root: where the guarantees under a
//! class add up to more than its rate, they are all scaled by one factor (floor 1 kbit) so that
//! they fit, and any ceil above the parent's is lowered to it. Each scaled node gets a warning
//! naming it and the factor; lowered circuit ceils are counted per node, not noted one by one.

use crate::diag::Diag;
use crate::policy_writer::rate_text;

use super::{Circuit, Node};

/// One direction after fitting. Index `nodes.len()` of the children lists is the root.
#[derive(Debug)]
pub(super) struct Fit {
    pub(super) root_rate: u64,
    pub(super) root_ceil: u64,
    pub(super) node_rate: Vec<u64>,
    pub(super) node_ceil: Vec<u64>,
    pub(super) circ_rate: Vec<u64>,
    pub(super) circ_ceil: Vec<u64>,
    /// Per node: what the fit did to it (written as `# note:` above the class).
    pub(super) node_notes: Vec<Vec<String>>,
    pub(super) warnings: Vec<Diag>,
}

/// The tree's shape: children of each node, the root last.
pub(super) struct Kids {
    pub(super) nodes: Vec<Vec<usize>>,
    pub(super) circuits: Vec<Vec<usize>>,
}

impl Kids {
    pub(super) fn new(nodes: &[Node], circuits: &[Circuit]) -> Kids {
        let root = nodes.len();
        let mut k = Kids {
            nodes: vec![Vec::new(); root + 1],
            circuits: vec![Vec::new(); root + 1],
        };
        for (i, n) in nodes.iter().enumerate() {
            k.nodes[n.parent.unwrap_or(root)].push(i);
        }
        for (i, c) in circuits.iter().enumerate() {
            k.circuits[c.parent.unwrap_or(root)].push(i);
        }
        k
    }

    /// Nodes top-down, the root (index `nodes.len()`) first.
    pub(super) fn order(&self) -> Vec<usize> {
        let mut order = vec![self.nodes.len() - 1];
        let mut k = 0;
        while k < order.len() {
            let p = order[k];
            k += 1;
            order.extend(self.nodes[p].iter().copied());
        }
        order
    }
}

/// Fits direction `d` (0 download, 1 upload). `unshaped` is the guarantee of the class for
/// traffic of no circuit, under the root.
pub(super) fn fit(
    nodes: &[Node],
    circuits: &[Circuit],
    kids: &Kids,
    d: usize,
    uplink: Option<u64>,
    unshaped: u64,
    nf: &str,
) -> Fit {
    let root = nodes.len();
    let mut f = Fit {
        root_rate: 0,
        root_ceil: 0,
        node_rate: nodes.iter().map(|n| n.bits[d]).collect(),
        node_ceil: nodes.iter().map(|n| n.bits[d]).collect(),
        circ_rate: circuits.iter().map(|c| c.min[d]).collect(),
        circ_ceil: circuits.iter().map(|c| c.max[d]).collect(),
        node_notes: vec![Vec::new(); root],
        warnings: Vec::new(),
    };
    let top_sum: u64 = kids.nodes[root]
        .iter()
        .map(|&i| f.node_rate[i])
        .chain(kids.circuits[root].iter().map(|&i| f.circ_rate[i]))
        .sum::<u64>()
        + unshaped;
    (f.root_rate, f.root_ceil) = match uplink {
        Some(u) => (u, u),
        None => {
            let top = kids.nodes[root]
                .iter()
                .map(|&i| f.node_ceil[i])
                .chain(kids.circuits[root].iter().map(|&i| f.circ_ceil[i]))
                .max()
                .unwrap_or(0);
            (top_sum, top.max(top_sum))
        }
    };
    let dir = ["download", "upload"][d];
    for p in kids.order() {
        let (prate, pceil, pname, pline) = if p == root {
            // The unshaped class's guarantee is kept; the rest shares what is left.
            let avail = f.root_rate.saturating_sub(unshaped).max(1000);
            (avail, f.root_ceil, "the uplink", 0)
        } else {
            let n = &nodes[p];
            (f.node_rate[p], f.node_ceil[p], n.name.as_str(), n.line)
        };
        scale_children(&mut f, kids, p, prate, (pname, pline, dir, nf), root);
        for &i in &kids.nodes[p] {
            if f.node_ceil[i] > pceil {
                f.node_notes[i].push(format!(
                    "its {dir} bandwidth {} is above {}'s {}: lowered to it",
                    rate_text(f.node_ceil[i]),
                    if p == root { "the uplink" } else { pname },
                    rate_text(pceil)
                ));
                f.node_ceil[i] = pceil;
                f.node_rate[i] = f.node_rate[i].min(pceil);
            }
        }
        let mut lowered = 0;
        for &i in &kids.circuits[p] {
            if f.circ_ceil[i] > pceil {
                f.circ_ceil[i] = pceil;
                lowered += 1;
            }
            f.circ_rate[i] = f.circ_rate[i].min(f.circ_ceil[i]);
        }
        if lowered > 0 && p != root {
            f.node_notes[p].push(format!(
                "{lowered} circuits' {dir} max is above its {}: lowered to it",
                rate_text(pceil)
            ));
        }
    }
    f
}

/// Scales the guarantees under `p` by one factor when they add up to more than `prate`.
fn scale_children(
    f: &mut Fit,
    kids: &Kids,
    p: usize,
    prate: u64,
    (pname, pline, dir, nf): (&str, usize, &str, &str),
    root: usize,
) {
    let sum: u128 = kids.nodes[p]
        .iter()
        .map(|&i| u128::from(f.node_rate[i]))
        .chain(kids.circuits[p].iter().map(|&i| u128::from(f.circ_rate[i])))
        .sum();
    if sum <= u128::from(prate) {
        return;
    }
    let factor = prate as f64 / sum as f64;
    let scale = |r: u64| ((u128::from(r) * u128::from(prate) / sum) as u64).max(1000);
    for &i in &kids.nodes[p] {
        f.node_rate[i] = scale(f.node_rate[i]);
    }
    for &i in &kids.circuits[p] {
        f.circ_rate[i] = scale(f.circ_rate[i]);
    }
    // The 1 kbit floor can push the sum over again.
    let total: u64 = kids.nodes[p]
        .iter()
        .map(|&i| f.node_rate[i])
        .chain(kids.circuits[p].iter().map(|&i| f.circ_rate[i]))
        .sum();
    if total > prate {
        f.warnings.push(Diag::new(
            nf,
            pline,
            format!(
                "`{pname}`: {} children cannot all get 1kbit within its {dir} rate",
                kids.nodes[p].len() + kids.circuits[p].len()
            ),
        ));
    }
    let msg = format!(
        "the {dir} minimums under `{pname}` add up to {}, above its rate {}: scaled by {factor:.4}",
        rate_text(sum as u64),
        rate_text(prate)
    );
    if p != root {
        f.node_notes[p].push(msg.clone() + " (as LibreQoS does, so that every guarantee fits)");
        f.warnings
            .push(Diag::new(nf, pline, format!("node `{pname}`: {msg}")));
    } else {
        f.warnings.push(Diag::new(nf, 0, msg));
    }
}
