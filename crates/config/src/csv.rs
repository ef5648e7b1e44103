//! One CSV record per line, split into fields without copying.
//!
//! The subscriber table of a policy and LibreQoS's `ShapedDevices.csv` are CSV files of up to
//! millions of rows, read once, line by line. This splitter follows RFC 4180's quoting (a field
//! in double quotes may hold commas, and `""` inside it is one quote) with two restrictions that
//! keep it small and allocation-free: a record is one line (a quoted field cannot span lines —
//! neither file ever needs it), and fields are trimmed of surrounding blanks. An unquoted field
//! is a slice of the line; only a quoted field with `""` inside is copied. Why not the `csv`
//! crate: it handles multi-line records and byte-level quirks we do not need, and its error
//! positions are byte offsets; here the caller knows the line and reports `file:line` itself.

use std::borrow::Cow;

/// Why a line is not a CSV record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CsvError {
    /// A `"` opens a field that does not close on the same line (1-based column of the quote).
    Unterminated { col: usize },
    /// Text after a closing quote, before the next comma (`"a"b`).
    AfterQuote { col: usize },
}

impl std::fmt::Display for CsvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CsvError::Unterminated { col } => write!(
                f,
                "the quoted field at column {col} does not end on this line"
            ),
            CsvError::AfterQuote { col } => {
                write!(f, "text after the closing quote at column {col}")
            }
        }
    }
}

impl CsvError {
    /// What to write instead.
    pub fn help(&self) -> &'static str {
        match self {
            CsvError::Unterminated { .. } => {
                "close the quote on the same line (a record is one line); write a quote inside \
                 a quoted field as \"\""
            }
            CsvError::AfterQuote { .. } => {
                "put the whole field in quotes (\"a, b\") and a quote inside it as \"\""
            }
        }
    }
}

/// Splits `line` into `out` (cleared first), each field trimmed.
pub fn split<'a>(line: &'a str, out: &mut Vec<Cow<'a, str>>) -> Result<(), CsvError> {
    out.clear();
    let bytes = line.as_bytes();
    let mut i = 0;
    loop {
        // Skip leading blanks of the field.
        while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        if i < bytes.len() && bytes[i] == b'"' {
            let open = i;
            i += 1;
            let start = i;
            let mut owned: Option<String> = None;
            loop {
                match line[i..].find('"') {
                    None => {
                        return Err(CsvError::Unterminated {
                            col: line[..open].chars().count() + 1,
                        })
                    }
                    Some(k) => {
                        let q = i + k;
                        if bytes.get(q + 1) == Some(&b'"') {
                            let s = owned.get_or_insert_with(String::new);
                            s.push_str(&line[i..=q]);
                            i = q + 2;
                        } else {
                            let field = match owned.take() {
                                Some(mut s) => {
                                    s.push_str(&line[i..q]);
                                    Cow::Owned(s)
                                }
                                None => Cow::Borrowed(&line[start..q]),
                            };
                            out.push(trim_cow(field));
                            i = q + 1;
                            break;
                        }
                    }
                }
            }
            while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
                i += 1;
            }
            match bytes.get(i) {
                None => return Ok(()),
                Some(b',') => i += 1,
                Some(_) => {
                    return Err(CsvError::AfterQuote {
                        col: line[..i].chars().count() + 1,
                    })
                }
            }
        } else {
            match line[i..].find(',') {
                Some(k) => {
                    out.push(Cow::Borrowed(line[i..i + k].trim()));
                    i += k + 1;
                }
                None => {
                    out.push(Cow::Borrowed(line[i..].trim()));
                    return Ok(());
                }
            }
        }
    }
}

fn trim_cow(c: Cow<'_, str>) -> Cow<'_, str> {
    match c {
        Cow::Borrowed(s) => Cow::Borrowed(s.trim()),
        Cow::Owned(s) if s.trim().len() == s.len() => Cow::Owned(s),
        Cow::Owned(s) => Cow::Owned(s.trim().to_string()),
    }
}

/// The lines of a CSV text with their 1-based numbers, without blank lines, `#` comments and a
/// leading byte-order mark.
pub fn records(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(i, l)| {
        let l = if i == 0 {
            l.trim_start_matches('\u{feff}')
        } else {
            l
        };
        let t = l.trim();
        (!t.is_empty() && !t.starts_with('#')).then_some((i + 1, l.trim_end_matches('\r')))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &str) -> Result<Vec<String>, CsvError> {
        let mut v = Vec::new();
        split(line, &mut v)?;
        Ok(v.into_iter().map(|c| c.into_owned()).collect())
    }

    #[test]
    fn plain_fields_are_trimmed_slices() {
        assert_eq!(fields(" a , b,,c ").unwrap(), ["a", "b", "", "c"]);
        assert_eq!(fields("").unwrap(), [""]);
        assert_eq!(fields("x,").unwrap(), ["x", ""]);
        let mut v = Vec::new();
        split("ab,cd", &mut v).unwrap();
        assert!(v.iter().all(|c| matches!(c, Cow::Borrowed(_))));
    }

    #[test]
    fn quoted_fields_hold_commas_and_doubled_quotes() {
        assert_eq!(
            fields("1,\"a, b\",\"x\"\"y\",").unwrap(),
            ["1", "a, b", "x\"y", ""]
        );
        assert_eq!(fields(" \"q\" ,z").unwrap(), ["q", "z"]);
        assert_eq!(fields("\"\"").unwrap(), [""]);
        assert_eq!(
            fields("\"10.0.0.1, 10.0.0.2\"").unwrap(),
            ["10.0.0.1, 10.0.0.2"]
        );
    }

    #[test]
    fn broken_quotes_say_where() {
        assert_eq!(
            fields("a,\"open").unwrap_err(),
            CsvError::Unterminated { col: 3 }
        );
        assert_eq!(
            fields("\"a\"b,c").unwrap_err(),
            CsvError::AfterQuote { col: 4 }
        );
        assert!(!CsvError::Unterminated { col: 1 }.help().is_empty());
    }

    #[test]
    fn records_skip_blank_lines_comments_and_the_bom() {
        let text = "\u{feff}name,plan\r\n\n# c\na,b\r\n";
        let r: Vec<(usize, &str)> = records(text).collect();
        assert_eq!(r, [(1, "name,plan"), (4, "a,b")]);
    }
}
