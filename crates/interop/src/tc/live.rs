//! `import tc --dev DEV`: the live configuration of a device, read from what tc(8) prints.
//!
//! Sources, per object (iproute2 6.1 is the reference; newer versions print more JSON and are
//! read the same way):
//! - qdiscs: `tc qdisc show dev DEV` — its lines repeat the options in the command's own
//!   syntax (`qdisc tbf 4: parent 1:3 rate 1Mbit burst 10Kb lat 50ms`), which `leaf.rs` reads;
//!   the root's size table from `tc -d qdisc show dev DEV root`, whose second line is
//!   ` linklayer atm overhead 10 mpu 0 mtu 2047 tsize 512` (`stab.rs` reads it);
//! - classes: `tc -j -d class show dev DEV` — a JSON array where tc has JSON for the class
//!   kind, else (HTB in iproute2 6.1) one text line per class, `class htb 1:2 parent 1:1 leaf 3:
//!   prio 0 quantum 25000 rate 2Mbit ceil 10Mbit … burst 1750b/1 …`, read with the same words as
//!   a `class add` command;
//! - filters: `tc -j filter show dev DEV` — u32 keys as `{"value","mask","off"}` objects, one
//!   `"match"` key per key of a rule (repeated keys in one object: read with a small JSON
//!   reader that keeps them, `Json`).
//!
//! What the kernel keeps is less than the script said: rates are bytes per second and tc
//! prints them rounded (`1234Kbit` for 1234567bit), bursts are recomputed from ticks; the
//! policy says so in a note. Everything after reading is `import::build`, as for a script.

use crate::diag::{Diag, ImportError};
use crate::tc::filter::{self, class_ref, Image, Rule};
use crate::tc::import::{self, ClassDef, FilterDef, QdiscDef, TcConf};
use crate::Imported;

/// A JSON value that keeps repeated keys in objects, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn get(&self, k: &str) -> Option<&Json> {
        match self {
            Json::Obj(kv) => kv.iter().find(|(n, _)| n == k).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn all<'a>(&'a self, k: &'a str) -> impl Iterator<Item = &'a Json> + 'a {
        let kv: &[(String, Json)] = match self {
            Json::Obj(kv) => kv,
            _ => &[],
        };
        kv.iter().filter(move |(n, _)| n == k).map(|(_, v)| v)
    }
    /// Strings and numbers as text.
    pub fn text(&self) -> Option<String> {
        match self {
            Json::Str(s) | Json::Num(s) => Some(s.clone()),
            Json::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// Parse `s` (at most 64 levels deep).
    pub fn parse(s: &str) -> Result<Json, String> {
        let b = s.as_bytes();
        let mut i = 0;
        let v = value(b, &mut i, 0)?;
        skip_ws(b, &mut i);
        if i != b.len() {
            return Err(format!("trailing characters at byte {i}"));
        }
        Ok(v)
    }
}

fn skip_ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

fn value(b: &[u8], i: &mut usize, depth: usize) -> Result<Json, String> {
    if depth > 64 {
        return Err("nested too deeply".into());
    }
    skip_ws(b, i);
    let Some(&c) = b.get(*i) else {
        return Err("unexpected end".into());
    };
    match c {
        b'{' | b'[' => {
            *i += 1;
            let obj = c == b'{';
            let close = if obj { b'}' } else { b']' };
            let mut kv = Vec::new();
            let mut arr = Vec::new();
            skip_ws(b, i);
            if b.get(*i) == Some(&close) {
                *i += 1;
            } else {
                loop {
                    if obj {
                        skip_ws(b, i);
                        let Json::Str(k) = string(b, i)? else {
                            return Err("expected a key".into());
                        };
                        skip_ws(b, i);
                        if b.get(*i) != Some(&b':') {
                            return Err(format!("expected `:` at byte {i}"));
                        }
                        *i += 1;
                        kv.push((k, value(b, i, depth + 1)?));
                    } else {
                        arr.push(value(b, i, depth + 1)?);
                    }
                    skip_ws(b, i);
                    match b.get(*i) {
                        Some(b',') => *i += 1,
                        Some(x) if *x == close => {
                            *i += 1;
                            break;
                        }
                        _ => return Err(format!("expected `,` or a closing bracket at byte {i}")),
                    }
                }
            }
            Ok(if obj { Json::Obj(kv) } else { Json::Arr(arr) })
        }
        b'"' => string(b, i),
        b't' | b'f' | b'n' => {
            for (w, v) in [
                ("true", Json::Bool(true)),
                ("false", Json::Bool(false)),
                ("null", Json::Null),
            ] {
                if b[*i..].starts_with(w.as_bytes()) {
                    *i += w.len();
                    return Ok(v);
                }
            }
            Err(format!("unexpected word at byte {i}"))
        }
        _ => {
            let start = *i;
            while *i < b.len() && matches!(b[*i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                *i += 1;
            }
            if start == *i {
                return Err(format!("unexpected character at byte {start}"));
            }
            Ok(Json::Num(
                String::from_utf8_lossy(&b[start..*i]).into_owned(),
            ))
        }
    }
}

fn string(b: &[u8], i: &mut usize) -> Result<Json, String> {
    if b.get(*i) != Some(&b'"') {
        return Err(format!("expected a string at byte {i}"));
    }
    *i += 1;
    let mut out = Vec::new();
    loop {
        let Some(&c) = b.get(*i) else {
            return Err("unterminated string".into());
        };
        *i += 1;
        match c {
            b'"' => break,
            b'\\' => {
                let Some(&e) = b.get(*i) else {
                    return Err("unterminated string".into());
                };
                *i += 1;
                match e {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'b' | b'f' => out.push(b' '),
                    b'u' => {
                        let hex = b.get(*i..*i + 4).ok_or("bad \\u escape")?;
                        let n = u32::from_str_radix(&String::from_utf8_lossy(hex), 16)
                            .map_err(|_| "bad \\u escape")?;
                        *i += 4;
                        let ch = char::from_u32(n).unwrap_or('\u{fffd}');
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                    other => out.push(other),
                }
            }
            other => out.push(other),
        }
    }
    Ok(Json::Str(String::from_utf8_lossy(&out).into_owned()))
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// `tc qdisc show` lines → qdiscs.
fn qdiscs(text: &str, file: &str, conf: &mut TcConf) -> Result<(), Diag> {
    let mut after_root = false;
    for (n, line) in text.lines().enumerate() {
        let w = words(line);
        if w.first().map(String::as_str) != Some("qdisc") {
            // `tc -d` prints the root's size table on the line after it.
            let stab_words = ["linklayer", "overhead", "mpu", "mtu", "tsize"];
            if after_root && w.first().is_some_and(|k| stab_words.contains(&k.as_str())) {
                let mut sw = vec!["stab".to_string()];
                sw.extend(w.iter().cloned());
                let (link, _) =
                    crate::tc::stab::parse(&sw, 0).map_err(|m| Diag::new(file, n + 1, m))?;
                conf.stab = link;
            }
            after_root = false;
            continue;
        }
        after_root = w.get(3).map(String::as_str) == Some("root");
        let err = |m: &str| Diag::new(file, n + 1, m.to_string());
        let kind = w
            .get(1)
            .ok_or_else(|| err("a qdisc line without kind"))?
            .clone();
        let handle = w.get(2).and_then(|h| class_ref(h)).map(|h| h.0);
        let mut i = 3;
        let mut parent = None;
        match w.get(i).map(String::as_str) {
            Some("root") => i += 1,
            Some("parent") => {
                parent = Some(
                    w.get(i + 1)
                        .and_then(|p| class_ref(p))
                        .ok_or_else(|| err("bad parent"))?,
                );
                i += 2;
            }
            _ => continue, // ingress and the like
        }
        if w.get(i).map(String::as_str) == Some("refcnt") {
            i += 2;
        }
        let opts = w[i.min(w.len())..].to_vec();
        // The kernel's own default root (`noqueue`, `pfifo_fast`, `mq` with handle 0:): nothing configured.
        if parent.is_none() && handle == Some(0) {
            continue;
        }
        let q = QdiscDef {
            line: n + 1,
            handle,
            parent,
            kind,
            opts,
        };
        match parent {
            None => conf.root = Some(q),
            Some(_) => conf.qdiscs.push(q),
        }
    }
    Ok(())
}

/// `tc -j -d class show`: JSON objects or text lines → classes.
fn classes(text: &str, file: &str, conf: &mut TcConf) -> Result<(), Diag> {
    if text.trim_start().starts_with('[') {
        let j = Json::parse(text)
            .map_err(|e| Diag::new(file, 0, format!("tc printed JSON that cannot be read: {e}")))?;
        let Json::Arr(items) = j else { return Ok(()) };
        for (n, it) in items.iter().enumerate() {
            let kind = it
                .get("class")
                .or(it.get("kind"))
                .and_then(Json::text)
                .unwrap_or_default();
            let id = it
                .get("handle")
                .and_then(Json::text)
                .and_then(|h| class_ref(&h));
            let parent = it
                .get("parent")
                .and_then(Json::text)
                .and_then(|h| class_ref(&h));
            let (Some(id), parent) = (id, parent) else {
                continue;
            };
            let parent = parent.unwrap_or((id.0, 0));
            let o = it.get("options").unwrap_or(it);
            let mut opts = Vec::new();
            for (k, scale) in [
                ("rate", 8u64),
                ("ceil", 8),
                ("burst", 1),
                ("cburst", 1),
                ("prio", 0),
                ("quantum", 0),
            ] {
                if let Some(v) = o.get(k).and_then(Json::text) {
                    let v = match (scale, v.parse::<u64>()) {
                        (8, Ok(x)) => format!("{}bit", x * 8),
                        (1, Ok(x)) => format!("{x}b"),
                        _ => v,
                    };
                    opts.push(k.to_string());
                    opts.push(v);
                }
            }
            conf.classes.push(ClassDef {
                line: n + 1,
                id,
                parent,
                kind,
                opts,
                name: None,
            });
        }
        return Ok(());
    }
    for (n, line) in text.lines().enumerate() {
        let w = words(line);
        if w.first().map(String::as_str) != Some("class") || w.len() < 3 {
            continue;
        }
        let err = |m: &str| Diag::new(file, n + 1, m.to_string());
        let kind = w[1].clone();
        let id = class_ref(&w[2]).ok_or_else(|| err("bad class id"))?;
        let mut i = 3;
        let parent = match w.get(i).map(String::as_str) {
            Some("root") => {
                i += 1;
                (id.0, 0)
            }
            Some("parent") => {
                i += 2;
                w.get(i - 1)
                    .and_then(|p| class_ref(p))
                    .ok_or_else(|| err("bad parent"))?
            }
            _ => return Err(err("a class line without root or parent")),
        };
        if w.get(i).map(String::as_str) == Some("leaf") {
            i += 2;
        }
        let opts = w[i.min(w.len())..].to_vec();
        conf.classes.push(ClassDef {
            line: n + 1,
            id,
            parent,
            kind,
            opts,
            name: None,
        });
    }
    Ok(())
}

/// `tc -j filter show`: u32 rules (and flower/matchall where the kernel has them).
fn filters(text: &str, file: &str, conf: &mut TcConf) -> Result<(), Diag> {
    if text.trim().is_empty() {
        return Ok(());
    }
    let j = Json::parse(text)
        .map_err(|e| Diag::new(file, 0, format!("tc printed JSON that cannot be read: {e}")))?;
    let Json::Arr(items) = j else { return Ok(()) };
    for (n, it) in items.iter().enumerate() {
        let line = n + 1;
        let Some(o) = it.get("options") else { continue };
        let kind = it.get("kind").and_then(Json::text).unwrap_or_default();
        let fam = match it.get("protocol").and_then(Json::text).as_deref() {
            Some("ip") => Some(false),
            Some("ipv6") => Some(true),
            Some("all") => None,
            Some(other) => {
                conf.filters.push(FilterDef::Skipped(
                    line,
                    format!("protocol {other}: linkshare classifies IP packets only"),
                ));
                continue;
            }
            None => None,
        };
        let prio = it
            .get("pref")
            .and_then(Json::text)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0xffff);
        let flowid = o
            .get("flowid")
            .or(o.get("classid"))
            .and_then(Json::text)
            .and_then(|f| class_ref(&f));
        let Some(flowid) = flowid else { continue }; // u32 hash-table headers
        let err = |m: String| Diag::new(file, line, m);
        let m = match kind.as_str() {
            "u32" => {
                let mut img = Image::default();
                for k in o.all("match") {
                    let hex = |key: &str| {
                        k.get(key)
                            .and_then(Json::text)
                            .and_then(|s| u64::from_str_radix(&s, 16).ok())
                    };
                    let off = k
                        .get("off")
                        .and_then(Json::text)
                        .and_then(|s| s.parse::<i64>().ok());
                    if k.get("offmask")
                        .and_then(Json::text)
                        .is_some_and(|s| !s.is_empty())
                    {
                        return Err(err(
                            "a u32 key with a variable offset (nexthdr): not imported".into(),
                        ));
                    }
                    let (Some(v), Some(mk), Some(off)) = (hex("value"), hex("mask"), off) else {
                        return Err(err("a u32 key without value, mask or off".into()));
                    };
                    img.put(v, mk, 4, off).map_err(err)?;
                }
                let mut notes = Vec::new();
                match img.decode(fam.unwrap_or(false), &mut notes).map_err(err)? {
                    Some(mut m) => {
                        if fam.is_none()
                            && m == (filter::Match {
                                v6: Some(false),
                                ..Default::default()
                            })
                        {
                            m.v6 = None;
                        }
                        conf.filters.push(FilterDef::Rule(Rule {
                            line,
                            prio,
                            flowid,
                            m,
                            notes,
                        }));
                    }
                    None => conf.filters.push(FilterDef::Skipped(
                        line,
                        "its keys contradict each other".into(),
                    )),
                }
                continue;
            }
            "matchall" => filter::Match {
                v6: fam,
                ..Default::default()
            },
            "flower" => {
                let mut w = Vec::new();
                if let Some(Json::Obj(keys)) = o.get("keys") {
                    for (k, v) in keys {
                        if let Some(t) = v.text() {
                            w.push(k.clone());
                            w.push(t);
                        }
                    }
                }
                filter::parse_flower(&w, fam.unwrap_or(false))
                    .map_err(err)?
                    .0
            }
            other => {
                conf.filters.push(FilterDef::Skipped(
                    line,
                    format!("filter kind {other} is not imported"),
                ));
                continue;
            }
        };
        conf.filters.push(FilterDef::Rule(Rule {
            line,
            prio,
            flowid,
            m,
            notes: Vec::new(),
        }));
    }
    Ok(())
}

/// `qdisc_show` with `detail` lines inserted after the root qdisc's line.
fn with_root_detail(qdisc_show: &str, detail: &[&str]) -> String {
    let mut out = String::new();
    for line in qdisc_show.lines() {
        out.push_str(line);
        out.push('\n');
        if words(line).get(3).map(String::as_str) == Some("root") {
            for d in detail {
                out.push_str(d);
                out.push('\n');
            }
        }
    }
    out
}

/// Build a policy from the three outputs of tc for device `dev`.
pub fn import_outputs(
    dev: &str,
    qdisc_show: &str,
    class_show: &str,
    filter_show: &str,
) -> Result<Imported, ImportError> {
    let mut conf = TcConf {
        dev: Some(dev.to_string()),
        ..TcConf::default()
    };
    let mut errors = Vec::new();
    for r in [
        qdiscs(qdisc_show, "tc qdisc show", &mut conf),
        classes(class_show, "tc -j -d class show", &mut conf),
        filters(filter_show, "tc -j filter show", &mut conf),
    ] {
        if let Err(e) = r {
            errors.push(e);
        }
    }
    if !errors.is_empty() {
        return Err(ImportError { errors });
    }
    // Leaf qdiscs show internal classes of their own (`class tbf 4:1 parent 4:`): only the
    // root's classes are the tree.
    let major = conf.root.as_ref().and_then(|r| r.handle);
    conf.classes.retain(|c| Some(c.id.0) == major);
    conf.notes.push("read from the kernel: rates are kept in bytes/s and printed rounded by tc (`1234Kbit`), bursts recomputed from ticks; import the script itself when exact values matter".into());
    import::build(
        &conf,
        &format!("dev {dev}"),
        &format!("linkshare import tc --dev {dev}"),
    )
}

fn run_tc(args: &[&str]) -> Result<String, Diag> {
    let out = std::process::Command::new("tc")
        .args(args)
        .output()
        .map_err(|e| {
            Diag::new("tc", 0, format!("cannot run `tc {}`: {e}", args.join(" ")))
                .help("install iproute2")
        })?;
    if !out.status.success() {
        return Err(Diag::new(
            "tc",
            0,
            format!(
                "`tc {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Read `dev`'s configuration with tc and import it.
pub fn import_dev(dev: &str) -> Result<Imported, ImportError> {
    let mut q = run_tc(&["qdisc", "show", "dev", dev])?;
    // The root's size table: the lines after the first of `tc -d qdisc show … root`, put after
    // the root's line (the only place `qdiscs` reads them).
    let detail = run_tc(&["-d", "qdisc", "show", "dev", dev, "root"])?;
    let stab: Vec<&str> = detail
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .collect();
    if !stab.is_empty() {
        q = with_root_detail(&q, &stab);
    }
    let c = run_tc(&["-j", "-d", "class", "show", "dev", dev])?;
    let f = run_tc(&["-j", "filter", "show", "dev", dev])?;
    import_outputs(dev, &q, &c, &f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_repeated_keys() {
        let j = Json::parse(r#"{"match":{"value":"b80000","off":0},"match":{"value":"1","off":20},"s":"a\"b\u00e9"}"#).unwrap();
        assert_eq!(j.all("match").count(), 2);
        assert_eq!(j.get("s").and_then(Json::text).as_deref(), Some("a\"bé"));
        for bad in ["{", "[1,", "{\"a\" 1}", "\"x", "[1] 2", "{\"a\":\"\\u12\"}"] {
            assert!(Json::parse(bad).is_err(), "{bad}");
        }
    }

    /// What iproute2 6.1 printed for `export tc policies/example.toml` applied to a veth.
    #[test]
    fn outputs_of_iproute2_6_1() {
        let q = "qdisc htb 1: root refcnt 3 r2q 10 default 0x3 direct_packets_stat 0 direct_qlen 1000\nqdisc pfifo 4: parent 1:3 limit 1000p\nqdisc bfifo 3: parent 1:2 limit 10000b\n";
        let c = "class htb 1:1 root rate 10Mbit ceil 10Mbit linklayer ethernet burst 2750b/1 mpu 0b cburst 2750b/1 mpu 0b level 7 \nclass htb 1:2 parent 1:1 leaf 3: prio 0 quantum 25000 rate 2Mbit ceil 10Mbit linklayer ethernet burst 1750b/1 mpu 0b cburst 2750b/1 mpu 0b level 0 \nclass htb 1:3 parent 1:1 leaf 4: prio 1 quantum 100000 rate 8Mbit ceil 10Mbit linklayer ethernet burst 15Kb/1 mpu 0b cburst 3Kb/1 mpu 0b level 0 \n";
        let f = r#"[{"parent":"1:","protocol":"ip","pref":1,"kind":"u32","chain":0},{"parent":"1:","protocol":"ip","pref":1,"kind":"u32","chain":0,"options":{"fh":"800:","ht_divisor":1}},{"parent":"1:","protocol":"ip","pref":1,"kind":"u32","chain":0,"options":{"fh":"800::800","order":2048,"key_ht":"800","bkt":"0","flowid":"1:2","not_in_hw":true,"match":{"value":"b80000","mask":"fc0000","offmask":"","off":0}}},{"parent":"1:","protocol":"ip","pref":3,"kind":"u32","chain":0,"options":{"fh":"802::800","order":2048,"key_ht":"802","bkt":"0","flowid":"1:2","not_in_hw":true,"match":{"value":"a000000","mask":"ff000000","offmask":"","off":16},"match":{"value":"110000","mask":"ff0000","offmask":"","off":8},"match":{"value":"5000000","mask":"f000000","offmask":"","off":0},"match":{"value":"0","mask":"1fff","offmask":"","off":4},"match":{"value":"1388","mask":"fff8","offmask":"","off":20}}}]"#;
        let imp = import_outputs("v0", q, c, f).unwrap();
        let p = linkshare_config::Policy::parse(&imp.toml, "x")
            .unwrap_or_else(|e| panic!("{e:?}\n{}", imp.toml));
        let names: Vec<&str> = p.classes().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["1:1", "1:2", "1:3"]);
        assert_eq!(p.default_class(), "1:3");
        assert_eq!(p.classes()[2].burst, 15 * 1024);
        assert_eq!(p.classes()[1].leaf.name(), "bfifo");
        assert_eq!(p.filters()[0].spec.dscp, Some(vec![46]));
        assert_eq!(p.filters()[1].spec.dst_port, Some((5000, 5007)));
        assert_eq!(p.filters()[1].spec.protocol, Some(17));
    }

    /// The root's size table as iproute2 6.1 prints it with `-d` (after `export tc` of a policy
    /// with `overhead = -4`, `mpu = 64`; and with `linklayer = "atm"`).
    #[test]
    fn size_table_of_the_root_is_read() {
        let q = "qdisc htb 1: root refcnt 3 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000\n";
        let c = "class htb 1:1 root prio 0 quantum 12500 rate 1Mbit ceil 1Mbit linklayer ethernet burst 1600b/1 mpu 0b cburst 1600b/1 mpu 0b level 0 \n";
        for (detail, want) in [
            (
                " linklayer ethernet overhead -4 mpu 64 mtu 2047 tsize 512 ",
                "overhead = -4\nmpu = 64\n",
            ),
            (
                " linklayer atm overhead 10 mtu 2047 tsize 512 ",
                "overhead = 10\nlinklayer = \"atm\"\n",
            ),
        ] {
            let merged = with_root_detail(q, &[detail]);
            let imp = import_outputs("v0", &merged, c, "[]").unwrap_or_else(|e| panic!("{e:?}"));
            assert!(imp.toml.contains(want), "{}", imp.toml);
            let p = linkshare_config::Policy::parse(&imp.toml, "x")
                .unwrap_or_else(|e| panic!("{e:?}\n{}", imp.toml));
            assert!(!p.link_layer().is_identity());
        }
    }
}
