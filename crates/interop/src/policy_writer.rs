//! The one place that writes a linkshare policy (docs/policy-format.md) for every importer.
//!
//! Principles:
//! * An importer describes *what* the policy says as a [`Draft`]: classes and filters with
//!   their keys, in the order the source had them, each key carrying the notes that explain
//!   where the source meant something linkshare does differently. This module decides *how*
//!   it is written: TOML with `# note:` comment lines directly above the line they concern, a
//!   `# from FILE:LINE` comment above each class and filter, values in tc's units as
//!   `linkshare check` prints them (re-read to be sure they parse back to the same number).
//! * Strings are escaped as TOML basic strings, so names taken from foreign files (LibreQoS
//!   circuit names, pf queue names) cannot break the file.

use std::fmt::Write as _;

use linkshare_core::units::{Duration, Rate, Size};

/// A value of a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Strs(Vec<String>),
    Ints(Vec<i64>),
    /// An inline table (`{ m1 = "400kbit", d = "30ms", m2 = "100kbit" }`); its fields' notes
    /// are not written.
    Table(Vec<Field>),
    /// An inline leaf table (`upload_leaf = { type = "cake", … }`).
    Leaf(Box<Leaf>),
}

/// `key = value`, with the notes written above it.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub key: String,
    pub val: Val,
    pub notes: Vec<String>,
}

impl Field {
    pub fn new(key: &str, val: Val) -> Field {
        Field {
            key: key.to_string(),
            val,
            notes: Vec::new(),
        }
    }
    pub fn str(key: &str, v: impl Into<String>) -> Field {
        Field::new(key, Val::Str(v.into()))
    }
    pub fn int(key: &str, v: i64) -> Field {
        Field::new(key, Val::Int(v))
    }
    pub fn bool(key: &str, v: bool) -> Field {
        Field::new(key, Val::Bool(v))
    }
    pub fn float(key: &str, v: f64) -> Field {
        Field::new(key, Val::Float(v))
    }
    /// A rate in bits per second, written in tc's units (`"10mbit"`, `"1234567bit"`).
    pub fn rate(key: &str, bits_per_sec: u64) -> Field {
        Field::str(key, rate_text(bits_per_sec))
    }
    /// A size in bytes (`"15k"`, `"1514b"`).
    pub fn size(key: &str, bytes: u64) -> Field {
        let s = Size(bytes).to_string();
        let s = if Size::parse(&s).ok() == Some(Size(bytes)) {
            s
        } else {
            format!("{bytes}b")
        };
        Field::str(key, s)
    }
    /// A time in nanoseconds (`"5ms"`).
    pub fn time(key: &str, ns: u64) -> Field {
        let s = Duration(ns).to_string();
        let s = if Duration::parse(&s).ok() == Some(Duration(ns)) {
            s
        } else {
            format!("{ns}ns")
        };
        Field::str(key, s)
    }
    /// An HFSC service curve: a linear one as its rate, else `{ m1 = …, d = …, m2 = … }`.
    pub fn curve(key: &str, sc: &linkshare_core::hfsc::ServiceCurve) -> Field {
        if sc.d == 0 {
            return Field::rate(key, sc.m2);
        }
        Field::new(
            key,
            Val::Table(vec![
                Field::rate("m1", sc.m1),
                Field::time("d", sc.d),
                Field::rate("m2", sc.m2),
            ]),
        )
    }
    pub fn note(mut self, n: impl Into<String>) -> Field {
        self.notes.push(n.into());
        self
    }
}

/// A rate in tc's units that reads back as exactly `bits_per_sec`.
pub fn rate_text(bits_per_sec: u64) -> String {
    let s = Rate(bits_per_sec).to_string();
    if Rate::parse(&s).ok() == Some(Rate(bits_per_sec)) {
        s
    } else {
        format!("{bits_per_sec}bit")
    }
}

/// A leaf discipline (`leaf = { type = …, … }`, or the root of a classless policy).
#[derive(Clone, Debug, PartialEq)]
pub struct Leaf {
    pub kind: String,
    pub fields: Vec<Field>,
    pub notes: Vec<String>,
}

impl Leaf {
    pub fn new(kind: &str) -> Leaf {
        Leaf {
            kind: kind.to_string(),
            fields: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// A `[[class]]`: `name` first, then the fields in order, then the leaf.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassDraft {
    pub name: String,
    /// Where it came from, e.g. `tc.sh:12` (written as `# from tc.sh:12`).
    pub source: Option<String>,
    pub fields: Vec<Field>,
    pub leaf: Option<Leaf>,
    pub notes: Vec<String>,
}

impl ClassDraft {
    pub fn new(name: &str, source: Option<String>) -> ClassDraft {
        ClassDraft {
            name: name.to_string(),
            source,
            fields: Vec::new(),
            leaf: None,
            notes: Vec::new(),
        }
    }
}

/// A `[[filter]]`: `class` first, then the match keys.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterDraft {
    pub class: String,
    pub source: Option<String>,
    pub fields: Vec<Field>,
    pub notes: Vec<String>,
}

/// The root scheduler.
#[derive(Clone, Debug, PartialEq)]
pub enum Root {
    Htb,
    Cbq,
    Hfsc,
    Leaf(Leaf),
}

/// A whole policy, in the order it will be written.
#[derive(Clone, Debug, PartialEq)]
pub struct Draft {
    /// Comment lines at the top (what was imported from where).
    pub title: Vec<String>,
    /// Notes about the whole file.
    pub notes: Vec<String>,
    pub root: Root,
    /// Top-level keys after `qdisc` (`default`, `r2q`, CBQ options).
    pub top: Vec<Field>,
    pub classes: Vec<ClassDraft>,
    /// `[[plan]]`s (a class's keys without `parent`), written after the classes.
    pub plans: Vec<ClassDraft>,
    pub filters: Vec<FilterDraft>,
}

impl Draft {
    pub fn new(root: Root) -> Draft {
        Draft {
            title: Vec::new(),
            notes: Vec::new(),
            root,
            top: Vec::new(),
            classes: Vec::new(),
            plans: Vec::new(),
            filters: Vec::new(),
        }
    }

    /// Every note in the draft, in file order (the CLI repeats them on stderr).
    pub fn all_notes(&self) -> Vec<String> {
        let mut v = self.notes.clone();
        let fields = |fs: &[Field], v: &mut Vec<String>| {
            for f in fs {
                v.extend(f.notes.iter().cloned());
            }
        };
        fields(&self.top, &mut v);
        if let Root::Leaf(l) = &self.root {
            v.extend(l.notes.iter().cloned());
            fields(&l.fields, &mut v);
        }
        for c in self.classes.iter().chain(&self.plans) {
            v.extend(c.notes.iter().cloned());
            fields(&c.fields, &mut v);
            if let Some(l) = &c.leaf {
                v.extend(l.notes.iter().cloned());
                fields(&l.fields, &mut v);
            }
        }
        for f in &self.filters {
            v.extend(f.notes.iter().cloned());
            fields(&f.fields, &mut v);
        }
        v
    }

    /// The policy as TOML text.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        for t in &self.title {
            let _ = writeln!(out, "# {}", one_line(t));
        }
        notes(&mut out, &self.notes);
        if !out.is_empty() {
            out.push('\n');
        }
        match &self.root {
            Root::Htb => out.push_str("qdisc = \"htb\"\n"),
            Root::Cbq => out.push_str("qdisc = \"cbq\"\n"),
            Root::Hfsc => out.push_str("qdisc = \"hfsc\"\n"),
            Root::Leaf(l) => {
                notes(&mut out, &l.notes);
                for f in &l.fields {
                    notes(&mut out, &f.notes);
                }
                let _ = writeln!(out, "qdisc = {}", inline_leaf(l));
            }
        }
        fields(&mut out, &self.top);
        let tables = self.classes.iter().map(|c| (c, "[[class]]\n"));
        for (c, header) in tables.chain(self.plans.iter().map(|p| (p, "[[plan]]\n"))) {
            out.push('\n');
            if let Some(s) = &c.source {
                let _ = writeln!(out, "# from {}", one_line(s));
            }
            notes(&mut out, &c.notes);
            out.push_str(header);
            let _ = writeln!(out, "name = {}", quote(&c.name));
            fields(&mut out, &c.fields);
            if let Some(l) = &c.leaf {
                notes(&mut out, &l.notes);
                for f in &l.fields {
                    notes(&mut out, &f.notes);
                }
                let _ = writeln!(out, "leaf = {}", inline_leaf(l));
            }
        }
        for f in &self.filters {
            out.push('\n');
            if let Some(s) = &f.source {
                let _ = writeln!(out, "# from {}", one_line(s));
            }
            notes(&mut out, &f.notes);
            out.push_str("[[filter]]\n");
            let _ = writeln!(out, "class = {}", quote(&f.class));
            fields(&mut out, &f.fields);
        }
        out
    }
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn notes(out: &mut String, notes: &[String]) {
    for n in notes {
        let _ = writeln!(out, "# note: {}", one_line(n));
    }
}

fn fields(out: &mut String, fs: &[Field]) {
    for f in fs {
        notes(out, &f.notes);
        let _ = writeln!(out, "{} = {}", f.key, value(&f.val));
    }
}

fn inline_leaf(l: &Leaf) -> String {
    let mut s = format!("{{ type = {}", quote(&l.kind));
    for f in &l.fields {
        let _ = write!(s, ", {} = {}", f.key, value(&f.val));
    }
    s.push_str(" }");
    s
}

fn value(v: &Val) -> String {
    match v {
        Val::Str(s) => quote(s),
        Val::Int(i) => i.to_string(),
        Val::Float(x) if x.is_finite() => {
            let s = format!("{x}");
            if s.contains(['.', 'e', 'E']) {
                s
            } else {
                format!("{s}.0")
            }
        }
        Val::Float(_) => "0.0".into(),
        Val::Bool(b) => b.to_string(),
        Val::Strs(v) => format!(
            "[{}]",
            v.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", ")
        ),
        Val::Leaf(l) => inline_leaf(l),
        Val::Ints(v) => format!(
            "[{}]",
            v.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Val::Table(fs) => format!(
            "{{ {} }}",
            fs.iter()
                .map(|f| format!("{} = {}", f.key, value(&f.val)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A TOML basic string.
pub fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(q, "\\u{:04x}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkshare_config::Policy;

    #[test]
    fn writes_a_policy_that_parses_with_notes_above_their_lines() {
        let mut d = Draft::new(Root::Htb);
        d.title.push("imported from x".into());
        d.top.push(Field::str("default", "b\"q"));
        let mut root = ClassDraft::new("root", Some("x:1".into()));
        root.fields.push(Field::rate("rate", 1_234_567));
        d.classes.push(root);
        let mut b = ClassDraft::new("b\"q", None);
        b.fields.push(Field::str("parent", "root"));
        b.fields
            .push(Field::rate("rate", 1_000_000).note("min 2M is not a guarantee here"));
        b.fields.push(Field::size("burst", 15 * 1024 + 1));
        let mut l = Leaf::new("fq_codel");
        l.fields.push(Field::time("target", 4_999_000));
        l.fields.push(Field::bool("ecn", false));
        b.leaf = Some(l);
        d.classes.push(b);
        d.filters.push(FilterDraft {
            class: "b\"q".into(),
            source: Some("x:3".into()),
            fields: vec![Field::new("dscp", Val::Ints(vec![46, 40]))],
            notes: vec!["two lines\nin one".into()],
        });
        let t = d.to_toml();
        let p = Policy::parse(&t, "w.toml").unwrap_or_else(|e| panic!("{t}\n{e:?}"));
        assert_eq!(p.classes()[0].rate.bits_per_sec(), 1_234_567);
        assert_eq!(p.classes()[1].burst, 15 * 1024 + 1);
        assert_eq!(p.filters()[0].spec.dscp, Some(vec![46, 40]));
        let lines: Vec<&str> = t.lines().collect();
        let i = lines
            .iter()
            .position(|l| l.starts_with("rate = \"1mbit\""))
            .unwrap();
        assert_eq!(lines[i - 1], "# note: min 2M is not a guarantee here");
        assert!(t.contains("# note: two lines in one"));
        assert_eq!(d.all_notes().len(), 2);
    }
}
