//! From a checked policy to the scheduler a driver runs: [`Policy::build_on`] picks the kind's
//! build, each turns the classes into core's class specs (their leaves shared where the policy
//! shares them), the filters into a [`Classifier`], and hands them to core's constructor.
//!
//! Principles: the checks come first and are complete, so a constructor that refuses a checked
//! policy is a bug in the checks and says so; the driver's own facts (its timer, for CBQ) come
//! in through [`Driver`], never from the file. CBQ's and HFSC's builds are beside their options
//! (`cbq.rs`, `hfsc.rs`).

use linkshare_core::classify::Classifier;
use linkshare_core::htb::{Htb, HtbClassSpec, HtbParams};
use linkshare_core::qdisc::drr::{Drr, DrrClassSpec, DrrParams};
use linkshare_core::shard::{ShardConfig, ShardedHtb};
use linkshare_core::{Packet, Qdisc};

use crate::{ConfigError, Diagnostic, Policy, QdiscKind, Severity};

/// What a scheduler is built for: the driver that will pull it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Driver {
    /// The driver's timer rate in Hz (0: an exact timer). CBQ's suspensions are rounded to it
    /// with `altq_compat`'s two-tick minimum; the simulator passes `[link] timer_hz`.
    pub timer_hz: u32,
}

impl Policy {
    /// Build both directions' schedulers: the download side's, and the upload side's when
    /// the policy has one ([`Policy::upload`]).
    #[allow(clippy::type_complexity)]
    pub fn build_directions<P: Packet + 'static>(
        &self,
        driver: &Driver,
    ) -> Result<(Box<dyn Qdisc<P>>, Option<Box<dyn Qdisc<P>>>), ConfigError> {
        let down = self.build_on::<P>(driver)?;
        let up = match &self.upload {
            Some(u) => Some(u.build_on::<P>(driver)?),
            None => None,
        };
        Ok((down, up))
    }

    /// HTB parameters (`r2q`, `mtu`).
    pub fn htb_params(&self) -> HtbParams {
        HtbParams {
            r2q: self.r2q,
            mtu: self.mtu,
        }
    }

    /// Build the scheduler for a driver with an exact timer. Class ids are indices in
    /// [`Policy::classes`].
    pub fn build<P: Packet + 'static>(&self) -> Result<Box<dyn Qdisc<P>>, ConfigError> {
        self.build_on::<P>(&Driver::default())
    }

    /// Build the scheduler for the driver that will run it (its timer matters to CBQ).
    pub fn build_on<P: Packet + 'static>(
        &self,
        driver: &Driver,
    ) -> Result<Box<dyn Qdisc<P>>, ConfigError> {
        match (self.kind, &self.root_leaf) {
            (QdiscKind::Leaf, Some(leaf)) => leaf
                .build::<P>()
                .map_err(|e| self.build_error(e.to_string(), &e.help)),
            (QdiscKind::Drr, _) => self
                .build_drr::<P>()
                .map(|d| Box::new(d) as Box<dyn Qdisc<P>>),
            (QdiscKind::Cbq, _) => self
                .build_cbq::<P>(driver)
                .map(|c| Box::new(c) as Box<dyn Qdisc<P>>),
            (QdiscKind::Hfsc, _) => self
                .build_hfsc::<P>()
                .map(|c| Box::new(c) as Box<dyn Qdisc<P>>),
            _ => self
                .build_htb::<P>()
                .map(|h| Box::new(h) as Box<dyn Qdisc<P>>),
        }
    }

    /// Build the HTB scheduler itself (for callers that need HTB-specific access).
    pub fn build_htb<P: Packet + 'static>(&self) -> Result<Htb<P>, ConfigError> {
        let (params, specs, classifier) = self.htb_parts::<P>()?;
        Htb::new(params, specs, classifier).map_err(|e| {
            self.build_error(
                format!("the scheduler rejected the policy: {e}"),
                "this is a bug in linkshare's checks: please report it with the policy file",
            )
        })
    }

    /// Build the HTB tree cut into shards below its root ([`linkshare_core::shard`]), for
    /// drivers with several workers and for `linkshare sim --workers N`. Only HTB policies can
    /// be sharded.
    pub fn build_sharded<P: Packet + 'static>(
        &self,
        cfg: &ShardConfig,
    ) -> Result<ShardedHtb<P>, ConfigError> {
        if self.kind != QdiscKind::Htb || self.root_leaf.is_some() {
            return Err(self.build_error(
                format!(
                    "{} workers need an HTB policy, this one is `{}`",
                    cfg.shards,
                    self.kind_name()
                ),
                "use one worker, or write the policy with qdisc = \"htb\"",
            ));
        }
        let (params, specs, classifier) = self.htb_parts::<P>()?;
        ShardedHtb::new(params, specs, classifier, cfg).map_err(|e| {
            self.build_error(
                format!("cannot cut the policy into {} shards: {e}", cfg.shards),
                "top-level classes are placed on shards whole: use at most one worker per \
                 top-level class, or give the policy one root class",
            )
        })
    }

    /// HTB's parameters, class specs and classifier for this policy.
    fn htb_parts<P: Packet + 'static>(
        &self,
    ) -> Result<(HtbParams, Vec<HtbClassSpec<P>>, Classifier), ConfigError> {
        let mut leaves = crate::leaf::LeafShare::default();
        let specs: Vec<HtbClassSpec<P>> = self
            .classes
            .iter()
            .map(|c| -> Result<HtbClassSpec<P>, ConfigError> {
                Ok(HtbClassSpec {
                    name: c.name.clone(),
                    parent: c.parent_id,
                    rate: c.rate,
                    ceil: c.ceil,
                    burst: c.burst,
                    cburst: c.cburst,
                    prio: c.prio,
                    quantum: c.quantum,
                    leaf: leaves.spec(&c.leaf).map_err(|e| {
                        self.build_error(format!("class `{}`: {e}", c.name), &e.help)
                    })?,
                })
            })
            .collect::<Result<_, _>>()?;
        let filters = self.filters.iter().map(|f| f.spec.clone()).collect();
        let classifier = Classifier::new(filters, self.default_id);
        Ok((self.htb_params(), specs, classifier))
    }

    /// Build the classful DRR (`qdisc = "drr"` with classes).
    pub fn build_drr<P: Packet + 'static>(&self) -> Result<Drr<P>, ConfigError> {
        let mut leaves = crate::leaf::LeafShare::default();
        let specs = self
            .classes
            .iter()
            .map(|c| -> Result<DrrClassSpec<P>, ConfigError> {
                Ok(DrrClassSpec {
                    name: c.name.clone(),
                    quantum: c.quantum,
                    leaf: leaves.spec(&c.leaf).map_err(|e| {
                        self.build_error(format!("class `{}`: {e}", c.name), &e.help)
                    })?,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let filters = self.filters.iter().map(|f| f.spec.clone()).collect();
        let classifier = Classifier::new(filters, self.default_id);
        Drr::with_classes(DrrParams::default(), specs, classifier).map_err(|e| {
            self.build_error(
                format!("the scheduler rejected the policy: {e}"),
                "this is a bug in linkshare's checks: please report it with the policy file",
            )
        })
    }

    pub(crate) fn build_error(&self, message: String, help: &str) -> ConfigError {
        ConfigError {
            diagnostics: vec![Diagnostic {
                severity: Severity::Error,
                file: self.origin.clone(),
                line: 1,
                col: 1,
                message,
                help: Some(help.to_string()),
            }],
        }
    }
}
