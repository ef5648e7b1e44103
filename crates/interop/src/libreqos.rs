//! Import LibreQoS's `network.json` + `ShapedDevices.csv` as a subscriber-scale HTB policy.
//!
//! Follows LibreQoS's documentation of the two files (docs "Configure LibreQoS": network.json
//! is a tree of nodes — sites, APs — each with `downloadBandwidthMbps`, `uploadBandwidthMbps`,
//! `type` and `children`, or `{}` for a flat network; ShapedDevices.csv has one row per device
//! with `Circuit ID, Circuit Name, Device ID, Device Name, Parent Node, MAC, IPv4, IPv6,
//! Download Min Mbps, Upload Min Mbps, Download Max Mbps, Upload Max Mbps, Comment[, sqm]`,
//! fractional Mbps allowed, devices of one circuit sharing its Circuit ID).
//!
//! What it writes: a policy in linkshare's subscriber form (docs/policy-format.md, "Subscriber
//! tables") and its subscriber table, both directions at once:
//! - every network.json node → a `[[class]]`, `rate` = `ceil` = its download bandwidth,
//!   `upload_rate` = `upload_ceil` = its upload bandwidth;
//! - every distinct (min, max, sqm) of circuits, both directions → a `[[plan]]`, named after its
//!   maxima (`100mbit/20mbit`), with `quantum` written explicitly (rate/10 clamped to
//!   1000–200000 bytes, tc's rule without a warning per plan);
//! - every circuit → a row of the table under its Parent Node (the root when empty): its plan,
//!   its devices' addresses (IPv4 and IPv6, host bits cleared), and `rate`/`ceil` (and upload)
//!   only where the fit below changed them;
//! - the circuit's `sqm` per direction (`down/up` form, or one word for both) → the plan's
//!   `leaf` and `upload_leaf`, as LibreQoS chooses them (`sqm.rs`): CAKE diffserv4 by default
//!   (lqos.conf's `default_sqm`), fq_codel from 1000 Mbps, none → pfifo with a note.
//!
//! The uplink ([`Options::uplink`]: LibreQoS's `uplink_bandwidth_mbps` and
//! `downlink_bandwidth_mbps` of lqos.conf, [`uplink::read`], or given by hand) is the root's
//! rate and ceil; as in LibreQoS, nothing below may be faster, and where the guarantees under
//! a node (the root included) add up to more than its rate — usual, operators sell more minimum
//! than they have — they are scaled down by one factor so that they fit, with a warning naming
//! the node and the factor ([`fit`]). Without an uplink the root is the sum of what sits below
//! it, and a note says to set it. linkshare needs a class for unmatched traffic: an `unshaped`
//! leaf is added under the root.
//!
//! Performance: one pass over the CSV and the tree, hash maps by name, nothing per circuit but
//! its row; 100,000 circuits import in about a second (see the CLI's `import` tests).

mod fit;
pub mod sqm;
pub mod synthetic;
pub mod uplink;
mod write;

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use crate::diag::{Diag, ImportError};

/// What the importer is told besides the two files.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The upstream capacity in bits per second: (download, upload).
    pub uplink: Option<(u64, u64)>,
    /// The subscriber table's file name as the policy refers to it (relative to the policy).
    pub table: String,
    /// lqos.conf's `default_sqm` and `fast_queues_fq_codel`.
    pub sqm: sqm::SqmDefaults,
}

/// An imported network: the policy, its subscriber table, and the importer's warnings (each
/// also a `# note:` in the policy where it belongs).
#[derive(Clone, Debug)]
pub struct Import {
    pub toml: String,
    /// The subscriber table (CSV), to be written where [`Options::table`] says.
    pub subscribers: String,
    pub warnings: Vec<Diag>,
}

/// Per direction: download first, then upload.
pub(crate) type Both<T> = [T; 2];

#[derive(Debug)]
pub(crate) struct Node {
    name: String,
    parent: Option<usize>,
    bits: Both<u64>,
    line: usize,
}

#[derive(Debug)]
pub(crate) struct Circuit {
    id: String,
    name: String,
    parent: Option<usize>,
    min: Both<u64>,
    max: Both<u64>,
    sqm: Both<String>,
    prefixes: Vec<String>,
    line: usize,
}

/// Mbps as written (`2.5`) → bits per second, exactly for up to six decimals.
pub(crate) fn mbps(s: &str) -> Option<u64> {
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

struct NodeReader<'a> {
    text: &'a str,
    file: &'a str,
    nodes: Vec<Node>,
    errors: Vec<Diag>,
}

impl NodeReader<'_> {
    fn read(&mut self, v: &Value, parent: Option<usize>, depth: usize) {
        let Some(map) = v.as_object() else {
            self.errors
                .push(Diag::new(self.file, 0, "expected an object of nodes"));
            return;
        };
        if depth > 6 {
            self.errors.push(
                Diag::new(
                    self.file,
                    0,
                    "the node tree is deeper than linkshare's 8 HTB levels",
                )
                .help("flatten network.json to at most 6 levels of nodes"),
            );
            return;
        }
        for (name, node) in map {
            let line = line_of(self.text, name);
            let Some(obj) = node.as_object() else {
                self.errors.push(Diag::new(
                    self.file,
                    line,
                    format!("node `{name}` is not an object"),
                ));
                continue;
            };
            let mut bits = [0; 2];
            let mut ok = true;
            for (k, key) in ["downloadBandwidthMbps", "uploadBandwidthMbps"]
                .iter()
                .enumerate()
            {
                match obj.get(*key).and_then(json_mbps) {
                    Some(b) if b > 0 => bits[k] = b,
                    _ => {
                        ok = false;
                        self.errors.push(
                            Diag::new(self.file, line, format!("node `{name}` has no valid `{key}`"))
                                .help("give every node its bandwidth in Mbps, e.g. \"downloadBandwidthMbps\": 1000"),
                        );
                    }
                }
            }
            if !ok {
                continue;
            }
            if self.nodes.iter().any(|n| n.name == *name) {
                self.errors.push(
                    Diag::new(self.file, line, format!("node `{name}` appears twice"))
                        .help("ShapedDevices.csv refers to nodes by name: names must be unique"),
                );
                continue;
            }
            self.nodes.push(Node {
                name: name.clone(),
                parent,
                bits,
                line,
            });
            let me = self.nodes.len() - 1;
            if let Some(children) = obj.get("children") {
                self.read(children, Some(me), depth + 1);
            }
        }
    }
}

/// The columns of ShapedDevices.csv that the import reads (lower case).
const NEED: [&str; 8] = [
    "circuit id",
    "parent node",
    "ipv4",
    "ipv6",
    "download min mbps",
    "upload min mbps",
    "download max mbps",
    "upload max mbps",
];
const MIN_COLS: Both<&str> = ["download min mbps", "upload min mbps"];
const MAX_COLS: Both<&str> = ["download max mbps", "upload max mbps"];

/// Import the pair of files, both directions.
pub fn import(
    network: &str,
    network_file: &str,
    devices: &str,
    devices_file: &str,
    opts: &Options,
) -> Result<Import, ImportError> {
    let json: Value = serde_json::from_str(network).map_err(|e| {
        Diag::new(network_file, e.line(), format!("not valid JSON: {e}"))
            .help("network.json is an object of nodes, or {} for a flat network")
    })?;
    let mut r = NodeReader {
        text: network,
        file: network_file,
        nodes: Vec::new(),
        errors: Vec::new(),
    };
    r.read(&json, None, 0);
    let NodeReader {
        nodes, mut errors, ..
    } = r;
    let by_name: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let circuits = read_devices(devices, devices_file, network_file, &by_name, &mut errors)?;
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    Ok(write::write(
        &nodes,
        &circuits,
        network_file,
        devices_file,
        opts,
    ))
}

/// ShapedDevices.csv's rows, grouped into circuits.
fn read_devices(
    devices: &str,
    devices_file: &str,
    network_file: &str,
    by_name: &HashMap<&str, usize>,
    errors: &mut Vec<Diag>,
) -> Result<Vec<Circuit>, ImportError> {
    let mut header: Option<HashMap<String, usize>> = None;
    let mut circuits: Vec<Circuit> = Vec::new();
    let mut circuit_at: HashMap<String, usize> = HashMap::new();
    let mut fields: Vec<Cow<str>> = Vec::new();
    for (line, raw) in linkshare_config::csv::records(devices) {
        if let Err(e) = linkshare_config::csv::split(raw, &mut fields) {
            errors.push(Diag::new(devices_file, line, e.to_string()).help(e.help()));
            continue;
        }
        let Some(h) = &header else {
            let map: HashMap<String, usize> = fields
                .iter()
                .enumerate()
                .map(|(k, f)| (f.to_ascii_lowercase(), k))
                .collect();
            let missing: Vec<&str> = NEED
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
                .map(|c| c.as_ref())
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
        let mut min = [0; 2];
        let mut max = [0; 2];
        let mut bad = false;
        for d in 0..2 {
            match (rate(MIN_COLS[d]), rate(MAX_COLS[d])) {
                (Ok(a), Ok(b)) if a > b => {
                    errors.push(
                        Diag::new(
                            devices_file,
                            line,
                            format!("circuit `{id}`: {} is above {}", MIN_COLS[d], MAX_COLS[d]),
                        )
                        .help("the minimum is the guaranteed rate: at most the maximum"),
                    );
                    bad = true;
                }
                (Ok(a), Ok(b)) => (min[d], max[d]) = (a, b),
                (Err(e), _) | (_, Err(e)) => {
                    errors.push(e);
                    bad = true;
                }
            }
        }
        if bad {
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
            Some((d, u)) => [d.trim().to_string(), u.trim().to_string()],
            None => [sqm_all.trim().to_string(), sqm_all.trim().to_string()],
        };
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
    Ok(circuits)
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
}
