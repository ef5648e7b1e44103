//! `linkshare run --workers N`: N datapath threads, each owning a shard of the class tree, and
//! one control thread that shows them as one shaper.
//!
//! ## Principles
//! * **A shard per worker, the root shared without a lock.** The policy's HTB is cut below its
//!   root ([`linkshare_core::shard`]): worker `i` owns shard `i` — its top-level classes and
//!   everything under them — and no other thread touches it. The root's rate is shared through
//!   the shards' gates and one atomic pool (the error bound is derived in `core/src/shard`).
//! * **Every frame is scheduled by the worker that owns its class.** Each worker has its own
//!   sockets on both interfaces: AF_PACKET sockets of one fanout group per interface
//!   (`PACKET_FANOUT_HASH`: the kernel gives each frame to one worker, a flow always to the same
//!   one), or the AF_XDP socket of one receive queue per worker. The worker that receives a frame
//!   parses and classifies it (the whole tree's classifier, [`Steer`]); a frame of another
//!   worker's shard is handed over through that worker's bounded inbox (one batch per turn, one
//!   eventfd wake-up per batch). Each worker sends on its own transmit ring. So a frame costs
//!   one classification wherever it lands; what moves between cores is a pointer.
//! * **One tree for the operator.** The control thread (`coord`) serves the control socket,
//!   signals and reloads. `stat` asks every worker for its snapshot and answers once all have
//!   replied, merged (`merge`): interfaces and counters summed, the root's copies summed into
//!   one row, every class under its id in the whole tree. A reload is built on the builder
//!   thread, cut into shards by the control thread, and each worker installs its shard at a turn
//!   boundary (its new shard adopts the old one's state, `Shard`'s `adopt`); the client hears
//!   one report when all have.
//! * **Nothing is lost between threads without a count.** A full inbox refuses the frame and the
//!   sender counts it (`handoff_full`); a frame classified under a policy the receiver no longer
//!   runs is classified again there (`handoff_reclassified`); at exit the control thread first
//!   stops every worker's receiving, then lets each drain its inbox and its queues.
//!
//! * **Subscribers by address** (`--placement address`, `address`): a top-level class is
//!   placed by its first address, and the fanout group steers each frame by its destination
//!   (downloads) or source (uploads) with the same function, so a subscriber's frames, both
//!   directions, are received by the worker that schedules them and nothing is handed over.
//!
//! Layout: this file (the messages and the worker's end, [`Link`]), `worker` (a worker: the
//! shaper's loop over a shard), `coord` (the control thread), `merge` (one snapshot from N),
//! `address` (placement and steering by address).
//!
//! Source: the per-queue / per-CPU datapath of DPDK's librte_sched applications and of Linux's
//! mq qdisc (one qdisc per transmit queue); the fanout modes of Linux's AF_PACKET
//! (net/packet/af_packet.c, `fanout_demux_hash`).

mod address;
mod coord;
mod merge;
mod worker;

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;

use linkshare_core::classify::{ClassId, Classifier};
use linkshare_core::shard::{Shard, ShardMap};

use crate::control::proto::ReloadReport;
use crate::control::snapshot::Snapshot;
use crate::frame::Frame;
use crate::hist::Hist;
use crate::sys;

pub use coord::run;

/// Batches a worker's inbox holds (each batch is what one peer received for it in one turn).
const INBOX_BATCHES: usize = 256;

/// What every worker needs to steer a frame of one direction: the whole tree's classifier and
/// where each class lives. Replaced as a whole by a reload (`gen` says which policy it is of).
pub(crate) struct Steer {
    pub gen: u64,
    pub classifier: Classifier,
    pub map: ShardMap,
}

impl Steer {
    /// The shard and local class of a frame's class (the default class for an unknown one).
    pub fn locate(&self, class: ClassId) -> (usize, ClassId) {
        self.map
            .locate(class)
            .or_else(|| self.map.locate(self.classifier.default_class()))
            .unwrap_or((0, 0))
    }
}

/// A frame handed to the worker that owns its class.
pub(crate) struct Handoff {
    pub dir: usize,
    /// The generation of the [`Steer`] that classified it, and the class it found.
    pub gen: u64,
    pub class: ClassId,
    /// How often it was passed on already (a frame classified under an old policy may move
    /// once more; never more than [`MAX_HOPS`]).
    pub hops: u8,
    pub frame: Frame,
}

/// Most hand-overs of one frame (the second and later only while a reload is being installed).
pub(crate) const MAX_HOPS: u8 = 3;

/// What the control thread asks of a worker.
pub(crate) enum Cmd {
    /// Reply with a [`Reply::Stat`] (`seq` pairs the replies of one `stat`).
    Stat { seq: u64 },
    /// Install a reloaded policy's shard for direction `dir`.
    Install(Box<Install>),
    /// Stop receiving (the first step of an exit); reply [`Reply::Quiet`].
    Quiesce,
    /// Send what is queued (and what peers handed over), then exit.
    Stop,
}

/// One worker's part of a reload.
pub(crate) struct Install {
    pub seq: u64,
    pub dir: usize,
    pub shard: Shard<Frame>,
    pub steer: Arc<Steer>,
    pub link: crate::builder::LinkRules,
    pub text: String,
    pub origin: String,
    pub path: Option<std::path::PathBuf>,
}

/// What a worker tells the control thread.
pub(crate) enum Reply {
    /// The worker opened its interfaces and runs (or why it could not).
    Started {
        worker: usize,
        result: Result<String, String>,
    },
    Stat {
        seq: u64,
        worker: usize,
        snap: Box<Snapshot>,
        lateness: Box<Hist>,
        /// The worker's timer wake-up lateness (`wake::EarlyWake::timer_hist`).
        timer: Box<Hist>,
        handoff: HandoffCounts,
    },
    Installed {
        seq: u64,
        report: ReloadReport,
    },
    Quiet,
    /// The worker's loop ended (its error, if any).
    Exited {
        worker: usize,
        result: Result<(), String>,
    },
}

/// One worker's hand-over counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandoffCounts {
    /// Frames this worker passed to the worker owning their class.
    pub sent: u64,
    /// Frames this worker took from its inbox.
    pub received: u64,
    /// Frames refused because the owner's inbox was full (dropped, counted here).
    pub full: u64,
    /// Frames classified again because they came under another policy generation.
    pub reclassified: u64,
    /// Frames the owner could no longer take (it had exited; only at shutdown).
    pub lost: u64,
}

/// A peer's inbox as another worker holds it.
#[derive(Clone)]
pub(crate) struct Peer {
    pub inbox: SyncSender<Vec<Handoff>>,
    pub wake: Arc<OwnedFd>,
}

/// The worker's end of everything: its index, its inbox, its peers, the control thread.
pub(crate) struct Link {
    pub index: usize,
    /// Rung by peers (hand-overs) and by the control thread (commands).
    pub wake: Arc<OwnedFd>,
    pub inbox: Receiver<Vec<Handoff>>,
    pub cmds: Receiver<Cmd>,
    pub replies: Sender<Reply>,
    pub coord_wake: Arc<OwnedFd>,
    /// Every worker's inbox, this one's included (never used: own frames are enqueued).
    pub peers: Vec<Peer>,
    /// Per peer, the frames for it received this turn.
    pub outbox: Vec<Vec<Handoff>>,
    /// Per direction, the steering of the policy this worker runs.
    pub steer: [Option<Arc<Steer>>; 2],
    pub counts: HandoffCounts,
    /// Receiving stopped (`Cmd::Quiesce`).
    pub quiet: bool,
    /// When this worker's loop last turned (monotonic ns): the control thread feeds systemd's
    /// watchdog only while every worker's is recent (notify.rs).
    pub heartbeat: Arc<AtomicU64>,
}

impl Link {
    /// Tell the control thread something (a control thread that is gone is ignored: the
    /// worker is being torn down with it).
    pub fn reply(&self, r: Reply) {
        if self.replies.send(r).is_ok() {
            sys::eventfd_ring(self.coord_wake.as_raw_fd());
        }
    }

    /// Send each peer what it was handed this turn: one batch and one wake-up per peer.
    pub fn flush_outbox(&mut self) {
        for (i, out) in self.outbox.iter_mut().enumerate() {
            if out.is_empty() {
                continue;
            }
            let n = out.len() as u64;
            let batch = std::mem::take(out);
            let Some(peer) = self.peers.get(i) else {
                self.counts.lost += n;
                continue;
            };
            match peer.inbox.try_send(batch) {
                Ok(()) => {
                    self.counts.sent += n;
                    sys::eventfd_ring(peer.wake.as_raw_fd());
                }
                Err(TrySendError::Full(_)) => self.counts.full += n,
                Err(TrySendError::Disconnected(_)) => self.counts.lost += n,
            }
        }
    }

    /// The next batch handed to this worker, if any.
    pub fn next_batch(&mut self) -> Option<Vec<Handoff>> {
        match self.inbox.try_recv() {
            Ok(b) => {
                self.counts.received += b.len() as u64;
                Some(b)
            }
            Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => None,
        }
    }

    /// The next command, if any.
    pub fn next_cmd(&mut self) -> Option<Cmd> {
        self.cmds.try_recv().ok()
    }
}
