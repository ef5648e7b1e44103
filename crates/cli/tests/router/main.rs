//! `linkshare run` on real interfaces: namespaces a, r, c joined by veth pairs a<->r and r<->c,
//! the shaper in r bridging its two veths, real kernel sockets in a and c.
//! Skips (with the reason printed) when not root or when `ip netns` does not work, and fails
//! instead under LINKSHARE_REQUIRE_NETNS=1 (`testbed::netns_test_can_run`, as .ci/run sets).
//!
//! One test binary (`cargo test -p linkshare --test router`), one module per topic; a test's
//! full name is `MODULE::NAME`, and a filter on NAME alone still selects it:
//! * `helpers`: the testbed (`Lab`), traffic in the namespaces and the shared policies;
//! * `forwarding`: TCP at a class's rate, the receive rings, a worker per direction with TCP,
//!   and the ignored forwarding and lateness measurement;
//! * `class_rates`: UDP classes get their rates and borrow (across workers too), priority,
//!   CBQ and the ATM link layer;
//! * `reload`: reloads and class changes during traffic, packet conservation, a bad reload;
//! * `datapath_thread`: `--realtime`, `--nice`, `--cpus`, and catching up after pauses;
//! * `reverse_and_delay`: the reverse policy and delay emulation (`--emulate`, `--path-delay`);
//! * `control`: the control protocol and `stat`'s forms;
//! * `malformed_and_exit`: namespace clean-up on panic, malformed frames, SIGHUP and SIGTERM;
//! * `cake_stats`: a CAKE leaf's tins in `stat --json`, `stat --tc` and `/metrics`;
//! * `dscp_trust`: the policy's `trust_dscp` and `wash` on EF-marked datagrams;
//! * `link_faults`: IP fragments through several workers, a link that goes down and up, an
//!   interface deleted and re-created, an MTU change;
//! * `non_ip`: frames that are not IP shaped, passed or dropped as the policy's `non_ip` says;
//! * `queue_memory`: a flood cut at the `--queue-memory` bound;
//! * `fail_open`: the kernel bridge that forwards while the shaper is not running.
//! * `workers_address`: `--placement address`: subscribers on one worker each, both
//!   directions, under a shared uplink.
//!
//! Tests take the testbed one at a time (`SERIAL` in `helpers`), whatever `--test-threads`.

mod helpers;

mod cake_stats;
mod class_rates;
mod control;
mod datapath_thread;
mod dscp_trust;
mod fail_open;
mod forwarding;
mod link_faults;
mod malformed_and_exit;
mod non_ip;
mod queue_memory;
mod reload;
mod reverse_and_delay;
mod workers_address;
