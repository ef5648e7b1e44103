//! The testbed itself: three namespaces A, B, C joined by two veth pairs (see the module
//! comment of [`super`]), with the router in B.
//!
//! Names carry the process id and a sequence number, so parallel runs never collide; a build
//! that fails half-way is undone by the same `Drop` that ends a run (router first, then the
//! namespaces, which take their veths with them, then the scratch directory).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::netns::{in_ns, ip, ip_batch, offloads_off, remove_stale, unavailable};
use super::router::Router;
use super::signals::interrupted;

/// Prefix of every namespace this module creates; `lslab<pid>x<seq>{a,r,c}`.
pub(super) const PREFIX: &str = "lslab";
/// The sender's and the sink's address on the shared segment.
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
pub const ADDR_C: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Three namespaces joined by two veth pairs; see the module comment.
pub struct Testbed {
    pub ns_a: String,
    pub ns_r: String,
    pub ns_c: String,
    pub dev_a: String,
    pub dev_ra: String,
    pub dev_rc: String,
    pub dev_c: String,
    /// Scratch directory (policy file, control socket), removed on drop.
    pub dir: PathBuf,
    router: Option<Box<dyn Router>>,
    /// Queues per veth (1 unless built with [`Testbed::with_queues`]).
    queues: u32,
    /// A and C on one veth pair, no B ([`Testbed::direct`]).
    direct: bool,
}

impl Testbed {
    /// Build the namespaces and links. Fails with the reason when not root or `ip` is missing.
    pub fn new() -> anyhow::Result<Testbed> {
        Self::with_queues(1)
    }

    /// The same with `queues` receive and transmit queues on every veth (`--workers N` with
    /// AF_XDP takes one receive queue per worker; a veth hands a frame to the peer's receive
    /// queue of the index its sender's transmit queue had, which the kernel picks by flow hash).
    pub fn with_queues(queues: u32) -> anyhow::Result<Testbed> {
        Self::make(queues, false)
    }

    /// A and C joined by one veth pair (`dev_a` ── `dev_c`), no router namespace between them:
    /// what the sender and the sink cost per frame with nothing in between, the floor under
    /// every router's machine CPU in `lab bench` (a router in B adds its own work to theirs).
    /// `ns_r`, `dev_ra` and `dev_rc` are named but never created; starting a router on it fails.
    pub fn direct() -> anyhow::Result<Testbed> {
        Self::make(1, true)
    }

    fn make(queues: u32, direct: bool) -> anyhow::Result<Testbed> {
        if let Some(why) = unavailable() {
            bail!("{why}");
        }
        remove_stale();
        let tag = format!(
            "{PREFIX}{}x{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        // Interface names are limited to 15 bytes: `l<pid>x<seq>` plus a role letter.
        let short = format!("l{}x{}", std::process::id(), SEQ.load(Ordering::SeqCst) - 1);
        let dir = std::env::temp_dir().join(&tag);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let mut bed = Testbed {
            ns_a: format!("{tag}a"),
            ns_r: format!("{tag}r"),
            ns_c: format!("{tag}c"),
            dev_a: format!("{short}a"),
            dev_ra: format!("{short}p"),
            dev_rc: format!("{short}q"),
            dev_c: format!("{short}c"),
            dir,
            router: None,
            queues: queues.max(1),
            direct,
        };
        let created = bed.build();
        match created {
            Ok(()) => Ok(bed),
            Err(e) => {
                drop(bed);
                Err(e)
            }
        }
    }

    fn build(&mut self) -> anyhow::Result<()> {
        if self.direct {
            return self.build_direct();
        }
        for ns in [&self.ns_a, &self.ns_r, &self.ns_c] {
            ip(&["netns", "add", ns])?;
        }
        let q = self.queues.to_string();
        let queues: &[&str] = if self.queues > 1 {
            &["numtxqueues", &q, "numrxqueues", &q]
        } else {
            &[]
        };
        for (dev, ns, peer, pns) in [
            (&self.dev_a, &self.ns_a, &self.dev_ra, &self.ns_r),
            (&self.dev_c, &self.ns_c, &self.dev_rc, &self.ns_r),
        ] {
            let mut args: Vec<&str> = vec!["link", "add", dev];
            args.extend_from_slice(queues);
            args.extend_from_slice(&["netns", ns, "type", "veth", "peer", "name", peer]);
            args.extend_from_slice(queues);
            args.extend_from_slice(&["netns", pns]);
            ip(&args)?;
        }
        self.address_ends()?;
        self.bring_up(&[
            (&self.ns_a, &self.dev_a),
            (&self.ns_r, &self.dev_ra),
            (&self.ns_r, &self.dev_rc),
            (&self.ns_c, &self.dev_c),
        ])
    }

    /// [`Testbed::direct`]: A and C only, one veth pair between them.
    fn build_direct(&mut self) -> anyhow::Result<()> {
        for ns in [&self.ns_a, &self.ns_c] {
            ip(&["netns", "add", ns])?;
        }
        ip(&[
            "link",
            "add",
            &self.dev_a,
            "netns",
            &self.ns_a,
            "type",
            "veth",
            "peer",
            "name",
            &self.dev_c,
            "netns",
            &self.ns_c,
        ])?;
        self.address_ends()?;
        self.bring_up(&[(&self.ns_a, &self.dev_a), (&self.ns_c, &self.dev_c)])
    }

    /// A's and C's addresses on the shared segment.
    fn address_ends(&self) -> anyhow::Result<()> {
        for (ns, addr, dev) in [
            (&self.ns_a, ADDR_A, &self.dev_a),
            (&self.ns_c, ADDR_C, &self.dev_c),
        ] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
        }
        Ok(())
    }

    /// Links (and each namespace's loopback) up, offloads off.
    fn bring_up(&self, devs: &[(&String, &String)]) -> anyhow::Result<()> {
        for (ns, dev) in devs {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            let d = (*dev).clone();
            in_ns(ns, move || offloads_off(&d))?;
        }
        Ok(())
    }

    /// Give A the source addresses and C the destination addresses of the flows (as /32 on the
    /// shared segment, with on-link routes both ways), so a policy's address filters see the
    /// scenario's addresses.
    pub fn add_flow_addresses(&self, srcs: &[Ipv4Addr], dsts: &[Ipv4Addr]) -> anyhow::Result<()> {
        let mut a = Vec::new();
        let mut c = Vec::new();
        for s in srcs {
            if *s != ADDR_A {
                a.push(format!("addr add {s}/32 dev {}", self.dev_a));
                c.push(format!("route add {s}/32 dev {}", self.dev_c));
            }
        }
        for d in dsts {
            if *d != ADDR_C {
                c.push(format!("addr add {d}/32 dev {}", self.dev_c));
                a.push(format!("route add {d}/32 dev {}", self.dev_a));
            }
        }
        ip_batch(&self.ns_a, &a)?;
        ip_batch(&self.ns_c, &c)
    }

    /// Route metrics for TCP in A, one host route per destination ([`TcpRoute`]) — the kernel
    /// reads a connection's initial window, minimum RTO and whether it asks for ECN
    /// (`features ecn`, as `net.ipv4.tcp_ecn = 1` for that destination) from its route.
    pub fn set_tcp_routes(&self, routes: &[TcpRoute]) -> anyhow::Result<()> {
        let lines: Vec<String> = routes
            .iter()
            .map(|r| {
                format!(
                    "route replace {}/32 dev {} initcwnd {} rto_min {}ms{}",
                    r.dst,
                    self.dev_a,
                    r.init_cwnd,
                    r.rto_min_ms,
                    if r.ecn { " features ecn" } else { "" }
                )
            })
            .collect();
        ip_batch(&self.ns_a, &lines)
    }

    /// Start `router` in B with `policy`; the testbed owns it from now on and stops it first
    /// when dropped.
    pub fn start_router(
        &mut self,
        mut router: Box<dyn Router>,
        policy: &Path,
    ) -> anyhow::Result<()> {
        if self.direct {
            bail!("this testbed has no router namespace (Testbed::direct): nothing to start");
        }
        let r = router.start(self, policy);
        self.router = Some(router);
        r
    }

    pub fn router(&mut self) -> Option<&mut (dyn Router + 'static)> {
        self.router.as_deref_mut()
    }

    /// Wait until A reaches C through B (neighbours resolved, the router forwarding): UDP
    /// datagrams from A until one arrives at a socket in C.
    pub fn wait_reachable(&self) -> anyhow::Result<()> {
        let sink = in_ns(&self.ns_c, || std::net::UdpSocket::bind((ADDR_C, 5299)))??;
        sink.set_read_timeout(Some(Duration::from_millis(100)))?;
        let src = in_ns(&self.ns_a, || std::net::UdpSocket::bind((ADDR_A, 0)))??;
        let t0 = Instant::now();
        let mut buf = [0u8; 16];
        while t0.elapsed() < Duration::from_secs(10) && !interrupted() {
            src.send_to(b"hello", (ADDR_C, 5299))?;
            if sink.recv(&mut buf).is_ok() {
                return Ok(());
            }
        }
        bail!("C is not reachable from A through the router after 10 s")
    }

    /// Write `text` to `name` in the scratch directory.
    pub fn write_file(&self, name: &str, text: &str) -> anyhow::Result<PathBuf> {
        let p = self.dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
        Ok(p)
    }
}

/// The TCP knobs of the flows to one destination, as route metrics in the sender namespace
/// (ip-route(8): `initcwnd`, `rto_min`, `features ecn`). The receivers' namespace keeps Linux's
/// default `net.ipv4.tcp_ecn = 2`: it accepts ECN when a sender asks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TcpRoute {
    pub dst: Ipv4Addr,
    pub init_cwnd: u32,
    pub rto_min_ms: u64,
    pub ecn: bool,
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Some(mut r) = self.router.take() {
            r.stop();
        }
        for ns in [&self.ns_a, &self.ns_r, &self.ns_c] {
            if Path::new(&format!("/var/run/netns/{ns}")).exists() {
                if let Err(e) = ip(&["netns", "del", ns]) {
                    eprintln!("warning: {e}");
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
