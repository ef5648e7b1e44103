//! `linkshare import tc|libreqos|pf`: argument handling and printing only; the importers are
//! `linkshare_interop` (what maps to what: docs/import.md).
//!
//! The policy goes to stdout (or `--out FILE`); on stderr come the importer's notes (also
//! `# note:` lines in the policy), then `check`'s diagnostics on the policy it wrote.
//! Exit status: 0 the policy is valid (warnings allowed), 1 the input could not be imported or
//! the result is not a valid policy, 2 a file cannot be read or written.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use linkshare_config::Policy;
use linkshare_interop::libreqos::Direction;
use linkshare_interop::{ImportError, Imported};

/// Turn another system's configuration into a linkshare policy.
#[derive(Args, Debug)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub source: ImportSource,
    /// Write the policy to FILE instead of stdout
    #[arg(long, global = true, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum ImportSource {
    /// A `tc -batch` script or a shell script of `tc` commands, or with `--dev` the live
    /// configuration of a device (`tc -j qdisc/class/filter show dev DEV`)
    Tc {
        /// The script; omit it with `--dev`
        file: Option<PathBuf>,
        /// Read the live configuration of this device (or, with FILE, import only its commands)
        #[arg(long)]
        dev: Option<String>,
    },
    /// LibreQoS's network.json and ShapedDevices.csv: sites and APs as inner classes, circuits
    /// as leaves, devices' addresses as filters
    Libreqos {
        /// network.json (the site/AP tree; `{}` for a flat network)
        network: PathBuf,
        /// ShapedDevices.csv (one row per device, circuits by Circuit ID)
        devices: PathBuf,
        /// Which side to shape: download (filters on destination) or upload (on source)
        #[arg(long, value_enum, default_value_t = DirectionArg::Download)]
        direction: DirectionArg,
    },
    /// pf.conf queues: OpenBSD `queue` lines or FreeBSD/ALTQ `altq on … cbq|priq` with
    /// `queue` lines, and the `pass … queue` rules as filters
    Pf {
        file: PathBuf,
        /// The interface whose queues to import, when the file has several
        #[arg(long = "on", value_name = "IFACE")]
        on: Option<String>,
    },
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum DirectionArg {
    Download,
    Upload,
}

fn read(path: &Path) -> Result<String, i32> {
    std::fs::read_to_string(path).map_err(|e| {
        eprintln!("error: cannot read `{}`: {e}", path.display());
        crate::check::EXIT_USAGE
    })
}

pub fn run(args: &ImportArgs) -> i32 {
    let (result, files) = match &args.source {
        ImportSource::Tc { file, dev } => match (file, dev) {
            (Some(f), dev) => {
                let text = match read(f) {
                    Ok(t) => t,
                    Err(c) => return c,
                };
                let name = f.display().to_string();
                let r = linkshare_interop::tc::import::import_script(&text, &name, dev.as_deref());
                (r, vec![(name, text)])
            }
            (None, Some(dev)) => (linkshare_interop::tc::live::import_dev(dev), Vec::new()),
            (None, None) => {
                eprintln!("error: `import tc` needs a FILE or `--dev DEV`");
                return crate::check::EXIT_USAGE;
            }
        },
        ImportSource::Libreqos {
            network,
            devices,
            direction,
        } => {
            let (n, d) = match (read(network), read(devices)) {
                (Ok(n), Ok(d)) => (n, d),
                (Err(c), _) | (_, Err(c)) => return c,
            };
            let dir = match direction {
                DirectionArg::Download => Direction::Download,
                DirectionArg::Upload => Direction::Upload,
            };
            let (nn, dn) = (network.display().to_string(), devices.display().to_string());
            let r = linkshare_interop::libreqos::import(&n, &nn, &d, &dn, dir);
            (r, vec![(nn, n), (dn, d)])
        }
        ImportSource::Pf { file, on } => {
            let text = match read(file) {
                Ok(t) => t,
                Err(c) => return c,
            };
            let name = file.display().to_string();
            let r = linkshare_interop::pf::import(&text, &name, on.as_deref());
            (r, vec![(name, text)])
        }
    };
    finish(result, &files, args.out.as_deref())
}

fn finish(
    result: Result<Imported, ImportError>,
    files: &[(String, String)],
    out: Option<&Path>,
) -> i32 {
    let source = |file: &str| {
        files
            .iter()
            .find(|(n, _)| n == file)
            .map(|(_, t)| t.as_str())
    };
    let imported = match result {
        Ok(i) => i,
        Err(e) => {
            for d in &e.errors {
                eprintln!("{}\n", d.render("error", source(&d.file)));
            }
            let n = e.errors.len();
            eprintln!("import failed: {n} error{}", if n == 1 { "" } else { "s" });
            return crate::check::EXIT_INVALID;
        }
    };
    for w in &imported.warnings {
        eprintln!("{}\n", w.render("warning", source(&w.file)));
    }
    for n in imported
        .toml
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("# note: "))
    {
        eprintln!("note: {n}");
    }
    let origin = match out {
        Some(p) => {
            if let Err(e) = std::fs::write(p, &imported.toml) {
                eprintln!("error: cannot write `{}`: {e}", p.display());
                return crate::check::EXIT_USAGE;
            }
            p.display().to_string()
        }
        None => {
            print!("{}", imported.toml);
            "<imported policy>".to_string()
        }
    };
    let checked = Policy::parse(&imported.toml, &origin);
    crate::check::print_diagnostics(&imported.toml, &checked);
    match checked {
        Ok(_) => crate::check::EXIT_OK,
        Err(_) => crate::check::EXIT_INVALID,
    }
}
