//! `docs/policy-format.md` cannot go stale: every ```toml block marked `# policy: valid` must be
//! accepted without a warning, and every block marked `# policy: warnings` or `# policy: invalid`
//! must give exactly the diagnostics the ```text block after it shows (as `linkshare check
//! p.toml` prints them; the source and caret lines and the closing summary are not compared).
//! A ```toml block without a marker is an error too, so no example escapes the check. A ```csv
//! block right after a ```toml block is its subscriber table (`subscribers = "…"`).

use linkshare_config::{Diagnostic, Policy};

const DOC: &str = include_str!("../../../docs/policy-format.md");
const ORIGIN: &str = "p.toml";

#[derive(Debug, PartialEq)]
enum Mark {
    Valid,
    Warnings,
    Invalid,
}

#[derive(Debug)]
struct Block {
    /// 1-based line of the opening fence in the doc.
    line: usize,
    lang: String,
    body: String,
}

/// Every fenced block of the doc, in order.
fn blocks(doc: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, l) in doc.lines().enumerate() {
        match (&mut open, l.strip_prefix("```")) {
            (None, Some(lang)) => {
                open = Some(Block {
                    line: i + 1,
                    lang: lang.trim().to_string(),
                    body: String::new(),
                })
            }
            (Some(_), Some("")) => out.extend(open.take()),
            (Some(b), _) => {
                b.body.push_str(l);
                b.body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "unclosed code block in the doc");
    out
}

fn mark(b: &Block) -> Mark {
    match b.body.lines().next().map(str::trim) {
        Some("# policy: valid") => Mark::Valid,
        Some("# policy: warnings") => Mark::Warnings,
        Some("# policy: invalid") => Mark::Invalid,
        other => panic!(
            "docs/policy-format.md:{}: a toml block must start with `# policy: valid`, \
             `# policy: warnings` or `# policy: invalid`, found {other:?}",
            b.line
        ),
    }
}

/// The diagnostic lines a `text` block shows: without source/caret lines (`7 | …`, `  |   ^`),
/// blank lines and the summaries (`policy is …`, `N errors`).
fn shown(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| {
            let t = l.trim_start();
            let gutter = t
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start();
            let summary = t.starts_with("policy is") || t.ends_with(" errors");
            !(t.is_empty() || gutter.starts_with('|') || summary)
        })
        .map(str::to_string)
        .collect()
}

fn rendered(diags: &[Diagnostic]) -> Vec<String> {
    diags
        .iter()
        .flat_map(|d| {
            d.to_string()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Checks every marked block; returns how many of each kind were seen.
fn check_doc(doc: &str) -> (usize, usize, usize) {
    let all = blocks(doc);
    let mut seen = (0, 0, 0);
    for (i, b) in all.iter().enumerate() {
        if b.lang != "toml" {
            continue;
        }
        let m = mark(b);
        let at = format!("docs/policy-format.md:{}", b.line);
        let table = all.get(i + 1).filter(|n| n.lang == "csv");
        let csv = table.map(|t| t.body.clone());
        let result = Policy::parse_with(&b.body, ORIGIN, &move |_: &std::path::Path| {
            csv.clone().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, "no ```csv block follows")
            })
        });
        let expected = || {
            let next = all
                .get(i + 1 + usize::from(table.is_some()))
                .filter(|n| n.lang == "text")
                .unwrap_or_else(|| panic!("{at}: a ```text block must follow with the output"));
            shown(&next.body)
        };
        match m {
            Mark::Valid => {
                let p = result.unwrap_or_else(|e| panic!("{at}: rejected:\n{e}"));
                assert!(
                    p.warnings().is_empty(),
                    "{at}: accepted with warnings:\n{}",
                    rendered(p.warnings()).join("\n")
                );
                seen.0 += 1;
            }
            Mark::Warnings => {
                let p = result.unwrap_or_else(|e| panic!("{at}: rejected:\n{e}"));
                assert!(!p.warnings().is_empty(), "{at}: no warning");
                assert_eq!(
                    rendered(p.warnings()),
                    expected(),
                    "{at}: the warnings differ from the doc"
                );
                seen.1 += 1;
            }
            Mark::Invalid => {
                let e = result.err().unwrap_or_else(|| panic!("{at}: accepted"));
                assert_eq!(
                    rendered(&e.diagnostics),
                    expected(),
                    "{at}: the diagnostics differ from the doc"
                );
                seen.2 += 1;
            }
        }
    }
    seen
}

#[test]
fn every_example_of_the_policy_format_doc_gives_what_the_doc_shows() {
    let (valid, warnings, invalid) = check_doc(DOC);
    // The doc shows the contracts of issues 2 and 4, a classless root, warnings and errors.
    assert!(valid >= 3, "{valid} valid examples");
    assert!(warnings >= 3, "{warnings} warning examples");
    assert!(invalid >= 15, "{invalid} invalid examples");
}

#[test]
fn the_doc_check_catches_a_stale_message() {
    // The checker itself must fail on a doc whose output no longer matches.
    let doc = "```toml\n# policy: invalid\nqdisc = \"htb\"\n```\n\n```text\np.toml:1:1: error: something else\n  help: nothing\n```\n";
    let r = std::panic::catch_unwind(|| check_doc(doc));
    assert!(r.is_err(), "a stale message passed");
    let good = doc.replace(
        "p.toml:1:1: error: something else\n  help: nothing",
        &Policy::parse("# policy: invalid\nqdisc = \"htb\"\n", ORIGIN)
            .unwrap_err()
            .to_string(),
    );
    assert_eq!(check_doc(&good), (0, 0, 1));
    // An unmarked toml block is refused.
    let unmarked = "```toml\nqdisc = \"htb\"\n```\n";
    assert!(std::panic::catch_unwind(|| check_doc(unmarked)).is_err());
}

#[test]
fn the_examples_the_doc_quotes_from_the_issues_are_the_shipped_ones() {
    // The first example is policies/example.toml without its comments: the same policy.
    let first = blocks(DOC)
        .into_iter()
        .find(|b| b.lang == "toml")
        .expect("a toml block");
    let doc_policy = Policy::parse(&first.body, "doc").expect("valid");
    let shipped = Policy::parse(
        include_str!("../../../policies/example.toml"),
        "policies/example.toml",
    )
    .expect("valid");
    assert_eq!(doc_policy.render_tree(), shipped.render_tree());
}
