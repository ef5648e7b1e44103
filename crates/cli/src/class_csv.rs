//! `class change --write` for a subscriber: its rates written into its row of the policy's
//! subscriber table (`subscribers = "…"`), since a subscriber has no `[[class]]` to edit.
//!
//! Only the row of the subscriber changes (its `rate`/`ceil` fields); when the table has no
//! such column it is added to the header and every other row gets an empty field for it (the
//! plan's rates, as before). Every other line, comments and blank lines included, stays byte
//! for byte. The fields of the
//! edited row are written back quoted when they hold a comma or a quote (RFC 4180, as
//! `linkshare_config::csv` reads them).

use std::borrow::Cow;

use anyhow::bail;

use linkshare_config::csv;

/// `text` (a subscriber table) with subscriber `name`'s `rate` and `ceil` set to those given.
pub fn set_rates(
    text: &str,
    file: &str,
    name: &str,
    rate: Option<&str>,
    ceil: Option<&str>,
) -> anyhow::Result<String> {
    let mut is_record = vec![false; text.lines().count() + 1];
    for (n, _) in csv::records(text) {
        is_record[n] = true;
    }
    let mut records = csv::records(text);
    let Some((header_line, header)) = records.next() else {
        bail!("{file} is empty: no subscriber `{name}` to write");
    };
    let mut cols: Vec<String> = fields(header, file, header_line)?;
    let width = cols.len();
    let col = |cols: &[String], c: &str| cols.iter().position(|x| x == c);
    let Some(name_col) = col(&cols, "name") else {
        bail!("{file}:{header_line}: the header has no `name` column");
    };
    let mut row_line = None;
    let mut row = Vec::new();
    for (n, line) in records {
        let f = fields(line, file, n)?;
        if f.get(name_col).map(String::as_str) == Some(name) {
            row_line = Some(n);
            row = f;
            break;
        }
    }
    let Some(row_line) = row_line else {
        bail!("no subscriber `{name}` in {file}");
    };
    let mut header_changed = false;
    let mut set = |key: &str, v: Option<&str>, cols: &mut Vec<String>| {
        let Some(v) = v else { return };
        let i = match col(cols, key) {
            Some(i) => i,
            None => {
                cols.push(key.to_string());
                header_changed = true;
                cols.len() - 1
            }
        };
        if row.len() <= i {
            row.resize(i + 1, String::new());
        }
        row[i] = v.to_string();
    };
    set("rate", rate, &mut cols);
    set("ceil", ceil, &mut cols);
    // Every other row gets an empty field per column added, as the header's width requires.
    let pad = ",".repeat(cols.len() - width);
    let mut out = String::with_capacity(text.len() + 32);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let body = line.trim_end_matches(['\r', '\n']);
        let end = &line[body.len()..];
        if i + 1 == row_line {
            out.push_str(&join(&row));
            out.push_str(end);
        } else if i + 1 == header_line && header_changed {
            // A byte-order mark stays where it was.
            if line.starts_with('\u{feff}') {
                out.push('\u{feff}');
            }
            out.push_str(&join(&cols));
            out.push_str(end);
        } else if header_changed && is_record.get(i + 1) == Some(&true) {
            out.push_str(body);
            out.push_str(&pad);
            out.push_str(end);
        } else {
            out.push_str(line);
        }
    }
    Ok(out)
}

fn fields(line: &str, file: &str, n: usize) -> anyhow::Result<Vec<String>> {
    let mut v: Vec<Cow<'_, str>> = Vec::new();
    if let Err(e) = csv::split(line, &mut v) {
        bail!("{file}:{n}: {e}");
    }
    Ok(v.into_iter().map(Cow::into_owned).collect())
}

fn join(fields: &[String]) -> String {
    let quoted: Vec<Cow<'_, str>> = fields
        .iter()
        .map(|f| {
            if f.contains([',', '"']) {
                Cow::Owned(format!("\"{}\"", f.replace('"', "\"\"")))
            } else {
                Cow::Borrowed(f.as_str())
            }
        })
        .collect();
    quoted.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "# sites\nname,parent,plan,addresses,rate,ceil,comment\n\
        alice,ap1,100M,100.64.0.1,,,\n\
        bob,ap1,100M,\"100.64.0.2, 100.64.0.3\",,,two addresses\n\
        carol,ap1,,100.64.0.4,5mbit,50mbit,her own\n";

    #[test]
    fn only_the_subscribers_row_changes() {
        let out = set_rates(TABLE, "s.csv", "bob", Some("20mbit"), None).expect("edit");
        let want = TABLE.replace(
            "bob,ap1,100M,\"100.64.0.2, 100.64.0.3\",,,two addresses",
            "bob,ap1,100M,\"100.64.0.2, 100.64.0.3\",20mbit,,two addresses",
        );
        assert_eq!(out, want);
        let out = set_rates(TABLE, "s.csv", "carol", Some("6mbit"), Some("60mbit")).expect("e");
        assert_eq!(out, TABLE.replace("5mbit,50mbit", "6mbit,60mbit"));
    }

    #[test]
    fn missing_columns_are_added_to_the_header() {
        let t =
            "name,parent,plan,addresses\nalice,ap1,100M,100.64.0.1\r\nbob,ap1,100M,100.64.0.2\n";
        let out = set_rates(t, "s.csv", "bob", None, Some("200mbit")).expect("edit");
        assert_eq!(
            out,
            "name,parent,plan,addresses,ceil\nalice,ap1,100M,100.64.0.1,\r\n\
             bob,ap1,100M,100.64.0.2,200mbit\n"
        );
        // Every row still has the header's width, bob his new ceil.
        let mut v = Vec::new();
        for (_, line) in csv::records(&out) {
            csv::split(line, &mut v).expect("csv");
            assert_eq!(v.len(), 5, "{line}");
        }
        assert_eq!(v[4], "200mbit");
    }

    #[test]
    fn an_unknown_subscriber_is_named() {
        let e = set_rates(TABLE, "s.csv", "dave", Some("1mbit"), None).unwrap_err();
        assert!(
            format!("{e}").contains("no subscriber `dave` in s.csv"),
            "{e}"
        );
    }
}
