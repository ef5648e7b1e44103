//! One `[[flow]]` table checked: its name and kind, the keys of that kind (a key of another
//! kind is an error that lists the right ones), its addresses, ports, times and TOS, and the
//! `count` expansion into numbered copies.
//!
//! Rule: a flow's values are checked against the link (MTU, delay) and the scenario's duration,
//! so that nothing the simulator adds up can overflow.

use std::ops::Range;

use linkshare_core::Duration;

use super::arrivals::{expand, first_key, Ctx};
use super::error::{Doc, ScenarioError};
use super::raw::{RawFlow, Val};
use super::spec::{
    CcKind, FlowKind, FlowSpec, Pattern, PingSpec, SizeMix, TcpSpec, UdpSpec, DEFAULT_INIT_CWND,
    DEFAULT_MIN_RTO, DEFAULT_PING_INTERVAL, DEFAULT_PING_SIZE, MAX_COUNT, MAX_DURATION,
};
use super::value::{
    dscp_val, dur_val, int_val, ip_size, opt_addr, opt_bool, opt_dur, opt_int, rate_val, size_val,
};

macro_rules! deny_for {
    ($doc:expr, $kind:expr, $( $field:expr => $name:literal ),* ) => {
        $( if let Some(v) = &$field {
            return Err($doc.err(v.span(), format!("`{}` does not apply to {} flows", $name, $kind),
                Some(keys_help($kind))));
        } )*
    };
}

fn keys_help(kind: &str) -> String {
    match kind {
        "tcp" => format!(
            "tcp flows take: cc, window, bytes, delayed_ack, sack, min_rto, init_cwnd, ecn; arriving flows: {}",
            super::arrivals::KEYS
        ),
        "udp" => "udp flows take: rate, size, pattern, on, off".into(),
        _ => "ping flows take: interval, size".into(),
    }
}

pub(super) fn flow_from_raw(
    doc: &Doc<'_>,
    rf: RawFlow,
    span: Range<usize>,
    ctx: &Ctx<'_>,
) -> Result<Vec<FlowSpec>, ScenarioError> {
    let (duration, link) = (ctx.duration, ctx.link);
    let Some(name) = rf.name.as_ref() else {
        return Err(doc.err(span, "a [[flow]] needs a `name`", None));
    };
    let name_s = name.get_ref().trim().to_string();
    if name_s.is_empty()
        || name_s
            .chars()
            .any(|c| c.is_whitespace() || c == ',' || c == '"')
    {
        return Err(doc.err(
            name.span(),
            "flow names must be non-empty, without spaces, commas or quotes",
            None,
        ));
    }
    let Some(kind) = rf.kind.as_ref() else {
        return Err(doc.err(
            name.span(),
            format!("flow `{name_s}` needs a `kind`"),
            Some("kind = \"tcp\", \"udp\" or \"ping\"".into()),
        ));
    };
    let kind_s = kind.get_ref().as_str();
    if let (Some((sp, key)), true) = (first_key(&rf), kind_s != "tcp") {
        return Err(doc.err(
            sp,
            format!("`{key}` does not apply to {kind_s} flows (arriving flows are tcp)"),
            None,
        ));
    }
    let max_ip = link.mtu;
    let fk = match kind_s {
        "tcp" => {
            deny_for!(doc, "tcp", rf.rate => "rate", rf.pattern => "pattern", rf.on => "on", rf.off => "off", rf.size => "size", rf.interval => "interval");
            let cc = match rf.cc.as_ref().map(|c| c.get_ref().as_str()) {
                None | Some("newreno") | Some("reno") => CcKind::NewReno,
                Some("cubic") => CcKind::Cubic,
                Some("bbr") => CcKind::Bbr,
                Some(other) => {
                    let sp = rf.cc.as_ref().map(|c| c.span()).unwrap_or(span.clone());
                    return Err(doc.err(
                        sp,
                        format!("unknown congestion control `{other}`"),
                        Some("cc = \"newreno\", \"cubic\" or \"bbr\"".into()),
                    ));
                }
            };
            let window = match rf.window.as_ref() {
                None => None,
                Some(v) => Some(size_val(doc, v)?),
            };
            let mss = crate::packet::mss_for_mtu(link.mtu) as u64;
            if let (Some(w), Some(v)) = (window, rf.window.as_ref()) {
                if w < mss {
                    return Err(doc.err(
                        v.span(),
                        format!("`window` {w} bytes is below one segment ({mss} bytes)"),
                        None,
                    ));
                }
            }
            let bytes = match rf.bytes.as_ref() {
                None => None,
                Some(v) => {
                    let b = size_val(doc, v)?;
                    if b == 0 {
                        return Err(doc.err(
                            v.span(),
                            "`bytes` must be above 0 (omit it for a bulk flow)",
                            None,
                        ));
                    }
                    Some(b)
                }
            };
            FlowKind::Tcp(TcpSpec {
                cc,
                window,
                bytes,
                delayed_ack: opt_bool(doc, rf.delayed_ack.as_ref(), true)?,
                sack: opt_bool(doc, rf.sack.as_ref(), true)?,
                min_rto: opt_dur(doc, rf.min_rto.as_ref(), DEFAULT_MIN_RTO)?,
                init_cwnd: opt_int(
                    doc,
                    rf.init_cwnd.as_ref(),
                    DEFAULT_INIT_CWND as i64,
                    1,
                    1000,
                )? as u32,
                ecn: opt_bool(doc, rf.ecn.as_ref(), false)?,
            })
        }
        "udp" => {
            deny_for!(doc, "udp", rf.cc => "cc", rf.window => "window", rf.bytes => "bytes", rf.delayed_ack => "delayed_ack", rf.sack => "sack", rf.min_rto => "min_rto", rf.init_cwnd => "init_cwnd", rf.ecn => "ecn", rf.interval => "interval");
            let Some(rate_v) = rf.rate.as_ref() else {
                return Err(doc.err(
                    name.span(),
                    format!("udp flow `{name_s}` needs a `rate`"),
                    Some("e.g. rate = \"2mbit\"".into()),
                ));
            };
            let rate = rate_val(doc, rate_v)?;
            if rate.0 == 0 {
                return Err(doc.err(rate_v.span(), "the rate must be above 0", None));
            }
            let size = match rf.size.as_ref() {
                None => SizeMix::fixed(max_ip),
                Some(v) => match v.get_ref() {
                    Val::Str(s) if s.eq_ignore_ascii_case("imix") => SizeMix::imix(),
                    _ => SizeMix::fixed(ip_size(doc, v, 28, max_ip)?),
                },
            };
            if size.max() > max_ip {
                let sp = rf.size.as_ref().map(|s| s.span()).unwrap_or(span.clone());
                return Err(doc.err(
                    sp,
                    format!(
                        "packets of {} bytes do not fit the link MTU {max_ip}",
                        size.max()
                    ),
                    None,
                ));
            }
            // Where an error about the pattern points: the key, else the flow.
            let pattern_span = || {
                rf.pattern
                    .as_ref()
                    .map(|p| p.span())
                    .unwrap_or(span.clone())
            };
            let pattern = match rf.pattern.as_ref().map(|p| p.get_ref().as_str()) {
                None | Some("cbr") => {
                    deny_for!(doc, "cbr", rf.on => "on", rf.off => "off");
                    Pattern::Cbr
                }
                Some("poisson") => {
                    deny_for!(doc, "poisson", rf.on => "on", rf.off => "off");
                    Pattern::Poisson
                }
                Some("onoff") => {
                    let (Some(on), Some(off)) = (rf.on.as_ref(), rf.off.as_ref()) else {
                        return Err(doc.err(
                            pattern_span(),
                            "pattern \"onoff\" needs `on` and `off` durations",
                            Some("e.g. on = \"1s\", off = \"2s\"".into()),
                        ));
                    };
                    let on_d = dur_val(doc, on)?;
                    let off_d = dur_val(doc, off)?;
                    if on_d.0 == 0 {
                        return Err(doc.err(on.span(), "`on` must be above 0", None));
                    }
                    if on_d
                        .0
                        .checked_add(off_d.0)
                        .is_none_or(|p| p > MAX_DURATION.0)
                    {
                        return Err(doc.err(
                            off.span(),
                            format!("`on` {on_d} plus `off` {off_d} (the period) is above {MAX_DURATION}"),
                            None,
                        ));
                    }
                    Pattern::OnOff {
                        on: on_d,
                        off: off_d,
                    }
                }
                Some(other) => {
                    return Err(doc.err(
                        pattern_span(),
                        format!("unknown pattern `{other}`"),
                        Some("pattern = \"cbr\", \"poisson\" or \"onoff\"".into()),
                    ));
                }
            };
            FlowKind::Udp(UdpSpec {
                rate,
                size,
                pattern,
            })
        }
        "ping" => {
            deny_for!(doc, "ping", rf.cc => "cc", rf.window => "window", rf.bytes => "bytes", rf.delayed_ack => "delayed_ack", rf.sack => "sack", rf.min_rto => "min_rto", rf.init_cwnd => "init_cwnd", rf.ecn => "ecn", rf.rate => "rate", rf.pattern => "pattern", rf.on => "on", rf.off => "off");
            let interval = opt_dur(doc, rf.interval.as_ref(), DEFAULT_PING_INTERVAL)?;
            if interval.0 < 1_000 {
                let sp = rf
                    .interval
                    .as_ref()
                    .map(|s| s.span())
                    .unwrap_or(span.clone());
                return Err(doc.err(sp, "`interval` must be at least 1us", None));
            }
            let size = match rf.size.as_ref() {
                None => DEFAULT_PING_SIZE,
                Some(v) => ip_size(doc, v, 28, max_ip)?,
            };
            FlowKind::Ping(PingSpec { interval, size })
        }
        other => {
            return Err(doc.err(
                kind.span(),
                format!("unknown flow kind `{other}`"),
                Some("kind = \"tcp\", \"udp\" or \"ping\"".into()),
            ));
        }
    };

    let tos = match (rf.dscp.as_ref(), rf.tos.as_ref()) {
        (Some(d), Some(t)) => {
            let _ = d;
            return Err(doc.err(t.span(), "give `dscp` or `tos`, not both", None));
        }
        (Some(d), None) => dscp_val(doc, d)? << 2,
        (None, Some(t)) => int_val(doc, t, 0, 255)? as u8,
        (None, None) => 0,
    };
    let src = opt_addr(doc, rf.src.as_ref())?;
    let dst = opt_addr(doc, rf.dst.as_ref())?;
    let sport = opt_int(doc, rf.sport.as_ref(), 0, 1, 65535)? as u16;
    let dport = opt_int(doc, rf.dport.as_ref(), 0, 1, 65535)? as u16;
    let start = opt_dur(doc, rf.start.as_ref(), Duration::ZERO)?;
    let stop = opt_dur(doc, rf.stop.as_ref(), duration)?;
    if stop < start {
        let sp = rf.stop.as_ref().map(|s| s.span()).unwrap_or(span.clone());
        return Err(doc.err(sp, format!("flow `{name_s}` stops before it starts"), None));
    }
    let extra_delay = opt_dur(doc, rf.extra_delay.as_ref(), Duration::ZERO)?;
    if let Some(v) = rf.extra_delay.as_ref() {
        let one_way = link.delay.0.checked_add(extra_delay.0);
        if one_way.is_none_or(|t| t > MAX_DURATION.0) {
            return Err(doc.err(
                v.span(),
                format!(
                    "`extra_delay` {extra_delay} plus the link's `delay` {} is above {MAX_DURATION}",
                    link.delay
                ),
                None,
            ));
        }
    }
    let count = opt_int(doc, rf.count.as_ref(), 1, 1, MAX_COUNT)?;
    let has_count = rf.count.is_some();
    if count > 1 && rf.sport.is_some() && rf.src.is_some() {
        let sp = rf.count.as_ref().map(|s| s.span()).unwrap_or(span.clone());
        return Err(doc.err(sp, "with `count` > 1, `src` and `sport` cannot both be fixed (the copies would be one flow)", None));
    }
    let base = FlowSpec {
        name: name_s.clone(),
        entry: name_s.clone(),
        kind: fk,
        tos,
        src,
        dst,
        sport,
        dport,
        start,
        stop,
        extra_delay,
        arrival: None,
    };
    if rf.arrivals.is_some() || first_key(&rf).is_some() {
        return expand(doc, &rf, span, base, ctx);
    }
    if !has_count {
        return Ok(vec![base]);
    }
    Ok((1..=count)
        .map(|i| {
            let mut f = base.clone();
            f.name = format!("{name_s}.{i}");
            f
        })
        .collect())
}
