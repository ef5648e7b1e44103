//! `tbf`: token bucket filter (tc-tbf(8)), with an optional peak-rate bucket.
//!
//! Tokens are exact integers in **nano-bits** (as in `htb`): the bucket gains `rate` nano-bits per
//! nanosecond and a packet of `len` bytes costs `len × 8 × 10⁹`, so there is no rounding drift.
//! The rate bucket holds at most `burst` bytes, the peak bucket at most `mtu` bytes.
//! A packet larger than `burst` (or `mtu` with a peak rate) can never be sent and is refused with
//! [`DropReason::TooBig`]; exceeding the byte `limit` refuses with [`DropReason::ByteLimit`].
//! With `limit = 0` the limit is derived from `latency` as tc does: `rate × latency + burst`.
//! Enqueue and dequeue are O(1).

use std::collections::VecDeque;

use super::{Books, Dequeued, Discipline, DropReason, Dropped, ParamError};
use crate::packet::Packet;
use crate::units::{Duration, Rate, Time};

const NS: u128 = 1_000_000_000;

/// TBF parameters (policy keys).
#[derive(Clone, Debug, PartialEq)]
pub struct TbfParams {
    /// Long-term rate (required, bit/s).
    pub rate: Rate,
    /// Bucket size in bytes (required).
    pub burst: u32,
    /// Queue limit in bytes; 0 = derive from `latency`.
    pub limit: u32,
    /// Maximum time a packet may wait; used when `limit` is 0.
    pub latency: Option<Duration>,
    /// Optional peak rate.
    pub peakrate: Option<Rate>,
    /// Peak bucket size in bytes (default 1514).
    pub mtu: u32,
}

impl Default for TbfParams {
    fn default() -> Self {
        TbfParams {
            rate: Rate(0),
            burst: 0,
            limit: 0,
            latency: Some(Duration::from_millis(50)),
            peakrate: None,
            mtu: 1514,
        }
    }
}

impl TbfParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.rate.0 == 0 {
            return Err(ParamError::new(
                "rate",
                "must be set and above 0, got 0",
                "set rate, e.g. rate = \"10mbit\"",
            ));
        }
        if self.burst < 64 {
            return Err(ParamError::new(
                "burst",
                format!("must be at least 64 bytes, got {}", self.burst),
                "set burst to at least one MTU (e.g. 1514), more for high rates (rate/HZ)",
            ));
        }
        if self.limit == 0 && self.latency.is_none() {
            return Err(ParamError::new(
                "limit",
                "neither limit nor latency is set",
                "set limit (bytes) or latency (e.g. \"50ms\")",
            ));
        }
        if let Some(l) = self.latency {
            if l.0 == 0 && self.limit == 0 {
                return Err(ParamError::new(
                    "latency",
                    "must be above 0, got 0",
                    "set latency to e.g. \"50ms\" or give a byte limit",
                ));
            }
        }
        if self.limit != 0 && self.limit < self.burst.min(self.mtu) {
            return Err(ParamError::new(
                "limit",
                format!("must hold at least one packet, got {} bytes", self.limit),
                "set limit to at least the burst",
            ));
        }
        if let Some(p) = self.peakrate {
            if p.0 <= self.rate.0 {
                return Err(ParamError::new(
                    "peakrate",
                    format!(
                        "must be above rate ({} bit/s), got {} bit/s",
                        self.rate.0, p.0
                    ),
                    "set peakrate above rate or remove it",
                ));
            }
            if self.mtu < 64 {
                return Err(ParamError::new(
                    "mtu",
                    format!("must be at least 64 bytes, got {}", self.mtu),
                    "set mtu to the link MTU (1514)",
                ));
            }
        }
        Ok(())
    }
    /// The effective byte limit: `limit`, or `rate × latency + burst` (as tc computes it).
    pub fn effective_limit(&self) -> u64 {
        if self.limit != 0 {
            return self.limit as u64;
        }
        let lat = self.latency.unwrap_or(Duration::ZERO);
        self.rate.bytes_in(lat).saturating_add(self.burst as u64)
    }
}

/// The TBF qdisc.
#[derive(Debug)]
pub struct Tbf<P> {
    p: TbfParams,
    q: VecDeque<P>,
    bytes: u64,
    limit: u64,
    /// Tokens in nano-bits, in [0, burst_nb].
    tokens: u128,
    burst_nb: u128,
    ptokens: u128,
    mtu_nb: u128,
    last: Time,
    books: Books<P>,
}

fn nb(bytes: u64) -> u128 {
    bytes as u128 * 8 * NS
}

impl<P: Packet> Tbf<P> {
    pub fn new(params: TbfParams) -> Result<Self, ParamError> {
        params.validate()?;
        let burst_nb = nb(params.burst as u64);
        let mtu_nb = nb(params.mtu as u64);
        Ok(Tbf {
            limit: params.effective_limit(),
            p: params,
            q: VecDeque::new(),
            bytes: 0,
            tokens: burst_nb,
            burst_nb,
            ptokens: mtu_nb,
            mtu_nb,
            last: Time::ZERO,
            books: Books::new(),
        })
    }
    pub fn params(&self) -> &TbfParams {
        &self.p
    }
    fn refill(&mut self, now: Time) {
        let dt = now.saturating_since(self.last).0 as u128;
        if now > self.last {
            self.last = now;
        }
        self.tokens = (self.tokens + dt * self.p.rate.0 as u128).min(self.burst_nb);
        if let Some(pr) = self.p.peakrate {
            self.ptokens = (self.ptokens + dt * pr.0 as u128).min(self.mtu_nb);
        }
    }
}

impl<P: Packet> Discipline<P> for Tbf<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }
    /// O(1).
    fn enqueue_inner(&mut self, pkt: P, _now: Time) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        let too_big = len > self.p.burst || (self.p.peakrate.is_some() && len > self.p.mtu);
        let reason = if too_big {
            Some(DropReason::TooBig)
        } else if self.bytes + len as u64 > self.limit {
            Some(DropReason::ByteLimit)
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Dropped {
                packet: pkt,
                reason,
            });
        }
        self.bytes += len as u64;
        self.q.push_back(pkt);
        Ok(())
    }

    /// O(1). `NotBefore(t)` gives the exact nanosecond at which both buckets hold enough.
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        let len = match self.q.front() {
            Some(p) => p.len(),
            None => return Dequeued::Empty,
        };
        self.refill(now);
        let cost = nb(len as u64);
        let mut wait: u128 = 0;
        if self.tokens < cost {
            wait = (cost - self.tokens).div_ceil(self.p.rate.0 as u128);
        }
        if let Some(pr) = self.p.peakrate {
            if self.ptokens < cost {
                wait = wait.max((cost - self.ptokens).div_ceil(pr.0 as u128));
            }
        }
        if wait > 0 {
            let t = (now.0 as u128 + wait).min(u64::MAX as u128) as u64;
            return Dequeued::NotBefore(Time(t));
        }
        self.tokens -= cost;
        if self.p.peakrate.is_some() {
            self.ptokens -= cost;
        }
        let Some(pkt) = self.q.pop_front() else {
            return Dequeued::Empty;
        };
        self.bytes -= len as u64;
        Dequeued::Packet(pkt)
    }

    fn kind_inner(&self) -> &'static str {
        "tbf"
    }
    fn drain_inner(&mut self, _now: Time) -> Vec<P> {
        let mut out = Vec::with_capacity(self.q.len());
        while let Some(p) = self.q.pop_front() {
            let len = p.len();
            self.bytes -= len as u64;
            out.push(p);
        }
        out
    }
    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("tokens_bytes", (self.tokens / (8 * NS)) as f64);
        f("ptokens_bytes", (self.ptokens / (8 * NS)) as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketMeta;
    use crate::qdisc::Qdisc;

    fn pkt(len: u32) -> PacketMeta {
        PacketMeta {
            len,
            ..Default::default()
        }
    }

    #[test]
    fn validate_rejects_zero_rate() {
        let e = TbfParams::default().validate().unwrap_err();
        assert_eq!(e.param, "rate");
    }

    #[test]
    fn limit_from_latency() {
        let p = TbfParams {
            rate: Rate::mbit(8),
            burst: 10_000,
            latency: Some(Duration::from_millis(10)),
            ..Default::default()
        };
        // 1 MB/s * 10 ms = 10000 B, + burst.
        assert_eq!(p.effective_limit(), 20_000);
    }

    #[test]
    fn exact_not_before() {
        let mut t: Tbf<PacketMeta> = Tbf::new(TbfParams {
            rate: Rate::mbit(8),
            burst: 1000,
            limit: 100_000,
            ..Default::default()
        })
        .unwrap();
        t.enqueue(pkt(1000), Time(0)).unwrap();
        t.enqueue(pkt(1000), Time(0)).unwrap();
        assert!(t.dequeue(Time(0)).packet().is_some());
        // 1000 B at 1 MB/s = 1 ms exactly.
        assert_eq!(t.dequeue(Time(0)), Dequeued::NotBefore(Time(1_000_000)));
        assert_eq!(
            t.dequeue(Time(999_999)),
            Dequeued::NotBefore(Time(1_000_000))
        );
        assert!(t.dequeue(Time(1_000_000)).packet().is_some());
        t.stats().check_conservation().unwrap();
    }

    #[test]
    fn too_big_refused() {
        let mut t: Tbf<PacketMeta> = Tbf::new(TbfParams {
            rate: Rate::mbit(8),
            burst: 1000,
            limit: 100_000,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            t.enqueue(pkt(1001), Time(0)).unwrap_err().reason,
            DropReason::TooBig
        );
    }
}
