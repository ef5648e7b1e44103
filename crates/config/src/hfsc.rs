//! HFSC in a checked policy: each class's curves ([`HfscClass`]), the compatibility choice
//! ([`HfscCompat`]) and the build of the scheduler ([`Policy::build_hfsc`]).
//!
//! `hfsc_compat = "openbsd"` selects both of OpenBSD's (ALTQ's) differences from Linux that
//! change what users see: the upper-limit catch-up (`cl_myfadj`, one 10 ms tick of ALTQ's
//! 100 Hz clock) and virtual times restarted in each parent period with a shifted curve
//! (docs/hfsc.md, "Choices against Linux and OpenBSD").

use linkshare_core::classify::Classifier;
use linkshare_core::hfsc::{Hfsc, HfscClassSpec, HfscParams, PeriodVt, ServiceCurve};
use linkshare_core::Packet;

use crate::{ConfigError, Policy};

/// ALTQ's clock tick at its usual 100 Hz: how far a fit time may lag under `openbsd`.
pub const ALTQ_TICK_NS: u64 = 10_000_000;

/// A class's curves (`None`: not given; `rt` of a class with children is dropped with a
/// warning).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct HfscClass {
    pub rt: Option<ServiceCurve>,
    pub ls: Option<ServiceCurve>,
    pub ul: Option<ServiceCurve>,
}

/// Whose HFSC to follow where Linux and OpenBSD differ.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum HfscCompat {
    /// Linux's `sch_hfsc.c` (the default).
    #[default]
    Linux,
    /// OpenBSD's `hfsc.c` / ALTQ.
    OpenBsd,
}

impl HfscCompat {
    pub fn name(self) -> &'static str {
        match self {
            HfscCompat::Linux => "linux",
            HfscCompat::OpenBsd => "openbsd",
        }
    }
}

impl Policy {
    /// HFSC's compatibility choice, for `qdisc = "hfsc"`.
    pub fn hfsc_compat(&self) -> Option<HfscCompat> {
        self.hfsc
    }

    /// HFSC's qdisc-wide parameters for this policy.
    pub fn hfsc_params(&self) -> Option<HfscParams> {
        Some(match self.hfsc? {
            HfscCompat::Linux => HfscParams::default(),
            HfscCompat::OpenBsd => HfscParams {
                ul_catchup: Some(ALTQ_TICK_NS),
                period_vt: PeriodVt::OpenBsd,
            },
        })
    }

    /// Build the HFSC scheduler itself (for callers that need HFSC-specific access).
    pub fn build_hfsc<P: Packet + 'static>(&self) -> Result<Hfsc<P>, ConfigError> {
        let params = self.hfsc_params().ok_or_else(|| {
            self.build_error(
                format!(
                    "this policy is `qdisc = \"{}\"`, not HFSC",
                    self.kind_name()
                ),
                "write `qdisc = \"hfsc\"` to build an HFSC tree",
            )
        })?;
        let mut leaves = crate::leaf::LeafShare::default();
        let specs = self
            .classes
            .iter()
            .map(|c| -> Result<HfscClassSpec<P>, ConfigError> {
                let k = c.hfsc.unwrap_or_default();
                let mut s = HfscClassSpec::new(&c.name, c.parent_id, ServiceCurve::default());
                s.rt = k.rt;
                s.ls = k.ls;
                s.ul = k.ul;
                s.leaf = leaves
                    .spec(&c.leaf)
                    .map_err(|e| self.build_error(format!("class `{}`: {e}", c.name), &e.help))?;
                Ok(s)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let filters = self.filters.iter().map(|f| f.spec.clone()).collect();
        let classifier = Classifier::new(filters, self.default_id);
        Hfsc::new(params, specs, classifier).map_err(|e| {
            self.build_error(
                format!("the scheduler rejected the policy: {e}"),
                "this is a bug in linkshare's checks: please report it with the policy file",
            )
        })
    }
}
