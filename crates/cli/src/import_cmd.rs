//! `linkshare import tc|libreqos|pf`: argument handling and printing only; the importers are
//! `linkshare_interop` (what maps to what: docs/import.md).
//!
//! The policy goes to stdout (or `--out FILE`); on stderr come the importer's notes (also
//! `# note:` lines in the policy), then `check`'s diagnostics on the policy it wrote.
//! Exit status: 0 the policy is valid (warnings allowed), 1 the input could not be imported or
//! the result is not a valid policy, 2 a file cannot be read or written.

mod libreqos;

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use linkshare_config::Policy;
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
    /// LibreQoS's network.json and ShapedDevices.csv: sites and APs as classes, circuits as
    /// a subscriber table (FILE.subscribers.csv beside `--out FILE`) with plans, both
    /// directions in one policy
    Libreqos(LibreqosArgs),
    /// pf.conf queues: OpenBSD `queue` lines or FreeBSD/ALTQ `altq on … cbq|priq` with
    /// `queue` lines, and the `pass … queue` rules as filters
    Pf {
        file: PathBuf,
        /// The interface whose queues to import, when the file has several
        #[arg(long = "on", value_name = "IFACE")]
        on: Option<String>,
    },
}

/// `import libreqos`'s arguments.
#[derive(Args, Debug)]
pub struct LibreqosArgs {
    /// network.json (the site/AP tree; `{}` for a flat network)
    #[arg(required_unless_present = "synthetic")]
    pub network: Option<PathBuf>,
    /// ShapedDevices.csv (one row per device, circuits by Circuit ID)
    #[arg(required_unless_present = "synthetic")]
    pub devices: Option<PathBuf>,
    /// LibreQoS's lqos.conf (or ispConfig.py): the upstream capacity from its
    /// downlink_bandwidth_mbps and uplink_bandwidth_mbps
    #[arg(long, value_name = "FILE")]
    pub lqos_conf: Option<PathBuf>,
    /// The upstream capacity towards subscribers (tc units, e.g. 10gbit); with --uplink
    #[arg(long, value_name = "RATE", requires = "uplink")]
    pub downlink: Option<String>,
    /// The upstream capacity from subscribers (tc units); with --downlink
    #[arg(long, value_name = "RATE", requires = "downlink")]
    pub uplink: Option<String>,
    /// Instead of importing, write a synthetic LibreQoS export of N circuits (25 sites x 8
    /// APs, four plans, one IPv4 address each) as network.json and ShapedDevices.csv into
    /// the directory `--out DIR`
    #[arg(long, value_name = "N", conflicts_with_all = ["network", "devices"])]
    pub synthetic: Option<usize>,
    /// With --synthetic: give each circuit an IPv6 /64 too
    #[arg(long, requires = "synthetic")]
    pub ipv6: bool,
}

pub(crate) fn read(path: &Path) -> Result<String, i32> {
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
        ImportSource::Libreqos(a) => return libreqos::run(a, args.out.as_deref()),
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

/// An importer's errors on stderr with their source lines; the exit code.
pub(crate) fn print_errors(e: &ImportError, files: &[(String, String)]) -> i32 {
    for d in &e.errors {
        eprintln!("{}\n", d.render("error", source(files, &d.file)));
    }
    let n = e.errors.len();
    eprintln!("import failed: {n} error{}", if n == 1 { "" } else { "s" });
    crate::check::EXIT_INVALID
}

fn source<'f>(files: &'f [(String, String)], file: &str) -> Option<&'f str> {
    files
        .iter()
        .find(|(n, _)| n == file)
        .map(|(_, t)| t.as_str())
}

/// An importer's warnings, then the notes of the policy it wrote, on stderr.
pub(crate) fn print_warnings(
    warnings: &[linkshare_interop::Diag],
    toml: &str,
    files: &[(String, String)],
) {
    for w in warnings {
        eprintln!("{}\n", w.render("warning", source(files, &w.file)));
    }
    for n in toml
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("# note: "))
    {
        eprintln!("note: {n}");
    }
}

fn finish(
    result: Result<Imported, ImportError>,
    files: &[(String, String)],
    out: Option<&Path>,
) -> i32 {
    let imported = match result {
        Ok(i) => i,
        Err(e) => return print_errors(&e, files),
    };
    print_warnings(&imported.warnings, &imported.toml, files);
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
    crate::check::print_diagnostics(&origin, &imported.toml, &checked);
    match checked {
        Ok(_) => crate::check::EXIT_OK,
        Err(_) => crate::check::EXIT_INVALID,
    }
}
