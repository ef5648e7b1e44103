//! The scheduler at the bottleneck: built from the scenario's policy, or a plain `pfifo`.
//!
//! A scenario's policy is either inline (a `[policy]` table with the keys of a policy file) or
//! `policy = "path"` relative to the scenario file; either way it is checked by
//! `linkshare_config::Policy` with the same diagnostics `linkshare check` gives. Each run builds a
//! fresh scheduler from it.

use linkshare_config::{ConfigError, Policy, PolicyDoc};
use linkshare_core::classify::Classifier;
use linkshare_core::qdisc::fifo::Fifo;
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
