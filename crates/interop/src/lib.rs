//! # linkshare-interop
//!
//! Bridges between linkshare policies and the configurations users already run:
//!
//! * [`tc::export`] — a policy as `tc -batch` input for the kernel (`linkshare export tc`);
//! * [`tc::import`] — a `tc -batch` script, a shell script of `tc` commands, or the live output of
//!   `tc -j qdisc/class/filter show` back into a policy (`linkshare import tc`);
//! * [`libreqos`] — LibreQoS's `network.json` + `ShapedDevices.csv` (`linkshare import libreqos`);
//! * [`pf`] — OpenBSD `queue` and FreeBSD/ALTQ `altq`/`queue` lines with their `pass … queue`
//!   rules (`linkshare import pf`).
//!
//! Principles, shared by every importer:
//!
//! * **Text in, text out, no I/O.** Parsers take `&str` and return `Result`; bad input is a
//!   located [`Diag`] (`file:line`), never a panic, so the fuzz harnesses in `crates/fuzzing` can
//!   drive them directly. Only [`tc::live`] runs a program (`tc … show`), and it hands the text
//!   to the same parsers.
//! * **One writer.** Every importer builds a [`policy_writer::Draft`] and [`policy_writer`]
//!   writes the TOML, with a `# note:` comment above every line where the source meant
//!   something linkshare does differently — the user reads the differences in the file itself.
//! * **The checker has the last word.** The result is meant to be run through
//!   `linkshare_config::Policy::parse` (the CLI does so and prints `check`'s diagnostics); the
//!   importers do not duplicate its validation.

pub mod diag;
pub mod libreqos;
pub mod pf;
pub mod policy_writer;
pub mod tc;

pub use diag::{Diag, ImportError};
pub use policy_writer::Draft;

/// An imported policy: the TOML text and the warnings the importer has for the user (each is
/// also a `# note:` in the text where it belongs).
#[derive(Clone, Debug)]
pub struct Imported {
    pub toml: String,
    pub warnings: Vec<Diag>,
}
