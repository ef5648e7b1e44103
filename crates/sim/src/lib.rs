//! # linkshare-sim
//!
//! A deterministic discrete-event simulator that drives linkshare's schedulers under virtual time.
//!
//! **No I/O in the engine, no wall clock, fully deterministic**: the same [`Scenario`] and seed
//! give the same [`model::SimResult`], event for event. The scheduler at the bottleneck is the very
//! object the real shaper runs (`Box<dyn Qdisc<SimPacket>>`, built from the scenario's policy).
//!
//! Modules, one concern each:
//! * [`scenario`]: the TOML scenario format (`docs/scenario-format.md`), strict, located errors;
//!   `load` reads a whole file, its `[sweep]` expanded by [`sweep`] (no module cycle);
//! * [`engine`]: the clock and the event heap ordered by `(time, seq)`, with a budget and a stall
//!   detector so a run never hangs;
//! * [`link`]: the bottleneck: scheduler → device buffer → wire, the pull rule and `timer_hz`;
//! * [`tcp`] (NewReno, CUBIC), [`udp`] (CBR, Poisson, on/off), [`ping`]: the traffic;
//! * [`workload`]: arriving flows: Poisson arrivals, size distributions, the unloaded FCT;
//! * [`metrics`]: RTT histograms, fairness;
//! * [`figures`]: a run's per-class and per-flow figures as rows of named columns;
//! * [`jitter`]: what a seed other than 1 changes for every kind of traffic (start offsets, ACK
//!   processing jitter);
//! * [`series`]: how much time series a run keeps (a row budget, whatever the duration);
//! * `world`: the topology and the event loop, behind [`run`];
//! * [`overrides`]: keys of a scenario set by dotted path (sweep axes, `--set`, Python);
//! * [`sweep`]: `[sweep]` sections: one file, many points, one table;
//! * [`model`]: the results (re-exported from `linkshare-report`, which writes the files);
//! * [`compare`]: a run held against the lab's (`linkshare compare`, docs/fidelity.md).

pub mod compare;
pub mod engine;
pub mod expect;
pub mod figures;
pub mod jitter;
pub mod link;
mod load;
pub mod metrics;
pub mod overrides;
pub mod packet;
pub mod ping;
pub mod policy;
pub mod scenario;
pub mod seeds;
pub mod series;
pub mod sweep;
pub mod tcp;
pub mod udp;
pub mod workload;
mod world;

/// The result model lives with its renderers in `linkshare-report`; re-exported so that
/// `linkshare_sim::model::SimResult` keeps naming what [`run`] returns.
pub use linkshare_report::model;
pub use packet::SimPacket;
pub use scenario::{Scenario, ScenarioError};
pub use world::{run, run_within, SimError, NO_POLICY_CLASS};
