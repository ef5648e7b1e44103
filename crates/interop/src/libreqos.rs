//! Import LibreQoS's `network.json` + `ShapedDevices.csv` as an HTB policy.
//!
//! Follows LibreQoS's documentation of the two files (docs "Configure LibreQoS": network.json
//! is a tree of nodes — sites, APs — each with `downloadBandwidthMbps`, `uploadBandwidthMbps`,
//! `type` and `children`, or `{}` for a flat network; ShapedDevices.csv has one row per device
//! with `Circuit ID, Circuit Name, Device ID, Device Name, Parent Node, MAC, IPv4, IPv6,
//! Download Min Mbps, Upload Min Mbps, Download Max Mbps, Upload Max Mbps, Comment[, sqm]`,
//! fractional Mbps allowed, devices of one circuit sharing its Circuit ID).
//!
//! What maps and how (one direction per import, `Direction`):
//! - every network.json node → an inner HTB class, `rate` = `ceil` = its bandwidth;
//! - every circuit → a leaf class under its Parent Node (the root when empty), `rate` = min,
//!   `ceil` = max, `quantum` written explicitly (rate/10 clamped to 1000–200000 bytes, tc's rule
//!   without its thousands of warnings);
//! - every device address (comma-separated IPv4 and IPv6 prefixes) → a filter on `dst`
//!   (download) or `src` (upload);
//! - the circuit's `sqm` for that direction (`down/up` form, or one word for both) → the leaf:
//!   fq_codel; cake → fq_codel with a note; none → pfifo with a note.
//!
//! Where the rates under a node add up to more than the node's rate — usual, since operators
//! sell more minimum than they have — they are scaled down by one factor so that they fit, and
//! a warning names the node and the factor. A ceil above the parent's is lowered to it (noted).
//! linkshare needs a class for unmatched traffic: an `unshaped` leaf is added under the root.
//! The upstream capacity lives in lqos.conf, not in these files: the root's rate is the sum of
//! what sits below it, and a note says to set it.
//!
//! Performance: one pass over the CSV and the tree, hash maps by name: 10,000 circuits import in
//! well under a second (tests/libreqos.rs times it).

use std::collections::HashMap;

use serde_json::Value;

use crate::diag::{Diag, ImportError};
use crate::policy_writer::{ClassDraft, Draft, Field, FilterDraft, Leaf, Root};
use crate::Imported;

/// Which side of the subscribers' traffic to shape.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Towards subscribers: filters on destination addresses.
    Download,
    /// From subscribers: filters on source addresses.
    Upload,
}

#[derive(Debug)]
struct Node {
    name: String,
    parent: Option<usize>,
    bits: u64,
    line: usize,
}

#[derive(Debug)]
struct Circuit {
    id: String,
    name: String,
    parent: Option<usize>,
    min: u64,
    max: u64,
    sqm: String,
    prefixes: Vec<String>,
    line: usize,
}

/// Mbps as written (`2.5`) → bits per second, exactly for up to six decimals.
fn mbps(s: &str) -> Option<u64> {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 6 {
        return None;
    }
    if !int.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let i: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let f: u64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<6}").parse().ok()?
    };
    i.checked_mul(1_000_000)?.checked_add(f)
}

fn json_mbps(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0 && *x < 1e12)
            .map(|x| (x * 1e6).round() as u64),
        Value::String(s) => mbps(s),
        _ => None,
    }
}

/// 1-based line of the first `"name"` key in `text` (for messages about a node), 0 if absent.
fn line_of(text: &str, name: &str) -> usize {
    let key = format!("{}:", serde_json::Value::String(name.to_string()));
    let key2 = format!("{} :", serde_json::Value::String(name.to_string()));
    text.find(&key)
        .or_else(|| text.find(&key2))
        .map(|at| text[..at].matches('\n').count() + 1)
        .unwrap_or(0)
}

#[allow(clippy::too_many_arguments)]
fn read_nodes(
    v: &Value,
    parent: Option<usize>,
    dir: Direction,
    text: &str,
    file: &str,
    nodes: &mut Vec<Node>,
    errors: &mut Vec<Diag>,
    depth: usize,
) {
    let Some(map) = v.as_object() else {
        errors.push(Diag::new(file, 0, "expected an object of nodes"));
        return;
    };
    if depth > 6 {
        errors.push(
            Diag::new(
                file,
                0,
                "the node tree is deeper than linkshare's 8 HTB levels",
            )
            .help("flatten network.json to at most 6 levels of nodes"),
        );
        return;
    }
    let key = match dir {
        Direction::Download => "downloadBandwidthMbps",
        Direction::Upload => "uploadBandwidthMbps",
    };
    for (name, node) in map {
        let line = line_of(text, name);
        let Some(obj) = node.as_object() else {
            errors.push(Diag::new(
                file,
                line,
                format!("node `{name}` is not an object"),
            ));
            continue;
        };
        let bits = match obj.get(key).and_then(json_mbps) {
            Some(b) if b > 0 => b,
            _ => {
                errors.push(
                    Diag::new(file, line, format!("node `{name}` has no valid `{key}`"))
                        .help("give every node its bandwidth in Mbps, e.g. \"downloadBandwidthMbps\": 1000"),
                );
                continue;
            }
        };
        if nodes.iter().any(|n| n.name == *name) {
            errors.push(
                Diag::new(file, line, format!("node `{name}` appears twice"))
                    .help("ShapedDevices.csv refers to nodes by name: names must be unique"),
            );
            continue;
        }
        nodes.push(Node {
            name: name.clone(),
            parent,
            bits,
            line,
        });
        let me = nodes.len() - 1;
        if let Some(children) = obj.get("children") {
            read_nodes(
                children,
                Some(me),
                dir,
                text,
                file,
                nodes,
                errors,
                depth + 1,
            );
        }
    }
}

/// One CSV record's fields (RFC 4180 quoting on one line).
fn csv_fields(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut at_start = true;
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    cur.push('"');
                    chars.next();
                } else {
                    quoted = false;
                }
            } else {
                cur.push(c);
            }
        } else if c == '"' && at_start {
            quoted = true;
            at_start = false;
        } else if c == ',' {
            out.push(std::mem::take(&mut cur));
            at_start = true;
        } else {
            cur.push(c);
            if !c.is_whitespace() {
                at_start = false;
            }
        }
    }
    if quoted {
        return Err("unterminated quoted field (fields spanning lines are not supported)".into());
    }
    out.push(cur);
    Ok(out.into_iter().map(|s| s.trim().to_string()).collect())
}

/// Import the pair of files for one direction.
pub fn import(
    network: &str,
    network_file: &str,
    devices: &str,
    devices_file: &str,
    dir: Direction,
) -> Result<Imported, ImportError> {
    let mut errors = Vec::new();
    let json: Value = serde_json::from_str(network).map_err(|e| {
        Diag::new(network_file, e.line(), format!("not valid JSON: {e}"))
            .help("network.json is an object of nodes, or {} for a flat network")
    })?;
    let mut nodes = Vec::new();
    read_nodes(
        &json,
        None,
        dir,
        network,
        network_file,
        &mut nodes,
        &mut errors,
        0,
    );
    let by_name: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();

    // ShapedDevices.csv
    let mut header: Option<HashMap<String, usize>> = None;
    let mut circuits: Vec<Circuit> = Vec::new();
    let mut circuit_at: HashMap<String, usize> = HashMap::new();
    let (min_col, max_col) = match dir {
        Direction::Download => ("download min mbps", "download max mbps"),
        Direction::Upload => ("upload min mbps", "upload max mbps"),
    };
    for (i, raw) in devices.lines().enumerate() {
        let line = i + 1;
        let t = raw.trim_start_matches('\u{feff}').trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let fields = match csv_fields(t) {
            Ok(f) => f,
            Err(e) => {
                errors.push(Diag::new(devices_file, line, e));
                continue;
            }
        };
        let Some(h) = &header else {
            let map: HashMap<String, usize> = fields
                .iter()
                .enumerate()
                .map(|(k, f)| (f.to_ascii_lowercase(), k))
                .collect();
            let need = [
                "circuit id",
                "parent node",
                "ipv4",
                "ipv6",
                min_col,
                max_col,
            ];
            let missing: Vec<&str> = need
                .iter()
                .copied()
                .filter(|n| !map.contains_key(*n))
                .collect();
            if !missing.is_empty() {
                return Err(Diag::new(devices_file, line, format!("the header lacks column(s): {}", missing.join(", ")))
                    .help("the first row names the columns: Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment[,sqm]")
                    .into());
            }
            header = Some(map);
            continue;
        };
        let get = |col: &str| {
            h.get(col)
                .and_then(|&k| fields.get(k))
                .map(String::as_str)
                .unwrap_or("")
        };
        let id = get("circuit id");
        if id.is_empty() {
            errors.push(Diag::new(devices_file, line, "the row has no Circuit ID"));
            continue;
        }
        let rate = |col: &str| -> Result<u64, Diag> {
            let s = get(col);
            mbps(s).filter(|b| *b > 0).ok_or_else(|| {
                Diag::new(
                    devices_file,
                    line,
                    format!("circuit `{id}`: {col} `{s}` is not a rate in Mbps"),
                )
                .help("write a positive number of Mbps, e.g. 25 or 2.5")
            })
        };
        let (min, max) = match (rate(min_col), rate(max_col)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                errors.push(e);
                continue;
            }
        };
        if min > max {
            errors.push(
                Diag::new(
                    devices_file,
                    line,
                    format!("circuit `{id}`: {min_col} is above {max_col}"),
                )
                .help("the minimum is the guaranteed rate: at most the maximum"),
            );
            continue;
        }
        let pn = get("parent node");
        let parent = if pn.is_empty() {
            None
        } else if let Some(&k) = by_name.get(pn) {
            Some(k)
        } else {
            errors.push(
                Diag::new(
                    devices_file,
                    line,
                    format!("circuit `{id}`: parent node `{pn}` is not in {network_file}"),
                )
                .help("name a node of network.json, or leave Parent Node empty for a flat network"),
            );
            continue;
        };
        let mut prefixes = Vec::new();
        for col in ["ipv4", "ipv6"] {
            for p in get(col).split(',').map(str::trim).filter(|p| !p.is_empty()) {
                match linkshare_core::classify::IpPrefix::parse_report(p) {
                    // Written as the network (`100.64.0.0/24` for `100.64.0.9/24`), as the
                    // classifier reads it, so that `check` has nothing to warn about.
                    Ok(pp) => prefixes.push(pp.prefix.to_string()),
                    Err(_) => errors.push(Diag::new(
                        devices_file,
                        line,
                        format!("circuit `{id}`: `{p}` is not an IP address or prefix"),
                    )),
                }
            }
        }
        let sqm_all = get("sqm").to_ascii_lowercase();
        let sqm = match sqm_all.split_once('/') {
            Some((d, u)) => {
                if dir == Direction::Download {
                    d
                } else {
                    u
                }
            }
            None => sqm_all.as_str(),
        }
        .trim()
        .to_string();
        match circuit_at.get(id) {
            Some(&k) => {
                let c = &mut circuits[k];
                if c.min != min || c.max != max || c.parent != parent {
                    errors.push(Diag::new(devices_file, line, format!("circuit `{id}`: this device's rates or parent differ from the circuit's first row (line {})", c.line)).help("devices of one circuit share its rates and Parent Node"));
                }
                c.prefixes.extend(prefixes);
            }
            None => {
                circuit_at.insert(id.to_string(), circuits.len());
                circuits.push(Circuit {
                    id: id.to_string(),
                    name: get("circuit name").to_string(),
                    parent,
                    min,
                    max,
                    sqm,
                    prefixes,
                    line,
                });
            }
        }
    }
    if header.is_none() {
        errors.push(Diag::new(devices_file, 0, "no header row and no circuits"));
    }
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    Ok(build(&nodes, &circuits, network_file, devices_file, dir))
}

fn quantum(bits: u64) -> u64 {
    (bits / 8 / 10).clamp(1000, 200_000)
}

fn build(nodes: &[Node], circuits: &[Circuit], nf: &str, df: &str, dir: Direction) -> Imported {
    let mut warnings = Vec::new();
    // Children of each node (index nodes.len() is the root).
    let root = nodes.len();
    let mut node_kids: Vec<Vec<usize>> = vec![Vec::new(); root + 1];
    let mut circ_kids: Vec<Vec<usize>> = vec![Vec::new(); root + 1];
    for (i, n) in nodes.iter().enumerate() {
        node_kids[n.parent.unwrap_or(root)].push(i);
    }
    for (i, c) in circuits.iter().enumerate() {
        circ_kids[c.parent.unwrap_or(root)].push(i);
    }
    // The unshaped class's guarantee.
    let unshaped_rate: u64 = 1_000_000;
    let mut node_rate: Vec<u64> = nodes.iter().map(|n| n.bits).collect();
    let mut node_ceil: Vec<u64> = node_rate.clone();
    let mut circ_rate: Vec<u64> = circuits.iter().map(|c| c.min).collect();
    let mut circ_ceil: Vec<u64> = circuits.iter().map(|c| c.max).collect();
    let mut node_notes: Vec<Vec<String>> = vec![Vec::new(); root];
    let mut circ_notes: Vec<Vec<String>> = vec![Vec::new(); circuits.len()];
    // The root: what sits below it (the upstream capacity is in lqos.conf).
    let top_sum: u64 = node_kids[root]
        .iter()
        .map(|&i| node_rate[i])
        .chain(circ_kids[root].iter().map(|&i| circ_rate[i]))
        .sum::<u64>()
        + unshaped_rate;
    let top_ceil: u64 = node_kids[root]
        .iter()
        .map(|&i| node_ceil[i])
        .chain(circ_kids[root].iter().map(|&i| circ_ceil[i]))
        .max()
        .unwrap_or(0)
        .max(top_sum);
    // Top-down: scale each node's children to fit its rate, clamp their ceils to its ceil.
    let mut order = vec![root];
    let mut k = 0;
    while k < order.len() {
        let p = order[k];
        k += 1;
        order.extend(node_kids[p].iter().copied());
        if p == root {
            continue;
        }
        let (prate, pceil) = (node_rate[p], node_ceil[p]);
        let sum: u128 = node_kids[p]
            .iter()
            .map(|&i| u128::from(node_rate[i]))
            .chain(circ_kids[p].iter().map(|&i| u128::from(circ_rate[i])))
            .sum();
        if sum > u128::from(prate) {
            let factor = prate as f64 / sum as f64;
            let scale = |r: u64| ((u128::from(r) * u128::from(prate) / sum) as u64).max(1000);
            for &i in &node_kids[p] {
                node_rate[i] = scale(node_rate[i]);
            }
            for &i in &circ_kids[p] {
                circ_rate[i] = scale(circ_rate[i]);
            }
            // The 1 kbit floor can push the sum over again; take it from the largest.
            let total: u64 = node_kids[p]
                .iter()
                .map(|&i| node_rate[i])
                .chain(circ_kids[p].iter().map(|&i| circ_rate[i]))
                .sum();
            if total > prate {
                warnings.push(Diag::new(
                    nf,
                    nodes[p].line,
                    format!(
                        "node `{}`: {} children cannot all get 1kbit within its rate",
                        nodes[p].name,
                        node_kids[p].len() + circ_kids[p].len()
                    ),
                ));
            }
            let msg = format!(
                "the minimums under `{}` add up to {}, above its rate {}: scaled by {factor:.4}",
                nodes[p].name,
                crate::policy_writer::rate_text(sum as u64),
                crate::policy_writer::rate_text(prate)
            );
            node_notes[p].push(msg.clone() + " (as LibreQoS does, so that every guarantee fits)");
            warnings.push(Diag::new(
                nf,
                nodes[p].line,
                format!("node `{}`: {msg}", nodes[p].name),
            ));
        }
        for &i in &node_kids[p] {
            if node_ceil[i] > pceil {
                node_notes[i].push(format!(
                    "its bandwidth {} is above its parent's {}: lowered to it",
                    crate::policy_writer::rate_text(node_ceil[i]),
                    crate::policy_writer::rate_text(pceil)
                ));
                node_ceil[i] = pceil;
                node_rate[i] = node_rate[i].min(pceil);
            }
        }
        for &i in &circ_kids[p] {
            if circ_ceil[i] > pceil {
                circ_notes[i].push(format!(
                    "max {} is above the parent node's {}: lowered to it",
                    crate::policy_writer::rate_text(circ_ceil[i]),
                    crate::policy_writer::rate_text(pceil)
                ));
                circ_ceil[i] = pceil;
            }
            circ_rate[i] = circ_rate[i].min(circ_ceil[i]);
        }
    }
    let mut d = Draft::new(Root::Htb);
    let dirname = if dir == Direction::Download {
        "download"
    } else {
        "upload"
    };
    d.title.push(format!(
        "linkshare import libreqos {nf} {df} --direction {dirname}"
    ));
    d.title.push(format!(
        "{} nodes, {} circuits",
        nodes.len(),
        circuits.len()
    ));
    d.notes.push("the upstream capacity is in lqos.conf, not in these files: the root's rate is the sum of what sits below it; set it to your link's rate".into());
    d.notes.push("circuits' quantum is written as rate/10 clamped to 1000-200000 bytes (tc's r2q rule, without a warning per circuit)".into());
    d.top.push(Field::str("default", "unshaped"));
    // Names: node names as they are; circuits by name when unique, else `name [id]`.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for n in nodes {
        *seen.entry(n.name.clone()).or_default() += 1;
    }
    for c in circuits {
        *seen.entry(c.name.clone()).or_default() += 1;
    }
    let cname = |c: &Circuit| {
        if !c.name.is_empty()
            && seen.get(&c.name) == Some(&1)
            && c.name != "root"
            && c.name != "unshaped"
        {
            c.name.clone()
        } else if c.name.is_empty() {
            format!("circuit {}", c.id)
        } else {
            format!("{} [{}]", c.name, c.id)
        }
    };
    let root_name = "root";
    let mut rc = ClassDraft::new(root_name, None);
    rc.fields.push(Field::rate("rate", top_sum));
    rc.fields.push(Field::rate("ceil", top_ceil));
    d.classes.push(rc);
    let mut un = ClassDraft::new("unshaped", None);
    un.notes.push("traffic of no circuit: LibreQoS passes it unshaped; here it gets 1mbit and may borrow up to the root".into());
    un.fields.push(Field::str("parent", root_name));
    un.fields.push(Field::rate("rate", unshaped_rate));
    un.fields.push(Field::rate("ceil", top_ceil));
    un.fields.push(Field::size("quantum", 1514));
    d.classes.push(un);
    for &i in &order[1..] {
        let n = &nodes[i];
        let mut c = ClassDraft::new(&n.name, Some(format!("{nf}:{}", n.line)));
        c.fields.push(Field::str(
            "parent",
            n.parent
                .map(|p| nodes[p].name.as_str())
                .unwrap_or(root_name),
        ));
        c.fields.push(Field::rate("rate", node_rate[i]));
        c.fields.push(Field::rate("ceil", node_ceil[i]));
        c.notes = node_notes[i].clone();
        if node_kids[i].is_empty() && circ_kids[i].is_empty() {
            c.notes.push("a node without circuits: a leaf here".into());
            c.fields.push(Field::size("quantum", quantum(node_rate[i])));
        }
        d.classes.push(c);
    }
    let src_or_dst = if dir == Direction::Download {
        "dst"
    } else {
        "src"
    };
    for (i, c) in circuits.iter().enumerate() {
        let name = cname(c);
        let mut cd = ClassDraft::new(&name, Some(format!("{df}:{} (circuit {})", c.line, c.id)));
        cd.fields.push(Field::str(
            "parent",
            c.parent
                .map(|p| nodes[p].name.as_str())
                .unwrap_or(root_name),
        ));
        cd.fields.push(Field::rate("rate", circ_rate[i]));
        cd.fields.push(Field::rate("ceil", circ_ceil[i]));
        cd.fields
            .push(Field::size("quantum", quantum(circ_rate[i])));
        cd.notes = circ_notes[i].clone();
        let mut leaf = Leaf::new("fq_codel");
        match c.sqm.as_str() {
            "" | "fq_codel" => {}
            "cake" => leaf.notes.push("sqm cake: linkshare's closest leaf is fq_codel (flow isolation and CoDel; no diffserv tins or host fairness)".into()),
            "none" => {
                leaf = Leaf::new("pfifo");
                leaf.notes.push("sqm none: a plain FIFO".into());
            }
            other => leaf.notes.push(format!("sqm `{other}` is unknown here: fq_codel")),
        }
        cd.leaf = Some(leaf);
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
        d.classes.push(cd);
        for p in &c.prefixes {
            d.filters.push(FilterDraft {
                class: name.clone(),
                source: None,
                fields: vec![Field::str(src_or_dst, p.clone())],
                notes: Vec::new(),
            });
        }
    }
    Imported {
        toml: d.to_toml(),
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractional_mbps_are_exact() {
        assert_eq!(mbps("2.5"), Some(2_500_000));
        assert_eq!(mbps("0.1"), Some(100_000));
        assert_eq!(mbps("155"), Some(155_000_000));
        assert_eq!(mbps("1.0000001"), None);
        assert_eq!(mbps("fast"), None);
        assert_eq!(mbps(""), None);
        assert_eq!(mbps("-1"), None);
    }

    #[test]
    fn csv_quotes() {
        assert_eq!(
            csv_fields("1,\"a, b\",\"x\"\"y\",").unwrap(),
            ["1", "a, b", "x\"y", ""]
        );
        assert!(csv_fields("1,\"open").is_err());
    }
}
