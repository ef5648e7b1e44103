//! The subscriber table: what a valid one becomes, and every problem with `file:line`.

use std::path::Path;

use crate::{ConfigError, Policy};

const POLICY: &str = r#"qdisc = "htb"
default = "other"
subscribers = "subs.csv"

[[class]]
name = "root"
rate = "1gbit"
upload_rate = "200mbit"

[[class]]
name = "other"
parent = "root"
rate = "1mbit"
ceil = "1gbit"
upload_rate = "1mbit"

[[class]]
name = "ap1"
parent = "root"
rate = "500mbit"
upload_rate = "100mbit"

[[class]]
name = "ap2"
parent = "root"
rate = "400mbit"
upload_rate = "90mbit"

[[plan]]
name = "basic"
rate = "10mbit"
ceil = "50mbit"
upload_rate = "2mbit"
upload_ceil = "10mbit"
leaf = "fq_codel"

[[plan]]
name = "fast"
rate = "20mbit"
ceil = "200mbit"
upload_rate = "4mbit"
upload_ceil = "40mbit"
upload_leaf = "pfifo"
"#;

fn parse(policy: &str, csv: &str) -> Result<Policy, ConfigError> {
    let csv = csv.to_string();
    Policy::parse_with(policy, "dir/p.toml", &move |p: &Path| {
        assert_eq!(
            p,
            Path::new("dir/subs.csv"),
            "the table is beside the policy"
        );
        Ok(csv.clone())
    })
}

/// Every error as `file:line: message`.
fn errors(policy: &str, csv: &str) -> Vec<String> {
    let e = parse(policy, csv).expect_err("the policy should be invalid");
    e.errors()
        .map(|d| format!("{}:{}: {}", d.file, d.line, d.message))
        .collect()
}

fn has(errs: &[String], want: &str) {
    assert!(
        errs.iter().any(|e| e.contains(want)),
        "no error containing {want:?} in {errs:#?}"
    );
}

const HEADER: &str = "name,parent,plan,addresses\n";

#[test]
fn a_table_becomes_leaf_classes_and_filters_in_both_directions() {
    let csv = format!(
        "{HEADER}# a comment\nalice,ap1,basic,100.64.0.1\nbob,ap1,fast,\"100.64.0.2, 2001:db8:1::/56\"\ncarol,ap2,basic,100.64.0.3 100.64.0.4\n"
    );
    let p = parse(POLICY, &csv).unwrap_or_else(|e| panic!("{e:?}"));
    let s = p.subscribers().expect("a table");
    assert_eq!(s.file, "dir/subs.csv");
    assert_eq!(s.first_class, 4);
    assert_eq!(s.plans, [("basic".to_string(), 2), ("fast".to_string(), 1)]);
    let bob = &p.classes()[5];
    assert_eq!(
        (bob.name.as_str(), bob.parent.as_deref(), bob.line),
        ("bob", Some("ap1"), 4)
    );
    assert_eq!((bob.rate.0, bob.ceil.0), (20_000_000, 200_000_000));
    assert!(bob.is_leaf);
    assert_eq!(bob.depth, 2);
    assert!(p.classes()[2].children.contains(&5), "ap1 lists bob");
    assert!(!p.classes()[2].is_leaf);
    // One filter per address, on the destination, after the policy's own (none here).
    let f: Vec<String> = p
        .filters()
        .iter()
        .map(|f| format!("{}={}", f.class, f.spec.dst.unwrap()))
        .collect();
    assert_eq!(
        f,
        [
            "alice=100.64.0.1/32",
            "bob=100.64.0.2/32",
            "bob=2001:db8:1::/56",
            "carol=100.64.0.3/32",
            "carol=100.64.0.4/32"
        ]
    );
    // The upload side: upload rates, its own leaf, filters on the source.
    let u = p.upload().expect("upload side");
    let ubob = &u.classes()[5];
    assert_eq!((ubob.rate.0, ubob.ceil.0), (4_000_000, 40_000_000));
    assert_eq!(ubob.leaf.name(), "pfifo");
    assert_eq!(u.classes()[4].leaf.name(), "fq_codel");
    assert_eq!(u.classes()[0].rate.0, 200_000_000);
    assert!(u
        .filters()
        .iter()
        .all(|f| f.spec.src.is_some() && f.spec.dst.is_none()));
    // Both build; `check` shows both sides and sums subscribers up.
    let (down, up) = p
        .build_directions::<linkshare_core::PacketMeta>(&crate::Driver::default())
        .unwrap();
    drop((down, up.expect("an upload scheduler")));
    let tree = p.render_tree();
    assert!(tree.contains("2 subscribers"), "{tree}");
    assert!(tree.contains("upload side"), "{tree}");
    assert!(
        tree.contains("subscribers: 3 from dir/subs.csv (basic 2, fast 1)"),
        "{tree}"
    );
    assert!(
        !tree.contains("alice"),
        "subscribers are not listed one by one: {tree}"
    );
}

#[test]
fn rows_may_give_their_own_rates() {
    let csv = "name,parent,plan,addresses,rate,ceil,upload_rate\n\
               a,ap1,basic,10.0.0.1,15mbit,,\n\
               b,ap1,,10.0.0.2,5mbit,6mbit,1mbit\n\
               c,ap1,,10.0.0.3,5mbit,6mbit,1mbit\n";
    let p = parse(POLICY, csv).unwrap_or_else(|e| panic!("{e:?}"));
    let a = &p.classes()[4];
    assert_eq!(
        (a.rate.0, a.ceil.0, a.leaf.name()),
        (15_000_000, 50_000_000, "fq_codel")
    );
    let b = &p.classes()[5];
    assert_eq!(
        (b.rate.0, b.ceil.0, b.leaf.name()),
        (5_000_000, 6_000_000, "pfifo")
    );
    assert_eq!(p.upload().unwrap().classes()[5].ceil.0, 1_000_000);
    // Every row gives a rate of its own (b and c share one profile).
    assert_eq!(
        p.subscribers().unwrap().plans,
        [("basic".into(), 0), ("fast".into(), 0), (String::new(), 3)]
    );
}

#[test]
fn a_duplicate_address_names_both_lines() {
    let csv = format!("{HEADER}a,ap1,basic,10.0.0.1\nb,ap1,basic,10.0.0.9\nc,ap2,basic,10.0.0.1\n");
    let e = errors(POLICY, &csv);
    has(
        &e,
        "dir/subs.csv:4: duplicate address 10.0.0.1/32: subscribers `a` (line 2) and `c` (line 4)",
    );
}

#[test]
fn overlapping_prefixes_name_both_lines() {
    let csv = format!("{HEADER}a,ap1,basic,10.0.0.0/24\nb,ap1,basic,2001:db8::/48\nc,ap2,basic,10.0.0.7\nd,ap2,basic,2001:db8:0:1::/64\n");
    let e = errors(POLICY, &csv);
    has(&e, "dir/subs.csv:4: overlapping prefixes: 10.0.0.7/32 lies inside 10.0.0.0/24, of subscribers `c` (line 4) and `a` (line 2)");
    has(
        &e,
        "dir/subs.csv:5: overlapping prefixes: 2001:db8:0:1::/64 lies inside 2001:db8::/48",
    );
}

#[test]
fn one_subscriber_listing_an_address_twice_is_a_warning() {
    let csv = format!("{HEADER}a,ap1,basic,10.0.0.1 10.0.0.1\n");
    let p = parse(POLICY, &csv).unwrap();
    assert!(
        p.warnings()
            .iter()
            .any(|w| w.line == 2 && w.message.contains("lists an address twice")),
        "{:?}",
        p.warnings()
    );
}

#[test]
fn unknown_plan_and_parent_are_located_with_suggestions() {
    let csv = format!("{HEADER}a,ap1,basci,10.0.0.1\nb,ap3,basic,10.0.0.2\nc,,basic,10.0.0.3\n");
    let err = parse(POLICY, &csv).unwrap_err();
    let d: Vec<_> = err.errors().collect();
    assert_eq!((d[0].file.as_str(), d[0].line), ("dir/subs.csv", 2));
    assert_eq!(d[0].message, "subscriber `a`: unknown plan `basci`");
    assert!(d[0]
        .help
        .as_deref()
        .unwrap()
        .contains("did you mean `basic`?"));
    assert_eq!(d[1].line, 3);
    assert_eq!(d[1].message, "subscriber `b`: unknown parent `ap3`");
    assert!(d[1]
        .help
        .as_deref()
        .unwrap()
        .contains("did you mean \"ap1\"?"));
    assert_eq!(d[2].message, "subscriber `c` has no parent");
}

#[test]
fn malformed_rows_say_what_to_write() {
    let csv = format!(
        "{HEADER}a,ap1,basic\nb,ap1,basic,\"10.0.0.2\nc,ap1,basic,10.0.0.x\n,ap1,basic,10.0.0.4\nd,ap1,,10.0.0.5\ne,ap1,basic,10.0.0.6\n"
    );
    let err = parse(POLICY, &csv).unwrap_err();
    let d: Vec<_> = err.errors().collect();
    let at = |line: usize| {
        d.iter()
            .find(|x| x.line == line)
            .unwrap_or_else(|| panic!("no error at line {line}: {d:#?}"))
    };
    assert_eq!(at(2).message, "malformed row: 3 fields, the header has 4");
    assert!(at(2).help.as_deref().unwrap().contains("double quotes"));
    assert!(at(3)
        .message
        .starts_with("malformed row: the quoted field at column 13"));
    assert!(at(4)
        .message
        .contains("`10.0.0.x` is not an address or prefix"));
    assert_eq!(at(5).message, "the row has no name");
    assert_eq!(
        at(6).message,
        "subscriber `d` has neither a plan nor a rate"
    );
    assert_eq!(d.len(), 5, "row 7 is fine: {d:#?}");
}

#[test]
fn bad_rates_in_rows_are_located() {
    let csv = "name,parent,plan,addresses,rate,ceil\n\
               a,ap1,,10.0.0.1,fast,\n\
               b,ap1,,10.0.0.2,5mbit,1mbit\n";
    let e = errors(POLICY, csv);
    has(
        &e,
        "dir/subs.csv:2: subscriber `a`: rate `fast` is not a rate",
    );
    has(
        &e,
        "dir/subs.csv:3: subscriber `b`: ceil 1mbit is below rate 5mbit",
    );
}

#[test]
fn names_are_unique_across_rows_and_classes() {
    let csv =
        format!("{HEADER}a,ap1,basic,10.0.0.1\nap2,ap1,basic,10.0.0.2\na,ap2,basic,10.0.0.3\n");
    let e = errors(POLICY, &csv);
    has(
        &e,
        "dir/subs.csv:4: subscriber `a` is listed twice: lines 2 and 4",
    );
    has(
        &e,
        "dir/subs.csv:3: subscriber `ap2` has the name of a `[[class]]` of the policy (line 24)",
    );
}

#[test]
fn the_header_is_checked() {
    let e = errors(POLICY, "name,parent,plna,addresses\n");
    has(&e, "dir/subs.csv:1: unknown column `plna` in the header");
    let e = errors(POLICY, "name,plan\n");
    has(
        &e,
        "dir/subs.csv:1: the header lacks column(s): parent, addresses",
    );
    let e = errors(POLICY, "\n");
    has(&e, "dir/subs.csv:1: the subscriber table is empty");
}

#[test]
fn capacity_counts_the_subscribers() {
    // 30 x 20mbit = 600mbit under ap1's 500mbit.
    let mut csv = HEADER.to_string();
    for i in 0..30 {
        csv.push_str(&format!("s{i},ap1,fast,10.1.0.{i}\n"));
    }
    let e = errors(POLICY, &csv);
    has(&e, "dir/p.toml:20: class `ap1`: impossible capacity: the children's guaranteed rates add up to 600mbit (30 subscribers of dir/subs.csv adding up to 600mbit), above its rate 500mbit");
    // and the upload side: 30 x 4mbit = 120mbit above ap1's upload_rate 100mbit.
    has(&e, "dir/p.toml:21: class `ap1`: impossible upload capacity");
}

#[test]
fn upload_rates_are_needed_everywhere_once_one_is_given() {
    let policy = POLICY.replace("upload_rate = \"90mbit\"\n", "");
    let e = errors(&policy, &format!("{HEADER}a,ap2,basic,10.0.0.1\n"));
    has(&e, "dir/p.toml:23: class `ap2` has no `upload_rate`, but the policy shapes uploads (class `root` has an upload_rate)");
    let policy = POLICY.replace("upload_rate = \"2mbit\"\nupload_ceil = \"10mbit\"\n", "");
    let e = errors(&policy, &format!("{HEADER}a,ap2,basic,10.0.0.1\n"));
    has(&e, "plan `basic` has no `upload_rate`");
}

#[test]
fn a_table_that_cannot_be_read_is_reported_at_its_key() {
    let e = Policy::parse_with(POLICY, "p.toml", &|_: &Path| {
        Err(std::io::Error::new(std::io::ErrorKind::NotFound, "gone"))
    })
    .unwrap_err();
    let d = e.errors().next().unwrap();
    assert_eq!(
        (d.line, d.message.as_str()),
        (3, "cannot read the subscriber table `subs.csv`: gone")
    );
}

#[test]
fn plans_without_a_table_and_tables_outside_htb() {
    let p = Policy::parse(
        "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n[[plan]]\nname = \"x\"\nrate = \"1mbit\"\n",
        "p.toml",
    )
    .unwrap();
    assert!(p.warnings()[0]
        .message
        .contains("used only by a subscriber table"));
    let e = Policy::parse("qdisc = \"sfq\"\nsubscribers = \"s.csv\"\n", "p.toml").unwrap_err();
    assert!(e
        .errors()
        .any(|d| d.message.contains("`subscribers` does not apply")));
}

#[test]
fn a_hundred_thousand_subscribers_build() {
    // 25 sites x 8 APs, four plans, one IPv4 /32 each (the issue's shape). pfifo leaves: the
    // per-flow tables of fq_codel leaves are the core's to size, not the table's.
    let mut policy = String::from("qdisc = \"htb\"\ndefault = \"other\"\nsubscribers = \"subs.csv\"\n[[class]]\nname = \"root\"\nrate = \"101gbit\"\n[[class]]\nname = \"other\"\nparent = \"root\"\nrate = \"1mbit\"\n");
    for s in 0..25 {
        policy.push_str(&format!(
            "[[class]]\nname = \"site{s}\"\nparent = \"root\"\nrate = \"4gbit\"\n"
        ));
        for a in 0..8 {
            policy.push_str(&format!(
                "[[class]]\nname = \"ap{s}-{a}\"\nparent = \"site{s}\"\nrate = \"500mbit\"\n"
            ));
        }
    }
    for (k, r) in [1, 2, 4, 8].iter().enumerate() {
        policy.push_str(&format!("[[plan]]\nname = \"p{k}\"\nrate = \"{r}00kbit\"\nceil = \"{r}0mbit\"\nleaf = \"pfifo\"\n"));
    }
    let n = 100_000u32;
    let mut csv = String::from(HEADER);
    for i in 0..n {
        let ap = i % 200;
        csv.push_str(&format!(
            "sub{i},ap{}-{},p{},100.{}.{}.{}\n",
            ap / 8,
            ap % 8,
            i % 4,
            64 + (i >> 16),
            (i >> 8) & 255,
            i & 255
        ));
    }
    let csv2 = csv.clone();
    let t0 = std::time::Instant::now();
    let p = Policy::parse_with(&policy, "p.toml", &move |_: &Path| Ok(csv2.clone()))
        .unwrap_or_else(|e| panic!("{:?}", &e.diagnostics[..3.min(e.diagnostics.len())]));
    assert_eq!(p.classes().len(), 2 + 25 * 9 + n as usize);
    assert_eq!(p.filters().len(), n as usize);
    let t1 = std::time::Instant::now();
    let q = p.build_htb::<linkshare_core::PacketMeta>().unwrap();
    eprintln!("parse+check {:?}, build {:?}", t1 - t0, t1.elapsed());
    drop(q);
    // The last row's class, by its address.
    let last = p.filters().last().unwrap();
    assert_eq!(last.class, format!("sub{}", n - 1));
}

/// The optional `id` (or `circuit_id`) column: each subscriber's circuit id, in both
/// directions, an empty field meaning none; an id used twice names both lines.
#[test]
fn circuit_ids_are_read_and_unique() {
    let csv = "name,circuit_id,parent,plan,addresses\n\
               alice,C-100,ap1,basic,100.64.0.1\n\
               bob,,ap1,basic,100.64.0.2\n\
               carol,C-7,ap2,fast,100.64.0.3\n";
    let p = parse(POLICY, csv).unwrap_or_else(|e| panic!("{e:?}"));
    let ids: Vec<(&str, &str)> = p.circuit_ids().collect();
    assert_eq!(ids, [("alice", "C-100"), ("carol", "C-7")]);
    let up = p.upload().expect("upload side");
    assert_eq!(
        up.circuit_ids().count(),
        2,
        "the upload side has the same ids"
    );
    // `id` is the same column; without it there are none.
    let short = csv.replace("circuit_id", "id");
    let p = parse(POLICY, &short).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(p.circuit_ids().count(), 2);
    let p = parse(POLICY, &format!("{HEADER}dave,ap1,basic,100.64.0.9\n"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(p.circuit_ids().count(), 0);
    // Twice the same id, or both spellings of the column.
    let errs = errors(
        POLICY,
        "name,id,parent,plan,addresses\na,X,ap1,basic,100.64.0.1\nb,X,ap1,basic,100.64.0.2\n",
    );
    has(
        &errs,
        "dir/subs.csv:3: circuit id `X` is used twice: subscribers `a` (line 2) and `b` (line 3)",
    );
    let errs = errors(POLICY, "name,id,circuit_id,parent,plan,addresses\n");
    has(&errs, "column `circuit_id` appears twice");
}
