//! A direction's state: its scheduler ([`Sched`]), the device model it drains into, its
//! emulated link ([`Dir`]), and what the shaper counts per interface ([`IfStats`]).
//!
//! Direction 0 is what arrives on IN and leaves on OUT, direction 1 the reverse. A direction's
//! device model follows its policy's root rate and the line rate ([`Dir::drain_bps`]); a reload
//! goes through [`Dir::install`], which adopts the running scheduler's state. A direction's
//! datapath — frames in, frames out, its next wake-up, all without I/O — is in datapath.rs; the
//! drivers that own directions (the single shaper, each worker) are lib.rs and run.rs.

use std::collections::HashMap;
use std::path::PathBuf;

use linkshare_core::egress::{Egress, EgressConfig};

pub(crate) use crate::builder::LinkRules;
use linkshare_core::htb::Htb;
use linkshare_core::qdisc::ClassView;
use linkshare_core::{Qdisc, Time};

use crate::options::Options;
use crate::{adopt_state, control, emulate, sys, Frame, PortCounters};

/// A scheduler built from a policy.
pub enum Sched {
    Htb(Box<Htb<Frame>>),
    /// One worker's shard of a sharded HTB (`--workers N`, workers/).
    Shard(Box<linkshare_core::shard::Shard<Frame>>),
    Other(Box<dyn Qdisc<Frame>>),
}

impl Sched {
    pub(crate) fn q(&mut self) -> &mut dyn Qdisc<Frame> {
        match self {
            Sched::Htb(h) => h.as_mut(),
            Sched::Shard(h) => h.as_mut(),
            Sched::Other(b) => b.as_mut(),
        }
    }
    pub(crate) fn qr(&self) -> &dyn Qdisc<Frame> {
        match self {
            Sched::Htb(h) => h.as_ref(),
            Sched::Shard(h) => h.as_ref(),
            Sched::Other(b) => b.as_ref(),
        }
    }
}

/// What the shaper counts per interface, beyond the port's own counters.
#[derive(Clone, Debug, Default)]
pub(crate) struct IfStats {
    /// Frames received on this interface (own transmissions excluded).
    pub(crate) rx_packets: u64,
    pub(crate) rx_bytes: u64,
    /// Non-IP frames (ARP, LLDP, …) passed unshaped to the other interface (`non_ip = "pass"`,
    /// or a direction without a scheduler).
    pub(crate) non_ip: u64,
    /// Non-IP frames offered to the scheduler (`non_ip = "shape"`, the default).
    pub(crate) non_ip_shaped: u64,
    /// Non-IP frames dropped (`non_ip = "drop"`).
    pub(crate) non_ip_dropped: u64,
    /// IP fragments received (shaped like any packet; later fragments have no ports).
    pub(crate) fragments: u64,
    /// Frames that did not parse, by `ParseError::name()`; dropped.
    pub(crate) malformed: HashMap<&'static str, u64>,
    /// IP packets with a parse issue that still were classified (`truncated_l4`, …).
    pub(crate) issues: HashMap<&'static str, u64>,
    /// Packets whose non-zero DSCP was not used to classify them (`trust_dscp = false`), and
    /// packets whose DSCP was cleared (`wash`).
    pub(crate) dscp_untrusted: u64,
    pub(crate) dscp_washed: u64,
    /// Frames that could not be queued for transmit on this interface, by reason.
    pub(crate) tx_ring_full: u64,
    pub(crate) tx_too_big: u64,
    /// The port's own counters, refreshed by the loop.
    pub(crate) port: PortCounters,
}

pub(crate) struct Dir {
    pub(crate) to: usize,
    pub(crate) sched: Option<Sched>,
    pub(crate) policy_path: Option<PathBuf>,
    /// Text and origin of the policy running in this direction.
    pub(crate) policy_text: Option<(String, String)>,
    /// Class changes by name applied since `policy_text` was loaded, oldest first.
    pub(crate) changes: Vec<control::proto::ClassChange>,
    /// Link rate for device pacing (bits/s), 0 = unpaced.
    pub(crate) link_bps: u64,
    /// The outgoing interface's line rate (bits/s; 0 = unknown): the device buffer drains at
    /// the faster of this and `link_bps`.
    pub(crate) line_bps: u64,
    pub(crate) device_buffer: u64,
    /// `--device-buffer` as given (`None`: derived from the rate, again on every reload).
    pub(crate) device_buffer_opt: Option<u64>,
    /// The device model shared with the simulator (`linkshare_core::egress`).
    pub(crate) egress: Egress,
    /// The instant the next departure was told to wait for: the scheduler's `NotBefore`, or
    /// the end of the modelled wire's packet when the device buffer is full.
    pub(crate) eligible: Option<Time>,
    /// The instant this direction wants to be polled again (datapath.rs).
    pub(crate) deadline: Option<Time>,
    /// How far back a late poll replays the missed stretch (`--catch-up`, datapath.rs).
    pub(crate) catch_up_ns: u64,
    /// The burst under way: frames received for the scheduler, offered together
    /// (datapath.rs), and on a worker the local class of each.
    pub(crate) burst: Vec<Frame>,
    pub(crate) burst_local: Vec<u32>,
    /// Scratch: frames the scheduler refused in a burst, frames pulled in one poll.
    pub(crate) refused: Vec<linkshare_core::qdisc::Dropped<Frame>>,
    /// Each with its departure from the modelled wire (`None`: an unpaced device).
    pub(crate) tx_scratch: Vec<(Frame, Option<Time>)>,
    /// The policy generation: changes on every install, so that the stats plane learns the
    /// class names again (control/raw.rs) and nothing else has to walk the classes.
    pub(crate) gen: u64,
    pub(crate) emu: Option<emulate::Emulator>,
    /// The policy's link layer, what becomes of non-IP frames, and its DSCP trust.
    pub(crate) link: LinkRules,
}

fn root_rate(s: &Sched) -> u64 {
    let mut r = 0u64;
    s.qr().visit_classes(&mut |c: &ClassView<'_>| {
        if c.parent.is_none() {
            r = r.saturating_add(c.ceil.bits_per_sec());
        }
    });
    r
}

/// Start `new`'s take-over of `old` in steps when both are HTBs (`Htb::adopt_begin`, O(1)):
/// the report and the new roots' ceils; `old` is then empty. Otherwise `old` stays (and is
/// taken over at once).
fn begin_takeover(
    new: &mut Sched,
    old: &mut Option<Sched>,
    t: crate::patch::Takeover,
    now: Time,
) -> Option<(control::ReloadReport, u64)> {
    match (new, old.take()) {
        (Sched::Htb(h), Some(Sched::Htb(o))) => {
            let queued = o.stats().backlog.packets;
            h.adopt_begin(o, t.map, now);
            let report = control::ReloadReport {
                kept: t.kept,
                added: t.added,
                removed: t.removed,
                omitted: t.omitted,
                moved_packets: queued,
                ..Default::default()
            };
            Some((report, t.root_ceil))
        }
        (_, o) => {
            *old = o;
            None
        }
    }
}

/// Default device buffer (bytes waiting behind the frame on the modelled wire): two full
/// frames, or 1 ms of the link rate plus a frame when that is more (so a slow loop turn does not
/// cap a fast link at one buffer per turn). The frames in flight (wire and buffer) peak at the
/// same 1 ms + 1 frame (or 3 frames) as before the shared model, which stopped pulling at
/// `in_flight ≥ max(2 frames, 1 ms)` counting the wire.
pub fn default_device_buffer(link_bps: u64) -> u64 {
    (2 * FULL_FRAME).max(link_bps / 8 / 1000) + FULL_FRAME
}

/// The router's device model: drains at `drain_bps` (0 = unpaced), `device_buffer` bytes behind
/// the wire, room for one [`FULL_FRAME`]; its timer and clock are exact (no ticks). The same
/// model as a simulated `[link]` of that rate, buffer and `mtu + overhead = 1514`.
pub fn device_model(drain_bps: u64, device_buffer: u64) -> EgressConfig {
    EgressConfig {
        rate_bps: drain_bps,
        device_buffer,
        full_packet: FULL_FRAME,
        timer_hz: 0,
        clock_hz: 0,
    }
}

/// Classes of the old tree a take-over step ([`Dir::adopt_step`]) takes between two looks at
/// the clock: each is O(depth) plus its queued packets.
pub const ADOPT_CHUNK: usize = 32;
/// The most classes of the old tree one take-over step takes, whatever the clock says (a step
/// ends earlier, at the first look at the clock past its time: background.rs; docs/router.md,
/// "Reload").
pub const ADOPT_STEP_MAX: usize = 1024;

/// A full untagged Ethernet frame at MTU 1500: the room the pull rule asks for (frames are
/// charged their whole length, see [`frame`](crate::frame)).
pub const FULL_FRAME: u64 = 1514;

impl Dir {
    pub(crate) fn new(
        sched: Option<Sched>,
        path: Option<PathBuf>,
        to: usize,
        buf: Option<u64>,
    ) -> Dir {
        let link_bps = sched.as_ref().map(root_rate).unwrap_or(0);
        let mut d = Dir {
            to,
            sched,
            policy_path: path,
            policy_text: None,
            changes: Vec::new(),
            link_bps,
            line_bps: 0,
            device_buffer: buf.unwrap_or(default_device_buffer(link_bps)),
            device_buffer_opt: buf,
            egress: Egress::new(EgressConfig::default()),
            eligible: None,
            deadline: None,
            catch_up_ns: 0,
            burst: Vec::new(),
            burst_local: Vec::new(),
            refused: Vec::new(),
            tx_scratch: Vec::new(),
            gen: 0,
            emu: None,
            link: Default::default(),
        };
        d.sync_egress();
        d
    }

    /// The device model of this direction: drains at [`Dir::drain_bps`], `device_buffer` bytes
    /// behind the wire; the router's timers and clock are exact (no ticks).
    fn egress_config(&self) -> EgressConfig {
        device_model(self.drain_bps(), self.device_buffer)
    }

    /// Apply a changed rate, line rate or buffer to the device model (frames in it keep their
    /// place).
    pub(crate) fn sync_egress(&mut self) {
        let cfg = self.egress_config();
        self.egress.reconfigure(cfg);
    }

    /// How fast the device buffer empties. With HTB, which holds its root to its ceil by
    /// itself: the line rate when the interface is faster than the root (shaping below line
    /// rate, the NIC sends at its own speed, so queued frames wait on the scheduler, not in the
    /// ring), else the root rate (shaping at line rate, the NIC is the bottleneck and the buffer
    /// keeps its queue short). CBQ's estimator measures the link itself (its root is never
    /// regulated, the link's transmission time spaces the packets), so with CBQ and every other
    /// root the buffer drains at the root rate. 0 = unpaced.
    ///
    /// With an emulated wire (`--emulate rate=`), the device model *is* that wire, whatever the
    /// scheduler: it drains at the wire's rate, and each frame goes onto the emulated line at
    /// its departure from the model ([`Dir::wire_bps`], datapath.rs) — one serialiser, as the
    /// simulator's link.
    pub(crate) fn drain_bps(&self) -> u64 {
        if let Some(r) = self.wire_bps() {
            return r;
        }
        match &self.sched {
            _ if self.link_bps == 0 => 0,
            Some(Sched::Htb(_)) | Some(Sched::Shard(_)) => self.link_bps.max(self.line_bps),
            _ => self.link_bps,
        }
    }

    /// The emulated wire's rate when this direction's line serialises (`--emulate rate=` on
    /// the forward direction): the device model drains at it and stamps each frame's departure.
    pub(crate) fn wire_bps(&self) -> Option<u64> {
        let rate = self.emu.as_ref()?.spec().rate?;
        Some(rate.bits_per_sec()).filter(|r| *r > 0)
    }

    /// Put `emu` on this direction's line; the device model follows its rate.
    pub(crate) fn set_emulator(&mut self, emu: Option<emulate::Emulator>) {
        self.emu = emu;
        self.sync_egress();
    }

    /// Run `new` from now on: it adopts the running scheduler's state (`adopt_state`), and the
    /// device model follows its root rate. Used by every reload path (the loop's, a worker's).
    /// The scheduler replaced is handed back, for the caller to free off the datapath.
    pub(crate) fn install(
        &mut self,
        new: Sched,
        link: LinkRules,
        text: (String, String),
        path: Option<PathBuf>,
        now: Time,
    ) -> (control::ReloadReport, Option<Sched>) {
        self.install_with(new, None, link, text, path, now)
    }

    /// [`Dir::install`], or with `takeover` (an HTB replacing the HTB it was compared with on
    /// the builder thread) without stopping: the new tree forwards from now on and takes over
    /// the running one's classes in steps bounded by time and count ([`Dir::adopt_step`]);
    /// here only O(1) work. The report then counts as moved the packets
    /// queued at the swap (they are moved, or dropped with a counted reason, by the steps).
    pub(crate) fn install_with(
        &mut self,
        mut new: Sched,
        takeover: Option<crate::patch::Takeover>,
        link: LinkRules,
        text: (String, String),
        path: Option<PathBuf>,
        now: Time,
    ) -> (control::ReloadReport, Option<Sched>) {
        let mut old = self.sched.take();
        let stepwise = takeover.and_then(|t| begin_takeover(&mut new, &mut old, t, now));
        let (report, link_bps) = match stepwise {
            Some(r) => r,
            _ => {
                let report = match old.as_mut() {
                    Some(o) => adopt_state(&mut new, o, now),
                    None => control::ReloadReport::default(),
                };
                (report, root_rate(&new))
            }
        };
        self.link_bps = link_bps;
        self.sched = Some(new);
        self.link = link;
        self.follow_link();
        self.gen += 1;
        self.eligible = None;
        self.policy_text = Some(text);
        self.changes.clear();
        if let Some(p) = path {
            self.policy_path = Some(p);
        }
        (report, old)
    }

    /// One step of a take-over under way (`install_with`): classes of the old tree, with their
    /// queued packets, [`ADOPT_CHUNK`] at a time until `out_of_time` says so (asked after each
    /// chunk) or [`ADOPT_STEP_MAX`] are taken. The old tree once all is taken over, for the
    /// caller to free off the datapath, and the old classes this step took.
    pub(crate) fn adopt_step(
        &mut self,
        now: Time,
        out_of_time: &dyn Fn() -> bool,
    ) -> (Option<linkshare_core::htb::Adopted<Frame>>, usize) {
        let Some(Sched::Htb(h)) = &mut self.sched else {
            return (None, 0);
        };
        let Some((start, total)) = h.adopt_progress() else {
            return (None, 0);
        };
        loop {
            if let Some(done) = h.adopt_step(now, ADOPT_CHUNK) {
                return (Some(done), total.saturating_sub(start));
            }
            let taken = h
                .adopt_progress()
                .map_or(0, |(at, _)| at.saturating_sub(start));
            if taken + ADOPT_CHUNK > ADOPT_STEP_MAX || out_of_time() {
                return (None, taken);
            }
        }
    }

    /// Whether a take-over is under way (the loop then comes back at once).
    pub(crate) fn adopting(&self) -> bool {
        matches!(&self.sched, Some(Sched::Htb(h)) if h.adopting())
    }

    /// Apply a difference to the running HTB in place (patch.rs, inplace.rs): classes added,
    /// changed, the filters swapped by pointer, classes removed; only those classes are
    /// touched (and those a removed class's packets go to), O(changes). What it replaces (the
    /// old filters, the leaf qdisc of a slot reused) is handed back, for the caller to free off
    /// the datapath. `Err` if the running scheduler is not an HTB or refuses a change (the
    /// builder thread compares policies that `check` accepted, so this is a defect); changes
    /// before the refused one stay applied.
    pub(crate) fn apply(
        &mut self,
        p: crate::patch::Patch,
        text: crate::builder::Text,
        path: Option<PathBuf>,
        now: Time,
    ) -> Result<(control::ReloadReport, Vec<Box<dyn Send>>), String> {
        let Some(Sched::Htb(h)) = self.sched.as_mut() else {
            return Err("the running scheduler is not an HTB; reload the policy again".into());
        };
        let mut replaced: Vec<Box<dyn Send>> = Vec::new();
        let reshaped = !p.adds.is_empty() || !p.removes.is_empty();
        for a in p.adds {
            let name = a.spec.name.clone();
            let (id, old) = h
                .add_class(a.spec, a.inner, now)
                .map_err(|e| format!("cannot add class `{name}`: {e}"))?;
            if id != a.slot {
                return Err(format!(
                    "class `{name}` went to slot {id}, not {} (a defect in linkshare); reload                      the policy again",
                    a.slot
                ));
            }
            replaced.extend(old.map(|q| Box::new(q) as Box<dyn Send>));
        }
        for (c, t) in &p.tunes {
            h.retune(*c, t, now)
                .map_err(|e| format!("cannot apply the change: {e}"))?;
        }
        if let Some(c) = p.classifier {
            let old = h
                .replace_classifier(c)
                .map_err(|e| format!("cannot apply the new filters: {e}"))?;
            replaced.push(Box::new(old));
        }
        let mut moved = linkshare_core::qdisc::adopt::AdoptReport::default();
        for c in p.removes {
            let r = h
                .remove_class(c, now)
                .map_err(|e| format!("cannot remove class {c}: {e}"))?;
            moved.moved_packets += r.moved_packets;
            moved.reclassified += r.reclassified;
            moved.dropped_packets += r.dropped_packets;
        }
        if reshaped {
            // The stats plane learns the names again.
            self.gen += 1;
        }
        if let Some(r) = p.root_ceil {
            self.link_bps = r;
            self.follow_link();
        }
        match text {
            crate::builder::Text::Whole(text, origin) => {
                self.policy_text = Some((text, origin));
                self.changes.clear();
            }
            crate::builder::Text::Change(c) => record_change(&mut self.changes, c),
        }
        if let Some(path) = path {
            self.policy_path = Some(path);
        }
        let changed = p.changed.len() as u64 + p.omitted.changed;
        let added = p.added.len() as u64 + p.omitted.added;
        let report = control::ReloadReport {
            kept: (p.classes as u64).saturating_sub(changed + added),
            added: p.added,
            removed: p.removed,
            changed: p.changed,
            omitted: p.omitted,
            in_place: true,
            moved_packets: moved.moved_packets,
            reclassified: moved.reclassified,
            dropped_packets: moved.dropped_packets,
            ..Default::default()
        };
        Ok((report, replaced))
    }

    /// The device model after a new link rate (`link_bps`).
    fn follow_link(&mut self) {
        self.device_buffer = self
            .device_buffer_opt
            .unwrap_or(default_device_buffer(self.link_bps));
        self.sync_egress();
    }

    /// Give back the per-flow state of the scheduler's leaves idle for its hold
    /// (`linkshare_core::qdisc::lazy`): O(released), at most a budget per call.
    pub(crate) fn reclaim_idle(&mut self, now: Time) {
        if let Some(s) = &mut self.sched {
            let _ = s
                .q()
                .reclaim_idle(now, linkshare_core::qdisc::lazy::DEFAULT_RECLAIM_BUDGET);
        }
    }
}

/// Add change `c` to those made by name since the text was loaded, one entry per class (its
/// latest rate, and its latest ceil given), so that any number of changes holds at most one
/// entry per class changed. O(entries).
fn record_change(changes: &mut Vec<control::proto::ClassChange>, c: control::proto::ClassChange) {
    match changes.iter_mut().find(|x| x.class == c.class) {
        Some(x) => {
            x.rate = c.rate.or(x.rate.take());
            x.ceil = c.ceil.or(x.ceil.take());
        }
        None => changes.push(c),
    }
}

/// Direction `d`'s emulated link from `--emulate` and `--path-delay` (`key` says which: `Src` is
/// the forward direction), or `None` when it would do nothing.
pub(crate) fn emulator(
    opts: &Options,
    d: &Dir,
    key: emulate::AddrKey,
) -> Option<emulate::Emulator> {
    let e = opts.emulate.clone().unwrap_or_default();
    let fwd = key == emulate::AddrKey::Src;
    let mut spec = emulate::LineSpec {
        rate: if fwd { e.rate } else { None },
        delay: if fwd { e.delay } else { e.reverse_delay },
        impair: if fwd {
            e.impair
        } else {
            emulate::ImpairSpec::default()
        },
        seed: e.seed,
        paths: opts.path_delays.clone(),
        key,
        limit_bytes: 0,
    };
    let idle = spec.rate.is_none() && !spec.impair.is_active() && spec.max_delay().0 == 0;
    if idle && !(fwd && opts.emulate.is_some()) {
        return None;
    }
    // The bound: the emulated rate, else the faster of the policy's root and the line rate.
    let bps = spec
        .rate
        .map(|r| r.0)
        .or_else(|| Some(d.link_bps.max(d.line_bps)).filter(|b| *b > 0))
        .unwrap_or(emulate::FALLBACK_LINE_BPS);
    spec.limit_bytes = emulate::line_limit(bps, spec.max_delay());
    Some(emulate::Emulator::new(spec))
}

/// The device buffers drain at the interfaces' line rates (as given, or as the drivers report
/// them): direction 0 leaves on OUT, direction 1 on IN.
pub(crate) fn set_line_rates(opts: &Options, d0: &mut Dir, d1: &mut Dir) {
    let line = |dev: &str| {
        opts.line_rate
            .or_else(|| sys::link_speed_bps(dev))
            .unwrap_or(0)
    };
    d0.line_bps = line(&opts.dev_out);
    d1.line_bps = line(&opts.dev_in);
    d0.sync_egress();
    d1.sync_egress();
}
