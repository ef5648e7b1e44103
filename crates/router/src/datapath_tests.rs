//! A direction driven without a socket: frames in at given instants, frames out at the instants
//! it names, as the shaper's loop drives it.

use std::net::Ipv4Addr;

use linkshare_core::wire::{self, BuildSpec};
use linkshare_core::{Duration, Time};

use super::*;
use crate::emulate::{AddrKey, Emulator, LineSpec};
use crate::frame::{parse_frame, Parsed};
use crate::{default_device_buffer, FULL_FRAME};

/// An HTB whose root and only leaf run at 8 Mbit/s (one byte a µs), a pfifo of `limit` frames.
fn htb(limit: u32) -> Dir {
    let text = format!(
        "qdisc = \"htb\"\ndefault = \"a\"\n\
         [[class]]\nname = \"root\"\nrate = \"8mbit\"\n\
         [[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"8mbit\"\n\
         leaf = {{ type = \"pfifo\", limit = {limit} }}\n"
    );
    let (_, sched) = match crate::load_sched(&text, "t.toml") {
        Ok(x) => x,
        Err(e) => panic!("{e}"),
    };
    Dir::new(Some(sched), None, 1, None)
}

/// A UDP frame of `len` bytes on the wire (Ethernet header included).
fn frame(len: usize) -> Frame {
    let mut spec = BuildSpec::udp(
        Ipv4Addr::new(10, 0, 0, 1),
        1000,
        Ipv4Addr::new(10, 0, 0, 2),
        2000,
    );
    spec.payload_len = len - 42;
    let mut bytes = Vec::new();
    wire::build_ethernet(&mut bytes, &spec);
    match parse_frame(bytes) {
        Parsed::Ip(f) => f,
        other => panic!("test frame did not parse: {other:?}"),
    }
}

/// What a poll handed out.
#[derive(Default)]
struct Out {
    sent: Vec<(Time, usize, Option<Time>)>,
    spare: usize,
}

/// Poll `d` at `now` with `room` slots; record what it emits.
fn poll(d: &mut Dir, now: Time, room: usize, out: &mut Out) -> u64 {
    d.poll_transmit(now, room, &mut |e| match e {
        Emit::Send { bytes, waited } => out.sent.push((now, bytes.len(), waited)),
        Emit::Spare(_) => out.spare += 1,
    })
}

/// Drive `d` as the loop does: poll at `now`, then at each wake-up it names, up to `until`.
fn drive(d: &mut Dir, mut now: Time, until: Time, out: &mut Out) {
    for _ in 0..100_000 {
        poll(d, now, 64, out);
        match d.next_wakeup() {
            Some(t) if t <= until => now = t.max(Time(now.0 + 1)),
            _ => return,
        }
    }
    panic!("the direction never stopped asking to be woken");
}

fn offer(d: &mut Dir, n: usize, len: usize, now: Time) -> usize {
    let mut spare = 0;
    for _ in 0..n {
        assert!(d
            .handle_frame(frame(len), now, &mut |_| spare += 1)
            .is_none());
    }
    d.end_burst(now, &mut |_| spare += 1);
    spare
}

#[test]
fn frames_in_then_out_at_the_root_rate_and_the_direction_sleeps_when_empty() {
    let mut d = htb(100);
    assert_eq!(offer(&mut d, 20, 1000, Time(0)), 0);
    assert_eq!(d.backlog_packets(), 20);
    let mut out = Out::default();
    drive(&mut d, Time(0), Time(1_000_000_000), &mut out);
    assert_eq!(out.sent.len(), 20, "every frame leaves");
    assert_eq!(out.spare, 0);
    assert_eq!(d.backlog_packets(), 0);
    assert_eq!(d.next_wakeup(), None, "nothing queued: no wake-up");
    // Departures never go back in time, and no stretch of them beats 8 Mbit/s by more than
    // the bucket and the device buffer: bytes sent by `t` ≤ allowance + t µs.
    let allowance = d.device_buffer + 2 * FULL_FRAME + 1000 * 4;
    let mut bytes = 0u64;
    for w in out.sent.windows(2) {
        assert!(w[0].0 <= w[1].0);
    }
    for (t, len, _) in &out.sent {
        bytes += *len as u64;
        assert!(
            bytes <= allowance + t.0 / 1000,
            "{bytes} bytes by {t:?} is faster than 8 Mbit/s"
        );
    }
    // The last frame cannot leave before the queue's bytes beyond the allowance took their
    // time at 8 Mbit/s.
    let last = out.sent.last().map_or(0, |s| s.0 .0);
    assert!(
        last / 1000 >= 20_000 - allowance,
        "last departure at {last} ns"
    );
    // Paced departures carry the instant they waited for (the driver's lateness).
    assert!(out.sent.iter().any(|s| s.2.is_some()));
}

#[test]
fn a_full_ring_defers_the_rest_to_a_retry() {
    let mut d = htb(100);
    offer(&mut d, 3, 200, Time(0));
    let mut out = Out::default();
    poll(&mut d, Time(0), 1, &mut out);
    assert_eq!(out.sent.len(), 1);
    assert_eq!(d.next_wakeup(), Some(Time(TX_RETRY_NS)));
    poll(&mut d, Time(TX_RETRY_NS), 64, &mut out);
    assert_eq!(out.sent.len(), 3);
}

#[test]
fn refused_frames_come_back_for_reuse() {
    let mut d = htb(2);
    assert_eq!(
        offer(&mut d, 5, 100, Time(0)),
        3,
        "a pfifo of 2 refuses 3 of 5"
    );
    assert_eq!(d.backlog_packets(), 2);
}

#[test]
fn an_unshaped_direction_forwards_at_once_or_after_the_emulated_line() {
    let mut d = Dir::new(None, None, 0, None);
    let mut spare = 0;
    assert!(d
        .handle_frame(frame(100), Time(0), &mut |_| spare += 1)
        .is_some());
    d.emu = Some(Emulator::new(LineSpec {
        rate: None,
        delay: Duration(5_000_000),
        impair: Default::default(),
        seed: 1,
        paths: Vec::new(),
        key: AddrKey::Dst,
        limit_bytes: 1 << 20,
    }));
    assert!(d
        .handle_frame(frame(100), Time(1_000), &mut |_| spare += 1)
        .is_none());
    assert_eq!(d.backlog_packets(), 1);
    let mut out = Out::default();
    poll(&mut d, Time(2_000), 64, &mut out);
    assert!(out.sent.is_empty());
    assert_eq!(d.next_wakeup(), Some(Time(5_001_000)));
    poll(&mut d, Time(5_001_000), 64, &mut out);
    assert_eq!(out.sent, vec![(Time(5_001_000), 100, None)]);
    assert_eq!(spare, 0);
}

/// A poll that comes late replays what the direction would have sent on time: the same frames
/// leave (late, not lost); without the replay the class's bucket overflowed while the loop was
/// away and fewer leave by then.
#[test]
fn a_late_poll_replays_the_missed_stretch() {
    let late = Time(10_000_000);
    let run = |catch_up_ns: u64, on_time: bool| {
        let mut d = htb(100);
        d.catch_up_ns = catch_up_ns;
        offer(&mut d, 40, 1000, Time(0));
        let mut out = Out::default();
        let replayed = if on_time {
            drive(&mut d, Time(0), late, &mut out);
            0
        } else {
            poll(&mut d, Time(0), 64, &mut out);
            poll(&mut d, late, 64, &mut out)
        };
        (out.sent.len(), replayed)
    };
    let (on_time, _) = run(0, true);
    let (replayed_sent, replayed) = run(20_000_000, false);
    let (lost_sent, none) = run(0, false);
    assert!(replayed > 0, "the late poll replays");
    assert_eq!(none, 0, "no replay without a window");
    assert_eq!(replayed_sent, on_time, "late but not lost");
    assert!(
        lost_sent < on_time,
        "{lost_sent} without replay vs {on_time}"
    );
}

#[test]
fn the_memory_bound_trims_a_burst_before_it_is_offered() {
    let mut d = htb(100);
    let mut spare = 0;
    for _ in 0..5 {
        assert!(d
            .handle_frame(frame(100), Time(0), &mut |_| spare += 1)
            .is_none());
    }
    assert_eq!(d.trim_burst(3, &mut |_| spare += 1), 2);
    assert_eq!(d.trim_burst(3, &mut |_| spare += 1), 0, "within the room");
    d.end_burst(Time(0), &mut |_| spare += 1);
    assert_eq!((spare, d.backlog_packets()), (2, 3));
}

/// An emulated line of `rate` bit/s and `delay_ms` (the lab's `--emulate rate=..,delay=..`).
fn wire_line(rate: u64, delay_ms: u64) -> Emulator {
    Emulator::new(LineSpec {
        rate: Some(linkshare_core::Rate(rate)),
        delay: Duration(delay_ms * 1_000_000),
        impair: Default::default(),
        seed: 1,
        paths: Vec::new(),
        key: AddrKey::Src,
        limit_bytes: 1 << 20,
    })
}

/// With an emulated wire the device model is that wire, whatever the interface's line rate
/// (a veth says 10 Gbit/s): each frame enters the line at its departure from the model and
/// leaves it exactly `delay` later. 8 Mbit/s is a byte a µs: back to back from t = 0, the k-th
/// 1000-byte frame's last bit leaves the model's wire at k ms.
#[test]
fn on_an_emulated_wire_a_frame_leaves_at_the_models_wire_end_plus_the_delay() {
    let mut d = htb(100);
    d.line_bps = 10_000_000_000;
    d.set_emulator(Some(wire_line(8_000_000, 5)));
    assert_eq!(
        d.drain_bps(),
        8_000_000,
        "the model drains at the wire's rate"
    );
    offer(&mut d, 20, 1000, Time(0));
    let mut out = Out::default();
    drive(&mut d, Time(0), Time(1_000_000_000), &mut out);
    let got: Vec<(Time, usize)> = out.sent.iter().map(|s| (s.0, s.1)).collect();
    let want: Vec<(Time, usize)> = (1..=20u64)
        .map(|k| (Time(k * 1_000_000 + 5_000_000), 1000))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        d.egress.stats().sent_packets,
        20,
        "the model sent each once"
    );
    assert_eq!(d.backlog_packets(), 0);
}

/// A UDP frame of `len` bytes with TOS `tos`.
fn frame_tos(len: usize, tos: u8) -> Frame {
    let mut spec = BuildSpec::udp(
        Ipv4Addr::new(10, 0, 0, 1),
        1000,
        Ipv4Addr::new(10, 0, 0, 2),
        2000,
    );
    spec.payload_len = len - 42;
    spec.tos = tos;
    let mut bytes = Vec::new();
    wire::build_ethernet(&mut bytes, &spec);
    match parse_frame(bytes) {
        Parsed::Ip(f) => f,
        other => panic!("test frame did not parse: {other:?}"),
    }
}

/// HTB paced at the wire's rate (8 Mbit/s) with a 20 KB burst, saturated by a bulk class from
/// t = 0, and a probe in a priority class at 100 ms. No standing queue forms on the emulated
/// line: what the burst lets out beyond the wire waits in the scheduler and the device buffer,
/// so the probe goes first and crosses at most the device buffer and a frame before its delay.
/// (Serialised a second time after a device drained at the veth's rate, the burst stood on
/// the line in front of every later frame: 20 ms more here.)
#[test]
fn no_standing_queue_forms_on_an_emulated_wire_behind_a_paced_scheduler() {
    let text = "qdisc = \"htb\"\ndefault = \"bulk\"\n\
         [[class]]\nname = \"root\"\nrate = \"8mbit\"\nburst = \"20k\"\ncburst = \"20k\"\n\
         [[class]]\nname = \"bulk\"\nparent = \"root\"\nrate = \"7mbit\"\nceil = \"8mbit\"\n\
         burst = \"20k\"\ncburst = \"20k\"\nprio = 1\nleaf = { type = \"pfifo\", limit = 1000 }\n\
         [[class]]\nname = \"voice\"\nparent = \"root\"\nrate = \"1mbit\"\nceil = \"8mbit\"\nprio = 0\n\
         [[filter]]\nclass = \"voice\"\ndscp = \"ef\"\n";
    let (_, sched) = match crate::load_sched(text, "t.toml") {
        Ok(x) => x,
        Err(e) => panic!("{e}"),
    };
    let mut d = Dir::new(Some(sched), None, 1, None);
    d.line_bps = 10_000_000_000;
    d.set_emulator(Some(wire_line(8_000_000, 5)));
    let buffer = d.device_buffer;
    assert_eq!(buffer, default_device_buffer(8_000_000));
    let mut spare = 0;
    for _ in 0..400 {
        assert!(d
            .handle_frame(frame(1000), Time(0), &mut |_| spare += 1)
            .is_none());
    }
    d.end_burst(Time(0), &mut |_| spare += 1);
    assert_eq!(spare, 0);
    let mut out = Out::default();
    let at = Time(100_000_000);
    drive(&mut d, Time(0), at, &mut out);
    assert!(d
        .handle_frame(frame_tos(100, 46 << 2), at, &mut |_| spare += 1)
        .is_none());
    d.end_burst(at, &mut |_| spare += 1);
    drive(&mut d, at, Time(2_000_000_000), &mut out);
    assert_eq!(out.sent.len(), 401);
    let probe = out.sent.iter().find(|s| s.1 == 100).map(|s| s.0);
    let Some(Time(left)) = probe else {
        panic!("the probe never left")
    };
    // Its wait before the delay: at most the device buffer, the frame on the wire and itself
    // at a byte a µs.
    let waited_us = (left - at.0 - 5_000_000) / 1000;
    assert!(
        waited_us <= buffer + FULL_FRAME + 100,
        "the probe waited {waited_us} µs on an 8 Mbit/s wire behind a {buffer}-byte buffer"
    );
    // And the bulk's departures never beat the wire: bytes by t ≤ (t − delay) at a byte a µs.
    let mut bytes = 0u64;
    for (t, len, _) in &out.sent {
        bytes += *len as u64;
        assert!(bytes <= (t.0 - 5_000_000) / 1000);
    }
}

/// With no device buffer the model holds only the wire, and the loop must come back at each
/// wire end; a poll that comes late replays from the wire's end, so the emulated line's
/// departures stay back to back (a late loop costs the wire nothing).
#[test]
fn late_polls_on_an_emulated_wire_with_no_device_buffer_lose_no_wire_time() {
    let run = |catch_up_ns: u64| {
        let mut d = Dir::new(htb(100).sched, None, 1, Some(0));
        d.catch_up_ns = catch_up_ns;
        d.set_emulator(Some(wire_line(8_000_000, 5)));
        offer(&mut d, 10, 1000, Time(0));
        let mut out = Out::default();
        let mut now = Time(0);
        for _ in 0..1000 {
            poll(&mut d, now, 64, &mut out);
            match d.next_wakeup() {
                // Every wake-up 30 µs late.
                Some(t) => now = Time(t.0 + 30_000).max(Time(now.0 + 1)),
                None => break,
            }
        }
        out.sent.iter().map(|s| s.0 .0).collect::<Vec<u64>>()
    };
    let on_time: Vec<u64> = (1..=10u64).map(|k| k * 1_000_000 + 5_000_000).collect();
    let replayed = run(10_000_000);
    assert_eq!(replayed.len(), 10);
    // Released when the (late) loop looks: never before the frame's instant, at most one
    // lateness after it.
    for (got, want) in replayed.iter().zip(&on_time) {
        assert!(*got >= *want && *got <= *want + 30_000, "{got} vs {want}");
    }
    // Without the replay each late wake-up idles the wire: the last frame leaves 10 × 30 µs
    // late or more.
    let lost = run(0);
    assert!(lost[9] >= on_time[9] + 9 * 30_000, "{lost:?}");
}
