//! Link emulation inside the shaper, for kernels without netem (`tc qdisc add … netem` fails with
//! "Specified qdisc kind is unknown" on the lab's kernel): a delay line per direction.
//!
//! * `--emulate rate=..,delay=..,reverse_delay=..,loss=..,seed=..`: on OUT, after the scheduler,
//!   serialization at `rate` — by the direction's device model, which then drains at `rate` and
//!   hands each frame over at its departure ([`Emulator::push_sent`], dir.rs; [`Emulator::push`]
//!   serialises by itself where no model paces the frames) — a one-way `delay` and the path's
//!   impairments — `jitter`, `jitter_reorder`, `loss` (Bernoulli) or `ge=p:r:bad:good`
//!   (Gilbert–Elliott), `reorder`,
//!   `duplicate` — drawn by [`linkshare_core::impair`] from `seed`, the very model the simulator
//!   runs for a scenario's `[path]`; on the reverse direction (OUT → IN, after the reverse policy
//!   if any, else as received) a fixed `reverse_delay`. This is netem's `rate`/`delay`/`loss`/
//!   `reorder`/`duplicate` (Linux net/sched/sch_netem.c: `time_to_send = now + delay`,
//!   serialized behind the last packet when a rate is set).
//! * `--path-delay ADDR=DELAY` (repeatable): a per-host extra one-way delay, in both directions:
//!   added to frames whose IPv4 *source* is ADDR on the forward direction and to frames whose
//!   IPv4 *destination* is ADDR on the reverse one. A host behind ADDR then sees a base RTT of
//!   `delay + reverse_delay + 2 × DELAY` — the simulator's `2 × (delay + extra_delay)` when
//!   `reverse_delay = delay` (docs/scenario-format.md).
//!
//! Frames of one total delay share a line kept in release order (a frame jittered or reordered
//! is inserted at its place), so a line's head is its next deadline; with several lines the
//! earliest head goes first. Memory is bounded:
//! a direction's lines hold at most [`line_limit`] bytes (rate × longest delay, clamped to
//! [`MIN_LINE_BYTES`, `MAX_LINE_BYTES`]); a frame beyond it is dropped and counted as
//! `line_full`, never queued.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};

pub use linkshare_core::impair::ImpairSpec;
use linkshare_core::impair::{Impairment, LossModel};
use linkshare_core::{Duration, Rate};

/// The smallest byte bound of a direction's delay lines (a few dozen full frames).
pub const MIN_LINE_BYTES: u64 = 256 * 1024;
/// The largest byte bound of a direction's delay lines, whatever the rate and delay.
pub const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;
/// Rate assumed for the bound when neither the emulation, the policy nor the driver gives one.
pub const FALLBACK_LINE_BPS: u64 = 10_000_000_000;

/// `--emulate`'s keys.
#[derive(Clone, Debug, PartialEq)]
pub struct EmulateSpec {
    pub rate: Option<Rate>,
    /// One-way delay on OUT (after the scheduler).
    pub delay: Duration,
    /// One-way delay on the reverse direction (OUT → IN).
    pub reverse_delay: Duration,
    /// Jitter, loss, reordering and duplication on OUT.
    pub impair: ImpairSpec,
    pub seed: u64,
}

impl Default for EmulateSpec {
    fn default() -> Self {
        EmulateSpec {
            rate: None,
            delay: Duration(0),
            reverse_delay: Duration(0),
            impair: ImpairSpec::default(),
            seed: 1,
        }
    }
}

impl EmulateSpec {
    /// Parse `rate=10mbit,delay=20ms,reverse_delay=20ms,loss=1%,seed=7` (every key optional;
    /// also `jitter=5ms`, `jitter_reorder=0|1`, `ge=P:R:BAD:GOOD` instead of `loss`,
    /// `reorder=P`, `duplicate=P`, probabilities as `0.01` or `1%`).
    pub fn parse(text: &str) -> Result<EmulateSpec, String> {
        let mut s = EmulateSpec::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected key=value"))?;
            match k {
                "rate" => s.rate = Some(Rate::parse(v).map_err(|e| format!("rate: {e}"))?),
                "delay" => s.delay = Duration::parse(v).map_err(|e| format!("delay: {e}"))?,
                "reverse_delay" => {
                    s.reverse_delay =
                        Duration::parse(v).map_err(|e| format!("reverse_delay: {e}"))?
                }
                "loss" => s.impair.loss = LossModel::Bernoulli(prob("loss", v)?),
                "ge" => {
                    let ps = v
                        .split(':')
                        .map(|x| prob("ge", x))
                        .collect::<Result<Vec<_>, _>>()?;
                    let [p, r, bad_loss, good_loss] = ps[..] else {
                        return Err(format!("ge: `{v}`: expected P:R:BAD:GOOD, e.g. 1%:25%:100%:0"));
                    };
                    s.impair.loss = LossModel::GilbertElliott {
                        p,
                        r,
                        bad_loss,
                        good_loss,
                    };
                }
                "jitter" => {
                    s.impair.jitter_ns = Duration::parse(v).map_err(|e| format!("jitter: {e}"))?.0
                }
                "jitter_reorder" => {
                    s.impair.jitter_reorder = match v {
                        "1" | "true" => true,
                        "0" | "false" => false,
                        _ => return Err(format!("jitter_reorder: `{v}`: expected 0 or 1")),
                    }
                }
                "reorder" => s.impair.reorder = prob("reorder", v)?,
                "duplicate" => s.impair.duplicate = prob("duplicate", v)?,
                "seed" => s.seed = v.parse().map_err(|_| format!("seed: bad number `{v}`"))?,
                _ => {
                    return Err(format!(
                        "unknown key `{k}` (rate, delay, reverse_delay, loss, ge, jitter, jitter_reorder, reorder, duplicate, seed)"
                    ))
                }
            }
        }
        Ok(s)
    }
}

/// A probability written `0.01` or `1%`, between 0 and 1.
fn prob(key: &str, v: &str) -> Result<f64, String> {
    let (num, pct) = match v.strip_suffix('%') {
        Some(n) => (n, true),
        None => (v, false),
    };
    let x: f64 = num
        .parse()
        .map_err(|_| format!("{key}: bad number `{v}`"))?;
    let p = if pct { x / 100.0 } else { x };
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("{key}: `{v}` is not between 0 and 100%"));
    }
    Ok(p)
}

/// `--path-delay ADDR=DELAY`: extra one-way delay, both directions, for one IPv4 host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathDelay {
    pub addr: Ipv4Addr,
    pub delay: Duration,
}

impl PathDelay {
    /// Parse `10.1.0.5=20ms`.
    pub fn parse(text: &str) -> Result<PathDelay, String> {
        let (a, d) = text
            .split_once('=')
            .ok_or_else(|| format!("`{text}`: expected ADDR=DELAY, e.g. 10.1.0.5=20ms"))?;
        let addr: Ipv4Addr = a
            .trim()
            .parse()
            .map_err(|_| format!("`{a}` is not an IPv4 address"))?;
        let delay = Duration::parse(d.trim()).map_err(|e| format!("`{d}`: {e}"))?;
        Ok(PathDelay { addr, delay })
    }
}

/// Which address of a frame selects its path delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrKey {
    /// The forward direction: the sender's address is the source.
    Src,
    /// The reverse direction: the sender's address is the destination.
    Dst,
}

/// One direction's emulated link.
#[derive(Clone, Debug, PartialEq)]
pub struct LineSpec {
    pub rate: Option<Rate>,
    pub delay: Duration,
    /// What the line does besides delaying (the forward direction's `[path]`).
    pub impair: ImpairSpec,
    pub seed: u64,
    pub paths: Vec<PathDelay>,
    pub key: AddrKey,
    /// Bytes the lines may hold together (see [`line_limit`]).
    pub limit_bytes: u64,
}

impl LineSpec {
    /// The longest delay a frame of this direction can get.
    pub fn max_delay(&self) -> Duration {
        let extra = self.paths.iter().map(|p| p.delay.0).max().unwrap_or(0);
        Duration(self.delay.0 + extra)
    }
}

/// The byte bound of a direction's lines: what `bps` delivers in `max_delay`, clamped to
/// [`MIN_LINE_BYTES`, `MAX_LINE_BYTES`]. With the scheduler in front, the lines never hold more
/// than that in steady state; a burst beyond it is dropped (`line_full`).
pub fn line_limit(bps: u64, max_delay: Duration) -> u64 {
    let bytes = bps as u128 * max_delay.0 as u128 / 8 / 1_000_000_000;
    (bytes.min(MAX_LINE_BYTES as u128) as u64).max(MIN_LINE_BYTES)
}

/// Frames that did not get through the emulated link, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmuDrops {
    /// Lost on purpose (`loss=`, `ge=`).
    pub lost: u64,
    /// The lines held their byte bound already.
    pub line_full: u64,
}

#[derive(Debug)]
struct Line {
    delay_ns: u64,
    /// (release instant, frame), release instants non-decreasing.
    queue: VecDeque<(u64, Vec<u8>)>,
}

/// The emulated link's state: one FIFO line per distinct total delay.
#[derive(Debug)]
pub struct Emulator {
    spec: LineSpec,
    impair: Impairment,
    link_free_ns: u64,
    lines: Vec<Line>,
    /// `(address, line index)` of every path delay.
    route: Vec<(Ipv4Addr, usize)>,
    bytes: u64,
    frames: usize,
    pub drops: EmuDrops,
}

impl Emulator {
    pub fn new(spec: LineSpec) -> Emulator {
        let mut lines = vec![Line {
            delay_ns: spec.delay.0,
            queue: VecDeque::new(),
        }];
        let mut route = Vec::new();
        for p in &spec.paths {
            let d = spec.delay.0 + p.delay.0;
            let i = match lines.iter().position(|l| l.delay_ns == d) {
                Some(i) => i,
                None => {
                    lines.push(Line {
                        delay_ns: d,
                        queue: VecDeque::new(),
                    });
                    lines.len() - 1
                }
            };
            route.push((p.addr, i));
        }
        Emulator {
            impair: Impairment::new(spec.impair, spec.seed),
            spec,
            link_free_ns: 0,
            lines,
            route,
            bytes: 0,
            frames: 0,
            drops: EmuDrops::default(),
        }
    }

    pub fn spec(&self) -> &LineSpec {
        &self.spec
    }

    /// Frames the impairments duplicated and sent ahead of their delay (`reorder`).
    pub fn impair_stats(&self) -> linkshare_core::impair::ImpairStats {
        self.impair.stats
    }

    fn line_of(&self, src: IpAddr, dst: IpAddr) -> usize {
        let key = match self.spec.key {
            AddrKey::Src => src,
            AddrKey::Dst => dst,
        };
        let IpAddr::V4(a) = key else { return 0 };
        self.route
            .iter()
            .find(|(x, _)| *x == a)
            .map_or(0, |(_, i)| *i)
    }

    /// The total one-way delay a frame from `src` to `dst` gets (serialization excluded).
    pub fn delay_for(&self, src: IpAddr, dst: IpAddr) -> Duration {
        Duration(self.lines[self.line_of(src, dst)].delay_ns)
    }

    /// A frame enters the link at `now_ns`: serialised at the line's `rate` behind the frames
    /// before it, then delayed. A frame lost or over the bound is handed back (for reuse) and
    /// counted in [`Emulator::drops`]; a duplicated one is queued twice.
    pub fn push(
        &mut self,
        now_ns: u64,
        frame: Vec<u8>,
        src: IpAddr,
        dst: IpAddr,
    ) -> Result<(), Vec<u8>> {
        let start = self.link_free_ns.max(now_ns);
        let ser = self
            .spec
            .rate
            .and_then(|r| r.tx_time(frame.len() as u64))
            .map_or(0, |d| d.0);
        self.enter(start + ser, frame, src, dst)
    }

    /// A frame whose last bit left the wire at `sent_ns`, serialised by the caller's own model
    /// of the wire (the device model paced at the line's rate, datapath.rs): only the delay and
    /// the impairments, no second serialisation. As [`Emulator::push`] otherwise.
    pub fn push_sent(
        &mut self,
        sent_ns: u64,
        frame: Vec<u8>,
        src: IpAddr,
        dst: IpAddr,
    ) -> Result<(), Vec<u8>> {
        self.enter(sent_ns, frame, src, dst)
    }

    /// The frame's last bit is on the line at `end`: its fate, its place on its delay line.
    fn enter(&mut self, end: u64, frame: Vec<u8>, src: IpAddr, dst: IpAddr) -> Result<(), Vec<u8>> {
        let len = frame.len() as u64;
        if self.bytes + len > self.spec.limit_bytes {
            self.drops.line_full += 1;
            return Err(frame);
        }
        let i = self.line_of(src, dst);
        let fate = self.impair.admit(end, self.lines[i].delay_ns);
        let releases = fate.releases();
        let Some((&last, firsts)) = releases.split_last() else {
            self.drops.lost += 1;
            return Err(frame);
        };
        self.link_free_ns = self.link_free_ns.max(end);
        for &t in firsts {
            if self.bytes + 2 * len <= self.spec.limit_bytes {
                self.insert(i, t, frame.clone());
            }
        }
        self.insert(i, last, frame);
        Ok(())
    }

    /// Queue `frame` on line `i` for release at `t`, after every frame due no later.
    fn insert(&mut self, i: usize, t: u64, frame: Vec<u8>) {
        self.bytes += frame.len() as u64;
        self.frames += 1;
        let q = &mut self.lines[i].queue;
        if q.back().is_none_or(|(b, _)| *b <= t) {
            q.push_back((t, frame));
        } else {
            let k = q.partition_point(|(x, _)| *x <= t);
            q.insert(k, (t, frame));
        }
    }

    fn earliest(&self) -> Option<(usize, u64)> {
        self.lines
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.queue.front().map(|(t, _)| (i, *t)))
            .min_by_key(|&(i, t)| (t, i))
    }

    /// The next frame due at `now_ns`, earliest first.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<Vec<u8>> {
        let (i, t) = self.earliest()?;
        if t > now_ns {
            return None;
        }
        let (_, f) = self.lines[i].queue.pop_front()?;
        self.bytes -= f.len() as u64;
        self.frames -= 1;
        Some(f)
    }

    /// When the next frame is due.
    pub fn next_due(&self) -> Option<u64> {
        self.earliest().map(|(_, t)| t)
    }

    /// Frames on the lines now.
    pub fn in_line(&self) -> usize {
        self.frames
    }

    /// Bytes on the lines now.
    pub fn in_line_bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: [u8; 4]) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(a))
    }

    fn line(text: &str, key: AddrKey, paths: &[&str]) -> LineSpec {
        let s = EmulateSpec::parse(text).unwrap();
        LineSpec {
            rate: s.rate,
            delay: if key == AddrKey::Src {
                s.delay
            } else {
                s.reverse_delay
            },
            impair: if key == AddrKey::Src {
                s.impair
            } else {
                ImpairSpec::default()
            },
            seed: s.seed,
            paths: paths.iter().map(|p| PathDelay::parse(p).unwrap()).collect(),
            key,
            limit_bytes: MAX_LINE_BYTES,
        }
    }

    const A: [u8; 4] = [10, 1, 0, 5];
    const B: [u8; 4] = [10, 1, 0, 6];
    const C: [u8; 4] = [10, 2, 0, 1];

    #[test]
    fn parses_and_delays_and_loses_deterministically() {
        let s =
            EmulateSpec::parse("rate=8mbit,delay=10ms,reverse_delay=4ms,loss=50%,seed=3").unwrap();
        assert_eq!(s.rate, Some(Rate(8_000_000)));
        assert_eq!(s.delay, Duration(10_000_000));
        assert_eq!(s.reverse_delay, Duration(4_000_000));
        assert!(EmulateSpec::parse("loss=150%").is_err());
        assert!(EmulateSpec::parse("bogus=1").is_err());
        let spec = line("rate=8mbit,delay=10ms,loss=50%,seed=3", AddrKey::Src, &[]);
        let run = || {
            let mut e = Emulator::new(spec.clone());
            for _ in 0..1000 {
                let _ = e.push(0, vec![0; 1000], v4(A), v4(C));
            }
            (e.drops.lost, e.next_due())
        };
        let (lost, first) = run();
        assert_eq!(run().0, lost, "same seed, same losses");
        assert!((400..600).contains(&lost), "lost {lost}");
        // 1000 bytes at 8 Mbit/s = 1 ms serialization, plus 10 ms.
        assert_eq!(first, Some(11_000_000));
        let mut e = Emulator::new(line("delay=5ms", AddrKey::Src, &[]));
        e.push(100, vec![1], v4(A), v4(C)).unwrap();
        assert!(e.pop_due(5_000_099).is_none());
        assert_eq!(e.pop_due(5_000_100), Some(vec![1]));
    }

    #[test]
    fn path_delay_parses_and_refuses_garbage() {
        let p = PathDelay::parse("10.1.0.5=20ms").unwrap();
        assert_eq!(
            (p.addr, p.delay),
            (Ipv4Addr::new(10, 1, 0, 5), Duration(20_000_000))
        );
        assert!(PathDelay::parse("10.1.0.5").is_err());
        assert!(PathDelay::parse("host=20ms").is_err());
        assert!(PathDelay::parse("10.1.0.5=soon").is_err());
    }

    /// The reverse direction delays by `reverse_delay` plus the destination's path delay; the
    /// forward direction by `delay` plus the source's.
    #[test]
    fn reverse_and_per_address_delays() {
        let paths = ["10.1.0.5=5ms", "10.1.0.6=20ms"];
        let mut fwd = Emulator::new(line("delay=10ms,reverse_delay=10ms", AddrKey::Src, &paths));
        let mut rev = Emulator::new(line("delay=10ms,reverse_delay=10ms", AddrKey::Dst, &paths));
        assert_eq!(fwd.delay_for(v4(A), v4(C)), Duration(15_000_000));
        assert_eq!(fwd.delay_for(v4(B), v4(C)), Duration(30_000_000));
        assert_eq!(
            fwd.delay_for(v4(C), v4(A)),
            Duration(10_000_000),
            "keyed by source"
        );
        assert_eq!(
            rev.delay_for(v4(C), v4(A)),
            Duration(15_000_000),
            "keyed by destination"
        );
        assert_eq!(rev.delay_for(v4(A), v4(C)), Duration(10_000_000));
        // Data from A then B at t = 0; their replies leave the sink at t = 1 ms.
        fwd.push(0, vec![b'a'], v4(A), v4(C)).unwrap();
        fwd.push(0, vec![b'b'], v4(B), v4(C)).unwrap();
        let untagged = IpAddr::V6(std::net::Ipv6Addr::LOCALHOST);
        fwd.push(0, vec![b'6'], untagged, untagged).unwrap();
        rev.push(1_000_000, vec![b'A'], v4(C), v4(A)).unwrap();
        rev.push(1_000_000, vec![b'B'], v4(C), v4(B)).unwrap();
        // Releases come out in time order across lines, each exactly at its instant.
        let mut out = Vec::new();
        for t in (0..=40_000_000u64).step_by(500_000) {
            while let Some(f) = fwd.pop_due(t) {
                out.push((t, f[0]));
            }
            while let Some(f) = rev.pop_due(t) {
                out.push((t, f[0]));
            }
        }
        assert_eq!(
            out,
            [
                (10_000_000, b'6'),
                (15_000_000, b'a'),
                (16_000_000, b'A'),
                (30_000_000, b'b'),
                (31_000_000, b'B'),
            ]
        );
        // Round trip of A: 15 + 15 ms = 2·(10 + 5).
        assert_eq!(fwd.in_line() + rev.in_line(), 0);
        assert_eq!(fwd.in_line_bytes(), 0);
    }

    #[test]
    fn impairment_keys_parse_into_the_shared_model() {
        let s = EmulateSpec::parse(
            "delay=20ms,jitter=5ms,jitter_reorder=0,reorder=10%,duplicate=0.01,ge=1%:25%:100%:0,seed=9",
        )
        .unwrap();
        assert_eq!(s.impair.jitter_ns, 5_000_000);
        assert!(!s.impair.jitter_reorder);
        assert_eq!((s.impair.reorder, s.impair.duplicate), (0.1, 0.01));
        assert_eq!(
            s.impair.loss,
            LossModel::GilbertElliott {
                p: 0.01,
                r: 0.25,
                bad_loss: 1.0,
                good_loss: 0.0
            }
        );
        assert!(EmulateSpec::parse("ge=1%:25%").is_err());
        assert!(EmulateSpec::parse("reorder=2").is_err());
        assert!(EmulateSpec::parse("jitter_reorder=maybe").is_err());
    }

    /// Jittered frames leave in release order, whatever order they entered; a duplicated frame
    /// leaves twice; a reordered one skips the delay.
    #[test]
    fn jittered_duplicated_and_reordered_frames() {
        let mut e = Emulator::new(line(
            "delay=10ms,jitter=5ms,duplicate=20%,reorder=10%,seed=4",
            AddrKey::Src,
            &[],
        ));
        for k in 0..250u64 {
            e.push(k * 100_000, vec![k as u8; 100], v4(A), v4(C))
                .unwrap();
        }
        let st = e.impair_stats();
        assert!(st.duplicated > 25 && st.reordered > 10, "{st:?}");
        let mut out = Vec::new();
        let mut t = 0;
        while e.in_line() > 0 {
            while let Some(f) = e.pop_due(t) {
                out.push((t, f[0]));
            }
            t += 50_000;
        }
        assert_eq!(out.len() as u64, 250 + st.duplicated);
        let first: Vec<u8> = out.iter().map(|o| o.1).collect();
        assert!(
            first.windows(2).any(|w| w[1] < w[0]),
            "frames overtook each other"
        );
        assert!(
            out.windows(2).all(|w| w[1].0 >= w[0].0),
            "released in time order"
        );
    }

    /// A frame beyond the byte bound is dropped and counted, never queued.
    #[test]
    fn lines_hold_at_most_their_bound() {
        let limit = line_limit(8_000_000, Duration(1_000_000_000));
        assert_eq!(limit, 1_000_000, "1 s at 8 Mbit/s");
        assert_eq!(line_limit(1_000, Duration(1_000_000)), MIN_LINE_BYTES);
        assert_eq!(line_limit(u64::MAX, Duration(u64::MAX)), MAX_LINE_BYTES);
        let mut spec = line("reverse_delay=10ms", AddrKey::Dst, &["10.1.0.5=5ms"]);
        assert_eq!(spec.max_delay(), Duration(15_000_000));
        spec.limit_bytes = 3000;
        let mut e = Emulator::new(spec);
        for _ in 0..5 {
            let _ = e.push(0, vec![0; 1000], v4(C), v4(A));
        }
        assert_eq!(e.in_line(), 3);
        assert_eq!(e.in_line_bytes(), 3000);
        assert_eq!(
            e.drops,
            EmuDrops {
                lost: 0,
                line_full: 2
            }
        );
        assert!(e.pop_due(15_000_000).is_some());
        assert!(e.push(0, vec![0; 1000], v4(C), v4(A)).is_ok(), "room again");
    }
}
