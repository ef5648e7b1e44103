//! The document as serde reads it: the `Raw*` structs mirror the file's tables key for key
//! (`deny_unknown_fields`), and unit values stay as written ([`Val`]) with their span, so the
//! checks (`check`, `flow`, `value`) can say where a bad value is.
//!
//! Rule: nothing here judges a value; it only reads the shape of the document.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

/// A scalar as written: a string with a unit, or a bare number.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Val {
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

pub(super) type SV = Spanned<Val>;

/// `policy = "path"` or an inline `[policy]` table.
///
/// Read without `toml::Spanned` around it, as is `[uplink]`: `[policy.qdisc]` with no `[policy]`
/// line makes `policy` an implicit table, which has no span, and `Spanned` then fails on the
/// table's own keys. The keys inside keep their spans; the checks find the path's span in the
/// text (`check::resolve_policy`).
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
pub(super) struct RawScenario {
    pub(super) name: Option<Spanned<String>>,
    pub(super) duration: Option<SV>,
    pub(super) seed: Option<Spanned<i64>>,
    pub(super) sample: Option<SV>,
    pub(super) link: Spanned<RawLink>,
    pub(super) policy: Option<RawPolicy>,
    pub(super) uplink: Option<RawUplink>,
    pub(super) path: Option<Spanned<super::path::RawPath>>,
    #[serde(default)]
    pub(super) flow: Vec<Spanned<RawFlow>>,
    #[serde(default)]
    pub(super) expect: Vec<Spanned<super::expect::RawExpect>>,
    /// Read by [`crate::load`] (`[sweep]` expands into whole scenarios, built above this module).
    #[serde(default, rename = "sweep")]
    _sweep: Option<de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLink {
    pub(super) rate: Option<SV>,
    pub(super) delay: Option<SV>,
    pub(super) mtu: Option<SV>,
    pub(super) device_buffer: Option<SV>,
    pub(super) timer_hz: Option<SV>,
    pub(super) clock_hz: Option<SV>,
    pub(super) overhead: Option<SV>,
    pub(super) queue: Option<SV>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUplink {
    pub(super) rate: Option<SV>,
    pub(super) queue: Option<SV>,
    pub(super) policy: Option<RawPolicy>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFlow {
    pub(super) name: Option<Spanned<String>>,
    pub(super) kind: Option<Spanned<String>>,
    pub(super) dscp: Option<SV>,
    pub(super) tos: Option<SV>,
    pub(super) src: Option<Spanned<String>>,
    pub(super) dst: Option<Spanned<String>>,
    pub(super) sport: Option<SV>,
    pub(super) dport: Option<SV>,
    pub(super) start: Option<SV>,
    pub(super) stop: Option<SV>,
    pub(super) count: Option<SV>,
    pub(super) extra_delay: Option<SV>,
    // tcp
    pub(super) cc: Option<Spanned<String>>,
    pub(super) window: Option<SV>,
    pub(super) bytes: Option<SV>,
    pub(super) delayed_ack: Option<SV>,
    pub(super) sack: Option<SV>,
    pub(super) min_rto: Option<SV>,
    pub(super) init_cwnd: Option<SV>,
    pub(super) ecn: Option<SV>,
    // tcp arrivals (`arrivals`)
    pub(super) arrivals: Option<Spanned<String>>,
    pub(super) arrival_rate: Option<SV>,
    pub(super) load: Option<SV>,
    pub(super) trace: Option<Spanned<String>>,
    pub(super) size_dist: Option<Spanned<String>>,
    pub(super) size_sigma: Option<SV>,
    pub(super) size_alpha: Option<SV>,
    pub(super) size_cdf: Option<Spanned<String>>,
    pub(super) size_max: Option<SV>,
    pub(super) request: Option<SV>,
    pub(super) dst_hosts: Option<SV>,
    // udp
    pub(super) rate: Option<SV>,
    pub(super) pattern: Option<Spanned<String>>,
    pub(super) on: Option<SV>,
    pub(super) off: Option<SV>,
    // udp and ping
    pub(super) size: Option<SV>,
    // ping
    pub(super) interval: Option<SV>,
}
