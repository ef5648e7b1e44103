//! `linkshare completions SHELL` and `linkshare man --out DIR`: shell completions and man pages
//! generated from the command line's own definition (clap_complete, clap_mangen), so they
//! cannot drift from it. Hidden from `--help`: they are for packagers (`scripts/package` puts
//! them in the .deb) and for users installing with cargo.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;

use crate::exit::OK;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell
    pub shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Directory to write linkshare.1 and one linkshare-<command>.1 per subcommand into
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Print the completion script for a shell on stdout.
pub fn completions<C: CommandFactory>(a: &CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = C::command();
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "linkshare", &mut buf);
    std::io::stdout()
        .write_all(&buf)
        .context("cannot write the completions")?;
    Ok(OK)
}

/// Write the man pages into `a.out` (created if missing) and list them on stdout.
pub fn man<C: CommandFactory>(a: &ManArgs) -> anyhow::Result<i32> {
    for p in write_man_pages(C::command(), &a.out)? {
        println!("{}", p.display());
    }
    Ok(OK)
}

/// The man pages of `cmd` and its visible subcommands, written into `dir`; their paths, sorted.
pub fn write_man_pages(cmd: clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "1")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("linkshare"))
        })
        .collect();
    pages.sort();
    Ok(pages)
}
