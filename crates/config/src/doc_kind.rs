//! Which linkshare document a TOML text looks like, from its top-level keys alone.
//!
//! A policy has `qdisc`, `default`, `[[class]]` and `[[filter]]` at the top; a simulation
//! scenario has `duration`, `sample`, `[[flow]]` and `[sweep]` (its policy, if inline, is under
//! `[policy]`). A file given to the wrong command fails with "unknown key" errors that do not say
//! what went wrong; a rejected file that clearly is the other kind gets a first diagnostic naming
//! the command that reads it. Nothing here rejects a file on its own.

use crate::diag::{Diagnostic, Severity};

/// The two kinds of documents.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DocKind {
    Policy,
    Scenario,
}

const POLICY_KEYS: &[&str] = &["class", "filter", "qdisc", "default"];
const SCENARIO_KEYS: &[&str] = &["flow", "duration", "sample", "sweep"];

/// The kind `text` looks like and the top-level key that says so; `None` when it is not TOML,
/// has keys of both kinds or of neither.
pub fn looks_like(text: &str) -> Option<(DocKind, &'static str)> {
    let table: toml::Table = toml::from_str(text).ok()?;
    let policy = POLICY_KEYS.iter().find(|k| table.contains_key(**k));
    let scenario = SCENARIO_KEYS.iter().find(|k| table.contains_key(**k));
    match (policy, scenario) {
        (Some(k), None) => Some((DocKind::Policy, k)),
        (None, Some(k)) => Some((DocKind::Scenario, k)),
        _ => None,
    }
}

/// How a top-level key is written: `[[flow]]` for arrays of tables, `[sweep]` for a table,
/// `duration = …` for a value.
fn spelled(key: &str) -> String {
    match key {
        "flow" | "class" | "filter" => format!("[[{key}]]"),
        "sweep" => "[sweep]".to_string(),
        _ => format!("{key} = …"),
    }
}

/// The 1-based line where top-level `key` is written (`key =` or a `[key…` header); 1 if not found.
fn key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let t = l.trim_start();
            let header = t.trim_start_matches('[');
            (t.starts_with('[') && header.starts_with(key))
                || t.strip_prefix(key)
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
        .unwrap_or(1)
}

/// The diagnostic to put first when a file read as `expected` was rejected and looks like the
/// other kind; `None` when it does not.
pub fn wrong_kind(text: &str, origin: &str, expected: DocKind) -> Option<Diagnostic> {
    let (kind, key) = looks_like(text).filter(|(k, _)| *k != expected)?;
    let (message, help) = match kind {
        DocKind::Scenario => (
            format!(
                "this looks like a simulation scenario (it has `{}`), not a policy",
                spelled(key)
            ),
            format!(
                "run it with `linkshare sim {origin}`; a policy file has `qdisc`, `default` and \
                 [[class]] tables (docs/policy-format.md)"
            ),
        ),
        DocKind::Policy => (
            format!(
                "this looks like a policy (it has `{}`), not a simulation scenario",
                spelled(key)
            ),
            format!(
                "check it with `linkshare check {origin}`; to simulate it, write a scenario with \
                 `policy = \"{origin}\"`, a [link] and [[flow]] tables (docs/scenario-format.md)"
            ),
        ),
    };
    Some(Diagnostic {
        severity: Severity::Error,
        file: origin.to_string(),
        line: key_line(text, key),
        col: 1,
        message,
        help: Some(help),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_their_top_level_keys() {
        let scenario = "duration = \"10s\"\n[link]\nrate = \"1mbit\"\n[[flow]]\nkind = \"udp\"\n";
        assert_eq!(looks_like(scenario), Some((DocKind::Scenario, "flow")));
        let policy = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\n";
        assert_eq!(looks_like(policy), Some((DocKind::Policy, "class")));
        // A scenario with an inline policy is a scenario.
        let inline = "[policy]\nqdisc = \"htb\"\n[[policy.class]]\nname = \"a\"\n[[flow]]\n";
        assert_eq!(looks_like(inline), Some((DocKind::Scenario, "flow")));
        assert_eq!(looks_like("not toml ["), None);
        assert_eq!(looks_like("[link]\nrate = 1\n"), None);
    }

    #[test]
    fn the_hint_points_at_the_key_and_names_the_command() {
        let scenario = "# s\nname = \"x\"\n\n[link]\nrate = \"1mbit\"\n[[flow]]\nkind = \"udp\"\n";
        let d = wrong_kind(scenario, "s.toml", DocKind::Policy).unwrap();
        assert_eq!((d.line, d.col), (6, 1));
        assert!(
            d.message.contains("looks like a simulation scenario"),
            "{d}"
        );
        assert!(d.help.unwrap().contains("linkshare sim s.toml"));
        assert!(wrong_kind(scenario, "s.toml", DocKind::Scenario).is_none());
    }

    #[test]
    fn a_scenario_given_to_check_says_use_sim() {
        let scenario = "name = \"x\"\nduration = \"10s\"\n[link]\nrate = \"1mbit\"\n";
        let e = crate::Policy::parse(scenario, "s.toml").unwrap_err();
        let d = &e.diagnostics[0];
        assert_eq!(d.line, 2, "{e}");
        assert!(d
            .message
            .contains("looks like a simulation scenario (it has `duration = …`)"));
        assert!(
            d.help
                .as_deref()
                .unwrap_or("")
                .contains("linkshare sim s.toml"),
            "{e}"
        );
        // The policy checker's own diagnostics follow.
        assert!(e.diagnostics.len() > 1, "{e}");
        // A broken policy is not called a scenario.
        let policy =
            "qdisc = \"htb\"\ndefault = \"nope\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n";
        let e = crate::Policy::parse(policy, "p.toml").unwrap_err();
        assert!(!e.to_string().contains("looks like"), "{e}");
    }
}
