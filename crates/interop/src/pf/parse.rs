//! pf.conf's syntax: statements (comments, `\\` continuations, macros), `queue` and `altq`
//! lines, and the parts of `pass`/`match` rules that choose packets (pf.conf(5)).

use std::collections::HashMap;

use super::{Bw, PfRule, Queue};
use crate::diag::{Diag, ImportError};
use crate::tc::filter::proto_number;

/// pf's bandwidth: `10Mb`, `100K`, `2G`, `300` (bits), `25%`.
pub(crate) fn bandwidth(s: &str) -> Option<Bw> {
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
pub(crate) fn statements(text: &str, file: &str) -> Result<Vec<(usize, Vec<String>)>, ImportError> {
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
pub(crate) fn list(w: &[String], i: &mut usize) -> Vec<String> {
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

pub(crate) fn parse_queue(w: &[String], line: usize, file: &str) -> Result<Queue, Diag> {
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
    // The option a `burst … for …` belongs to (pf.conf(5): bandwidth, min and max each take one).
    let mut last = "bandwidth";
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
            "bandwidth" => {
                last = "bandwidth";
                q.bw = Some(bandwidth(val(i)?).ok_or_else(|| err(format!("`{}` is not a bandwidth (write 10M, 512K, 10Mb or 20%)", w[i + 1])))?)
            }
            "min" => {
                last = "min";
                q.min = Some(bits(val(i)?)?)
            }
            "max" => {
                last = "max";
                q.max = Some(bits(val(i)?)?)
            }
            "burst" => {
                let b = bits(val(i)?)?;
                if w.get(i + 2).map(String::as_str) != Some("for") {
                    return Err(err("`burst B` needs `for T ms`".into()));
                }
                let t = w.get(i + 3).map(String::as_str).unwrap_or("");
                let ms: u64 = t.trim_end_matches("ms").parse().map_err(|_| err(format!("`{t}` is not a time in ms")))?;
                let burst = Some((b, ms));
                match last {
                    "min" => q.min_burst = burst,
                    "max" => q.max_burst = burst,
                    _ => q.burst = burst,
                }
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
                    // Options up to the matching `)`; inner parentheses (hfsc's `realtime (m1,
                    // d, m2)`) are kept as tokens.
                    i += 1;
                    let mut depth = 1;
                    while let Some(t) = w.get(i) {
                        i += 1;
                        match t.as_str() {
                            ")" if depth == 1 => break,
                            "," => {}
                            o => {
                                depth += usize::from(o == "(");
                                depth -= usize::from(o == ")");
                                q.opts.push(o.to_string());
                            }
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
            other => return Err(err(format!("unknown queue keyword `{other}`")).help("pf.conf(5) queue options: on, parent, bandwidth, min, max, burst … for … ms, qlimit, flows, quantum, default; ALTQ: priority, cbq(…), priq(…), hfsc(…)")),
        }
        i += 2;
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

pub(crate) fn parse_rule(w: &[String], line: usize) -> Result<Option<PfRule>, String> {
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
