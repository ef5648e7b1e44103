//! Hierarchical Token Bucket. (Implementation in progress.)

mod spec;
pub use spec::*;

use crate::classify::{ClassId, Classifier};
use crate::packet::Packet;
use crate::qdisc::{ClassView, Dequeued, Dropped, Qdisc, QdiscStats};
use crate::units::Time;

/// The HTB qdisc.
pub struct Htb<P: Packet> {
    classes: Vec<HtbClassSpec<P>>,
    classifier: Classifier,
    stats: QdiscStats,
}

impl<P: Packet> Htb<P> {
    /// Build a tree. The classifier's default class is where unmatched packets go.
    pub fn new(params: HtbParams, classes: Vec<HtbClassSpec<P>>, classifier: Classifier) -> Result<Self, HtbError> {
        let _ = params;
        Ok(Htb { classes, classifier, stats: QdiscStats::default() })
    }
    /// Index of the class with this name.
    pub fn class_id(&self, name: &str) -> Option<ClassId> {
        self.classes.iter().position(|c| c.name == name).map(|i| i as ClassId)
    }
    /// Enqueue into a given leaf class, bypassing the classifier.
    pub fn enqueue_to(&mut self, class: ClassId, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let _ = (class, now);
        todo!("{}", pkt.len())
    }
}

impl<P: Packet> Qdisc<P> for Htb<P> {
    fn enqueue(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let c = self.classifier.classify(pkt.meta());
        self.enqueue_to(c, pkt, now)
    }
    fn dequeue(&mut self, _now: Time) -> Dequeued<P> {
        todo!()
    }
    fn stats(&self) -> &QdiscStats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "htb"
    }
    fn visit_classes(&self, _f: &mut dyn FnMut(&ClassView<'_>)) {}
}
