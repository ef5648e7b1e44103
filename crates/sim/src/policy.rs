//! The scheduler at the bottleneck: built from the scenario's policy, or a plain `pfifo`.
//!
//! A scenario's policy is either inline (a `[policy]` table with the keys of a policy file) or
//! `policy = "path"` relative to the scenario file; either way it is checked by
//! `linkshare_config::Policy` with the same diagnostics `linkshare check` gives. Each run builds a
//! fresh scheduler from it.

use linkshare_config::{ConfigError, Policy, PolicyDoc};
use linkshare_core::classify::Classifier;
use linkshare_core::qdisc::fifo::Fifo;
use linkshare_core::shard::ShardConfig;
use linkshare_core::units::Rate;
use linkshare_core::{PacketMeta, Qdisc};

use crate::packet::SimPacket;

/// An inline `[policy]` table as written (spans point into the scenario file).
pub type InlinePolicy = PolicyDoc;

/// A checked policy, ready to build schedulers from.
#[derive(Clone, Debug)]
pub struct PolicySource {
    policy: Policy,
    classifier: Classifier,
}

impl PolicySource {
    fn new(policy: Policy) -> Self {
        let filters = policy.filters().iter().map(|f| f.spec.clone()).collect();
        let classifier = Classifier::new(filters, policy.default_class_id());
        PolicySource { policy, classifier }
    }
    pub(crate) fn load(path: &std::path::Path) -> Result<Self, ConfigError> {
        Policy::load(path).map(Self::new)
    }
    pub(crate) fn inline(doc: InlinePolicy, text: &str, origin: &str) -> Result<Self, ConfigError> {
        Policy::from_spanned_table(doc, text, origin).map(Self::new)
    }
    /// The checked policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
    /// A fresh scheduler for one run on a link whose driver timer runs at `timer_hz` (0: exact).
    pub fn build(&self, timer_hz: u32) -> Result<Box<dyn Qdisc<SimPacket>>, ConfigError> {
        self.policy
            .build_on::<SimPacket>(&linkshare_config::Driver { timer_hz })
    }
    /// The policy's HTB cut into `workers` shards (round robin placement of the top-level
    /// classes, default lease), served deterministically from one thread.
    pub fn build_sharded(&self, workers: u32) -> Result<Box<dyn Qdisc<SimPacket>>, ConfigError> {
        let cfg = ShardConfig::new(workers as usize);
        self.policy
            .build_sharded::<SimPacket>(&cfg)
            .map(|q| Box::new(q) as Box<dyn Qdisc<SimPacket>>)
    }
    /// What a user should hear when the policy's root and the link disagree (issue 15 §7): a
    /// root above the link rate shapes nothing (the queue builds past the scheduler, in the
    /// device and on the link: the classic "shaping above the bottleneck" mistake); a root below
    /// it leaves part of the link unused. `None` when they agree or the policy has no classes.
    /// The root rate is the sum of the top-level classes' ceilings.
    pub fn root_rate_warning(&self, link: Rate) -> Option<String> {
        let root = self.policy.root_rate().0;
        if root == 0 || root == link.0 {
            return None;
        }
        let names: Vec<&str> = self
            .policy
            .classes()
            .iter()
            .filter(|c| c.parent.is_none())
            .map(|c| c.name.as_str())
            .collect();
        let (r, l) = (Rate(root), link);
        Some(if root > link.0 {
            format!(
                "the policy's root ({}: {r}) is above the link rate ({l}): the queue builds after \
                 the scheduler, so classes are not shaped as configured; set the root's rate and \
                 ceil to at most {l} (a little below, to keep the queue in the scheduler)",
                names.join(" + ")
            )
        } else {
            format!(
                "the policy's root ({}: {r}) is below the link rate ({l}): {:.1} % of the link \
                 stays unused (fine if intended, e.g. to keep the queue here rather than in a \
                 slower device beyond)",
                names.join(" + "),
                100.0 * (l.0 - root) as f64 / l.0 as f64
            )
        })
    }
    /// The name of the leaf class a packet lands in (the classifier's first matching filter, or
    /// the default class).
    pub fn class_of(&self, meta: &PacketMeta) -> String {
        if self.policy.classes().is_empty() {
            return self.policy.kind_name().to_string();
        }
        let id = self.classifier.classify(meta);
        self.policy
            .classes()
            .get(id as usize)
            .map(|c| c.name.clone())
            .unwrap_or_default()
    }
}

/// The bottleneck scheduler for a scenario without a policy: `pfifo` of `limit` packets.
pub fn default_qdisc(limit: u32) -> Box<dyn Qdisc<SimPacket>> {
    Box::new(Fifo::pfifo(limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(root: &str) -> PolicySource {
        let text = format!(
            "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"root\"\nrate = \"{root}\"\n\
             [[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"1mbit\"\n"
        );
        PolicySource::new(Policy::parse(&text, "p.toml").unwrap_or_else(|e| panic!("{e:?}")))
    }

    #[test]
    fn root_above_or_below_the_link_is_named() {
        let link = Rate(10_000_000);
        assert_eq!(source("10mbit").root_rate_warning(link), None);
        let above = source("100mbit")
            .root_rate_warning(link)
            .unwrap_or_default();
        assert!(
            above.starts_with("the policy's root (root: 100mbit) is above the link rate (10mbit)"),
            "{above}"
        );
        let below = source("8mbit").root_rate_warning(link).unwrap_or_default();
        assert!(
            below.contains("is below the link rate (10mbit): 20.0 % of the link stays unused"),
            "{below}"
        );
    }
}
