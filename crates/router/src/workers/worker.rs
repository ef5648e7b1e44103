//! One worker of `--workers N`: a [`Shaper`] whose schedulers are shards, with its own sockets,
//! whose role (role.rs) is its [`Link`]: it steers each frame to the worker owning its class,
//! takes what its peers hand over, and has no control plane of its own (the control thread's
//! commands arrive through its inbox).
//!
//! Per frame it receives: one classification with the whole tree's classifier, then either the
//! enqueue into its own shard (O(1) in classes beyond HTB's own cost, see core/src/htb) or one
//! push onto the owner's hand-over batch; a handed-over frame costs its receiver one map lookup
//! (O(1)). Commands (`stat`, an install, stop) are handled at a turn boundary, never mid-turn.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::Context;
use linkshare_core::shard::Shard;
use linkshare_core::Time;

use super::address::{fanout_program, Side};
use super::{Cmd, Handoff, Install, Link, Reply, Steer, MAX_HOPS};
use crate::frame::Frame;
use crate::port::{PacketPort, Port};
use crate::role::Role;
use crate::run::T_WAKE;
use crate::xdp::port::Attachment;
use crate::xdp::XdpPort;
use crate::{sys, Dir, Options, RxSplit, Sched, Shaper};

/// A direction's part of a worker: its shard and the steering of the whole tree.
pub(crate) struct DirSpec {
    pub shard: Shard<Frame>,
    pub steer: Arc<Steer>,
    pub link: crate::builder::LinkRules,
    pub text: (String, String),
    pub path: Option<std::path::PathBuf>,
}

/// Everything a worker thread starts from.
pub(crate) struct WorkerSpec {
    pub opts: Options,
    pub dirs: [Option<DirSpec>; 2],
    /// The receive fanout group of each interface (AF_PACKET).
    pub fanout: [u16; 2],
    /// The AF_XDP attachment of each interface, when the workers use AF_XDP there.
    pub xdp: [Option<Arc<Attachment>>; 2],
    pub link: Link,
}

/// Open one worker's socket on interface `name`: the AF_XDP socket of receive queue `queue`
/// when the interface has a shared attachment, else an AF_PACKET socket in its fanout group
/// (frames dealt by flow hash, or with `--placement address` by the address on `side`).
fn open_port(
    opts: &Options,
    name: &str,
    queue: usize,
    att: Option<Arc<Attachment>>,
    group: u16,
    side: Side,
) -> anyhow::Result<Box<dyn Port>> {
    if let Some(att) = att {
        let p = XdpPort::open_queue(name, att, queue as u32)
            .with_context(|| format!("cannot open {name} (AF_XDP, queue {queue})"))?;
        return Ok(Box::new(p));
    }
    let mut p =
        PacketPort::open_with(name, opts.rx_ring).with_context(|| format!("cannot open {name}"))?;
    if opts.by_address {
        p.join_fanout_cbpf(group, &fanout_program(side, opts.workers))?;
    } else {
        p.join_fanout(group)?;
    }
    Ok(Box::new(p))
}

impl Shaper<Link> {
    /// Build worker `spec.link.index`: open its sockets, install its shards.
    pub(crate) fn new_worker(spec: WorkerSpec) -> anyhow::Result<Shaper<Link>> {
        let WorkerSpec {
            opts,
            dirs,
            fanout,
            xdp: [x0, x1],
            mut link,
        } = spec;
        let i = link.index;
        let (p0, p1) = match opts.rx_split {
            RxSplit::Flow => (
                open_port(&opts, &opts.dev_in, i, x0, fanout[0], Side::Dst)?,
                open_port(&opts, &opts.dev_out, i, x1, fanout[1], Side::Src)?,
            ),
            // Worker i receives alone on interface i (no fanout group; AF_XDP on every queue, or
            // AF_PACKET, as `--io` asks) and only transmits on the other one, through an
            // AF_PACKET transmit ring: that interface's AF_XDP sockets, one per queue, belong to
            // the worker receiving there (`coord::run` checked: two workers).
            RxSplit::Direction => {
                let devs = [&opts.dev_in, &opts.dev_out];
                let mut ports: Vec<Box<dyn Port>> = Vec::with_capacity(2);
                for (k, dev) in devs.into_iter().enumerate() {
                    let p: Box<dyn Port> = if k == i {
                        crate::xdp::open_port(dev, opts.io, opts.rx_ring)
                            .with_context(|| format!("cannot open {dev}"))?
                    } else {
                        Box::new(
                            PacketPort::open_tx_only(dev)
                                .with_context(|| format!("cannot open {dev}"))?,
                        )
                    };
                    ports.push(p);
                }
                let (Some(p1), Some(p0)) = (ports.pop(), ports.pop()) else {
                    anyhow::bail!("internal: a worker needs two ports");
                };
                (p0, p1)
            }
        };
        let mut out = Vec::new();
        for (d, spec) in dirs.into_iter().enumerate() {
            let to = 1 - d;
            let dir = match spec {
                Some(s) => {
                    link.steer[d] = Some(s.steer);
                    let mut dir = Dir::new(
                        Some(Sched::Shard(Box::new(s.shard))),
                        s.path,
                        to,
                        opts.device_buffer,
                    );
                    dir.policy_text = Some(s.text);
                    dir.link = s.link;
                    dir
                }
                None => Dir::new(None, None, to, opts.device_buffer),
            };
            out.push(dir);
        }
        let (Some(mut d1), Some(mut d0)) = (out.pop(), out.pop()) else {
            anyhow::bail!("internal: a worker needs two directions");
        };
        crate::set_line_rates(&opts, &mut d0, &mut d1);
        // Each worker holds its share of the memory bound.
        let share = opts.workers.max(1) as u64;
        Ok(Shaper::assemble(opts, [p0, p1], [d0, d1], link, share))
    }

    /// A parsed frame of direction `d` on a worker: into this turn's burst for this worker's
    /// shard, or onto the owner's hand-over batch. Unshaped directions forward at once.
    fn steer(&mut self, d: usize, f: Frame) {
        let l = &mut self.role;
        let Some(st) = l.steer[d].clone() else {
            let to = self.dirs[d].to;
            self.send(to, f.bytes);
            return;
        };
        let class = st.classifier.classify(&f.meta);
        let (shard, local) = st.locate(class);
        if shard == l.index {
            // With the rest of the chunk's frames for this shard (`Dir::end_burst`).
            self.dirs[d].handle_local(local, f);
        } else if let Some(out) = l.outbox.get_mut(shard) {
            out.push(Handoff {
                dir: d,
                gen: st.gen,
                class,
                hops: 0,
                frame: f,
            });
        } else {
            l.counts.lost += 1;
            self.recycle(f.bytes);
        }
    }

    /// Take what peers handed over; returns how many frames.
    fn take_handoffs(&mut self) -> usize {
        let mut n = 0;
        while let Some(batch) = self.role.next_batch() {
            n += batch.len();
            let now = self.now();
            for h in batch {
                self.take_handoff(h, now);
            }
        }
        if n > 0 {
            self.role.flush_outbox();
        }
        n
    }

    fn take_handoff(&mut self, mut h: Handoff, now: Time) {
        let l = &mut self.role;
        let Some(st) = l.steer.get(h.dir).cloned().flatten() else {
            // The direction became unshaped meanwhile: forward.
            let to = self.dirs[h.dir].to;
            self.send(to, h.frame.bytes);
            return;
        };
        if st.gen != h.gen {
            // Classified under another policy: classify again under ours.
            l.counts.reclassified += 1;
            h.class = st.classifier.classify(&h.frame.meta);
            h.gen = st.gen;
        }
        let (shard, local) = st.locate(h.class);
        if shard == l.index {
            let pool = &mut self.pool;
            self.dirs[h.dir].enqueue_local(local, h.frame, now, &mut |v| pool.put(v));
        } else if h.hops < MAX_HOPS && shard < l.outbox.len() {
            h.hops += 1;
            l.outbox[shard].push(h);
        } else {
            l.counts.lost += 1;
            self.recycle(h.frame.bytes);
        }
    }

    /// The worker's eventfd rang: hand-overs first, then the control thread's commands.
    fn on_wake(&mut self, stopping: &mut Option<Time>) {
        sys::eventfd_clear(self.role.wake.as_raw_fd());
        self.take_handoffs();
        while let Some(cmd) = self.role.next_cmd() {
            match cmd {
                Cmd::Stat { seq } => self.reply_stat(seq),
                Cmd::Install(i) => self.install_shard(*i),
                Cmd::Quiesce => {
                    let l = &mut self.role;
                    l.quiet = true;
                    l.flush_outbox();
                    l.reply(Reply::Quiet);
                }
                Cmd::Stop => {
                    let now = self.now();
                    stopping.get_or_insert(now);
                }
            }
        }
    }

    /// This worker's snapshot, its classes under their ids in the whole tree.
    fn reply_stat(&mut self, seq: u64) {
        let mut snap = self.stat();
        let l = &self.role;
        for (d, dir) in snap.directions.iter_mut().enumerate() {
            let Some(st) = l.steer.get(d).cloned().flatten() else {
                continue;
            };
            for c in &mut dir.classes {
                if let Some(g) = st.map.global(l.index, c.id) {
                    c.id = g;
                }
                c.parent_id = c.parent_id.and_then(|p| st.map.global(l.index, p));
            }
        }
        l.reply(Reply::Stat {
            seq,
            worker: l.index,
            snap: Box::new(snap),
            lateness: Box::new(self.lateness.clone()),
            timer: Box::new(self.wake.timer_hist().clone()),
            handoff: l.counts,
        });
    }

    /// A reload's shard for this worker: adopt the running one's state, steer by the new tree.
    fn install_shard(&mut self, i: Install) {
        let now = self.now();
        // The shard replaced is freed here (workers do not patch in place: docs/router.md).
        let (report, _old) = self.dirs[i.dir].install(
            Sched::Shard(Box::new(i.shard)),
            i.link,
            (i.text, i.origin),
            i.path,
            now,
        );
        let l = &mut self.role;
        if let Some(s) = l.steer.get_mut(i.dir) {
            *s = Some(i.steer);
        }
        l.reply(Reply::Installed { seq: i.seq, report });
    }
}

impl Role for Link {
    /// A worker hears only its peers and the control thread (its wake-up fd); the control
    /// thread serves the control plane.
    fn start(s: &mut Shaper<Link>, ep: RawFd) -> anyhow::Result<()> {
        sys::epoll_add(ep, s.role.wake.as_raw_fd(), T_WAKE)?;
        Ok(())
    }

    fn cpu_index(&self) -> usize {
        self.index
    }

    fn receiving(&self) -> bool {
        !self.quiet
    }

    fn admit(s: &mut Shaper<Link>, i: usize, f: Frame, _now: Time) {
        s.steer(i, f);
    }

    fn end_receive(&mut self) {
        self.flush_outbox();
    }

    /// The heartbeat: systemd's watchdog is fed by the control thread while every worker's is
    /// recent (workers/coord).
    fn housekeeping(&mut self, _now: Time, monotonic_ns: u64) {
        // Read by the control thread on its own clock: CLOCK_MONOTONIC.
        self.heartbeat.store(monotonic_ns, Ordering::Relaxed);
    }

    fn take_pending(s: &mut Shaper<Link>) -> usize {
        s.take_handoffs()
    }

    /// The wake-up fd rang: hand-overs, then the control thread's commands.
    fn on_events(s: &mut Shaper<Link>, ready: &[u64], stopping: &mut Option<Time>) {
        if ready.contains(&T_WAKE) {
            s.on_wake(stopping);
        }
    }
}
