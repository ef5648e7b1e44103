//! The namespace testbed shared by `linkshare lab` and `linkshare lab bench`: hosts A, B, C of the
//! seeds as three network namespaces.
//!
//! ```text
//!   sender (A)                 router (B)                  sink (C)
//!   dev_a 10.77.0.1 ── veth ── dev_ra   dev_rc ── veth ── dev_c 10.77.0.2
//!                              └─ Router ─┘
//! ```
//!
//! B has no addresses: the [`Router`] bridges `dev_ra` and `dev_rc` (a bump in the wire), so A and
//! C share one L2 segment and every frame from A to C crosses the router's scheduler. The router
//! is either `linkshare run` ([`LinkshareRouter`]) or a Linux bridge, bare or with the kernel's HTB
//! from `export tc` ([`KernelRouter`]).
//!
//! Names carry the process id and a sequence number (`lslab<pid>x<seq>a`), so parallel runs and
//! test binaries never collide. Everything is removed on every exit path: [`Drop`] stops the
//! router and deletes the namespaces (which takes the veths with them); SIGINT and SIGTERM only
//! set a flag ([`install_signal_handlers`], [`interrupted`]) that the run loop polls, so the
//! unwinding path is the ordinary one. The router child gets `PR_SET_PDEATHSIG`, so it dies with
//! us even on SIGKILL; namespaces left behind by a killed run are removed by the next
//! [`Testbed::new`] ([`remove_stale`]).
//!
//! Submodules, one concern each: `bed` the namespaces and veths, `netns` the `ip` plumbing
//! and namespace threads, `router` the routers, `stats` their counters and the parsers of
//! `tc -s` and `stat --json`, `signals` the SIGINT/SIGTERM flag and the lab's priority,
//! `gate` the skip-or-fail gate of the namespace tests. Everything public is re-exported
//! here, so callers keep writing `testbed::X`.

mod bed;
mod gate;
mod netns;
mod router;
mod signals;
mod stats;

pub use bed::{TcpRoute, Testbed, ADDR_A, ADDR_C};
pub use gate::{netns_test_can_run, netns_test_skipped, NETNS_LOG_ENV, REQUIRE_NETNS_ENV};
pub use netns::{
    in_ns, ip, ip_batch, netns_list, offloads_off, remove_stale, set_rx_vlan_offload, spawn_in_ns,
    unavailable,
};
pub use router::{KernelRouter, LinkshareRouter, Router, ScriptFn};
pub use signals::{install_signal_handlers, interrupted, raise_priority, LAB_NICE};
pub use stats::{parse_tc_classes, ClassCounters, RouterStats};
