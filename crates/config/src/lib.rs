//! # linkshare-config
//!
//! Policy files: a TOML description of a class tree, its leaf queues and its filters, with tc(8)'s
//! units, checked as a whole before anything is built.
//!
//! ```toml
//! qdisc = "htb"
//! default = "bulk"
//!
//! [[class]]
//! name = "root"
//! rate = "10mbit"
//!
//! [[class]]
//! name = "bulk"
//! parent = "root"
//! rate = "8mbit"
//! ceil = "10mbit"
//! ```
//!
//! [`Policy::parse`] reads and checks a policy; every problem found becomes a [`Diagnostic`] with
//! `file:line:col`, a message and a `help:` line saying what to write instead. All problems are
//! collected (not just the first); any error rejects the policy with a [`ConfigError`], warnings
//! travel with the accepted [`Policy`] ([`Policy::warnings`]). [`Policy::build`] then makes the
//! scheduler. The format is documented in `docs/policy-format.md`.
//!
//! A policy may also be embedded in a larger TOML document (a simulator scenario): deserialize the
//! table as a [`PolicyDoc`] and pass it to [`Policy::from_spanned_table`].
//!
//! Adding a scheduler kind means a new [`QdiscKind`] variant, its name in [`QdiscKind::KNOWN`],
//! and a match arm in the validator and in [`Policy::build_on`].
//!
//! ## The modules, in the order a file goes through them
//!
//! * `raw`: the TOML text as a spanned tree that accepts anything ([`PolicyDoc`]), and TOML
//!   syntax errors as located diagnostics.
//! * `validate`: the two passes that turn a [`PolicyDoc`] into a [`Policy`] — every key read on
//!   its own, then the tree, rates, routes, subscriber table and upload side checked as a
//!   whole. It reads values with `values` (scalars, tc's units, header fields) and `params`
//!   (a discipline's table), leaves with `leaf` and `cake`, the link layer, DSCP trust and
//!   `non_ip` with `link`, `trust` and `non_ip`, and CSV with [`csv`].
//! * `diag` and `source`: [`Diagnostic`]s and how `check` prints them with their source line;
//!   `doc_kind`: "this looks like a scenario".
//! * `policy`: the checked [`Policy`] ([`ClassInfo`], [`FilterInfo`], [`Subscribers`]) and the
//!   ways in ([`Policy::parse`], [`Policy::load`], [`Policy::from_spanned_table`]); `kind`: the
//!   [`QdiscKind`] names.
//! * `build`: a [`Policy`] to the scheduler a [`Driver`] runs (HTB, sharded HTB, DRR, a leaf);
//!   `cbq` and `hfsc`: those kinds' options, defaults and builds, on core's own types.
//! * `render`: the tree `check` prints; `memory`: the worst-case queue memory it prints;
//!   `change`: one class's new rates applied to a checked policy (`class change`).

mod build;
mod cake;
mod cbq;
mod change;
pub mod csv;
mod diag;
mod doc_kind;
mod hfsc;
mod kind;
mod leaf;
mod link;
mod memory;
mod non_ip;
mod params;
mod policy;
mod raw;
mod render;
mod source;
mod trust;
mod validate;
mod values;

pub use build::Driver;
pub use cbq::{
    CbqClassOptions, CbqGuideline, CbqOptions, CbqScheduler, OfftimeUnit, UndertimeClock,
};
pub use diag::{ConfigError, Diagnostic, Severity};
pub use doc_kind::{looks_like, wrong_kind, DocKind};
pub use hfsc::{HfscClass, HfscCompat};
pub use kind::QdiscKind;
pub use leaf::LeafKind;
pub use memory::MIN_FRAME;
pub use non_ip::NonIp;
pub use policy::{subscriber_table_path, ClassInfo, FilterInfo, Policy, Subscribers, Written};
pub use raw::PolicyDoc;
pub use source::{
    render_report, render_report_for, Source, ECHO_MAX_CHARS, SHOWN_PER_KIND, SHOWN_PER_SEVERITY,
};
pub use validate::ReadTable;
