//! Import: tc's configuration (a `tc -batch` script, a shell script of `tc` commands, or what
//! `tc … show` prints for a live device) → a linkshare policy.
//!
//! Follows tc(8) for the command syntax (`qdisc|class|filter add|replace|change dev DEV
//! parent|root|handle|classid …`), tc-htb(8) for classes, tc-u32(8) and tc-flower(8) for
//! filters (decoded in `filter.rs`), and each leaf's page (in `leaf.rs`).
//!
//! What maps and how:
//! - An HTB root with its classes becomes `qdisc = "htb"`; `r2q` and `default` carry over (the
//!   default minor is hex, as tc reads it). Each class keeps `rate`, `ceil`, `burst`, `cburst`,
//!   `prio`, `quantum`; it is named by the comment after its line when there is one (what
//!   `export tc` writes), otherwise by its class id (`"1:10"`). A qdisc attached to a leaf
//!   class becomes its `leaf`.
//! - An HFSC root (tc-hfsc(8)) becomes `qdisc = "hfsc"` with its `default`; each class's `rt`,
//!   `ls`, `ul` and `sc` curves become its `rt`, `ls` and `ul` (`hfsc_in.rs`); leaves, names
//!   and filters as for HTB.
//! - A classless root (`root sfq`, `root tbf …`) becomes that discipline at the root.
//! - The root's size table (`stab overhead N mpu M linklayer atm`) becomes the policy's
//!   `overhead`, `mpu` and `linklayer` (`stab.rs`); a size table below the root is refused.
//! - Filters attached to the root qdisc become `[[filter]]`s in tc's order: `prio` ascending,
//!   then the order they were added; adjacent rules that `export tc` expanded are merged back.
//! - `qdisc del dev DEV root` starts over (scripts begin with it); commands for other devices
//!   are left out with a note, the first device named is the one imported.
//!
//! Refused, with the line: other classful roots (cbq, drr, prio with filters), classes
//! whose parent does not exist, filters pointing at missing classes, unknown keywords.

use std::collections::{BTreeMap, HashMap};

use crate::diag::{Diag, ImportError};
use crate::policy_writer::{ClassDraft, Draft, Field, FilterDraft, Root};
use crate::tc::filter::{self, class_ref, ClassRef, Rule};
use crate::tc::hashed_in::{self, HashedDef};
use crate::tc::hfsc_in;
use crate::tc::leaf;
use crate::tc::lex::{self, Cmd, Line};
use crate::Imported;

/// A qdisc as configured.
#[derive(Clone, Debug)]
pub struct QdiscDef {
    pub line: usize,
    /// Major number of its handle (`1:` → 1).
    pub handle: Option<u32>,
    /// `None` at the root, else the class it is attached to.
    pub parent: Option<ClassRef>,
    pub kind: String,
    pub opts: Vec<String>,
}

/// A class as configured.
#[derive(Clone, Debug)]
pub struct ClassDef {
    pub line: usize,
    pub id: ClassRef,
    pub parent: ClassRef,
    pub kind: String,
    pub opts: Vec<String>,
    pub name: Option<String>,
}

/// A filter as configured (already decoded).
#[derive(Clone, Debug)]
pub enum FilterDef {
    Rule(Rule),
    /// A u32 hash table, a rule in one of its buckets, or a link to it (`hashed_in.rs`).
    Hashed(HashedDef),
    /// Left out, with the reason (a note in the output).
    Skipped(usize, String),
}

/// tc's configuration of one device, whichever form it came in.
#[derive(Clone, Debug, Default)]
pub struct TcConf {
    pub dev: Option<String>,
    pub root: Option<QdiscDef>,
    pub qdiscs: Vec<QdiscDef>,
    pub classes: Vec<ClassDef>,
    pub filters: Vec<FilterDef>,
    pub notes: Vec<String>,
    /// The root qdisc's size table (`stab …`) as a link layer.
    pub stab: linkshare_core::linklayer::LinkLayer,
}

/// Import a tc script (batch or shell form). `dev` picks a device when the script configures
/// several.
pub fn import_script(text: &str, file: &str, dev: Option<&str>) -> Result<Imported, ImportError> {
    let conf = parse_script(text, file, dev)?;
    build(&conf, file, &format!("linkshare import tc {file}"))
}

/// Parse a script into its configuration; every bad line is reported.
pub fn parse_script(text: &str, file: &str, dev: Option<&str>) -> Result<TcConf, ImportError> {
    let lines = lex::lex(text, file)?;
    let mut conf = TcConf {
        dev: dev.map(String::from),
        ..TcConf::default()
    };
    let mut errors = Vec::new();
    let mut others = Vec::new();
    for l in lines {
        match l {
            Line::Tc(cmd) => {
                if let Err(e) = command(&mut conf, &cmd, file) {
                    errors.push(e);
                }
            }
            Line::Other(n, w) => others.push(format!("{n} ({w})")),
        }
    }
    if !others.is_empty() {
        conf.notes.push(format!(
            "lines that are not tc commands were ignored: {}",
            others.join(", ")
        ));
    }
    if errors.is_empty() {
        Ok(conf)
    } else {
        Err(ImportError { errors })
    }
}

fn bad(file: &str, line: usize, m: impl Into<String>) -> Diag {
    Diag::new(file, line, m)
}

/// One command into `conf`.
fn command(conf: &mut TcConf, cmd: &Cmd, file: &str) -> Result<(), Diag> {
    let w = &cmd.words;
    let line = cmd.line;
    let Some(object) = w.first() else {
        return Ok(());
    };
    let verb = w.get(1).map(String::as_str).unwrap_or("");
    if matches!(verb, "show" | "list" | "ls" | "get") {
        return Ok(());
    }
    if !matches!(verb, "add" | "replace" | "change" | "del" | "delete") {
        return Err(
            bad(file, line, format!("unknown tc command `{object} {verb}`")).help(
                "linkshare imports `qdisc`, `class` and `filter` with add, replace, change or del",
            ),
        );
    }
    // Common words: dev, parent/root, handle/classid, then the kind.
    let mut dev = None;
    let mut parent: Option<Option<ClassRef>> = None;
    let mut handle = None;
    let mut classid = None;
    let mut protocol = None;
    let mut prio = None;
    let mut stab = None;
    let mut i = 2;
    let need = |i: usize| -> Result<&String, Diag> {
        w.get(i + 1)
            .ok_or_else(|| bad(file, line, format!("`{}` needs a value", w[i])))
    };
    let cref =
        |s: &str| class_ref(s).ok_or_else(|| bad(file, line, format!("`{s}` is not a tc handle")));
    while i < w.len() {
        match w[i].as_str() {
            "dev" => dev = Some(need(i)?.clone()),
            "root" => {
                parent = Some(None);
                i += 1;
                continue;
            }
            "ingress" | "clsact" => {
                conf.notes.push(format!(
                    "line {line}: the {} qdisc is for incoming traffic and was left out",
                    w[i]
                ));
                return Ok(());
            }
            "parent" => parent = Some(Some(cref(need(i)?)?)),
            "handle" => handle = Some(need(i)?.clone()),
            "classid" if object == "class" => classid = Some(cref(need(i)?)?),
            "protocol" if object == "filter" => protocol = Some(need(i)?.clone()),
            "prio" | "pref" | "priority" if object == "filter" => {
                let p = need(i)?;
                prio = Some(
                    filter::tc_number(p)
                        .filter(|v| *v <= 0xffff)
                        .ok_or_else(|| bad(file, line, format!("`{p}` is not a filter priority")))?
                        as u32,
                );
            }
            "chain" => {
                let c = need(i)?;
                if c != "0" {
                    return Err(bad(
                        file,
                        line,
                        "filter chains other than 0 are not imported",
                    ));
                }
            }
            "estimator" => {
                i += 3;
                continue;
            }
            "stab" if object == "qdisc" => {
                let (link, next) = crate::tc::stab::parse(w, i).map_err(|m| bad(file, line, m))?;
                stab = Some(link);
                i = next;
                continue;
            }
            _ => break,
        }
        i += 2;
    }
    if let (Some(d), Some(want)) = (&dev, &conf.dev) {
        if d != want {
            if !conf
                .notes
                .iter()
                .any(|n| n.contains(&format!("device {d} ")))
            {
                conf.notes.push(format!(
                    "commands for device {d} were left out (importing {want})"
                ));
            }
            return Ok(());
        }
    } else if let Some(d) = &dev {
        conf.dev = Some(d.clone());
    }
    let rest: Vec<String> = w[i.min(w.len())..].to_vec();
    let kind = rest.first().cloned().unwrap_or_default();
    let opts: Vec<String> = rest.iter().skip(1).cloned().collect();
    match (object.as_str(), verb) {
        ("qdisc", "del" | "delete") => {
            if parent == Some(None) {
                *conf = TcConf {
                    dev: conf.dev.clone(),
                    notes: std::mem::take(&mut conf.notes),
                    ..TcConf::default()
                };
                Ok(())
            } else {
                Err(bad(
                    file,
                    line,
                    "deleting a qdisc below the root is not imported",
                )
                .help("import the final configuration (`linkshare import tc --dev DEV`)"))
            }
        }
        (_, "del" | "delete") => {
            Err(
                bad(file, line, format!("deleting a {object} is not imported"))
                    .help("import the final configuration (`linkshare import tc --dev DEV`)"),
            )
        }
        ("qdisc", _) => {
            if kind.is_empty() {
                return Err(bad(file, line, "the qdisc has no kind (htb, sfq, …)"));
            }
            let Some(parent) = parent else {
                return Err(bad(file, line, "the qdisc has neither `root` nor `parent`"));
            };
            let major = match &handle {
                Some(h) => Some(cref(h)?.0),
                None => None,
            };
            let q = QdiscDef {
                line,
                handle: major,
                parent,
                kind,
                opts,
            };
            match (parent, stab) {
                (None, link) => {
                    conf.root = Some(q);
                    conf.stab = link.unwrap_or_default();
                }
                (Some(_), Some(_)) => {
                    return Err(bad(file, line, "a size table (`stab`) below the root is not imported")
                        .help("linkshare's `overhead`, `mpu` and `linklayer` apply to the whole policy: put the stab on the root qdisc"));
                }
                (Some(p), None) => {
                    conf.qdiscs.retain(|x| x.parent != Some(p));
                    conf.qdiscs.push(q);
                }
            }
            Ok(())
        }
        ("class", _) => {
            let Some(id) = classid else {
                return Err(bad(file, line, "the class has no `classid`"));
            };
            let Some(Some(parent)) = parent else {
                return Err(bad(file, line, "the class has no `parent`"));
            };
            if kind.is_empty() {
                return Err(bad(file, line, "the class has no kind (htb)"));
            }
            let name = cmd
                .comment
                .clone()
                .filter(|c| !c.is_empty() && c.len() <= 200);
            let c = ClassDef {
                line,
                id,
                parent,
                kind,
                opts,
                name,
            };
            if let Some(old) = conf.classes.iter_mut().find(|x| x.id == id) {
                if verb == "change" {
                    let mut merged = old.opts.clone();
                    merged.extend(c.opts);
                    old.opts = merged;
                } else {
                    *old = c;
                }
            } else {
                conf.classes.push(c);
            }
            Ok(())
        }
        ("filter", _) => {
            let fam = match protocol.as_deref() {
                Some("ip") => Some(false),
                Some("ipv6") => Some(true),
                Some("all") | None => None,
                Some(other) => {
                    conf.filters.push(FilterDef::Skipped(
                        line,
                        format!("protocol {other}: linkshare classifies IP packets only"),
                    ));
                    return Ok(());
                }
            };
            if parent.flatten().is_some_and(|p| p.1 != 0) {
                return Err(bad(file, line, "filters attached to a class are not imported").help("attach filters to the root qdisc (`parent 1:`), as linkshare's filters are one list"));
            }
            let prio = prio.unwrap_or(0xffff);
            let rule = match kind.as_str() {
                "u32" => {
                    let v6 = fam.unwrap_or(false);
                    let u = filter::parse_u32(&opts, v6).map_err(|e| bad(file, line, e))?;
                    let table = match &handle {
                        Some(h) => Some(cref(h)?.0),
                        None => None,
                    };
                    if let Some(kind) =
                        hashed_in::classify(&u, table).map_err(|e| bad(file, line, e))?
                    {
                        let qdisc = parent.flatten().map(|p| p.0).unwrap_or(0);
                        conf.filters.push(FilterDef::Hashed(HashedDef {
                            line,
                            prio,
                            qdisc,
                            v6,
                            kind,
                        }));
                        return Ok(());
                    }
                    filter::rule_of(&u.img, u.flowid, v6, line, file, prio)?.map(|mut r| {
                        if fam.is_none() {
                            if r.m
                                == (filter::Match {
                                    v6: Some(false),
                                    ..Default::default()
                                })
                            {
                                r.m.v6 = None;
                            } else {
                                r.notes.push(
                                    "`protocol all` with matches: read as IPv4 headers".into(),
                                );
                            }
                        }
                        r
                    })
                }
                "flower" => {
                    let (m, flowid) = filter::parse_flower(&opts, fam.unwrap_or(false))
                        .map_err(|e| bad(file, line, e))?;
                    let flowid = flowid
                        .ok_or_else(|| bad(file, line, "the flower filter has no `classid`"))?;
                    Some(Rule {
                        line,
                        prio,
                        flowid,
                        m,
                        notes: Vec::new(),
                    })
                }
                "matchall" => {
                    let f = opts
                        .iter()
                        .position(|o| o == "classid" || o == "flowid")
                        .and_then(|k| opts.get(k + 1))
                        .and_then(|s| class_ref(s));
                    let flowid =
                        f.ok_or_else(|| bad(file, line, "the matchall filter has no `classid`"))?;
                    Some(Rule {
                        line,
                        prio,
                        flowid,
                        m: filter::Match {
                            v6: fam,
                            ..Default::default()
                        },
                        notes: Vec::new(),
                    })
                }
                other => {
                    return Err(
                        bad(file, line, format!("filter kind `{other}` is not imported"))
                            .help("linkshare imports u32, flower and matchall filters"),
                    )
                }
            };
            match rule {
                Some(r) => conf.filters.push(FilterDef::Rule(r)),
                None => conf.filters.push(FilterDef::Skipped(
                    line,
                    "its matches contradict each other: it matches nothing".into(),
                )),
            }
            Ok(())
        }
        _ => Err(bad(file, line, format!("unknown tc object `{object}`"))
            .help("linkshare imports qdisc, class and filter commands")),
    }
}

/// HTB class options → fields; notes for what linkshare lacks.
fn htb_fields(c: &ClassDef, file: &str) -> Result<(Vec<Field>, Vec<String>), Diag> {
    let mut f = Vec::new();
    let mut notes = Vec::new();
    let o = &c.opts;
    let mut i = 0;
    let err = |m: String| bad(file, c.line, m);
    let val = |i: usize| {
        o.get(i + 1)
            .map(String::as_str)
            .ok_or_else(|| err(format!("htb: `{}` needs a value", o[i])))
    };
    let size = |s: &str| {
        linkshare_core::units::Size::parse(s.split('/').next().unwrap_or(s))
            .map(|z| z.bytes())
            .map_err(|e| err(format!("htb: `{s}`: {e}")))
    };
    let rate = |s: &str| {
        linkshare_core::units::Rate::parse(s)
            .map(|r| r.bits_per_sec())
            .map_err(|e| err(format!("htb: `{s}`: {e}")))
    };
    let (mut r, mut ce, mut b, mut cb, mut p, mut q) = (None, None, None, None, None, None);
    while i < o.len() {
        let k = o[i].as_str();
        let mut used = 2;
        match k {
            "rate" => r = Some(rate(val(i)?)?),
            "ceil" => ce = Some(rate(val(i)?)?),
            "burst" | "buffer" | "maxburst" => b = Some(size(val(i)?)?),
            "cburst" | "cbuffer" | "cmaxburst" => cb = Some(size(val(i)?)?),
            "prio" => {
                p = Some(
                    val(i)?
                        .parse::<u8>()
                        .map_err(|_| err("htb: prio is 0-7".into()))?,
                )
            }
            "quantum" => q = Some(size(val(i)?)?),
            // What `tc class show` prints for the defaults.
            "linklayer" if val(i)? == "ethernet" => {}
            "mpu" if matches!(val(i)?, "0" | "0b") => {}
            "overhead" if val(i)? == "0" => {}
            "mtu" | "mpu" | "overhead" | "linklayer" => notes.push(format!(
                "htb `{k} {}` is not imported: linkshare has no per-class link-layer options",
                val(i)?
            )),
            // What `tc class show` prints besides the options.
            "leaf" | "level" => {}
            "root" => used = 1,
            "parent" => {}
            "offload" => used = 1,
            other => {
                return Err(err(format!("htb: unknown class option `{other}`"))
                    .help("tc-htb(8) class options: rate, ceil, burst, cburst, prio, quantum"))
            }
        }
        i += used;
    }
    let Some(r) = r else {
        return Err(err("htb: the class has no `rate`".into())
            .help("tc-htb(8) requires a rate on every class"));
    };
    f.push(Field::rate("rate", r));
    if let Some(ce) = ce {
        f.push(Field::rate("ceil", ce));
    }
    if let Some(b) = b {
        f.push(Field::size("burst", b));
    }
    if let Some(cb) = cb {
        f.push(Field::size("cburst", cb));
    }
    if let Some(p) = p {
        f.push(Field::int("prio", i64::from(p)));
    }
    if let Some(q) = q {
        f.push(Field::size("quantum", q));
    }
    Ok((f, notes))
}

/// Build the draft (and its TOML) from a configuration.
pub fn build(conf: &TcConf, file: &str, title: &str) -> Result<Imported, ImportError> {
    let Some(root) = &conf.root else {
        return Err(Diag::new(file, 0, "no root qdisc: nothing to import")
            .help("the script needs `qdisc add dev DEV root …` (for example `root handle 1: htb default 10`)")
            .into());
    };
    let mut d = match root.kind.as_str() {
        "htb" | "mq" => Draft::new(Root::Htb),
        "hfsc" => Draft::new(Root::Hfsc),
        "cbq" => {
            return Err(bad(
                file,
                root.line,
                "the kernel's cbq (removed in Linux 6.3) is not imported",
            )
            .help("write the tree as htb")
            .into())
        }
        kind => {
            let l = leaf::leaf(kind, &root.opts).map_err(|e| bad(file, root.line, e))?;
            let mut d = Draft::new(Root::Leaf(l));
            d.top.extend(crate::tc::stab::fields(conf.stab));
            if !conf.classes.is_empty()
                || conf.filters.iter().any(|f| matches!(f, FilterDef::Rule(_)))
            {
                d.notes.push(format!("the {kind} root's classes and filters were left out: linkshare's {kind} has none"));
            }
            d.title.push(title.to_string());
            if let Some(dev) = &conf.dev {
                d.title.push(format!("device {dev}"));
            }
            d.notes.extend(conf.notes.iter().cloned());
            return Ok(Imported {
                toml: d.to_toml(),
                warnings: Vec::new(),
            });
        }
    };
    d.title.push(title.to_string());
    if let Some(dev) = &conf.dev {
        d.title.push(format!("device {dev}"));
    }
    d.notes.extend(conf.notes.iter().cloned());
    d.top.extend(crate::tc::stab::fields(conf.stab));
    let mut errors = Vec::new();
    // The HTBs: the root, or one per transmit queue under `mq` (what `export tc` writes for
    // trees larger than one HTB can number); their classes become one tree.
    let htbs: Vec<&QdiscDef> = if root.kind == "mq" {
        let mq = root.handle.unwrap_or(0);
        let under: Vec<&QdiscDef> = conf
            .qdiscs
            .iter()
            .filter(|q| q.parent.is_some_and(|p| p.0 == mq))
            .collect();
        if let Some(q) = under.iter().find(|q| q.kind != "htb") {
            return Err(bad(
                file,
                q.line,
                format!(
                    "a `{}` under mq: linkshare imports mq with one htb per queue",
                    q.kind
                ),
            )
            .into());
        }
        if under.is_empty() {
            return Err(bad(
                file,
                root.line,
                "mq without an htb under any queue: nothing to import",
            )
            .into());
        }
        under
    } else {
        vec![root]
    };
    let majors: std::collections::HashSet<u32> =
        htbs.iter().map(|q| q.handle.unwrap_or(1)).collect();
    let mut major = htbs[0].handle.unwrap_or(1);
    // Names: the comment, else the class id; unique.
    let mut names: HashMap<ClassRef, String> = HashMap::new();
    let mut used: HashMap<String, usize> = HashMap::new();
    for c in &conf.classes {
        let id = format!("{:x}:{:x}", c.id.0, c.id.1);
        let mut n = c.name.clone().unwrap_or_else(|| id.clone());
        if used.contains_key(&n) {
            n = format!("{n} ({id})");
        }
        used.insert(n.clone(), c.line);
        names.insert(c.id, n);
    }
    let is_parent: std::collections::HashSet<ClassRef> =
        conf.classes.iter().map(|c| c.parent).collect();
    let mut r2q = None;
    let mut default = None;
    for q in &htbs {
        let mut o = q.opts.iter();
        while let Some(k) = o.next() {
            match k.as_str() {
                "default" if default.is_none() => {
                    default = o
                        .next()
                        .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok());
                    major = q.handle.unwrap_or(1);
                }
                "r2q" if root.kind != "hfsc" => r2q = o.next().and_then(|v| v.parse::<u32>().ok()),
                "direct_qlen" | "direct_packets_stat" | "ver" => {
                    o.next();
                }
                "offload" if root.kind != "hfsc" => {}
                other => errors.push(
                    bad(
                        file,
                        root.line,
                        format!("{}: unknown qdisc option `{other}`", root.kind),
                    )
                    .help(if root.kind == "hfsc" {
                        "tc-hfsc(8) qdisc options: default"
                    } else {
                        "tc-htb(8) qdisc options: default, r2q, direct_qlen"
                    }),
                ),
            }
        }
    }
    let class_kind = if root.kind == "hfsc" { "hfsc" } else { "htb" };
    for c in &conf.classes {
        if c.kind != class_kind {
            errors.push(bad(
                file,
                c.line,
                format!("class kind `{}` under an {class_kind} root", c.kind),
            ));
            continue;
        }
        if !majors.contains(&c.id.0) {
            errors.push(bad(
                file,
                c.line,
                format!(
                    "class {:x}:{:x} is not under the root qdisc {:x}:",
                    c.id.0,
                    c.id.1,
                    htbs[0].handle.unwrap_or(1)
                ),
            ));
            continue;
        }
        let parent = if c.parent.1 == 0 && majors.contains(&c.parent.0) {
            None
        } else if let Some(p) = names.get(&c.parent) {
            Some(p.clone())
        } else {
            errors.push(
                bad(
                    file,
                    c.line,
                    format!(
                        "class {:x}:{:x}: its parent {:x}:{:x} does not exist",
                        c.id.0, c.id.1, c.parent.0, c.parent.1
                    ),
                )
                .help("create the parent class first, or attach the class to the root qdisc"),
            );
            continue;
        };
        let mut cd = ClassDraft::new(
            &names[&c.id],
            Some(format!(
                "{file}:{} (class {:x}:{:x})",
                c.line, c.id.0, c.id.1
            )),
        );
        if let Some(p) = parent {
            cd.fields.push(Field::str("parent", p));
        }
        let fields = if class_kind == "hfsc" {
            hfsc_in::class_fields(&c.opts, is_parent.contains(&c.id))
                .map_err(|m| bad(file, c.line, m))
        } else {
            htb_fields(c, file)
        };
        match fields {
            Ok((f, n)) => {
                cd.fields.extend(f);
                cd.notes.extend(n);
            }
            Err(e) => {
                errors.push(e);
                continue;
            }
        }
        let q = conf.qdiscs.iter().find(|q| q.parent == Some(c.id));
        if let Some(q) = q {
            if is_parent.contains(&c.id) {
                cd.notes.push(format!(
                    "the {} qdisc at line {} on this inner class was left out: only leaves queue",
                    q.kind, q.line
                ));
            } else {
                match leaf::leaf(&q.kind, &q.opts) {
                    Ok(l) => cd.leaf = Some(l),
                    Err(e) => errors.push(bad(file, q.line, e)),
                }
            }
        }
        d.classes.push(cd);
    }
    for q in &conf.qdiscs {
        if let Some(p) = q.parent {
            if !names.contains_key(&p) && !htbs.iter().any(|h| std::ptr::eq(*h, q)) {
                errors.push(bad(
                    file,
                    q.line,
                    format!(
                        "qdisc attached to class {:x}:{:x}, which does not exist",
                        p.0, p.1
                    ),
                ));
            }
        }
    }
    let leaves: Vec<&ClassDef> = conf
        .classes
        .iter()
        .filter(|c| !is_parent.contains(&c.id))
        .collect();
    let default_name = match default
        .map(|m| (major, m))
        .filter(|id| names.contains_key(id) && !is_parent.contains(id))
    {
        Some(id) => names[&id].clone(),
        None => match leaves.last() {
            Some(c) => {
                d.notes.push(format!(
                    "tc's htb default {} is not a leaf class: unclassified packets bypass HTB in the kernel; linkshare needs a default class, `{}` (the last leaf) was chosen",
                    default.map(|x| format!("{x:x}")).unwrap_or_else(|| "0".into()),
                    names[&c.id]
                ));
                names[&c.id].clone()
            }
            None => {
                errors.push(
                    Diag::new(file, root.line, "the htb root has no classes")
                        .help("add `class add dev DEV parent 1: classid 1:1 htb rate …`"),
                );
                String::new()
            }
        },
    };
    d.top.push(Field::str("default", default_name));
    if let Some(r) = r2q {
        d.top.push(Field::int("r2q", i64::from(r)));
    }
    // Filters in tc's order: prio ascending, then as added.
    // Under mq each HTB has its own list: its filters stay together, in the HTBs' order.
    let mut by_prio: BTreeMap<(u32, u32), Vec<Rule>> = BTreeMap::new();
    let flat = match hashed_in::flatten(conf.filters.clone(), file) {
        Ok(f) => f,
        Err(e) => {
            errors.extend(e);
            Vec::new()
        }
    };
    for f in &flat {
        match f {
            FilterDef::Rule(r) => by_prio
                .entry((if htbs.len() > 1 { r.flowid.0 } else { 0 }, r.prio))
                .or_default()
                .push(r.clone()),
            FilterDef::Hashed(_) => {}
            FilterDef::Skipped(line, why) => d
                .notes
                .push(format!("filter at line {line} was left out: {why}")),
        }
    }
    let rules: Vec<Rule> = by_prio.into_values().flatten().collect();
    for r in filter::merge(rules) {
        let Some(class) = names.get(&r.flowid) else {
            errors.push(bad(
                file,
                r.line,
                format!(
                    "the filter sends packets to class {:x}:{:x}, which does not exist",
                    r.flowid.0, r.flowid.1
                ),
            ));
            continue;
        };
        if is_parent.contains(&r.flowid) {
            errors.push(
                bad(
                    file,
                    r.line,
                    format!("the filter sends packets to class {class}, which has children"),
                )
                .help("linkshare's filters name leaf classes"),
            );
            continue;
        }
        let (fields, mut notes) = filter::fields(&r.m);
        notes.extend(r.notes.iter().cloned());
        d.filters.push(FilterDraft {
            class: class.clone(),
            source: Some(format!("{file}:{} (prio {})", r.line, r.prio)),
            fields,
            notes,
        });
    }
    if errors.is_empty() {
        Ok(Imported {
            toml: d.to_toml(),
            warnings: Vec::new(),
        })
    } else {
        Err(ImportError { errors })
    }
}
