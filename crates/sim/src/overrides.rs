//! Overrides: keys of a scenario document set by dotted path before it is checked.
//!
//! One mechanism serves three callers: the axes of a `[sweep]` (`crate::sweep`), `linkshare sim
//! --set key=value` / `--seed N`, and the Python package's `overrides=` and sweep grids. A key is
//! a dotted path into the document; where the path meets an array of tables (`flow`,
//! `policy.class`) the next part is the `name` of the element, so `flow.in.size` is the `size` of
//! the `[[flow]]` named `in`. Setting `None` removes the key, so its default applies (a sweep's
//! `"default"`).
//!
//! Principle: an edited document is checked from scratch like a file, by the scenario's own
//! checks; an edit only says where it was made, never what a value may be.

use std::path::Path;

use crate::scenario::{Scenario, ScenarioError};

/// One edit: a dotted key and its new value (`None` removes the key).
pub type Override = (String, Option<toml::Value>);

/// `key=value` from a command line: the value is read as a TOML value (`64`, `1.5`, `true`,
/// `"x"`, `[1, 2]`) and, when it is not one, taken as a string (`10mbit`, `pfifo`).
pub fn parse_assignment(s: &str) -> Result<Override, String> {
    let Some((key, value)) = s.split_once('=') else {
        return Err(format!(
            "`{s}` is not `key=value` (e.g. --set flow.in.size=64)"
        ));
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(format!("`{s}` has no key before `=`"));
    }
    let value = value.trim();
    let parsed = format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"));
    Ok((
        key.to_string(),
        Some(parsed.unwrap_or_else(|| toml::Value::String(value.to_string()))),
    ))
}

/// The scenario `text` with `edits` applied, checked; `seed` (when given) replaces the file's.
/// Without edits and seed this is [`Scenario::parse_with`] on the text itself, so diagnostics
/// point into it; an edited document is generated, so its diagnostics name the edits instead of
/// lines. A `[sweep]` in the file stays: its points are built from the edited document.
pub fn apply(
    text: &str,
    origin: &str,
    base_dir: &Path,
    default_name: &str,
    edits: &[Override],
    seed: Option<u64>,
) -> Result<Scenario, ScenarioError> {
    if edits.is_empty() && seed.is_none() {
        return Scenario::parse_with(text, origin, base_dir, default_name);
    }
    let what = describe(edits, seed);
    let fail = |msg: String, help: Option<String>| {
        ScenarioError::one(origin, 0, 0, format!("with {what}: {msg}"), help)
    };
    // The file must be a valid document first; its own errors are reported at their lines.
    let mut doc: toml::Table = match text.parse() {
        Ok(d) => d,
        Err(_) => return Scenario::parse_with(text, origin, base_dir, default_name),
    };
    for (key, value) in edits {
        set_key(&mut doc, key, value.as_ref()).map_err(|(m, h)| fail(m, h))?;
    }
    if let Some(s) = seed {
        let s = i64::try_from(s).map_err(|_| fail("the seed is above 2^63".into(), None))?;
        doc.insert("seed".into(), toml::Value::Integer(s));
    }
    let edited = to_text(&doc).map_err(|m| fail(m, None))?;
    Scenario::parse_with(&edited, origin, base_dir, default_name).map_err(|mut e| {
        for d in &mut e.diagnostics {
            d.line = 0;
            d.col = 0;
            d.message = format!("with {what}: {}", d.message);
        }
        e
    })
}

/// `a = 1, b = x, seed = 3` for messages.
fn describe(edits: &[Override], seed: Option<u64>) -> String {
    let mut parts: Vec<String> = edits
        .iter()
        .map(|(k, v)| match v {
            Some(v) => format!("{k} = {v}"),
            None => format!("{k} removed"),
        })
        .collect();
    if let Some(s) = seed {
        parts.push(format!("seed = {s}"));
    }
    parts.join(", ")
}

/// A document as TOML text that reads back as the same document, every key's value written
/// inline (`link = { rate = "10mbit" }`, `flow = [{ name = "a", … }]`).
///
/// `toml::to_string` writes nested tables as `[a.b]` sections; a table that then has no header of
/// its own (a `[policy]` whose only key is an inline `qdisc = { type = "pfifo", … }`) is read back
/// as an implicit table whose keys carry no position, and the policy reader, which keeps every
/// key's position, rejects it ("expected a borrowed string"). Inline values always carry theirs.
pub fn to_text(doc: &toml::Table) -> Result<String, String> {
    let mut out = String::new();
    for (k, v) in doc {
        push_key(&mut out, k);
        out.push_str(" = ");
        push_inline(&mut out, v)?;
        out.push('\n');
    }
    Ok(out)
}

fn push_key(out: &mut String, k: &str) {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        out.push_str(k);
    } else {
        out.push_str(&toml::Value::String(k.to_string()).to_string());
    }
}

fn push_inline(out: &mut String, v: &toml::Value) -> Result<(), String> {
    match v {
        toml::Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_inline(out, x)?;
            }
            out.push(']');
        }
        toml::Value::Table(t) => {
            out.push('{');
            for (i, (k, x)) in t.iter().enumerate() {
                out.push_str(if i > 0 { ", " } else { " " });
                push_key(out, k);
                out.push_str(" = ");
                push_inline(out, x)?;
            }
            out.push_str(if t.is_empty() { "}" } else { " }" });
        }
        toml::Value::Float(f) if !f.is_finite() => {
            return Err(format!("cannot write the value {f} into a scenario"))
        }
        scalar => out.push_str(&scalar.to_string()),
    }
    Ok(())
}

/// Set (or with `None`, remove) the value at dotted `key` of `doc`. Where the path meets an array
/// of tables the next part names the element (its `name`). Errors carry a message and a help.
pub fn set_key(
    doc: &mut toml::Table,
    key: &str,
    value: Option<&toml::Value>,
) -> Result<(), (String, Option<String>)> {
    let parts: Vec<&str> = key.split('.').map(str::trim).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err((
            format!("`{key}` is not a key path"),
            Some("write dotted keys such as \"link.timer_hz\" or \"flow.NAME.size\"".into()),
        ));
    }
    if parts[0] == "sweep" {
        return Err(("a sweep cannot change `[sweep]`".into(), None));
    }
    let mut table = doc;
    let mut i = 0;
    let mut path = String::new();
    while i + 1 < parts.len() {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(parts[i]);
        match table.get_mut(parts[i]) {
            Some(toml::Value::Table(t)) => {
                table = t;
                i += 1;
            }
            Some(toml::Value::Array(items)) => {
                let sel = parts[i + 1];
                if i + 2 >= parts.len() {
                    return Err((
                        format!("`{path}.{sel}` is a table, not a value"),
                        Some(format!("name the key to set, e.g. \"{path}.{sel}.rate\"")),
                    ));
                }
                let names: Vec<String> = items
                    .iter()
                    .filter_map(|it| it.get("name").and_then(|n| n.as_str()).map(String::from))
                    .collect();
                let found = items.iter_mut().find_map(|it| match it {
                    toml::Value::Table(t)
                        if t.get("name").and_then(|n| n.as_str()) == Some(sel) =>
                    {
                        Some(t)
                    }
                    _ => None,
                });
                match found {
                    Some(t) => {
                        table = t;
                        i += 2;
                    }
                    None => {
                        return Err((
                            format!("no [[{path}]] is named `{sel}`"),
                            Some(format!("names: {}", names.join(", "))),
                        ))
                    }
                }
            }
            Some(_) => return Err((format!("`{path}` is a value, not a table"), None)),
            None => {
                return Err((
                    format!("the scenario has no `{path}`"),
                    Some("a sweep changes keys of tables the scenario has".into()),
                ))
            }
        }
    }
    let last = parts[parts.len() - 1];
    match value {
        Some(v) => {
            table.insert(last.to_string(), v.clone());
        }
        None => {
            table.remove(last);
        }
    }
    Ok(())
}
