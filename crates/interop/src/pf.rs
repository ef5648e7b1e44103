//! Import pf.conf queues: OpenBSD's `queue` lines (pf.conf(5), OpenBSD 5.5 and later) and
//! FreeBSD/ALTQ's `altq on …` + `queue` lines (pf.conf(5) of FreeBSD, altq(4)), with the
//! `pass`/`match … queue` rules that put traffic in them as filters.
//!
//! What maps and how:
//! - OpenBSD: `queue NAME on IF bandwidth X [max Z]` is the root, `queue NAME parent P
//!   bandwidth X [min Y] [max Z] [burst B for T ms] [qlimit N] [flows N] [quantum N]
//!   [default]` its descendants → an HTB tree: `rate` = bandwidth (HFSC's link-sharing share,
//!   which HTB's rate also is), `ceil` = max, or the parent's ceil (OpenBSD queues borrow
//!   unless capped); `min` (HFSC's real-time guarantee) is noted, `burst B for T ms` becomes
//!   HTB's `burst` = the bytes sent above the rate in T; `qlimit` → a pfifo leaf limit, `flows N`
//!   → an fq_codel leaf (OpenBSD's flow queueing is FQ-CoDel).
//! - ALTQ `cbq` → `qdisc = "cbq"` with ALTQ's behaviours (`altq_compat = true`): `bandwidth X%`
//!   → `share`, absolute → `rate`; `priority N` (0-7, higher first) → `prio = 7 - N`;
//!   `cbq(borrow)` → `borrow = true` (ALTQ's default is no borrowing: `borrow = false` is
//!   written); `red`/`ecn`/`rio` → red/rio leaves; `default` → `default`.
//! - ALTQ `priq` → linkshare's strict priority between classes: HTB classes with a token
//!   guarantee (1 ‰ of the link) and the whole link as ceil, `prio` ranked from PRIQ's priority,
//!   so what is borrowed — nearly everything — goes to the highest priority first. (The `prio`
//!   leaf picks bands by TOS, not by rules, so it cannot carry pf's rules.)
//! - ALTQ `hfsc` is refused with its line: linkshare has no HFSC yet.
//! - `pass`/`match` rules with `queue NAME` or `set queue NAME` → filters on proto, from/to
//!   addresses (lists expanded) and ports (`=`, lists, `A:B`, `A >< B`, `>`, `>=`, `<`, `<=`,
//!   service names). pf's last matching rule wins unless `quick`: the filters are written
//!   quick rules first (file order), then the others from last to first, which is the same
//!   decision under linkshare's first match. `in` rules queue the replies that leave: their
//!   addresses and ports are swapped. Tables, negations, interface addresses and the second
//!   (ACK/low-delay) queue are noted and left out.
//!
//! Macros (`name = "value"`, `$name`) and `\` continuations are expanded; everything else in
//! pf.conf (options, NAT, scrub, tables, block rules) is ignored with one note.

use std::collections::HashMap;

use crate::diag::{Diag, ImportError};
use crate::policy_writer::{rate_text, ClassDraft, Draft, Field, FilterDraft, Leaf, Root};
use crate::tc::filter::proto_number;
use crate::Imported;

#[derive(Clone, Debug, PartialEq)]
enum Bw {
    Bits(u64),
    Percent(f64),
}

#[derive(Clone, Debug, Default)]
struct Queue {
    name: String,
    line: usize,
    iface: Option<String>,
    parent: Option<String>,
    bw: Option<Bw>,
    min: Option<u64>,
    max: Option<u64>,
    burst: Option<(u64, u64)>,
    qlimit: Option<u32>,
    flows: Option<u32>,
    quantum: Option<u32>,
    default: bool,
    priority: Option<u8>,
    sched: Option<String>,
    opts: Vec<String>,
    children: Vec<String>,
}

#[derive(Clone, Debug)]
struct Altq {
    line: usize,
    iface: String,
    sched: String,
    bw: Bw,
    queues: Vec<String>,
}

#[derive(Clone, Debug)]
struct PfRule {
    line: usize,
    quick: bool,
    inbound: bool,
    iface: Option<String>,
    protos: Vec<Option<u8>>,
    from: Vec<Option<String>>,
    from_ports: Vec<Option<(u16, u16)>>,
    to: Vec<Option<String>>,
    to_ports: Vec<Option<(u16, u16)>>,
    queue: String,
    notes: Vec<String>,
    /// Why the whole rule is left out (every address of a side was unusable).
    skip: Option<String>,
}

/// pf's bandwidth: `10Mb`, `100K`, `2G`, `300` (bits), `25%`.
fn bandwidth(s: &str) -> Option<Bw> {
    if let Some(p) = s.strip_suffix('%') {
        return p
            .parse::<f64>()
            .ok()
            .filter(|x| *x > 0.0 && *x <= 100.0)
            .map(Bw::Percent);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (n, u) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let scale = match u.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        _ => return None,
    };
    let bits = (n * scale).round();
    (bits.is_finite() && bits > 0.0 && bits < 1e13).then_some(Bw::Bits(bits as u64))
}

fn service(s: &str) -> Option<u16> {
    let known = [
        ("ftp-data", 20),
        ("ftp", 21),
        ("ssh", 22),
        ("telnet", 23),
        ("smtp", 25),
        ("domain", 53),
        ("http", 80),
        ("www", 80),
        ("pop3", 110),
        ("ntp", 123),
        ("imap", 143),
        ("snmp", 161),
        ("bgp", 179),
        ("https", 443),
        ("submission", 587),
        ("imaps", 993),
        ("pop3s", 995),
        ("openvpn", 1194),
        ("sip", 5060),
    ];
    s.parse()
        .ok()
        .or_else(|| known.iter().find(|(n, _)| *n == s).map(|(_, p)| *p))
}

/// Tokens of one statement: words, with `{ } ( ) ,` as tokens of their own.
fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        if c == '"' {
            quoted = !quoted;
            continue;
        }
        if !quoted && (c.is_whitespace() || "{}(),".contains(c)) {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Statements: (line, tokens), comments removed, continuations joined, macros expanded.
fn statements(text: &str, file: &str) -> Result<Vec<(usize, Vec<String>)>, ImportError> {
    let mut macros: HashMap<String, String> = HashMap::new();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut acc = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        let no_comment = match raw.find('#') {
            Some(k) => &raw[..k],
            None => raw,
        };
        if acc.is_empty() {
            start = i + 1;
        }
        if let Some(s) = no_comment.trim_end().strip_suffix('\\') {
            acc.push_str(s);
            acc.push(' ');
            continue;
        }
        acc.push_str(no_comment);
        let stmt = std::mem::take(&mut acc);
        let t = stmt.trim();
        if t.is_empty() {
            continue;
        }
        // Macro definition: NAME = value
        if let Some((k, v)) = t.split_once('=') {
            let k = k.trim();
            if !k.is_empty()
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !k.starts_with(|c: char| c.is_ascii_digit())
            {
                macros.insert(k.to_string(), v.trim().trim_matches('"').to_string());
                continue;
            }
        }
        // Expand $name (longest macro name first).
        let mut expanded = String::new();
        let mut rest = t;
        while let Some(k) = rest.find('$') {
            expanded.push_str(&rest[..k]);
            let name: String = rest[k + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            match macros.get(&name) {
                Some(v) => expanded.push_str(v),
                None => {
                    errors.push(
                        Diag::new(file, start, format!("macro `${name}` is not defined"))
                            .help("define it before use: name = \"value\""),
                    );
                    expanded.push_str(&name);
                }
            }
            rest = &rest[k + 1 + name.len()..];
        }
        expanded.push_str(rest);
        out.push((start, tokens(&expanded)));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(ImportError { errors })
    }
}

/// `{ a, b }` or a single word at `w[*i]`; advances past it.
fn list(w: &[String], i: &mut usize) -> Vec<String> {
    if w.get(*i).map(String::as_str) == Some("{") {
        let mut v = Vec::new();
        *i += 1;
        while let Some(t) = w.get(*i) {
            *i += 1;
            match t.as_str() {
                "}" => break,
                "," => {}
                other => v.push(other.to_string()),
            }
        }
        v
    } else if let Some(t) = w.get(*i) {
        *i += 1;
        vec![t.clone()]
    } else {
        Vec::new()
    }
}

fn parse_queue(w: &[String], line: usize, file: &str) -> Result<Queue, Diag> {
    let err = |m: String| Diag::new(file, line, m);
    let name = w
        .get(1)
        .ok_or_else(|| err("`queue` needs a name".into()))?
        .clone();
    let mut q = Queue {
        name,
        line,
        ..Queue::default()
    };
    let mut i = 2;
    let val = |i: usize| {
        w.get(i + 1)
            .map(String::as_str)
            .ok_or_else(|| err(format!("`{}` needs a value", w[i])))
    };
    let bits = |s: &str| match bandwidth(s) {
        Some(Bw::Bits(b)) => Ok(b),
        _ => Err(err(format!(
            "`{s}` is not a bandwidth (write 10M, 512K or 1000000)"
        ))),
    };
    while i < w.len() {
        match w[i].as_str() {
            "on" => q.iface = Some(val(i)?.to_string()),
            "parent" => q.parent = Some(val(i)?.to_string()),
            "bandwidth" => q.bw = Some(bandwidth(val(i)?).ok_or_else(|| err(format!("`{}` is not a bandwidth (write 10M, 512K, 10Mb or 20%)", w[i + 1])))?),
            "min" => q.min = Some(bits(val(i)?)?),
            "max" => q.max = Some(bits(val(i)?)?),
            "burst" => {
                let b = bits(val(i)?)?;
                if w.get(i + 2).map(String::as_str) != Some("for") {
                    return Err(err("`burst B` needs `for T ms`".into()));
                }
                let t = w.get(i + 3).map(String::as_str).unwrap_or("");
                let ms: u64 = t.trim_end_matches("ms").parse().map_err(|_| err(format!("`{t}` is not a time in ms")))?;
                q.burst = Some((b, ms));
                i += 4;
                continue;
            }
            "qlimit" => q.qlimit = Some(val(i)?.parse().map_err(|_| err("qlimit takes a number of packets".into()))?),
            "flows" => q.flows = Some(val(i)?.parse().map_err(|_| err("flows takes a number".into()))?),
            "quantum" => q.quantum = Some(val(i)?.parse().map_err(|_| err("quantum takes a number of bytes".into()))?),
            "priority" => q.priority = Some(val(i)?.parse().ok().filter(|p: &u8| *p <= 15).ok_or_else(|| err("priority is 0-15".into()))?),
            "default" => {
                q.default = true;
                i += 1;
                continue;
            }
            s @ ("cbq" | "priq" | "hfsc" | "codel" | "fairq") => {
                q.sched = Some(s.to_string());
                i += 1;
                if w.get(i).map(String::as_str) == Some("(") {
                    i += 1;
                    while let Some(t) = w.get(i) {
                        i += 1;
                        match t.as_str() {
                            ")" => break,
                            "," => {}
                            o => q.opts.push(o.to_string()),
                        }
                    }
                }
                if q.opts.iter().any(|o| o == "default") {
                    q.default = true;
                }
                continue;
            }
            "{" => {
                q.children = list(w, &mut i);
                continue;
            }
            other => return Err(err(format!("unknown queue keyword `{other}`")).help("pf.conf(5) queue options: on, parent, bandwidth, min, max, burst … for … ms, qlimit, flows, quantum, default; ALTQ: priority, cbq(…), priq(…)")),
        }
        i += 2;
    }
    if q.sched.as_deref() == Some("hfsc") {
        return Err(err(
            "linkshare has no HFSC yet; use cbq or the OpenBSD queue syntax".into(),
        ));
    }
    Ok(q)
}

fn addr(s: &str) -> Result<Option<String>, String> {
    match s {
        "any" | "all" => Ok(None),
        s if s.starts_with('<') => Err(format!("table {s}")),
        s if s.starts_with('!') => Err(format!("negation {s}")),
        s if s.contains(':') && s.parse::<linkshare_core::classify::IpPrefix>().is_err() => {
            Err(format!("interface address {s}"))
        }
        s => match linkshare_core::classify::IpPrefix::parse_report(s) {
            Ok(p) => Ok(Some(p.prefix.to_string())),
            Err(_) => Err(format!("`{s}`, not an address")),
        },
    }
}

/// `port …` after `*i`.
fn ports(w: &[String], i: &mut usize) -> Result<Vec<Option<(u16, u16)>>, String> {
    let svc = |s: &str| service(s).ok_or_else(|| format!("unknown port or service `{s}`"));
    let op = w.get(*i).cloned().unwrap_or_default();
    let one = |i: &mut usize| -> Result<(u16, u16), String> {
        let t = w.get(*i).cloned().unwrap_or_default();
        *i += 1;
        match t.as_str() {
            "=" => {
                let p = svc(w.get(*i).map(String::as_str).unwrap_or(""))?;
                *i += 1;
                Ok((p, p))
            }
            ">" | ">=" | "<" | "<=" => {
                let p = svc(w.get(*i).map(String::as_str).unwrap_or(""))?;
                *i += 1;
                Ok(match t.as_str() {
                    ">" => (p.checked_add(1).ok_or("port > 65535")?, 65535),
                    ">=" => (p, 65535),
                    "<" => (0, p.checked_sub(1).ok_or("port < 0")?),
                    _ => (0, p),
                })
            }
            "!=" => Err("`port != N` (linkshare has no negation)".into()),
            s => {
                if let Some((a, b)) = s.split_once(':') {
                    let (a, b) = (svc(a)?, svc(b)?);
                    return if a <= b {
                        Ok((a, b))
                    } else {
                        Err(format!("empty port range {s}"))
                    };
                }
                let a = svc(s)?;
                match w.get(*i).map(String::as_str) {
                    Some("><") | Some("<>") => {
                        let o = w[*i].clone();
                        let b = svc(w.get(*i + 1).map(String::as_str).unwrap_or(""))?;
                        *i += 2;
                        if o == "<>" {
                            return Err(
                                "`A <> B` (outside a range) has no linkshare equivalent".into()
                            );
                        }
                        if b <= a + 1 {
                            return Err(format!("empty port range {a} >< {b}"));
                        }
                        Ok((a + 1, b - 1))
                    }
                    _ => Ok((a, a)),
                }
            }
        }
    };
    if op == "{" {
        *i += 1;
        let mut v = Vec::new();
        while let Some(t) = w.get(*i) {
            match t.as_str() {
                "}" => {
                    *i += 1;
                    break;
                }
                "," => *i += 1,
                _ => v.push(Some(one(i)?)),
            }
        }
        Ok(v)
    } else {
        Ok(vec![Some(one(i)?)])
    }
}

fn parse_rule(w: &[String], line: usize) -> Result<Option<PfRule>, String> {
    let mut r = PfRule {
        line,
        quick: false,
        inbound: false,
        iface: None,
        protos: vec![None],
        from: vec![None],
        from_ports: vec![None],
        to: vec![None],
        to_ports: vec![None],
        queue: String::new(),
        notes: Vec::new(),
        skip: None,
    };
    let mut i = 1;
    let mut queue = None;
    while i < w.len() {
        let t = w[i].as_str();
        match t {
            "in" => r.inbound = true,
            "out" | "log" | "inet" | "inet6" | "all" => {}
            "quick" => r.quick = true,
            "on" => {
                i += 1;
                r.iface = w.get(i).cloned();
            }
            "proto" => {
                i += 1;
                let ps = list(w, &mut i);
                r.protos = ps
                    .iter()
                    .map(|p| {
                        proto_number(p)
                            .map(Some)
                            .ok_or_else(|| format!("unknown protocol `{p}`"))
                    })
                    .collect::<Result<_, _>>()?;
                continue;
            }
            "from" | "to" => {
                i += 1;
                let addrs = if w.get(i).map(String::as_str) == Some("port") {
                    vec!["any".to_string()]
                } else {
                    list(w, &mut i)
                };
                let mut v = Vec::new();
                for a in &addrs {
                    match addr(a) {
                        Ok(x) => v.push(x),
                        Err(why) => r.notes.push(format!(
                            "{why} left out of `{t}`: linkshare filters match prefixes"
                        )),
                    }
                }
                if v.is_empty() {
                    r.skip = Some(format!("no address of `{t}` can be matched"));
                    v.push(None);
                }
                let p = if w.get(i).map(String::as_str) == Some("port") {
                    i += 1;
                    ports(w, &mut i)?
                } else {
                    vec![None]
                };
                if t == "from" {
                    r.from = v;
                    r.from_ports = p;
                } else {
                    r.to = v;
                    r.to_ports = p;
                }
                continue;
            }
            "queue" => {
                i += 1;
                let q = if w.get(i).map(String::as_str) == Some("(") {
                    let mut names = Vec::new();
                    i += 1;
                    while let Some(x) = w.get(i) {
                        i += 1;
                        match x.as_str() {
                            ")" => break,
                            "," => {}
                            n => names.push(n.to_string()),
                        }
                    }
                    if names.len() > 1 {
                        r.notes.push(format!("second queue `{}` (for ACKs and low-delay packets) left out: linkshare has one class per filter", names[1]));
                    }
                    names.into_iter().next()
                } else {
                    let n = w.get(i).cloned();
                    i += 1;
                    n
                };
                queue = q;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    let Some(q) = queue else { return Ok(None) };
    r.queue = q;
    if r.inbound {
        std::mem::swap(&mut r.from, &mut r.to);
        std::mem::swap(&mut r.from_ports, &mut r.to_ports);
        r.notes.push(
            "an `in` rule queues the replies that leave: source and destination swapped".into(),
        );
    }
    Ok(Some(r))
}

/// Import the queues of `iface` (the first interface with queues when `None`).
pub fn import(text: &str, file: &str, iface: Option<&str>) -> Result<Imported, ImportError> {
    let stmts = statements(text, file)?;
    let mut errors = Vec::new();
    let mut queues: Vec<Queue> = Vec::new();
    let mut altqs: Vec<Altq> = Vec::new();
    let mut rules = Vec::new();
    let mut ignored = 0;
    for (line, w) in &stmts {
        let err = |m: String| Diag::new(file, *line, m);
        match w.first().map(String::as_str) {
            Some("queue") => match parse_queue(w, *line, file) {
                Ok(q) => queues.push(q),
                Err(e) => errors.push(e),
            },
            Some("altq") => {
                let mut a = Altq {
                    line: *line,
                    iface: String::new(),
                    sched: String::new(),
                    bw: Bw::Bits(0),
                    queues: Vec::new(),
                };
                let mut i = 1;
                while i < w.len() {
                    match w[i].as_str() {
                        "on" => a.iface = w.get(i + 1).cloned().unwrap_or_default(),
                        s @ ("cbq" | "priq" | "hfsc" | "fairq" | "codel") => {
                            a.sched = s.to_string();
                            i += 1;
                            continue;
                        }
                        "bandwidth" => match w.get(i + 1).and_then(|b| bandwidth(b)) {
                            Some(b) => a.bw = b,
                            None => {
                                errors.push(err("`bandwidth` needs a rate such as 10Mb".into()))
                            }
                        },
                        "queue" => {
                            i += 1;
                            a.queues = list(w, &mut i);
                            continue;
                        }
                        "qlimit" | "tbrsize" => {}
                        other => errors.push(err(format!("unknown altq keyword `{other}`"))),
                    }
                    i += 2;
                }
                if a.sched == "hfsc" {
                    errors.push(err(
                        "linkshare has no HFSC yet; use cbq or the OpenBSD queue syntax".into(),
                    ));
                } else if a.sched != "cbq" && a.sched != "priq" {
                    errors.push(err(format!(
                        "altq scheduler `{}` is not imported: linkshare imports cbq and priq",
                        a.sched
                    )));
                } else if a.iface.is_empty() || matches!(a.bw, Bw::Bits(0)) {
                    errors.push(err("`altq` needs `on IF` and `bandwidth`".into()));
                }
                altqs.push(a);
            }
            Some("pass" | "match") => match parse_rule(w, *line) {
                Ok(Some(r)) => rules.push(r),
                Ok(None) => {}
                Err(e) => errors.push(err(e)),
            },
            _ => ignored += 1,
        }
    }
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    let ifaces: Vec<String> = altqs
        .iter()
        .map(|a| a.iface.clone())
        .chain(queues.iter().filter_map(|q| q.iface.clone()))
        .collect();
    let Some(on) = iface.map(String::from).or_else(|| ifaces.first().cloned()) else {
        return Err(Diag::new(
            file,
            0,
            "no `queue … on IF` or `altq on IF` line: nothing to import",
        )
        .into());
    };
    let mut d = if altqs.is_empty() {
        openbsd(&queues, &on, file)?
    } else {
        altq(&altqs, &queues, &on, file)?
    };
    d.title
        .insert(0, format!("linkshare import pf {file} (interface {on})"));
    if ifaces.iter().any(|x| *x != on) {
        d.notes.push(format!(
            "queues of other interfaces left out (import them with --on IF): {}",
            ifaces
                .iter()
                .filter(|x| **x != on)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if ignored > 0 {
        d.notes.push(format!("{ignored} pf.conf statements that are not queues or queue-assigning rules were ignored"));
    }
    filters(&mut d, &rules, &on, file);
    // A catch-all rule that ends the list (pf's first `match … set queue`, reversed) is what
    // the default class means.
    while d.filters.last().is_some_and(|f| f.fields.is_empty()) {
        if let Some(f) = d.filters.pop() {
            d.top.retain(|t| t.key != "default");
            d.top.insert(
                0,
                Field::str("default", f.class.clone()).note(format!(
                    "from the catch-all rule at {}",
                    f.source.unwrap_or_default()
                )),
            );
        }
    }
    Ok(Imported {
        toml: d.to_toml(),
        warnings: Vec::new(),
    })
}

fn leaf_of(q: &Queue) -> Option<Leaf> {
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

fn openbsd(queues: &[Queue], on: &str, file: &str) -> Result<Draft, ImportError> {
    let mut d = Draft::new(Root::Htb);
    let mut errors = Vec::new();
    let mut tree: Vec<&Queue> = queues
        .iter()
        .filter(|q| q.iface.as_deref() == Some(on) && q.parent.is_none())
        .collect();
    let mut k = 0;
    while k < tree.len() {
        let name = tree[k].name.clone();
        tree.extend(
            queues
                .iter()
                .filter(|q| q.parent.as_deref() == Some(name.as_str())),
        );
        k += 1;
        if tree.len() > 10_000 {
            break;
        }
    }
    for q in queues {
        if let Some(p) = &q.parent {
            if !queues.iter().any(|x| x.name == *p) {
                errors.push(Diag::new(
                    file,
                    q.line,
                    format!("queue `{}`: its parent `{p}` is not defined", q.name),
                ));
            }
        }
    }
    let ceil_of: HashMap<&str, u64> = {
        let mut m = HashMap::new();
        for q in &tree {
            let bw = match q.bw {
                Some(Bw::Bits(b)) => b,
                _ => 0,
            };
            let parent_ceil = q
                .parent
                .as_deref()
                .and_then(|p| m.get(p).copied())
                .unwrap_or(bw);
            m.insert(
                q.name.as_str(),
                q.max
                    .unwrap_or(parent_ceil)
                    .min(parent_ceil.max(q.max.unwrap_or(0))),
            );
        }
        m
    };
    let rate_of = |q: &Queue| -> Option<u64> {
        match q.bw {
            Some(Bw::Bits(b)) => Some(b),
            Some(Bw::Percent(p)) => q
                .parent
                .as_deref()
                .and_then(|par| queues.iter().find(|x| x.name == par))
                .and_then(|x| match x.bw {
                    Some(Bw::Bits(b)) => Some((b as f64 * p / 100.0) as u64),
                    _ => None,
                }),
            None => None,
        }
    };
    let is_parent = |n: &str| queues.iter().any(|x| x.parent.as_deref() == Some(n));
    let mut default = None;
    for q in &tree {
        let Some(rate) = rate_of(q) else {
            errors.push(
                Diag::new(file, q.line, format!("queue `{}` has no bandwidth", q.name))
                    .help("write `bandwidth 10M` (or a percentage of the parent's)"),
            );
            continue;
        };
        let mut c = ClassDraft::new(&q.name, Some(format!("{file}:{}", q.line)));
        if let Some(p) = &q.parent {
            c.fields.push(Field::str("parent", p.clone()));
        }
        let mut rf = Field::rate("rate", rate);
        if let Some(m) = q.min {
            rf = rf.note(format!(
                "min {}: HFSC's real-time guarantee; in HTB the rate (bandwidth) is the guarantee",
                rate_text(m)
            ));
        }
        c.fields.push(rf);
        let ceil = ceil_of
            .get(q.name.as_str())
            .copied()
            .unwrap_or(rate)
            .max(rate);
        let mut cf = Field::rate("ceil", ceil);
        if q.max.is_none() && q.parent.is_some() {
            cf = cf.note("no max: the queue may borrow up to its parent's ceiling");
        }
        c.fields.push(cf);
        if let Some((b, ms)) = q.burst {
            let extra = (b.saturating_sub(rate) as u128 * u128::from(ms) / 8000) as u64;
            if extra >= 1514 {
                c.fields.push(Field::size("burst", extra).note(format!(
                    "burst {} for {ms}ms: the bytes sent above the rate in that time",
                    rate_text(b)
                )));
            } else {
                c.notes.push(format!("burst {} for {ms}ms is less than one packet above the rate: left at the default", rate_text(b)));
            }
        }
        if let Some(qn) = q.quantum {
            c.fields.push(Field::size("quantum", u64::from(qn)));
        }
        if !is_parent(&q.name) {
            c.leaf = leaf_of(q);
            if q.default {
                default = Some(q.name.clone());
            }
        }
        d.classes.push(c);
    }
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    match default.or_else(|| d.classes.last().map(|c| c.name.clone())) {
        Some(n) => d.top.push(Field::str("default", n)),
        None => return Err(Diag::new(file, 0, format!("no queues on {on}")).into()),
    }
    Ok(d)
}

fn altq(altqs: &[Altq], queues: &[Queue], on: &str, file: &str) -> Result<Draft, ImportError> {
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
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    let default = tree
        .iter()
        .find(|(q, _)| q.default && q.children.is_empty())
        .map(|(q, _)| q.name.clone());
    let Some(default) = default else {
        return Err(Diag::new(file, a.line, "no leaf queue has `default`")
            .help("ALTQ requires one default queue: add cbq(default) or priq(default) to one")
            .into());
    };
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

fn filters(d: &mut Draft, rules: &[PfRule], on: &str, file: &str) {
    let leaves: Vec<String> = d
        .classes
        .iter()
        .filter(|c| {
            c.leaf.is_some()
                || !d.classes.iter().any(|x| {
                    x.fields.iter().any(|f| {
                        f.key == "parent" && f.val == crate::policy_writer::Val::Str(c.name.clone())
                    })
                })
        })
        .map(|c| c.name.clone())
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
        if !leaves.contains(&r.queue) {
            d.notes.push(format!(
                "the rule at line {} names queue `{}`, which is not a leaf queue on {on}: left out",
                r.line, r.queue
            ));
            continue;
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
}
