//! Scenario files: the link, the policy and the traffic of one simulation, as TOML.
//!
//! Every key, its unit and its default is documented in `docs/scenario-format.md`. Parsing is
//! strict: an unknown key, a value of the wrong type or unit, a key that does not apply to the
//! flow's kind, or a flow of an unknown kind is an error that points at the line and column.
//!
//! Parsing happens in two steps: serde reads the document into the `Raw*` structs below (unit
//! values keep their span), then [`Scenario::from_raw`] checks every value and expands `count`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::ops::Range;
use std::path::{Path, PathBuf};

use linkshare_config::{ConfigError, Diagnostic, Severity};
use linkshare_core::{dscp, Duration, Rate, Size};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

use crate::policy::PolicySource;

/// A rejected scenario: every diagnostic (file:line:col, message, help), as `linkshare check`
/// prints them for policies. Problems of an inline or referenced policy come from the policy
/// checker and point into the file they are in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub diagnostics: Vec<Diagnostic>,
}

impl ScenarioError {
    pub(crate) fn one(
        file: &str,
        line: usize,
        col: usize,
        message: String,
        help: Option<String>,
    ) -> Self {
        ScenarioError {
            diagnostics: vec![Diagnostic {
                severity: Severity::Error,
                file: file.to_string(),
                line,
                col,
                message,
                help,
            }],
        }
    }
    /// The first error (there is always one).
    pub fn first(&self) -> Option<&Diagnostic> {
        self.diagnostics
            .iter()
            .find(|d| d.is_error())
            .or(self.diagnostics.first())
    }
}

impl From<ConfigError> for ScenarioError {
    fn from(e: ConfigError) -> Self {
        ScenarioError {
            diagnostics: e.diagnostics,
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Locates byte offsets of one document.
pub(crate) struct Doc<'a> {
    pub(crate) text: &'a str,
    pub(crate) origin: &'a str,
}

/// A TOML or serde error of `doc`, located, with a pointer to the format for unknown keys.
pub(crate) fn toml_error(doc: &Doc<'_>, e: &toml::de::Error) -> ScenarioError {
    let span = e.span().unwrap_or(0..0);
    let msg = e
        .message()
        .trim()
        .lines()
        .next()
        .unwrap_or("invalid TOML")
        .to_string();
    let help = if msg.starts_with("unknown field") {
        Some("see docs/scenario-format.md for the keys a scenario accepts".to_string())
    } else {
        None
    };
    doc.err(span, msg, help)
}

impl Doc<'_> {
    fn err(
        &self,
        span: Range<usize>,
        message: impl Into<String>,
        help: Option<String>,
    ) -> ScenarioError {
        let (line, col) = line_col(self.text, span.start);
        ScenarioError::one(self.origin, line, col, message.into(), help)
    }
}

pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before.get(start..).map(|s| s.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

/// A scalar as written: a string with a unit, or a bare number.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl<'de> Deserialize<'de> for Val {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Val, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Val;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, a number or a boolean")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Val, E> {
                Ok(Val::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Val, E> {
                Ok(Val::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Val, E> {
                i64::try_from(v)
                    .map(Val::Int)
                    .map_err(|_| E::custom("integer out of range"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Val, E> {
                Ok(Val::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Val, E> {
                Ok(Val::Str(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

type SV = Spanned<Val>;

/// `policy = "path"` or an inline `[policy]` table.
#[derive(Debug)]
pub(crate) enum RawPolicy {
    Path(String),
    Inline(crate::policy::InlinePolicy),
}

impl<'de> Deserialize<'de> for RawPolicy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawPolicy, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawPolicy;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a path to a policy file or a [policy] table")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawPolicy, E> {
                Ok(RawPolicy::Path(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawPolicy, A::Error> {
                let doc = crate::policy::InlinePolicy::deserialize(
                    de::value::MapAccessDeserializer::new(map),
                )?;
                Ok(RawPolicy::Inline(doc))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<Spanned<String>>,
    duration: Option<SV>,
    seed: Option<Spanned<i64>>,
    sample: Option<SV>,
    link: Spanned<RawLink>,
    policy: Option<Spanned<RawPolicy>>,
    #[serde(default)]
    flow: Vec<Spanned<RawFlow>>,
    /// Read by [`crate::load`] (`[sweep]` expands into whole scenarios, built above this module).
    #[serde(default, rename = "sweep")]
    _sweep: Option<de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    rate: Option<SV>,
    delay: Option<SV>,
    mtu: Option<SV>,
    device_buffer: Option<SV>,
    timer_hz: Option<SV>,
    clock_hz: Option<SV>,
    overhead: Option<SV>,
    queue: Option<SV>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    name: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    dscp: Option<SV>,
    tos: Option<SV>,
    src: Option<Spanned<String>>,
    dst: Option<Spanned<String>>,
    sport: Option<SV>,
    dport: Option<SV>,
    start: Option<SV>,
    stop: Option<SV>,
    count: Option<SV>,
    extra_delay: Option<SV>,
    // tcp
    cc: Option<Spanned<String>>,
    window: Option<SV>,
    bytes: Option<SV>,
    delayed_ack: Option<SV>,
    sack: Option<SV>,
    min_rto: Option<SV>,
    init_cwnd: Option<SV>,
    // udp
    rate: Option<SV>,
    pattern: Option<Spanned<String>>,
    on: Option<SV>,
    off: Option<SV>,
    // udp and ping
    size: Option<SV>,
    // ping
    interval: Option<SV>,
}

/// The bottleneck link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    pub rate: Rate,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Largest IP packet; TCP's MSS is `mtu − 52` (IP and TCP headers with timestamps).
    pub mtu: u32,
    /// Bytes of driver/NIC ring between the scheduler and the wire (see `link.rs` for the rule).
    pub device_buffer: u64,
    /// Wake-up timer frequency; 0 = exact wake-ups.
    pub timer_hz: u32,
    /// Resolution of the scheduler's clock (`now` rounded down to its tick); 0 = exact.
    pub clock_hz: u32,
    /// Bytes added to every packet's length for scheduling and transmission (tc's `overhead`).
    pub overhead: u32,
    /// Packet limit of the `pfifo` used when the scenario has no policy.
    pub queue: u32,
}

/// TCP congestion control.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CcKind {
    NewReno,
    Cubic,
    /// BBR v1 as Linux's `tcp_bbr`.
    Bbr,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TcpSpec {
    pub cc: CcKind,
    /// Receive window fixed at this many bytes (`SO_RCVBUF`); `None`: autotuned as Linux's, up
    /// to `tcp_rmem[2]`.
    pub window: Option<u64>,
    /// Bytes to send, then stop; `None` = bulk until `stop`.
    pub bytes: Option<u64>,
    /// Delayed ACKs as Linux's (default true).
    pub delayed_ack: bool,
    /// SACK (RFC 2018) with SACK-based recovery (default true); false: NewReno without SACK.
    pub sack: bool,
    pub min_rto: Duration,
    /// Initial congestion window in segments.
    pub init_cwnd: u32,
}

#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Pattern {
    Cbr,
    Poisson,
    OnOff { on: Duration, off: Duration },
}

/// Packet sizes of a UDP flow: IP bytes, chosen with the given weights.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeMix {
    pub sizes: Vec<(u32, u32)>,
}

impl SizeMix {
    pub fn fixed(size: u32) -> Self {
        SizeMix {
            sizes: vec![(size, 1)],
        }
    }
    /// Simple IMIX: 7 × 40, 4 × 576, 1 × 1500 bytes.
    pub fn imix() -> Self {
        SizeMix {
            sizes: vec![(40, 7), (576, 4), (1500, 1)],
        }
    }
    pub fn max(&self) -> u32 {
        self.sizes.iter().map(|s| s.0).max().unwrap_or(0)
    }
    pub fn min(&self) -> u32 {
        self.sizes.iter().map(|s| s.0).min().unwrap_or(0)
    }
    pub fn mean(&self) -> f64 {
        let w: u64 = self.sizes.iter().map(|s| s.1 as u64).sum();
        let b: u64 = self.sizes.iter().map(|s| s.0 as u64 * s.1 as u64).sum();
        if w == 0 {
            0.0
        } else {
            b as f64 / w as f64
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct UdpSpec {
    pub rate: Rate,
    pub size: SizeMix,
    pub pattern: Pattern,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PingSpec {
    pub interval: Duration,
    /// IP packet size of the echo request (and reply).
    pub size: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum FlowKind {
    Tcp(TcpSpec),
    Udp(UdpSpec),
    Ping(PingSpec),
}

impl FlowKind {
    pub fn name(&self) -> &'static str {
        match self {
            FlowKind::Tcp(_) => "tcp",
            FlowKind::Udp(_) => "udp",
            FlowKind::Ping(_) => "ping",
        }
    }
}

/// One flow, after `count` expansion.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub name: String,
    pub kind: FlowKind,
    /// IPv4 TOS byte (DSCP << 2).
    pub tos: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub start: Duration,
    pub stop: Duration,
    /// One-way delay of the flow's access path, added in both directions.
    pub extra_delay: Duration,
}

/// A checked scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub duration: Duration,
    pub seed: u64,
    pub sample: Duration,
    pub link: LinkSpec,
    pub policy: Option<PolicySource>,
    /// Run the policy through the sharded HTB with this many shards, served in a fixed order
    /// from one thread ([`linkshare_core::shard::ShardedHtb`]); 0 or 1: one HTB. Not a key of
    /// the file: set by `linkshare sim --workers N`.
    pub workers: u32,
    pub flows: Vec<FlowSpec>,
    /// Where it was read from (for messages).
    pub origin: String,
    /// The `[sweep]` section with every point built, if the file has one. The scenario itself
    /// is the file without it.
    pub sweep: Option<Sweep>,
}

/// One axis of a sweep, as checked (built by [`crate::sweep`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Column name in the table and the CSV; used in point selectors.
    pub name: String,
    /// The dotted keys it sets.
    pub keys: Vec<String>,
    /// One label per value, in file order.
    pub labels: Vec<String>,
}

/// One point of a sweep: a label per axis and the scenario it runs.
#[derive(Clone, Debug)]
pub struct Point {
    /// 1-based, in sweep order.
    pub index: usize,
    pub labels: Vec<String>,
    pub scenario: Scenario,
}

/// A checked sweep: its axes and every point, built. The types live here, beside the scenario
/// that carries them; [`crate::sweep`] builds and runs them.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub axes: Vec<Axis>,
    pub points: Vec<Point>,
}

pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
pub const DEFAULT_SAMPLE: Duration = Duration::from_millis(100);
pub const DEFAULT_MTU: u32 = 1500;
pub const DEFAULT_QUEUE: u32 = 1000;
/// Buffer the lab sets when a TCP flow has no `window` (the simulator autotunes instead).
pub const DEFAULT_WINDOW: u64 = 1 << 20;
pub const DEFAULT_MIN_RTO: Duration = Duration::from_millis(200);
pub const DEFAULT_INIT_CWND: u32 = 10;
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(1);
/// `ping`'s default: 56 data bytes + 8 ICMP + 20 IP.
pub const DEFAULT_PING_SIZE: u32 = 84;
/// Base of the default ports: source `20000 + i`, destination `5000 + i` for flow `i` (0-based).
pub const DEFAULT_SPORT_BASE: u32 = 20000;
pub const DEFAULT_DPORT_BASE: u32 = 5000;
/// Largest `count`.
pub const MAX_COUNT: i64 = 10_000;
/// Longest simulated duration accepted.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

impl Scenario {
    /// Parse a scenario without its `[sweep]` (the section is accepted and left to
    /// [`crate::load`], which the public `Scenario::parse*` go through); `base` resolves
    /// `policy = "path"`, `default_name` names a file without `name`.
    pub(crate) fn parse_base(
        text: &str,
        origin: &str,
        base: &Path,
        default_name: &str,
    ) -> Result<Scenario, ScenarioError> {
        let doc = Doc { text, origin };
        let raw: RawScenario = toml::from_str(text).map_err(|e| toml_error(&doc, &e))?;
        Self::from_raw(raw, &doc, base, default_name)
    }

    fn from_raw(
        raw: RawScenario,
        doc: &Doc<'_>,
        base: &Path,
        default_name: &str,
    ) -> Result<Scenario, ScenarioError> {
        let name = raw
            .name
            .map(|n| n.into_inner())
            .unwrap_or_else(|| default_name.to_string());
        let duration = opt_dur(doc, raw.duration.as_ref(), DEFAULT_DURATION)?;
        if duration.0 == 0 || duration > MAX_DURATION {
            let span = raw.duration.as_ref().map(|d| d.span()).unwrap_or(0..0);
            return Err(doc.err(span, "`duration` must be above 0 and at most 24h", None));
        }
        let seed = match raw.seed {
            None => 1,
            Some(s) if *s.get_ref() >= 0 => *s.get_ref() as u64,
            Some(s) => return Err(doc.err(s.span(), "`seed` must not be negative", None)),
        };
        let sample = opt_dur(doc, raw.sample.as_ref(), DEFAULT_SAMPLE)?;
        if sample.0 < 1_000_000 {
            let span = raw.sample.as_ref().map(|d| d.span()).unwrap_or(0..0);
            return Err(doc.err(span, "`sample` must be at least 1ms", None));
        }
        let link_span = raw.link.span();
        let rl = raw.link.into_inner();
        let Some(rate_v) = rl.rate.as_ref() else {
            return Err(doc.err(
                link_span,
                "[link] needs a `rate`",
                Some("e.g. rate = \"10mbit\"".into()),
            ));
        };
        let rate = rate_val(doc, rate_v)?;
        if rate.0 == 0 {
            return Err(doc.err(rate_v.span(), "the link rate must be above 0", None));
        }
        let mtu = opt_int(doc, rl.mtu.as_ref(), DEFAULT_MTU as i64, 68, 65535)? as u32;
        let link = LinkSpec {
            rate,
            delay: opt_dur(doc, rl.delay.as_ref(), Duration::ZERO)?,
            mtu,
            device_buffer: opt_size(doc, rl.device_buffer.as_ref(), 0)?,
            timer_hz: opt_int(doc, rl.timer_hz.as_ref(), 0, 0, 1_000_000)? as u32,
            clock_hz: opt_int(doc, rl.clock_hz.as_ref(), 0, 0, 1_000_000)? as u32,
            overhead: opt_int(doc, rl.overhead.as_ref(), 0, 0, 1024)? as u32,
            queue: opt_int(doc, rl.queue.as_ref(), DEFAULT_QUEUE as i64, 1, 10_000_000)? as u32,
        };
        // Times are added up (delays, on/off periods) in u64 nanoseconds: bounded so no sum wraps.
        if let Some(d) = rl.delay.as_ref().filter(|_| link.delay > MAX_DURATION) {
            return Err(doc.err(
                d.span(),
                format!("the link `delay` {} is above {MAX_DURATION}", link.delay),
                None,
            ));
        }
        let policy = match raw.policy {
            None => None,
            Some(p) => {
                let span = p.span();
                Some(match p.into_inner() {
                    RawPolicy::Path(path) => {
                        let full: PathBuf = base.join(&path);
                        if !full.is_file() {
                            return Err(doc.err(
                                span,
                                format!("policy file `{}` not found", full.display()),
                                Some("`policy = \"...\"` is relative to the scenario file's directory".into()),
                            ));
                        }
                        PolicySource::load(&full)?
                    }
                    RawPolicy::Inline(inline) => {
                        PolicySource::inline(inline, doc.text, doc.origin)?
                    }
                })
            }
        };

        let mut flows = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for rf in raw.flow {
            let span = rf.span();
            let rf = rf.into_inner();
            let expanded = flow_from_raw(doc, rf, span.clone(), duration, &link)?;
            for mut f in expanded {
                let i = flows.len() as u32;
                if !names.insert(f.name.clone()) {
                    return Err(doc.err(span, format!("two flows are named `{}`", f.name), None));
                }
                default_endpoints(&mut f, i);
                flows.push(f);
            }
        }
        Ok(Scenario {
            name,
            duration,
            seed,
            sample,
            link,
            policy,
            workers: 0,
            flows,
            origin: doc.origin.to_string(),
            sweep: None,
        })
    }
}

/// Fill in defaults for endpoints that were not given: unique per flow.
fn default_endpoints(f: &mut FlowSpec, i: u32) {
    let n = i + 1;
    if f.src.is_unspecified() {
        f.src = IpAddr::V4(Ipv4Addr::new(10, 1, (n >> 8) as u8, (n & 0xff) as u8));
    }
    if f.dst.is_unspecified() {
        f.dst = IpAddr::V4(Ipv4Addr::new(10, 2, (n >> 8) as u8, (n & 0xff) as u8));
    }
    if f.sport == 0 {
        f.sport = ((DEFAULT_SPORT_BASE + i) % 65536).max(1) as u16;
    }
    if f.dport == 0 {
        f.dport = ((DEFAULT_DPORT_BASE + i) % 65536).max(1) as u16;
    }
}

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
        "tcp" => "tcp flows take: cc, window, bytes, delayed_ack, sack, min_rto, init_cwnd".into(),
        "udp" => "udp flows take: rate, size, pattern, on, off".into(),
        _ => "ping flows take: interval, size".into(),
    }
}

fn flow_from_raw(
    doc: &Doc<'_>,
    rf: RawFlow,
    span: Range<usize>,
    duration: Duration,
    link: &LinkSpec,
) -> Result<Vec<FlowSpec>, ScenarioError> {
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
            })
        }
        "udp" => {
            deny_for!(doc, "udp", rf.cc => "cc", rf.window => "window", rf.bytes => "bytes", rf.delayed_ack => "delayed_ack", rf.sack => "sack", rf.min_rto => "min_rto", rf.init_cwnd => "init_cwnd", rf.interval => "interval");
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
                        let sp = rf
                            .pattern
                            .as_ref()
                            .map(|p| p.span())
                            .unwrap_or(span.clone());
                        return Err(doc.err(
                            sp,
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
                    let sp = rf
                        .pattern
                        .as_ref()
                        .map(|p| p.span())
                        .unwrap_or(span.clone());
                    return Err(doc.err(
                        sp,
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
            deny_for!(doc, "ping", rf.cc => "cc", rf.window => "window", rf.bytes => "bytes", rf.delayed_ack => "delayed_ack", rf.sack => "sack", rf.min_rto => "min_rto", rf.init_cwnd => "init_cwnd", rf.rate => "rate", rf.pattern => "pattern", rf.on => "on", rf.off => "off");
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
        kind: fk,
        tos,
        src,
        dst,
        sport,
        dport,
        start,
        stop,
        extra_delay,
    };
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

fn dur_val(doc: &Doc<'_>, v: &SV) -> Result<Duration, ScenarioError> {
    match v.get_ref() {
        Val::Int(0) => Ok(Duration::ZERO),
        Val::Str(s) => {
            let t = s.trim();
            if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
                if t.chars().all(|c| c == '0' || c == '.') {
                    return Ok(Duration::ZERO);
                }
                return Err(doc.err(
                    v.span(),
                    format!("`{s}` has no time unit"),
                    Some(format!("write e.g. \"{t}s\" or \"{t}ms\"")),
                ));
            }
            Duration::parse(s).map_err(|e| doc.err(v.span(), e.to_string(), None))
        }
        other => Err(doc.err(
            v.span(),
            format!(
                "expected a duration such as \"10ms\", found {}",
                val_kind(other)
            ),
            None,
        )),
    }
}

fn rate_val(doc: &Doc<'_>, v: &SV) -> Result<Rate, ScenarioError> {
    match v.get_ref() {
        Val::Int(n) if *n >= 0 => Ok(Rate(*n as u64)),
        Val::Str(s) => Rate::parse(s).map_err(|e| doc.err(v.span(), e.to_string(), None)),
        other => Err(doc.err(
            v.span(),
            format!(
                "expected a rate such as \"10mbit\", found {}",
                val_kind(other)
            ),
            None,
        )),
    }
}

fn size_val(doc: &Doc<'_>, v: &SV) -> Result<u64, ScenarioError> {
    match v.get_ref() {
        Val::Int(n) if *n >= 0 => Ok(*n as u64),
        Val::Str(s) => Size::parse(s)
            .map(|s| s.0)
            .map_err(|e| doc.err(v.span(), e.to_string(), None)),
        other => Err(doc.err(
            v.span(),
            format!(
                "expected a size such as 1500 or \"64k\", found {}",
                val_kind(other)
            ),
            None,
        )),
    }
}

fn ip_size(doc: &Doc<'_>, v: &SV, min: u32, max: u32) -> Result<u32, ScenarioError> {
    let s = size_val(doc, v)?;
    if s < min as u64 || s > max as u64 {
        return Err(doc.err(
            v.span(),
            format!(
                "packet size {s} is out of range: IP packets of {min}..{max} bytes (the link MTU)"
            ),
            Some("`size` counts IP bytes, headers included".into()),
        ));
    }
    Ok(s as u32)
}

fn int_val(doc: &Doc<'_>, v: &SV, min: i64, max: i64) -> Result<i64, ScenarioError> {
    match v.get_ref() {
        Val::Int(n) if *n >= min && *n <= max => Ok(*n),
        Val::Int(n) => Err(doc.err(v.span(), format!("{n} is out of range {min}..={max}"), None)),
        other => Err(doc.err(
            v.span(),
            format!("expected an integer, found {}", val_kind(other)),
            None,
        )),
    }
}

fn dscp_val(doc: &Doc<'_>, v: &SV) -> Result<u8, ScenarioError> {
    match v.get_ref() {
        Val::Int(n) if (0..64).contains(n) => Ok(*n as u8),
        Val::Str(s) => dscp::parse(s).ok_or_else(|| {
            doc.err(
                v.span(),
                format!("unknown DSCP `{s}`"),
                Some(format!("write {}", dscp::KNOWN_NAMES)),
            )
        }),
        other => Err(doc.err(
            v.span(),
            format!("expected a DSCP name or 0-63, found {}", val_kind(other)),
            None,
        )),
    }
}

fn val_kind(v: &Val) -> &'static str {
    match v {
        Val::Str(_) => "a string",
        Val::Int(_) => "an integer",
        Val::Float(_) => "a float",
        Val::Bool(_) => "a boolean",
    }
}

fn opt_dur(doc: &Doc<'_>, v: Option<&SV>, d: Duration) -> Result<Duration, ScenarioError> {
    v.map(|v| dur_val(doc, v)).unwrap_or(Ok(d))
}
fn opt_size(doc: &Doc<'_>, v: Option<&SV>, d: u64) -> Result<u64, ScenarioError> {
    v.map(|v| size_val(doc, v)).unwrap_or(Ok(d))
}
fn opt_int(
    doc: &Doc<'_>,
    v: Option<&SV>,
    d: i64,
    min: i64,
    max: i64,
) -> Result<i64, ScenarioError> {
    v.map(|v| int_val(doc, v, min, max)).unwrap_or(Ok(d))
}
fn opt_bool(doc: &Doc<'_>, v: Option<&SV>, d: bool) -> Result<bool, ScenarioError> {
    match v {
        None => Ok(d),
        Some(v) => match v.get_ref() {
            Val::Bool(b) => Ok(*b),
            other => Err(doc.err(
                v.span(),
                format!("expected true or false, found {}", val_kind(other)),
                None,
            )),
        },
    }
}
fn opt_addr(doc: &Doc<'_>, v: Option<&Spanned<String>>) -> Result<IpAddr, ScenarioError> {
    match v {
        None => Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        Some(s) => s.get_ref().trim().parse::<IpAddr>().map_err(|_| {
            doc.err(
                s.span(),
                format!("`{}` is not an IP address", s.get_ref()),
                None,
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "name = \"t\"\nduration = \"1s\"\n[link]\nrate = \"10mbit\"\n";

    #[test]
    fn defaults_and_count_expansion() {
        let text = format!("{BASE}[[flow]]\nname = \"b\"\nkind = \"tcp\"\ncount = 3\n[[flow]]\nname = \"p\"\nkind = \"ping\"\n");
        let s = Scenario::parse(&text, "t.toml").unwrap();
        assert_eq!(s.duration, Duration::from_secs(1));
        assert_eq!(s.sample, DEFAULT_SAMPLE);
        let names: Vec<_> = s.flows.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["b.1", "b.2", "b.3", "p"]);
        let mut tuples: Vec<_> = s
            .flows
            .iter()
            .map(|f| (f.src, f.dst, f.sport, f.dport))
            .collect();
        tuples.dedup();
        assert_eq!(tuples.len(), 4, "endpoints unique per flow");
        assert_eq!(s.flows[0].stop, Duration::from_secs(1));
        assert!(matches!(&s.flows[3].kind, FlowKind::Ping(p) if p.size == DEFAULT_PING_SIZE));
    }

    #[test]
    fn errors_point_at_the_value() {
        let text = format!("{BASE}[[flow]]\nname = \"b\"\nkind = \"tpc\"\n");
        let e = Scenario::parse(&text, "t.toml").unwrap_err();
        let d = e.first().unwrap();
        assert_eq!((d.line, d.col), (7, 8), "{e}");
        assert!(d.message.contains("unknown flow kind `tpc`"));

        let text = format!("{BASE}bogus = 1\n");
        let e = Scenario::parse(&text, "t.toml").unwrap_err();
        let d = e.first().unwrap();
        assert_eq!(d.line, 5, "{e}");
        assert!(d.message.contains("unknown field"), "{e}");

        let text = format!(
            "{BASE}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\nwindow = \"64k\"\n"
        );
        let e = Scenario::parse(&text, "t.toml").unwrap_err();
        let d = e.first().unwrap();
        assert_eq!(d.line, 9, "{e}");
        assert!(
            d.message.contains("`window` does not apply to udp flows"),
            "{e}"
        );

        let text = format!("{BASE}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1 furlong\"\n");
        let e = Scenario::parse(&text, "t.toml").unwrap_err();
        let d = e.first().unwrap();
        assert_eq!((d.line, d.col), (8, 8), "{e}");

        let text = "duration = \"5\"\n[link]\nrate = \"1mbit\"\n";
        let e = Scenario::parse(text, "t.toml").unwrap_err();
        assert!(e.first().unwrap().message.contains("no time unit"), "{e}");
        assert!(e.to_string().starts_with("t.toml:1:12: error:"), "{e}");
    }

    #[test]
    fn udp_sizes_and_patterns() {
        let text = format!(
            "{BASE}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\nsize = \"imix\"\npattern = \"onoff\"\non = \"1s\"\noff = \"500ms\"\n"
        );
        let s = Scenario::parse(&text, "t.toml").unwrap();
        let FlowKind::Udp(u) = &s.flows[0].kind else {
            panic!()
        };
        assert_eq!(u.size, SizeMix::imix());
        assert_eq!(
            u.pattern,
            Pattern::OnOff {
                on: Duration::from_secs(1),
                off: Duration::from_millis(500)
            }
        );
        let text = format!(
            "{BASE}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\nsize = 1600\n"
        );
        assert!(Scenario::parse(&text, "t.toml").is_err());
    }
}
