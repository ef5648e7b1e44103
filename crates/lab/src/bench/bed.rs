//! The testbeds `lab bench` measures through: how router B forwards ([`Via`]), the policies the
//! measurements load, and the interface counters read around a run (from `ip -s`; CPU time:
//! `cpu`).

use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::{bail, Context};
use serde_json::Value;

use crate::testbed::{interrupted, KernelRouter, LinkshareRouter, Router, Testbed};

/// The receive coalescing of the `--rx-coalesce-us` rows (µs).
const COALESCE_US: &str = "50";

/// How router B forwards (or, for [`Via::Direct`], that there is no B).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Via {
    /// No router at all: A and C on one veth pair ([`Testbed::direct`]), the ends' own cost.
    Direct,
    /// A Linux bridge, no shaping.
    None,
    /// A Linux bridge with the kernel's HTB (from `export tc`) on the port towards C.
    Kernel,
    /// `linkshare run --io packet` between the two veths (AF_PACKET rings).
    Linkshare,
    /// `linkshare run --io packet --rx-ring v3` (block receive ring).
    LinkshareV3,
    /// `linkshare run --io xdp` (AF_XDP; native mode on veth, copy transmit).
    LinkshareXdp,
    /// `linkshare run --io xdp-generic` (AF_XDP on generic, skb-mode XDP).
    LinkshareXdpGeneric,
    /// `linkshare run --io packet --rx-coalesce-us 50` (receive coalescing).
    LinkshareCoalesce,
    /// `linkshare run --io xdp --rx-coalesce-us 50`.
    LinkshareXdpCoalesce,
    /// `linkshare run --io packet --realtime 10` (SCHED_FIFO datapath).
    LinkshareRealtime,
    /// `linkshare run --io xdp --realtime 10`.
    LinkshareXdpRealtime,
    /// `linkshare run --io packet --nice -10` (an ordinary thread that preempts sooner).
    LinkshareNice,
    /// `linkshare run --io packet --catch-up-ms 0` (late wake-ups lose the rate, as in Linux).
    LinkshareNoCatchUp,
    /// `linkshare run --io packet --busy-poll-us 2000` (a core given to pacing).
    LinksharePoll,
    /// `linkshare run --io xdp --busy-poll-us 2000`.
    LinkshareXdpPoll,
    /// `linkshare run --io packet --workers 2` (two datapath threads, AF_PACKET fanout).
    LinkshareWorkers2,
    /// `linkshare run --io xdp --workers 2` (veths with two queues, one per worker).
    LinkshareXdpWorkers2,
    /// `linkshare run --io packet --workers 2 --rx-split direction` (a worker per direction).
    LinkshareWorkers2Dir,
    /// `linkshare run --io xdp --workers 2 --rx-split direction` (AF_XDP receive, AF_PACKET
    /// transmit).
    LinkshareXdpWorkers2Dir,
}

impl Via {
    pub(super) fn name(self) -> &'static str {
        match self {
            Via::Direct => "no router (A and C on one veth pair)",
            Via::None => "no shaper (bridge)",
            Via::Kernel => "kernel HTB",
            Via::Linkshare => "linkshare",
            Via::LinkshareV3 => "linkshare --rx-ring v3",
            Via::LinkshareXdp => "linkshare --io xdp",
            Via::LinkshareXdpGeneric => "linkshare --io xdp-generic",
            Via::LinkshareCoalesce => "linkshare --rx-coalesce-us 50",
            Via::LinkshareXdpCoalesce => "linkshare --io xdp --rx-coalesce-us 50",
            Via::LinkshareRealtime => "linkshare --realtime 10",
            Via::LinkshareXdpRealtime => "linkshare --io xdp --realtime 10",
            Via::LinkshareNice => "linkshare --nice -10",
            Via::LinkshareNoCatchUp => "linkshare --catch-up-ms 0",
            Via::LinksharePoll => "linkshare --busy-poll-us 2000",
            Via::LinkshareXdpPoll => "linkshare --io xdp --busy-poll-us 2000",
            Via::LinkshareWorkers2 => "linkshare --workers 2",
            Via::LinkshareXdpWorkers2 => "linkshare --io xdp --workers 2",
            Via::LinkshareWorkers2Dir => "linkshare --workers 2 --rx-split direction",
            Via::LinkshareXdpWorkers2Dir => "linkshare --io xdp --workers 2 --rx-split direction",
        }
    }
}

/// The two end hosts of a testbed (names only, so threads can share them).
#[derive(Clone)]
pub(super) struct Hosts {
    pub(super) a: String,
    pub(super) c: String,
}

impl Hosts {
    pub(super) fn ns_a(&self) -> &str {
        &self.a
    }
    pub(super) fn ns_c(&self) -> &str {
        &self.c
    }
    pub(super) fn addr_c(&self) -> Ipv4Addr {
        crate::testbed::ADDR_C
    }
}

/// A testbed with its router started, and the router's process id.
pub(super) struct Bed {
    pub(super) t: Testbed,
    pub(super) pid: Option<u32>,
}

impl Bed {
    pub(super) fn ns_a(&self) -> &str {
        &self.t.ns_a
    }
    pub(super) fn ns_c(&self) -> &str {
        &self.t.ns_c
    }
    pub(super) fn dev_c(&self) -> &str {
        &self.t.dev_c
    }
    pub(super) fn addr_c(&self) -> Ipv4Addr {
        crate::testbed::ADDR_C
    }
    pub(super) fn router_pid(&self) -> Option<u32> {
        self.pid
    }
    pub(super) fn hosts(&self) -> Hosts {
        Hosts {
            a: self.t.ns_a.clone(),
            c: self.t.ns_c.clone(),
        }
    }
}

/// A testbed whose router forwards `via`, with `policy` (TOML) where it shapes.
pub(super) fn bed(via: Via, policy: &str) -> anyhow::Result<Bed> {
    if interrupted() {
        bail!("interrupted");
    }
    // AF_XDP workers take one receive queue each.
    let queues = if via == Via::LinkshareXdpWorkers2 {
        2
    } else {
        1
    };
    let router: Box<dyn Router> = match via {
        Via::Direct => {
            let t = Testbed::direct()?;
            t.wait_reachable()?;
            return Ok(Bed { t, pid: None });
        }
        Via::None => Box::new(KernelRouter::bridge()),
        Via::Kernel => Box::new(KernelRouter::htb(linkshare_interop::tc::export::tc_script)),
        Via::Linkshare => Box::new(LinkshareRouter::new(args(&["--io", "packet"]))?),
        Via::LinkshareV3 => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "packet",
            "--rx-ring",
            "v3",
        ]))?),
        Via::LinkshareXdp => Box::new(LinkshareRouter::new(args(&["--io", "xdp"]))?),
        Via::LinkshareXdpGeneric => Box::new(LinkshareRouter::new(args(&["--io", "xdp-generic"]))?),
        Via::LinkshareCoalesce => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "packet",
            "--rx-coalesce-us",
            COALESCE_US,
        ]))?),
        Via::LinkshareXdpCoalesce => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "xdp",
            "--rx-coalesce-us",
            COALESCE_US,
        ]))?),
        Via::LinkshareRealtime => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "packet",
            "--realtime",
            "10",
        ]))?),
        Via::LinkshareXdpRealtime => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "xdp",
            "--realtime",
            "10",
        ]))?),
        Via::LinkshareNice => Box::new(LinkshareRouter::new(args(&[
            "--io", "packet", "--nice", "-10",
        ]))?),
        Via::LinkshareNoCatchUp => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "packet",
            "--catch-up-ms",
            "0",
        ]))?),
        Via::LinksharePoll => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "packet",
            "--busy-poll-us",
            "2000",
        ]))?),
        Via::LinkshareXdpPoll => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "xdp",
            "--busy-poll-us",
            "2000",
        ]))?),
        Via::LinkshareWorkers2Dir => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "packet",
            "--workers",
            "2",
            "--rx-split",
            "direction",
        ]))?),
        Via::LinkshareXdpWorkers2Dir => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "xdp",
            "--workers",
            "2",
            "--rx-split",
            "direction",
        ]))?),
        Via::LinkshareWorkers2 => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "packet",
            "--workers",
            "2",
        ]))?),
        Via::LinkshareXdpWorkers2 => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "xdp",
            "--workers",
            "2",
        ]))?),
    };
    let mut t = Testbed::with_queues(queues)?;
    let file = t.write_file("policy.toml", policy)?;
    t.start_router(router, &file)?;
    t.wait_reachable()?;
    let pid = t.router().and_then(|r| r.pid());
    Ok(Bed { t, pid })
}

pub(super) fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A one-class HTB policy of rate `rate` (tc units) with leaf `leaf`.
pub(super) fn one_class(rate: &str, leaf: &str) -> String {
    format!(
        "qdisc = \"htb\"\ndefault = \"all\"\n[[class]]\nname = \"all\"\nrate = \"{rate}\"\nleaf = {leaf}\n"
    )
}

/// An HTB policy with `n` leaf classes under a root of `rate`, class `k` matching UDP destination
/// port `BASE_PORT + k`.
pub(super) fn n_classes(kind: &str, n: usize, rate_mbit: u64, leaf: &str) -> String {
    let mut s = format!(
        "qdisc = \"{kind}\"\ndefault = \"c0\"\n[[class]]\nname = \"root\"\nrate = \"{rate_mbit}mbit\"\n"
    );
    let each = rate_mbit * 1_000_000 / n as u64;
    for k in 0..n {
        s.push_str(&format!(
            "[[class]]\nname = \"c{k}\"\nparent = \"root\"\nrate = \"{each}bit\"\n"
        ));
        if kind == "htb" {
            s.push_str(&format!("ceil = \"{rate_mbit}mbit\"\n"));
        } else {
            s.push_str("borrow = true\n");
        }
        s.push_str(&format!("leaf = {leaf}\n"));
    }
    for k in 0..n {
        s.push_str(&format!(
            "[[filter]]\nclass = \"c{k}\"\nprotocol = \"udp\"\ndst_port = \"{}\"\n",
            BASE_PORT as usize + k
        ));
    }
    s
}

pub(super) const BASE_PORT: u16 = 9000;

/// Counters of one interface in a namespace: (rx packets, rx bytes).
pub(super) fn rx_counters(ns: &str, dev: &str) -> anyhow::Result<(u64, u64)> {
    let out = Command::new("ip")
        .args(["-n", ns, "-s", "-j", "link", "show", "dev", dev])
        .output()
        .context("running ip -s link")?;
    let v: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("ip -s -j link show dev {dev}: not JSON"))?;
    let rx = &v[0]["stats64"]["rx"];
    match (rx["packets"].as_u64(), rx["bytes"].as_u64()) {
        (Some(p), Some(b)) => Ok((p, b)),
        _ => bail!("no rx counters for {dev} in {ns}: {v}"),
    }
}

/// A policy that never limits: one class far above what veths forward.
pub(super) fn unlimited(leaf: &str) -> String {
    one_class("10gbit", leaf)
}

pub(super) const PFIFO: &str = "{ type = \"pfifo\", limit = 10000 }";
