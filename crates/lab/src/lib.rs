//! # linkshare-lab
//!
//! The namespace lab: hosts A (sender), B (router), C (sink) of the seeds as three Linux network
//! namespaces joined by veth pairs, with real kernel sockets in A and C and, in B, either the real
//! shaper (`linkshare run`) or a Linux bridge with or without the kernel's HTB. See docs/lab.md.
//!
//! Principles:
//! * **A library, not a command**: the `linkshare lab …` subcommands (crates/cli) only parse
//!   arguments and print; the namespace tests (crates/cli/tests, crates/lab/tests) use the same
//!   [`testbed`] instead of a copy.
//! * **Nothing left behind**: every namespace, veth and child process is removed on every exit
//!   path ([`testbed`]'s `Drop`, a SIGINT/SIGTERM flag, `PR_SET_PDEATHSIG`).
//! * **The simulator's vocabulary**: a lab run reads the scenario format of `linkshare-sim` and
//!   produces its result model (`linkshare_report::model`), so the two can be compared.
//!
//! Modules, one concern each:
//! * [`testbed`]: the namespaces, the routers (linkshare, kernel HTB, bare bridge), `ip`/`tc`;
//! * [`traffic`]: a scenario's flows as kernel sockets (TCP, UDP patterns, ping);
//! * [`host`]: how busy the host was while a run's traffic ran (timer lateness, steal, load);
//! * [`run`]: one scenario through the lab, measured into a `SimResult` ([`execute`]);
//! * [`bench`]: the seeds' overhead measurements beside the kernel's HTB (`lab bench`);
//! * [`soak`]: saturation for a long time with reloads, class changes and misbehaving control
//!   clients, checking conservation, flat memory and bounded pauses (`lab soak`, docs/soak.md);
//! * [`uml`]: a user-mode Linux guest for the kernel side where the host's kernel lacks the
//!   policy's qdisc (CAKE, HFSC, …).

pub mod bench;
pub mod host;
pub mod run;
pub mod soak;
pub mod testbed;
pub mod traffic;
pub mod uml;

pub use run::{execute, LabRun, DEFAULT_ORIGIN, DEFAULT_SCENARIO, EXIT_INTERRUPTED};

/// An error in what the user gave (a command's exit code 1, not 2): the CLI tells the two apart
/// by this type.
#[derive(Debug)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

/// `Err(Invalid(msg))` as an `anyhow` error.
pub fn invalid(msg: impl Into<String>) -> anyhow::Error {
    Invalid(msg.into()).into()
}
