//! `linkshare class add|change|del`: the edit of a policy's `[[class]]` array, made with
//! `toml_edit` so comments, order and layout stay (the text sent to the shaper is the user's file
//! with one class changed, so its diagnostics' line numbers match it), the origin label of the
//! edited text, suggestions for a mistyped class name, and the write-back of `--write` (into
//! the subscriber table for a subscriber: class_csv.rs).

use anyhow::Context;

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, Value};

use crate::exit::invalid;

/// The arguments of `linkshare class add|change|del` (the command itself is in `router_cmds`).
#[derive(clap::Args, Debug)]
pub struct ClassArgs {
    /// add, change or del
    pub action: String,
    pub name: String,
    #[arg(long)]
    pub parent: Option<String>,
    #[arg(long)]
    pub rate: Option<String>,
    #[arg(long)]
    pub ceil: Option<String>,
    #[arg(long)]
    pub prio: Option<u8>,
    #[arg(long)]
    pub control: Option<PathBuf>,
    /// Also write the change into the policy file the shaper runs (comments and layout kept),
    /// so a later SIGHUP keeps it
    #[arg(long)]
    pub write: bool,
    /// Print the outcome as one JSON object: the reload report (`kept`, `added`, `removed`,
    /// `moved_packets`, …) or the shaper's error reply, and `written` (the file, or null)
    #[arg(long)]
    pub json: bool,
}

/// Apply `class add|change|del` to a policy's text; returns the edited text, identical to
/// `text` outside the class edited.
pub fn edit_policy_text(text: &str, a: &ClassArgs) -> anyhow::Result<String> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| invalid(format!("the policy is not TOML: {e}")))?;
    if doc.get("class").is_none() {
        doc["class"] = Item::ArrayOfTables(Default::default());
    }
    let Some(classes) = doc["class"].as_array_of_tables_mut() else {
        return Err(invalid(
            "`class` is not an array of tables ([[class]]): edit the file by hand",
        ));
    };
    let names: Vec<String> = classes
        .iter()
        .filter_map(|t| t.get("name").and_then(Item::as_str).map(str::to_string))
        .collect();
    let pos = names.iter().position(|n| *n == a.name);
    match (a.action.as_str(), pos) {
        ("add", Some(_)) => {
            return Err(invalid(format!(
                "class `{}` already exists; use `class change`",
                a.name
            )))
        }
        ("add", None) => {
            let mut t = Table::new();
            t["name"] = toml_edit::value(a.name.as_str());
            set_fields(&mut t, a);
            classes.push(t);
        }
        ("change", Some(i)) => match classes.get_mut(i) {
            Some(t) => set_fields(t, a),
            None => return Err(invalid(format!("class `{}` vanished", a.name))),
        },
        ("del", Some(i)) => classes.remove(i),
        ("change" | "del", None) => {
            let hint = suggest(&a.name, &names)
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            return Err(invalid(format!("no class named `{}`{hint}", a.name)));
        }
        (other, _) => {
            return Err(invalid(format!(
                "unknown action `{other}`: use add, change or del"
            )))
        }
    }
    Ok(doc.to_string())
}

/// Set the fields given on the command line, keeping each replaced value's comments and spacing.
fn set_fields(t: &mut Table, a: &ClassArgs) {
    if let Some(p) = &a.parent {
        set(t, "parent", Value::from(p.as_str()));
    }
    if let Some(r) = &a.rate {
        set(t, "rate", Value::from(r.as_str()));
    }
    if let Some(c) = &a.ceil {
        set(t, "ceil", Value::from(c.as_str()));
    }
    if let Some(p) = a.prio {
        set(t, "prio", Value::from(i64::from(p)));
    }
}

fn set(t: &mut Table, key: &str, mut v: Value) {
    if let Some(old) = t.get_mut(key).and_then(Item::as_value_mut) {
        *v.decor_mut() = old.decor().clone();
        *old = v;
    } else {
        t[key] = Item::Value(v);
    }
}

/// The closest of `names` to a mistyped `name`, if close enough to be what was meant
/// (Levenshtein distance at most 2, or a third of the name's length for long names).
pub fn suggest<'a>(name: &str, names: &'a [String]) -> Option<&'a str> {
    let limit = 2.max(name.chars().count() / 3);
    names
        .iter()
        .map(|n| (edit_distance(name, n), n))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n.as_str())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diag + usize::from(ca != *cb));
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The origin label of an edited policy: `<class change of FILE>`, naming the file once however
/// many changes were made (`origin` may already be such a label).
pub fn change_origin(origin: &str, path: Option<&str>) -> String {
    let base = origin
        .strip_prefix("<class change of ")
        .and_then(|s| s.strip_suffix('>'))
        .unwrap_or(origin);
    let base = match path {
        Some(p) if base.is_empty() || base.starts_with('<') => p,
        _ => base,
    };
    format!("<class change of {base}>")
}

/// Apply the same edit to the policy file `path` (its own text, comments kept) and replace it
/// atomically; a subscriber's new rates go into its row of the policy's subscriber table
/// instead (class_csv.rs). Returns the file written.
pub fn write_back(path: &Path, a: &ClassArgs) -> anyhow::Result<PathBuf> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    // A class added is a `[[class]]`; an existing one is one, or a subscriber.
    let in_classes = text
        .parse::<DocumentMut>()
        .ok()
        .filter(|_| a.action != "add")
        .and_then(|doc| table_of(&doc, &a.name));
    match in_classes {
        Some(None) | None => {
            replace_file(path, &edit_policy_text(&text, a)?)?;
            Ok(path.to_path_buf())
        }
        Some(Some(table)) => {
            if a.action != "change" || a.parent.is_some() || a.prio.is_some() {
                return Err(invalid(format!(
                    "`{}` is a subscriber of {table}: only its rate and ceil can be written                      there by `class change`; edit the row by hand",
                    a.name
                )));
            }
            let origin = path.display().to_string();
            let csv_path = linkshare_config::subscriber_table_path(&origin, &table);
            let file = csv_path.display().to_string();
            let csv = std::fs::read_to_string(&csv_path)
                .with_context(|| format!("cannot read {file}"))?;
            let edited = crate::class_csv::set_rates(
                &csv,
                &file,
                &a.name,
                a.rate.as_deref(),
                a.ceil.as_deref(),
            )?;
            replace_file(&csv_path, &edited)?;
            Ok(csv_path)
        }
    }
}

/// Where class `name` is written in a policy document: `None` as a `[[class]]` (or nowhere),
/// `Some(table)` when it is not a `[[class]]` and the policy takes subscribers from `table`.
fn table_of(doc: &DocumentMut, name: &str) -> Option<Option<String>> {
    let in_classes = doc
        .get("class")
        .and_then(Item::as_array_of_tables)
        .is_some_and(|a| {
            a.iter()
                .any(|t| t.get("name").and_then(Item::as_str) == Some(name))
        });
    if in_classes {
        return Some(None);
    }
    doc.get("subscribers")
        .and_then(Item::as_str)
        .map(|t| Some(t.to_string()))
}

/// Replace `path` with `text` atomically (a temporary file in the same directory, then
/// rename), keeping its permissions.
fn replace_file(path: &Path, edited: &str) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".linkshare-{}.tmp", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, edited).with_context(|| format!("cannot write {}", tmp.display()))?;
    if let Ok(m) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, m.permissions());
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("cannot replace {}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"# Our uplink.
qdisc = "htb"
default = "bulk"

[[class]]
name = "root"
rate = "10mbit"   # the link

# Voice first.
[[class]]
name = "voice"
parent = "root"
rate = "2mbit"
prio = 0

[[class]]
name = "bulk"
parent = "root"
rate = "8mbit"
"#;

    fn args(action: &str, name: &str, rate: Option<&str>) -> ClassArgs {
        ClassArgs {
            action: action.into(),
            name: name.into(),
            parent: Some("root".into()).filter(|_| action == "add"),
            rate: rate.map(str::to_string),
            ceil: None,
            prio: None,
            control: None,
            write: false,
            json: false,
        }
    }

    #[test]
    fn a_change_keeps_comments_and_layout() {
        let out = edit_policy_text(FILE, &args("change", "voice", Some("3mbit"))).expect("edit");
        let want = FILE.replace("rate = \"2mbit\"", "rate = \"3mbit\"");
        assert_eq!(out, want);
    }

    #[test]
    fn add_and_del_keep_the_rest_of_the_file() {
        let out = edit_policy_text(FILE, &args("add", "video", Some("1mbit"))).expect("add");
        assert!(out.starts_with(FILE), "{out}");
        assert!(out.contains("name = \"video\""), "{out}");
        let out = edit_policy_text(FILE, &args("del", "voice", None)).expect("del");
        assert!(
            out.contains("# Our uplink.") && out.contains("# the link"),
            "{out}"
        );
        assert!(!out.contains("\"voice\""), "{out}");
    }

    #[test]
    fn an_unknown_class_gets_a_suggestion() {
        let e = edit_policy_text(FILE, &args("change", "vocie", Some("1mbit")))
            .expect_err("unknown class");
        let msg = format!("{e:#}");
        assert!(msg.contains("did you mean `voice`"), "{msg}");
        let e = edit_policy_text(FILE, &args("del", "zzzzzzzz", None)).expect_err("unknown");
        assert!(!format!("{e:#}").contains("did you mean"), "{e:#}");
    }

    #[test]
    fn the_origin_names_the_file_once_however_many_changes() {
        let once = change_origin("p.toml", Some("p.toml"));
        assert_eq!(once, "<class change of p.toml>");
        assert_eq!(change_origin(&once, None), once);
        assert_eq!(change_origin(&once, Some("p.toml")), once);
    }

    #[test]
    fn diagnostics_point_at_the_text_that_was_checked() {
        let edited = edit_policy_text(FILE, &args("change", "voice", Some("lots"))).expect("edit");
        let origin = change_origin("p.toml", Some("p.toml"));
        let Err(d) = linkshare_router::load_sched(&edited, &origin) else {
            panic!("`lots` accepted as a rate");
        };
        let line = edited
            .lines()
            .position(|l| l.contains("lots"))
            .map(|i| i + 1)
            .expect("edited line");
        assert!(d.contains(&format!("{origin}:{line}:")), "{d}");
        // The line echoed is the edited one, and it is where the file has it.
        assert_eq!(FILE.lines().nth(line - 1), Some("rate = \"2mbit\""), "{d}");
    }

    #[test]
    fn write_back_replaces_the_file_keeping_comments() {
        let dir = std::env::temp_dir().join(format!("lsclass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("p.toml");
        std::fs::write(&p, FILE).expect("write");
        let w = write_back(&p, &args("change", "bulk", Some("7mbit"))).expect("write back");
        assert_eq!(w, p);
        let now = std::fs::read_to_string(&p).expect("read");
        assert_eq!(now, FILE.replace("rate = \"8mbit\"", "rate = \"7mbit\""));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A subscriber's change is written into its row of the table; the policy stays.
    #[test]
    fn a_subscribers_change_is_written_into_its_row() {
        let dir = std::env::temp_dir().join(format!("lsclass-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("p.toml");
        let policy = "qdisc = \"htb\"\ndefault = \"other\"\nsubscribers = \"subs.csv\"\n\
            [[class]]\nname = \"root\"\nrate = \"100mbit\"\n\
            [[class]]\nname = \"other\"\nparent = \"root\"\nrate = \"1mbit\"\n\
            [[plan]]\nname = \"basic\"\nrate = \"2mbit\"\nceil = \"20mbit\"\n";
        let table =
            "name,parent,plan,addresses\nalice,root,basic,10.0.0.1\nbob,root,basic,10.0.0.2\n";
        std::fs::write(&p, policy).expect("write");
        std::fs::write(dir.join("subs.csv"), table).expect("write");
        let w = write_back(&p, &args("change", "bob", Some("3mbit"))).expect("write back");
        assert_eq!(w, dir.join("subs.csv"));
        assert_eq!(std::fs::read_to_string(&p).expect("read"), policy);
        let csv = std::fs::read_to_string(&w).expect("read");
        assert_eq!(
            csv,
            "name,parent,plan,addresses,rate\nalice,root,basic,10.0.0.1,\n\
             bob,root,basic,10.0.0.2,3mbit\n"
        );
        // The policy with the edited table reads, bob at 3 Mbit/s under his plan's ceil.
        let pol = linkshare_config::Policy::load(&p).expect("valid");
        let bob = pol.class_id("bob").expect("bob") as usize;
        assert_eq!(pol.classes()[bob].rate.bits_per_sec(), 3_000_000);
        assert_eq!(pol.classes()[bob].ceil.bits_per_sec(), 20_000_000);
        let e = write_back(&p, &args("del", "bob", None)).unwrap_err();
        assert!(format!("{e:#}").contains("edit the row by hand"), "{e:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
