//! `linkshare import libreqos`: the files in and out; the importer is
//! `linkshare_interop::libreqos` (docs/import.md).
//!
//! The import writes two files: the policy (`--out FILE`) and its subscriber table beside it
//! (`FILE`'s stem + `.subscribers.csv`), then checks them as `linkshare check` would. The
//! upstream capacity comes from `--lqos-conf` or `--downlink`/`--uplink`. With `--synthetic N`
//! it writes a generated LibreQoS export into the directory `--out DIR` instead (for tests
//! and benchmarks). Exit status as `import`'s.

use std::path::{Path, PathBuf};

use linkshare_config::Policy;
use linkshare_core::units::Rate;
use linkshare_interop::libreqos::sqm::SqmDefaults;
use linkshare_interop::libreqos::synthetic::{generate, Synthetic};
use linkshare_interop::libreqos::{import, uplink, Options};

use super::{print_errors, print_warnings, read, LibreqosArgs};
use crate::check::{EXIT_INVALID, EXIT_OK, EXIT_USAGE};

pub fn run(a: &LibreqosArgs, out: Option<&Path>) -> i32 {
    let Some(out) = out else {
        eprintln!("error: `import libreqos` writes a policy and its subscriber table: give `--out FILE` (or `--out DIR` with --synthetic)");
        return EXIT_USAGE;
    };
    if let Some(n) = a.synthetic {
        return write_synthetic(n, a.ipv6, out);
    }
    let (Some(network), Some(devices)) = (&a.network, &a.devices) else {
        eprintln!("error: `import libreqos` needs network.json and ShapedDevices.csv");
        return EXIT_USAGE;
    };
    let (n, d) = match (read(network), read(devices)) {
        (Ok(n), Ok(d)) => (n, d),
        (Err(c), _) | (_, Err(c)) => return c,
    };
    let uplink = match uplink_of(a) {
        Ok(u) => u,
        Err(c) => return c,
    };
    let table = table_path(out);
    // lqos.conf's `default_sqm` and `fast_queues_fq_codel` choose each circuit's queue.
    let sqm = match &a.lqos_conf {
        Some(conf) => match read(conf) {
            Ok(text) => SqmDefaults::read(&text),
            Err(c) => return c,
        },
        None => SqmDefaults::default(),
    };
    let opts = Options {
        uplink,
        sqm,
        table: table
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let (nn, dn) = (network.display().to_string(), devices.display().to_string());
    let files = [(nn.clone(), n), (dn.clone(), d)];
    let imp = match import(&files[0].1, &nn, &files[1].1, &dn, &opts) {
        Ok(i) => i,
        Err(e) => return print_errors(&e, &files),
    };
    print_warnings(&imp.warnings, &imp.toml, &files);
    for (path, text) in [(out, &imp.toml), (table.as_path(), &imp.subscribers)] {
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            return EXIT_USAGE;
        }
    }
    let origin = out.display().to_string();
    let checked = Policy::parse(&imp.toml, &origin);
    crate::check::print_diagnostics(&origin, &imp.toml, &checked);
    match checked {
        Ok(_) => EXIT_OK,
        Err(_) => EXIT_INVALID,
    }
}

/// `p.toml` → `p.subscribers.csv` in the same directory.
fn table_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map_or("policy".into(), |s| s.to_string_lossy().into_owned());
    out.with_file_name(format!("{stem}.subscribers.csv"))
}

/// The upstream capacity: from lqos.conf, or `--downlink`/`--uplink`.
fn uplink_of(a: &LibreqosArgs) -> Result<Option<(u64, u64)>, i32> {
    if let Some(conf) = &a.lqos_conf {
        if a.downlink.is_some() {
            eprintln!("error: give the uplink either in --lqos-conf or as --downlink/--uplink");
            return Err(EXIT_USAGE);
        }
        let text = read(conf)?;
        let name = conf.display().to_string();
        return match uplink::read(&text, &name) {
            Ok(u) => Ok(Some(u)),
            Err(d) => {
                eprintln!("{}", d.render("error", Some(&text)));
                Err(EXIT_INVALID)
            }
        };
    }
    match (&a.downlink, &a.uplink) {
        (Some(d), Some(u)) => {
            let parse = |flag: &str, s: &str| {
                Rate::parse(s).ok().filter(|r| r.0 > 0).ok_or_else(|| {
                    eprintln!("error: --{flag} `{s}` is not a rate: write it with a unit, e.g. 10gbit or 950mbit");
                    EXIT_USAGE
                })
            };
            Ok(Some((parse("downlink", d)?.0, parse("uplink", u)?.0)))
        }
        _ => Ok(None),
    }
}

fn write_synthetic(n: usize, ipv6: bool, dir: &Path) -> i32 {
    let s = Synthetic {
        ipv6,
        ..Synthetic::new(n)
    };
    let (net, csv) = generate(&s);
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("error: cannot create `{}`: {e}", dir.display());
        return EXIT_USAGE;
    }
    for (name, text) in [("network.json", net), ("ShapedDevices.csv", csv)] {
        let p = dir.join(name);
        if let Err(e) = std::fs::write(&p, text) {
            eprintln!("error: cannot write `{}`: {e}", p.display());
            return EXIT_USAGE;
        }
    }
    eprintln!(
        "wrote a LibreQoS export of {n} circuits ({} sites x {} APs) to {}",
        s.sites,
        s.aps_per_site,
        dir.display()
    );
    EXIT_OK
}
