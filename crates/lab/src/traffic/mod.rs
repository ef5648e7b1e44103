//! The scenario's flows as real kernel sockets: sources in the sender namespace, sinks in the
//! sink namespace, counters shared with the sampler through atomics.
//!
//! * **tcp**: one connection per flow, connected (handshake done) before t0, written from `start`
//!   to `stop` (or `bytes`) in chunks of [`NOTSENT_LOWAT`] bytes with `TCP_NOTSENT_LOWAT` set to
//!   the same, so at `stop` at most about that much written data is still unsent (Linux
//!   net/ipv4/tcp.c: `tcp_stream_memory_free` holds writers while `notsent ≥ lowat`). The socket
//!   runs the flow's `cc` (`TCP_CONGESTION`, read back). A `window` set in the file is the
//!   receiver's buffer: `SO_RCVBUF` (forced, as root) on the listening socket before the
//!   handshake, so the advertised window stays at about `window`, and `SO_SNDBUF` the same;
//!   without one both buffers autotune as Linux's do. RTT samples are the kernel's smoothed RTT
//!   (`TCP_INFO.tcpi_rtt`) read every 50 ms; retransmits are `tcpi_total_retrans`, read until
//!   everything written is acknowledged. A finite flow (`bytes`) completes when the sink has
//!   read all of them: the instant is its FCT's end, as in the simulator. An arriving flow with a
//!   `request` has its sink write the request at the arrival time and its source answer once it
//!   has read it; the handshake is done before t0 either way, so neither side counts it.
//! * **udp**: datagrams of the flow's IP `size` (payload `size − 28`) paced at `rate` by a
//!   deadline loop (absolute deadlines, 1 ns timer slack, bounded catch-up), CBR, Poisson or
//!   on/off. Each datagram carries its number and its send time, so the sink measures loss and
//!   one-way delay (both ends read the same monotonic clock).
//! * **ping**: ICMP echo through a ping socket (`SOCK_DGRAM`, `IPPROTO_ICMP`) every `interval`;
//!   the echo carries its send time, the RTT is measured on the reply.
//!
//! UDP and ping receivers keep counting for [`Plan::drain`] after the flow's `stop` (max(0.5 s,
//! 2 × base RTT)), so a packet still in flight at `stop` is not counted as lost.
//!
//! Every socket gets the flow's TOS byte (`IP_TOS`) and is bound to the flow's source address and
//! port, so the policy's filters see exactly what the simulator's classifier sees.//!
//! Submodules, one concern each: `tcp`, `udp` and `ping` the three kinds of flow (source
//! and sink), `sockets` the raw socket calls and options they share, congestion control
//! included. This module holds what a flow measures ([`FlowLive`]), what it is to do
//! ([`Plan`]) and the start and stop of them all ([`Traffic`]).

mod ping;
mod sockets;
mod tcp;
mod udp;

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use linkshare_sim::metrics::Hist;
use linkshare_sim::scenario::{FlowKind, FlowSpec};
pub use linkshare_sim::tcp::NOTSENT_LOWAT;

use crate::testbed::spawn_in_ns;

pub(crate) use sockets::setsockopt_int;
pub use sockets::{check_congestion, congestion_of, linux_cc, set_congestion, AVAILABLE_CC};
pub use tcp::fixed_window;

use ping::ping_source;
use tcp::{tcp_sink, tcp_source};
use udp::{udp_sink, udp_source};

/// How often blocking calls wake up to check the clock and the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// How long a TCP source may take to connect before t0.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What one flow measured so far; shared between its threads and the sampler.
#[derive(Default)]
pub struct FlowLive {
    /// Bytes delivered at the sink: TCP payload, UDP IP bytes, ping IP bytes of echoes answered.
    pub delivered: AtomicU64,
    pub packets_sent: AtomicU64,
    /// UDP: nanoseconds of the flow's schedule skipped because its source woke from a sleep
    /// more than the catch-up bound late (the machine starved it; time blocked in `send` by
    /// a full queue is the network's answer and not counted).
    pub late_skipped_ns: AtomicU64,
    /// Datagrams / echoes received (UDP, ping).
    pub packets_received: AtomicU64,
    pub retransmits: AtomicU64,
    /// RTT samples: (seconds since t0, ms).
    pub rtt: Mutex<Vec<(f64, f64)>>,
    /// One-way delay in ns (UDP).
    pub owd: Mutex<Hist>,
    /// The same delays summed (ns) and counted, read at every sample for the per-interval mean.
    pub owd_sum_ns: AtomicU64,
    pub owd_n: AtomicU64,
    /// First error a thread of the flow ran into.
    pub error: Mutex<Option<String>>,
    /// A finite TCP flow: seconds after t0 its last byte reached the sink.
    pub done_s: Mutex<Option<f64>>,
}

impl FlowLive {
    fn fail(&self, e: impl std::fmt::Display) {
        if let Ok(mut g) = self.error.lock() {
            g.get_or_insert_with(|| e.to_string());
        }
    }
}

/// One flow of the scenario, checked for the lab (IPv4 only).
#[derive(Clone, Debug)]
pub struct Plan {
    pub spec: FlowSpec,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// Seconds after t0.
    pub start: f64,
    pub stop: f64,
    pub seed: u64,
    /// Base RTT in seconds: 2 × (link delay + extra_delay).
    pub base_rtt: f64,
}

impl Plan {
    /// `link_delay`: the scenario's one-way `[link] delay` in seconds.
    pub fn new(spec: &FlowSpec, duration: f64, seed: u64, link_delay: f64) -> anyhow::Result<Plan> {
        let (std::net::IpAddr::V4(src), std::net::IpAddr::V4(dst)) = (spec.src, spec.dst) else {
            bail!(
                "flow `{}`: the lab runs IPv4 flows only (src {}, dst {})",
                spec.name,
                spec.src,
                spec.dst
            );
        };
        Ok(Plan {
            spec: spec.clone(),
            src,
            dst,
            start: spec.start.as_secs_f64(),
            stop: spec.stop.as_secs_f64().min(duration),
            seed,
            base_rtt: 2.0 * (link_delay + spec.extra_delay.as_secs_f64()),
        })
    }

    /// How long after `stop` the receivers keep counting: max(0.5 s, 2 × base RTT).
    pub fn drain(&self) -> f64 {
        (2.0 * self.base_rtt).max(0.5)
    }
}

/// The running flows: join them with [`Traffic::finish`].
pub struct Traffic {
    threads: Vec<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Traffic {
    /// Start the sinks in `ns_c`, wait until they listen, then the sources in `ns_a`; returns
    /// t0, the instant the scenario's time 0 corresponds to.
    pub fn start(
        plans: &[Plan],
        live: &[Arc<FlowLive>],
        ns_a: &str,
        ns_c: &str,
    ) -> anyhow::Result<(Traffic, Instant)> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tr = Traffic {
            threads: Vec::new(),
            stop: stop.clone(),
        };
        // t0 is set after the sinks are ready; they wait for it through this cell.
        let t0_cell: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let mut ready = Vec::new();
        for (p, l) in plans.iter().zip(live) {
            let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
            let (p, l, st, t0c) = (p.clone(), l.clone(), stop.clone(), t0_cell.clone());
            match &p.spec.kind {
                FlowKind::Tcp(_) => {
                    tr.threads
                        .push(spawn_in_ns(ns_c, move || tcp_sink(&p, &l, &st, &t0c, tx))?);
                    ready.push(rx);
                }
                FlowKind::Udp(_) => {
                    tr.threads
                        .push(spawn_in_ns(ns_c, move || udp_sink(&p, &l, &st, &t0c, tx))?);
                    ready.push(rx);
                }
                FlowKind::Ping(_) => {}
            }
        }
        for rx in ready {
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tr.finish();
                    bail!("{e}");
                }
                Err(_) => {
                    tr.finish();
                    bail!("a sink did not start within 5 s");
                }
            }
        }
        if plans
            .iter()
            .any(|p| matches!(p.spec.kind, FlowKind::Ping(_)))
        {
            // Ping sockets for root: the group range is per namespace.
            crate::testbed::in_ns(ns_a, || {
                std::fs::write("/proc/sys/net/ipv4/ping_group_range", "0 2147483647")
            })?
            .context("cannot allow ping sockets in the sender namespace")?;
        }
        // TCP connects first: every handshake is done before t0, whatever the flow's `start`.
        let mut t0_senders = Vec::new();
        let mut connected = Vec::new();
        for (p, l) in plans.iter().zip(live) {
            if !matches!(p.spec.kind, FlowKind::Tcp(_)) {
                continue;
            }
            let (p, l, st) = (p.clone(), l.clone(), stop.clone());
            let (t0_tx, t0_rx) = std::sync::mpsc::channel::<Instant>();
            let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
            tr.threads.push(spawn_in_ns(ns_a, move || {
                set_timer_slack();
                tcp_source(&p, &l, &st, &tx, &t0_rx);
            })?);
            t0_senders.push(t0_tx);
            connected.push(rx);
        }
        for rx in connected {
            match rx.recv_timeout(CONNECT_TIMEOUT + Duration::from_secs(1)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tr.finish();
                    bail!("{e}");
                }
                Err(_) => {
                    tr.finish();
                    bail!(
                        "a TCP flow did not connect within {} s",
                        CONNECT_TIMEOUT.as_secs()
                    );
                }
            }
        }
        let t0 = Instant::now() + Duration::from_millis(100);
        if let Ok(mut g) = t0_cell.lock() {
            *g = Some(t0);
        }
        for tx in t0_senders {
            let _ = tx.send(t0);
        }
        for (p, l) in plans.iter().zip(live) {
            let (p, l, st) = (p.clone(), l.clone(), stop.clone());
            if matches!(p.spec.kind, FlowKind::Tcp(_)) {
                continue;
            }
            tr.threads.push(spawn_in_ns(ns_a, move || {
                set_timer_slack();
                let r = match &p.spec.kind {
                    FlowKind::Tcp(_) => Ok(()),
                    FlowKind::Udp(_) => udp_source(&p, &l, &st, t0),
                    FlowKind::Ping(_) => ping_source(&p, &l, &st, t0),
                };
                if let Err(e) = r {
                    l.fail(format!("flow `{}`: {e:#}", p.spec.name));
                }
            })?);
        }
        Ok((tr, t0))
    }

    /// Tell every thread to stop and wait for them.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.finish();
    }
}

fn set_timer_slack() {
    // SAFETY: prctl with integer arguments; affects only this thread's timers.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

fn since(t0: Instant) -> f64 {
    Instant::now().saturating_duration_since(t0).as_secs_f64()
}

/// Sleep until `t` seconds after t0 or until stopped; false if stopped.
fn wait_until(t0: Instant, t: f64, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = since(t0);
        if now >= t {
            return true;
        }
        std::thread::sleep(Duration::from_secs_f64((t - now).min(0.05)));
    }
}
