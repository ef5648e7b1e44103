//! Shell-like tokenising of tc command lines, for `tc -batch` input and shell scripts of `tc`
//! commands alike.
//!
//! Follows what tc(8) `-batch` does (iproute2's `makeargs`: words split on blanks, `"…"` and
//! `'…'` quoting, `#` starts a comment) plus the little of sh(1) that tc scripts use: `\` at
//! the end of a line continues it, `NAME=value` sets a variable that `$NAME` / `${NAME}`
//! expand later, `;` and `&&` separate commands, and `||`, `|` and redirections
//! (`2>/dev/null || true`) end the part of a command that tc sees. A leading `tc` (or a path
//! ending in `/tc`) is dropped, so both forms give the same words: `qdisc add dev …`.
//!
//! Lines that are neither tc commands nor variable assignments (`set -e`, `ip link …`) are
//! returned as [`Line::Other`] so that the importer can say it ignored them. Nothing here can
//! panic on any input; an unterminated quote or an unknown variable is a located error.
//!
//! Expansion is bounded: the values a logical line expands may add up to at most
//! [`MAX_EXPANSION`] bytes, so every variable is at most that plus a line long. Without the cap
//! `X=a` followed by 40 lines of `X=$X$X` would ask for 2^40 bytes from a 300-byte script.

use std::collections::HashMap;

use crate::diag::Diag;

/// Bytes that the variables of one logical line may expand to, in all (a tc command is a few
/// hundred bytes; a script that needs more is building its values by repeated doubling).
pub const MAX_EXPANSION: usize = 64 * 1024;

/// One logical command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmd {
    /// 1-based line where the command starts.
    pub line: usize,
    pub words: Vec<String>,
    /// The comment after the command on its line, if any (`# root` in `export tc`'s output).
    pub comment: Option<String>,
}

/// What a logical line held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Tc(Cmd),
    /// Something else (its line and first word), ignored by the importer.
    Other(usize, String),
}

/// Split `text` into tc commands.
pub fn lex(text: &str, file: &str) -> Result<Vec<Line>, Diag> {
    let mut vars: HashMap<String, String> = HashMap::new();
    let mut out = Vec::new();
    let mut logical = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        if logical.is_empty() {
            start = i + 1;
        }
        if let Some(stripped) = raw.strip_suffix('\\') {
            logical.push_str(stripped);
            logical.push(' ');
            continue;
        }
        logical.push_str(raw);
        let line = std::mem::take(&mut logical);
        for part in split_line(&line, start, file, &vars)? {
            classify(part, start, &mut vars, &mut out);
        }
    }
    if !logical.is_empty() {
        for part in split_line(&logical, start, file, &vars)? {
            classify(part, start, &mut vars, &mut out);
        }
    }
    Ok(out)
}

fn classify(
    (mut words, comment): (Vec<String>, Option<String>),
    line: usize,
    vars: &mut HashMap<String, String>,
    out: &mut Vec<Line>,
) {
    let Some(first) = words.first().cloned() else {
        return;
    };
    // NAME=value (all words assignments): shell variables.
    if words.iter().all(|w| assignment(w).is_some()) {
        for w in &words {
            if let Some((k, v)) = assignment(w) {
                vars.insert(k.to_string(), v.to_string());
            }
        }
        return;
    }
    if first == "tc" || first.ends_with("/tc") {
        words.remove(0);
        // Global options (`tc -s …`, `tc -batch`) are not part of the command.
        while words.first().is_some_and(|w| w.starts_with('-')) {
            words.remove(0);
        }
        out.push(Line::Tc(Cmd {
            line,
            words,
            comment,
        }));
    } else if ["qdisc", "class", "filter"].contains(&first.as_str()) {
        out.push(Line::Tc(Cmd {
            line,
            words,
            comment,
        }));
    } else {
        out.push(Line::Other(line, first));
    }
}

fn assignment(w: &str) -> Option<(&str, &str)> {
    let (k, v) = w.split_once('=')?;
    let ok = !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit());
    ok.then_some((k, v))
}

/// The commands of one logical line: words and the trailing comment, split at `;` and `&&`,
/// cut at `||`, `|` and redirections.
#[allow(clippy::type_complexity)]
fn split_line(
    line: &str,
    lineno: usize,
    file: &str,
    vars: &HashMap<String, String>,
) -> Result<Vec<(Vec<String>, Option<String>)>, Diag> {
    let mut cmds = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut cut = false; // after `||`, `|` or a redirection: words are not tc's
    let mut skip_next = false; // the target of a bare `>`
    let mut comment = None;
    let mut cur = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut expanded = 0usize; // bytes of variable values expanded on this line
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let err = |m: &str| Diag::new(file, lineno, m.to_string());
    let finish_word = |cur: &mut String,
                       in_word: &mut bool,
                       quoted: &mut bool,
                       words: &mut Vec<String>,
                       cut: &mut bool,
                       skip_next: &mut bool| {
        if !*in_word {
            return;
        }
        let w = std::mem::take(cur);
        *in_word = false;
        let was_quoted = std::mem::replace(quoted, false);
        if *skip_next {
            *skip_next = false;
            return;
        }
        if !was_quoted && (w == ">" || w == "2>" || w == "1>" || w == "&>" || w == ">>") {
            *cut = true;
            *skip_next = true;
            return;
        }
        if !was_quoted && is_redirection(&w) {
            *cut = true;
            return;
        }
        if !*cut {
            words.push(w);
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\r' => {
                finish_word(
                    &mut cur,
                    &mut in_word,
                    &mut quoted,
                    &mut words,
                    &mut cut,
                    &mut skip_next,
                );
            }
            '#' if !in_word => {
                let text: String = chars[i + 1..].iter().collect();
                let t = text.trim();
                if !t.is_empty() && !cut {
                    comment = Some(t.to_string());
                }
                break;
            }
            '\'' | '"' => {
                let q = c;
                in_word = true;
                quoted = true;
                i += 1;
                loop {
                    let Some(&d) = chars.get(i) else {
                        return Err(err(&format!("unterminated {q} quote")));
                    };
                    if d == q {
                        break;
                    }
                    if q == '"' && d == '$' {
                        let (v, used) =
                            expand(&chars[i..], vars, &mut expanded).map_err(|m| err(&m))?;
                        cur.push_str(v);
                        i += used;
                        continue;
                    }
                    if q == '"' && d == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    cur.push(chars[i]);
                    i += 1;
                }
            }
            '\\' if i + 1 < chars.len() => {
                in_word = true;
                cur.push(chars[i + 1]);
                i += 1;
            }
            '$' => {
                // Unquoted: the value is split into words, as sh does.
                let (v, used) = expand(&chars[i..], vars, &mut expanded).map_err(|m| err(&m))?;
                for c in v.chars() {
                    if c.is_whitespace() {
                        finish_word(
                            &mut cur,
                            &mut in_word,
                            &mut quoted,
                            &mut words,
                            &mut cut,
                            &mut skip_next,
                        );
                    } else {
                        in_word = true;
                        cur.push(c);
                    }
                }
                i += used;
                continue;
            }
            ';' | '&' | '|' => {
                finish_word(
                    &mut cur,
                    &mut in_word,
                    &mut quoted,
                    &mut words,
                    &mut cut,
                    &mut skip_next,
                );
                let next = chars.get(i + 1).copied();
                if c == ';' || (c == '&' && next == Some('&')) {
                    if !words.is_empty() {
                        cmds.push((std::mem::take(&mut words), comment.take()));
                    }
                    cut = false;
                    if c == '&' {
                        i += 1;
                    }
                } else {
                    // `||`, `|`, or a lone `&` (background): what follows is not tc's.
                    cut = true;
                }
            }
            _ => {
                in_word = true;
                cur.push(c);
            }
        }
        i += 1;
    }
    finish_word(
        &mut cur,
        &mut in_word,
        &mut quoted,
        &mut words,
        &mut cut,
        &mut skip_next,
    );
    if !words.is_empty() {
        cmds.push((words, comment));
    }
    Ok(cmds)
}

fn is_redirection(w: &str) -> bool {
    let w = w.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
    w.starts_with('>') || w.starts_with('<')
}

/// Expand `$NAME` or `${NAME}` at the start of `chars`: the value and the characters used.
/// `expanded` counts the bytes this line has expanded so far; past [`MAX_EXPANSION`] it is an
/// error.
fn expand<'v>(
    chars: &[char],
    vars: &'v HashMap<String, String>,
    expanded: &mut usize,
) -> Result<(&'v str, usize), String> {
    let (name, used): (String, usize) = if chars.get(1) == Some(&'{') {
        let end = chars
            .iter()
            .position(|&c| c == '}')
            .ok_or_else(|| "unterminated ${…}".to_string())?;
        (chars[2..end].iter().collect(), end + 1)
    } else {
        let n: String = chars[1..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
            .collect();
        let len = n.chars().count();
        (n, len + 1)
    };
    if name.is_empty() {
        return Ok(("$", 1));
    }
    match vars.get(&name) {
        Some(v) => {
            *expanded = expanded.saturating_add(v.len());
            if *expanded > MAX_EXPANSION {
                return Err(format!(
                    "the variables on this line expand to more than {} KiB (`${name}` is {} bytes); \
                     a tc command needs a few hundred bytes: write the values out instead of \
                     building them by repeated expansion",
                    MAX_EXPANSION / 1024,
                    v.len()
                ));
            }
            Ok((v.as_str(), used))
        }
        None => Err(format!(
            "variable `${name}` is not set in this script (only NAME=value lines of the script are read)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tc(text: &str) -> Vec<(usize, Vec<String>, Option<String>)> {
        lex(text, "t")
            .unwrap()
            .into_iter()
            .filter_map(|l| match l {
                Line::Tc(c) => Some((c.line, c.words, c.comment)),
                Line::Other(..) => None,
            })
            .collect()
    }

    #[test]
    fn batch_and_shell_forms_give_the_same_words() {
        let a = tc("class add dev eth0 parent 1: classid 1:1 htb rate 1mbit  # root\n");
        let b = tc("DEV=eth0\nR=1mbit\ntc class add dev $DEV parent 1: \\\n  classid 1:1 htb rate ${R} # root\n");
        assert_eq!(a[0].1, b[0].1);
        assert_eq!(a[0].2.as_deref(), Some("root"));
        assert_eq!(b[0].0, 3);
    }

    #[test]
    fn shell_operators_quotes_and_other_lines() {
        let l = lex(
            "#!/bin/sh\nset -e\n/sbin/tc qdisc del dev eth0 root 2>/dev/null || true\ntc -s qdisc add dev \"eth 0\" root sfq; tc qdisc show > /tmp/x\n",
            "t",
        )
        .unwrap();
        let words: Vec<Vec<String>> = l
            .iter()
            .filter_map(|l| match l {
                Line::Tc(c) => Some(c.words.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(words[0], ["qdisc", "del", "dev", "eth0", "root"]);
        assert_eq!(words[1], ["qdisc", "add", "dev", "eth 0", "root", "sfq"]);
        assert_eq!(words[2], ["qdisc", "show"]);
        assert!(matches!(l[0], Line::Other(2, ref w) if w == "set"));
        assert!(lex("tc qdisc add dev $NOPE root sfq", "t").is_err());
        assert!(lex("tc qdisc add dev 'eth0 root sfq", "t").is_err());
    }

    #[test]
    fn repeated_doubling_is_refused_at_the_line_that_passes_the_cap() {
        // `X=a` then 40 doublings: 2^40 bytes unbounded. 2^16 = 64 KiB is reached by the 16th
        // doubling (line 17); the 17th (line 18) would pass the cap.
        let mut script = String::from("X=a\n");
        for _ in 0..40 {
            script.push_str("X=$X$X\n");
        }
        script.push_str("tc qdisc add dev $X root sfq\n");
        let e = lex(&script, "double.sh").unwrap_err().to_string();
        assert!(e.contains("double.sh:18"), "{e}");
        assert!(e.contains("64 KiB"), "{e}");
        assert!(e.contains("write the values out"), "{e}");
        // Below the cap the same construction still works.
        let mut ok = String::from("X=a\n");
        for _ in 0..4 {
            ok.push_str("X=$X$X\n");
        }
        ok.push_str("tc qdisc add dev $X root sfq\n");
        assert_eq!(tc(&ok)[0].1[3], "a".repeat(16));
    }
}
