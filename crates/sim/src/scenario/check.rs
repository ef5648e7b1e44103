//! From the raw document to a checked [`Scenario`]: the top-level keys, the `[link]` table, the
//! policy (a path or inline) and the flows in order, with their default endpoints.
//!
//! Rule: the first bad value is the error, located by `Doc::err`; a flow's own keys are checked
//! in `flow`, single values in `value`.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use linkshare_config::DocKind;
use linkshare_core::Duration;

use super::arrivals::Ctx;
use super::error::{toml_error, Doc, ScenarioError};
use super::flow::flow_from_raw;
use super::raw::{RawPolicy, RawScenario};
use super::spec::{
    FlowSpec, LinkSpec, Scenario, UplinkSpec, DEFAULT_DPORT_BASE, DEFAULT_DURATION, DEFAULT_MTU,
    DEFAULT_QUEUE, DEFAULT_SAMPLE, DEFAULT_SPORT_BASE, MAX_DURATION,
};
use super::value::{opt_dur, opt_int, opt_size, rate_val};
use crate::policy::PolicySource;

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
        let parsed = toml::from_str::<RawScenario>(text)
            .map_err(|e| toml_error(&doc, &e))
            .and_then(|raw| Self::from_raw(raw, &doc, base, default_name));
        // A policy given to `sim` says so first (`linkshare check` reads it).
        parsed.map_err(|mut e| {
            if let Some(d) = linkshare_config::wrong_kind(text, origin, DocKind::Scenario) {
                e.diagnostics.insert(0, d);
            }
            e
        })
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
            Some(p) => Some(resolve_policy(doc, base, p)?),
        };
        let uplink = match raw.uplink {
            None => None,
            Some(u) => {
                // An implicit `[uplink]` (only `[uplink.policy]` written) has no span of its
                // own: point at its first header.
                let header = doc.text.find("[uplink").map_or(0..0, |i| i..i + 7);
                let span = header;
                let ru = u;
                let Some(rate_v) = ru.rate.as_ref() else {
                    return Err(doc.err(
                        span,
                        "[uplink] needs a `rate`",
                        Some("e.g. rate = \"1mbit\"".into()),
                    ));
                };
                let rate = rate_val(doc, rate_v)?;
                if rate.0 == 0 {
                    return Err(doc.err(rate_v.span(), "the uplink rate must be above 0", None));
                }
                Some(UplinkSpec {
                    rate,
                    queue: opt_int(doc, ru.queue.as_ref(), DEFAULT_QUEUE as i64, 1, 10_000_000)?
                        as u32,
                    policy: match ru.policy {
                        None => None,
                        Some(p) => Some(resolve_policy(doc, base, p)?),
                    },
                })
            }
        };

        let path = match raw.path {
            None => None,
            Some(p) => Some(super::path::path_from_raw(doc, p.into_inner(), link.delay)?),
        };

        let mut flows: Vec<FlowSpec> = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        let ctx = Ctx {
            duration,
            link: &link,
            seed,
            dir: base,
        };
        for rf in raw.flow {
            let span = rf.span();
            let rf = rf.into_inner();
            let expanded = flow_from_raw(doc, rf, span.clone(), &ctx)?;
            // Arriving flows of one entry share the first one's default hosts (one client, one
            // server), each with its own ports.
            let mut hosts = None;
            for mut f in expanded {
                let i = flows.len() as u32;
                if !names.insert(f.name.clone()) {
                    return Err(doc.err(span, format!("two flows are named `{}`", f.name), None));
                }
                if let (Some((src, dst)), Some(_)) = (hosts, &f.arrival) {
                    if f.src.is_unspecified() {
                        f.src = src;
                    }
                    if f.dst.is_unspecified() {
                        f.dst = dst;
                    }
                }
                default_endpoints(&mut f, i);
                if let (Some(a), None) = (&f.arrival, hosts) {
                    // The group is reported under the entry's name: it is taken too.
                    if !names.insert(a.group.clone()) {
                        return Err(doc.err(
                            span,
                            format!("two flows are named `{}`", a.group),
                            None,
                        ));
                    }
                    hosts = Some((f.src, f.dst));
                }
                flows.push(f);
            }
        }
        // Class names are known for a classful policy (and `pfifo` without one); a root
        // discipline reports its own rows, not checked here.
        let classes: Option<Vec<String>> = match &policy {
            None => Some(vec![crate::NO_POLICY_CLASS.to_string()]),
            Some(p) => {
                let names: Vec<String> = p
                    .policy()
                    .classes()
                    .iter()
                    .map(|c| c.name.clone())
                    .collect();
                (!names.is_empty()).then_some(names)
            }
        };
        let mut expects = Vec::new();
        for re in raw.expect {
            let span = re.span();
            expects.push(super::expect::expect_from_raw(
                doc,
                re.into_inner(),
                span,
                &flows,
                classes.as_deref(),
            )?);
        }
        Ok(Scenario {
            name,
            duration,
            seed,
            sample,
            link,
            policy,
            uplink,
            path,
            expects,
            workers: 0,
            flows,
            origin: doc.origin.to_string(),
            sweep: None,
        })
    }
}

/// `policy = "path"` (relative to the scenario's directory) or an inline policy table.
fn resolve_policy(doc: &Doc<'_>, base: &Path, p: RawPolicy) -> Result<PolicySource, ScenarioError> {
    match p {
        RawPolicy::Path(path) => {
            let full: PathBuf = base.join(&path);
            if !full.is_file() {
                // The quoted path in the text (the value carries no span of its own).
                let quoted = format!("\"{path}\"");
                let span = doc.text.find(&quoted).map_or(0..0, |i| i..i + quoted.len());
                return Err(doc.err(
                    span,
                    format!("policy file `{}` not found", full.display()),
                    Some("`policy = \"...\"` is relative to the scenario file's directory".into()),
                ));
            }
            Ok(PolicySource::load(&full)?)
        }
        RawPolicy::Inline(inline) => Ok(PolicySource::inline(inline, doc.text, doc.origin)?),
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
