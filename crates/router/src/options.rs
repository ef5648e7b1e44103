//! The options of `linkshare run`: what the shaper is told at start (interfaces, policies,
//! device model, emulation, I/O, threads) and where its control socket lives by default.
//!
//! Plain data, parsed by the cli; nothing here opens or runs anything. Checks that need only the
//! options themselves (`RxSplit::check`) live with them.

use std::path::PathBuf;

use crate::emulate;
use crate::port::RxRingKind;
use crate::xdp::IoKind;

/// Everything `linkshare run` needs.
#[derive(Clone, Debug)]
pub struct Options {
    pub policy: PathBuf,
    pub reverse_policy: Option<PathBuf>,
    pub dev_in: String,
    pub dev_out: String,
    pub control: PathBuf,
    /// Directory of the interface locks ([`DEFAULT_RUN_DIR`] unless given).
    pub lock_dir: PathBuf,
    /// Where the last accepted policy is kept, and started from when the file given does not
    /// validate (`--last-good`, or systemd's state directory; last_good.rs).
    pub last_good: Option<crate::last_good::LastGood>,
    /// The key of the flow hash that per-flow queues (fq_codel, DRR, SFQ, CAKE) bucket by:
    /// random per process ([`random_flow_key`]), or fixed by `--flow-key` for reproducible
    /// tests, so that no remote host can pick ports that share another flow's queue.
    pub flow_key: u64,
    /// Bytes the modelled device buffer holds behind the frame on the wire (the pull rule of
    /// `linkshare_core::egress`); `None`: [`default_device_buffer`](crate::default_device_buffer)
    /// of the root rate.
    pub device_buffer: Option<u64>,
    /// Link emulation: after the scheduler on OUT, and a delay on the reverse direction.
    pub emulate: Option<emulate::EmulateSpec>,
    /// Per-host extra one-way delays, both directions (`--path-delay ADDR=DELAY`).
    pub path_delays: Vec<emulate::PathDelay>,
    /// Waits shorter than this are busy-polled, and the timer is armed this early; `None`: a
    /// margin learnt from the timer's latency ([`wake::EarlyWake`](crate::wake::EarlyWake)).
    pub busy_poll_ns: Option<u64>,
    /// How much of a late wake-up's missed time the scheduler is replayed over
    /// (`--catch-up-ms`; 0: none, a late loop loses the rate like the kernel's watchdog).
    pub catch_up_ns: u64,
    /// Receive coalescing (`--rx-coalesce-us`, 0: off): after a loop turn that received a few
    /// frames and emptied the rings, sleep this long (never past the next departure's
    /// margin) before the next turn, so frames arrive in batches and each turn's system calls
    /// are paid once per batch instead of once per frame or two: a NIC's `rx-usecs` for the
    /// rings. Adds up to this much (plus the timer's lateness) to the wait of a frame that
    /// arrives while traffic flows; a frame after a quiet spell is taken at once.
    pub rx_coalesce_ns: u64,
    /// The kind of receive ring on both interfaces (AF_PACKET).
    pub rx_ring: RxRingKind,
    /// AF_XDP or AF_PACKET ([`xdp::open_port`](crate::xdp::open_port)).
    pub io: IoKind,
    /// Line rate of the interfaces in bit/s (`None`: what the drivers report; unknown counts as
    /// the policy's root rate). The device buffer drains at the faster of this and the root rate.
    pub line_rate: Option<u64>,
    /// Serve OpenMetrics at `http://ADDR/metrics` from the event loop (`--metrics`).
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve the live dashboard at `http://ADDR/` from the event loop (`--web`).
    pub web: Option<std::net::SocketAddr>,
    /// Run the datapath thread under `SCHED_FIFO` at this priority (1–99) with its memory
    /// locked (`--realtime`); `None`: an ordinary thread.
    pub realtime: Option<u8>,
    /// The datapath thread's nice value (`--nice`; `None`: left as inherited).
    pub nice: Option<i8>,
    /// The datapath thread's time slice under the fair scheduler, ns (`--slice-us`; `None`: the
    /// kernel's default): a short one lets the loop's wake-ups preempt other tasks at once
    /// (sys::set_slice). Not used with `realtime`.
    pub slice_ns: Option<u64>,
    /// CPUs of the datapath threads (`--cpus`): thread `i` is pinned to `cpus[i % len]`
    /// ([`affinity`](crate::affinity)); empty: wherever the kernel puts them.
    pub cpus: Vec<usize>,
    /// Datapath threads (`--workers`): 1 is the single-threaded shaper, more cut the policy's
    /// HTB into shards, one per worker (workers/).
    pub workers: usize,
    /// Bytes the buffers of queued frames may hold, both directions together
    /// (`--queue-memory`; [`crate::membound`]).
    pub queue_memory: u64,
    /// How the top-level classes are dealt to the workers (`--placement`).
    pub placement: linkshare_core::shard::Placement,
    /// `--placement address`: top-level classes placed, and received frames steered, by the
    /// subscriber's address (workers/address.rs); `placement` is then unused.
    pub by_address: bool,
    /// Which worker receives what (`--rx-split`).
    pub rx_split: RxSplit,
}

/// How `--workers` share what the interfaces receive (`--rx-split`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxSplit {
    /// Every worker receives on both interfaces; the kernel deals the frames by flow hash
    /// (AF_PACKET fanout, or the receive queue with AF_XDP).
    #[default]
    Flow,
    /// Two workers: worker 0 receives everything that arrives on the first interface, worker 1
    /// on the second (with the `--io` asked for), and each transmits on the other one (an
    /// AF_PACKET transmit-only socket there). A
    /// connection's two directions then run on two cores: on veth the data's transmit carries
    /// the receiver's stack and the ACKs' transmit the sender's (docs/router.md, "Workers").
    Direction,
}

impl RxSplit {
    /// Whether this split can run `workers` datapath threads; if not, why and the fix.
    pub fn check(self, workers: usize) -> Result<(), String> {
        if self == RxSplit::Direction && workers != 2 {
            return Err(format!(
                "--rx-split direction gives each of two workers one interface to receive on: \
                 use --workers 2 with it (got --workers {workers})"
            ));
        }
        Ok(())
    }
}

impl std::str::FromStr for RxSplit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "flow" => Ok(RxSplit::Flow),
            "direction" => Ok(RxSplit::Direction),
            other => Err(format!(
                "unknown --rx-split `{other}`: use flow or direction"
            )),
        }
    }
}

/// Where control sockets and interface locks live by default.
pub const DEFAULT_RUN_DIR: &str = "/run/linkshare";

/// Default control socket path for a pair of interfaces.
pub fn default_control(dev_in: &str, dev_out: &str) -> PathBuf {
    PathBuf::from(format!("{DEFAULT_RUN_DIR}/{dev_in}-{dev_out}.sock"))
}

/// A flow-hash key from the kernel's random source (getrandom(2)); `None` if it is unavailable.
pub fn random_flow_key() -> Option<u64> {
    let mut b = [0u8; 8];
    // SAFETY: `b` is valid for 8 bytes.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    (n == 8).then(|| u64::from_ne_bytes(b))
}
