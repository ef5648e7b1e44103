//! The exit codes of every `linkshare` subcommand, in one place (docs/router.md, README):
//!
//! * 0 — success;
//! * 1 — rejected: bad usage, an invalid policy, scenario or option, a policy the kernel has no
//!   equivalent for (`export tc`), a change the running shaper refused, a check that found a
//!   difference (`seeds --check`), a lab flow that did not run as planned;
//! * 2 — runtime error: a file that cannot be read or written, missing permissions, an interface
//!   that is missing or held by another shaper, no shaper on the control socket, no namespaces;
//! * 3 — a scenario's `[[expect]]` not met (`sim`, `lab`, `compare`); the report is written;
//! * 4 — `compare` outside its tolerance while the lab's host was busy (late timers, CPU steal,
//!   load: `linkshare_sim::compare::trust`): no verdict on the simulator, run it again on a
//!   quiet machine;
//! * 130 — interrupted (`lab`, SIGINT/SIGTERM).
//!
//! Code that finds the input wrong returns [`Invalid`] (or the router's `guard::Refused`);
//! every other error is a runtime error.

/// Success.
pub const OK: i32 = 0;
/// Input rejected.
pub const INVALID: i32 = 1;
/// Runtime error.
pub const RUNTIME: i32 = 2;
/// The run went through but an `[[expect]]` of the scenario was not met (`sim`, `lab`,
/// `compare`).
pub const EXPECT_FAILED: i32 = 3;
/// `compare` outside its tolerance on a lab run whose host crossed a threshold: not a verdict
/// on the simulator (a busy host, not necessarily a wrong model).
pub const HOST_BUSY: i32 = 4;

/// An error in what the user gave (exit code [`INVALID`]).
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

/// The exit code of an error: [`INVALID`] for rejected input, else [`RUNTIME`].
pub fn code_of(e: &anyhow::Error) -> i32 {
    let rejected = e.chain().any(|c| {
        c.downcast_ref::<Invalid>().is_some()
            || c.downcast_ref::<linkshare_lab::Invalid>().is_some()
            || c.downcast_ref::<linkshare_router::guard::Refused>()
                .is_some()
    });
    if rejected {
        INVALID
    } else {
        RUNTIME
    }
}
