//! `frame`: an arbitrary Ethernet frame through the parser, the classifier and a scheduler.
//!
//! Parsing must be total (a frame is parsed or refused with a reason). A parsed frame is offered to
//! an HTB whose filters use every kind of match (DSCP, protocol, IPv4 and IPv6 prefixes, port
//! ranges; FIFO leaves, so that an execution costs little beyond parsing and classifying), dequeued, and the scheduler's counters must balance.

use std::sync::OnceLock;

use linkshare_config::Policy;
use linkshare_core::{Dequeued, PacketMeta, Qdisc, Time};

/// A policy whose classifier exercises every filter kind.
pub const POLICY: &str = r#"
qdisc = "htb"
default = "bulk"

[[class]]
name = "root"
rate = "100mbit"

[[class]]
name = "voice"
parent = "root"
rate = "10mbit"
ceil = "100mbit"
prio = 0

[[class]]
name = "web"
parent = "root"
rate = "40mbit"
ceil = "100mbit"

[[class]]
name = "v6"
parent = "root"
rate = "10mbit"
ceil = "100mbit"

[[class]]
name = "bulk"
parent = "root"
rate = "40mbit"
ceil = "100mbit"

[[filter]]
class = "voice"
dscp = ["ef", "cs5", "af41"]

[[filter]]
class = "web"
protocol = "tcp"
dst = "10.0.0.0/8"
dst_port = "80-443"

[[filter]]
class = "web"
protocol = "udp"
src = "192.168.0.0/16"
src_port = "1000-1999"

[[filter]]
class = "v6"
dst = "2001:db8::/32"
"#;

fn policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| match Policy::parse(POLICY, "frame-fuzz-policy") {
        Ok(p) => p,
        Err(e) => panic!("the frame harness's own policy is invalid: {e}"),
    })
}

pub fn run(data: &[u8]) {
    let parsed = [
        linkshare_core::wire::parse_ethernet(data),
        linkshare_core::wire::parse_ip(data),
    ];
    let mut q: Box<dyn Qdisc<PacketMeta>> = match policy().build() {
        Ok(q) => q,
        Err(e) => panic!("the frame harness's own policy does not build: {e}"),
    };
    let mut now = 0u64;
    for meta in parsed.into_iter().flatten() {
        assert!(
            meta.len as usize <= data.len(),
            "parsed length {} exceeds the {} bytes given",
            meta.len,
            data.len()
        );
        let _ = q.enqueue(meta, Time(now));
        crate::assert_conserved(q.as_ref(), "frame enqueue");
        now += 1_000;
    }
    for _ in 0..4 {
        match q.dequeue(Time(now)) {
            Dequeued::Packet(_) | Dequeued::Empty => {}
            Dequeued::NotBefore(t) => now = now.max(t.0),
        }
        while q.take_dropped().is_some() {}
        crate::assert_conserved(q.as_ref(), "frame dequeue");
    }
}
