//! CBQ in a checked policy: the top-level options ([`CbqOptions`]), each class's keys (core's
//! [`CbqClassOptions`]), the qdisc-wide parameters for a driver ([`Policy::cbq_params`]) and the
//! build of the scheduler ([`Policy::build_cbq`]).
//!
//! Principles: one schema. Every type a CBQ policy writes is core's ([`linkshare_core::cbq`]),
//! with the names a policy writes in core's `NAMED` tables, so the file, the checks and the
//! scheduler read one definition and nothing is converted field by field; what is the policy's
//! own is only the `altq_compat` switch and the defaults a file gets (`validate/cbq.rs`).

use linkshare_core::cbq::{self, Cbq, CbqClassSpec, CbqParams};
use linkshare_core::classify::Classifier;
use linkshare_core::Packet;

use crate::build::Driver;
use crate::{ConfigError, Policy};

/// CBQ's option values and per-class keys are core's types: one definition for the file, the
/// checks and the scheduler ([`linkshare_core::cbq`], with the names a policy writes).
pub use linkshare_core::cbq::{
    CbqClassOptions, Guideline as CbqGuideline, OfftimeUnit, Scheduler as CbqScheduler,
    UndertimeClock,
};

/// CBQ's top-level options.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CbqOptions {
    pub scheduler: CbqScheduler,
    pub guideline: CbqGuideline,
    pub efficient: bool,
    pub undertime_clock: UndertimeClock,
    pub offtime_unit: OfftimeUnit,
    /// `altq_compat = true`: ALTQ's behaviours, including the two-tick minimum suspension.
    pub altq_compat: bool,
}

impl CbqOptions {
    /// Every ALTQ behaviour at once.
    pub fn altq() -> Self {
        CbqOptions {
            scheduler: CbqScheduler::Wrr,
            guideline: CbqGuideline::TopLevel,
            efficient: false,
            undertime_clock: UndertimeClock::Expected,
            offtime_unit: OfftimeUnit::Packets,
            altq_compat: true,
        }
    }
}

/// `avgpkt` of a class that does not write it (or the mtu, if smaller).
pub(crate) const DEFAULT_AVGPKT: u32 = 1000;

/// The keys of a CBQ class that writes none of them (`docs/policy-format.md`): may borrow,
/// `maxburst` 16, `minburst` 2, `avgpkt` [`DEFAULT_AVGPKT`] (lowered to the mtu by the checks),
/// nothing overridden.
pub(crate) fn class_defaults() -> CbqClassOptions {
    CbqClassOptions {
        borrow: true,
        maxburst: cbq::DEFAULT_MAXBURST,
        minburst: cbq::DEFAULT_MINBURST,
        ..CbqClassOptions::new(DEFAULT_AVGPKT)
    }
}

impl Policy {
    /// CBQ's options, for `qdisc = "cbq"`.
    pub fn cbq_options(&self) -> Option<&CbqOptions> {
        self.cbq.as_ref()
    }

    /// CBQ's qdisc-wide parameters for a driver: the link is the root classes' allocation
    /// ([`Policy::root_rate`]: a CBQ class's ceil is its rate), the
    /// timer is the driver's, and ALTQ's two-tick minimum suspension and `ifnow` clamp come with
    /// `altq_compat`.
    pub fn cbq_params(&self, driver: &Driver) -> Option<CbqParams> {
        let o = self.cbq.as_ref()?;
        let mut p = CbqParams::new(self.root_rate());
        p.scheduler = o.scheduler;
        p.guideline = o.guideline;
        p.efficient = o.efficient;
        p.mtu = self.mtu;
        p.undertime_clock = o.undertime_clock;
        p.offtime_unit = o.offtime_unit;
        p.timer_hz = driver.timer_hz;
        p.min_suspend_ticks = if o.altq_compat {
            cbq::ALTQ_MIN_SUSPEND_TICKS
        } else {
            0
        };
        // ALTQ's 16-MTU clamp on its link model (seed 001 §6.1) comes with `altq_compat` too.
        p.clamp_ifnow = o.altq_compat;
        // ALTQ's runaway offtime for large minbursts (validate/cbq.rs warns) is kept only there.
        p.bound_offtime = !o.altq_compat;
        Some(p)
    }

    /// Build the CBQ scheduler itself (for callers that need CBQ-specific access).
    pub fn build_cbq<P: Packet + 'static>(&self, driver: &Driver) -> Result<Cbq<P>, ConfigError> {
        let params = self.cbq_params(driver).ok_or_else(|| {
            self.build_error(
                format!("this policy is `qdisc = \"{}\"`, not CBQ", self.kind_name()),
                "write `qdisc = \"cbq\"` to build a CBQ tree",
            )
        })?;
        let mut leaves = crate::leaf::LeafShare::default();
        let specs: Vec<CbqClassSpec<P>> = self
            .classes
            .iter()
            .map(|c| -> Result<CbqClassSpec<P>, ConfigError> {
                let mut s = CbqClassSpec::new(&c.name, c.parent_id, c.rate, &params);
                s.prio = c.prio;
                s.options = c.cbq.unwrap_or_else(class_defaults);
                s.leaf = leaves
                    .spec(&c.leaf)
                    .map_err(|e| self.build_error(format!("class `{}`: {e}", c.name), &e.help))?;
                Ok(s)
            })
            .collect::<Result<_, _>>()?;
        let filters = self.filters.iter().map(|f| f.spec.clone()).collect();
        let classifier = Classifier::new(filters, self.default_id);
        Cbq::new(params, specs, classifier).map_err(|e| {
            self.build_error(
                format!("the scheduler rejected the policy: {e}"),
                "this is a bug in linkshare's checks: please report it with the policy file",
            )
        })
    }
}
