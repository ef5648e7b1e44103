//! # linkshare-config
//!
//! Policy files: a TOML description of a class tree, its leaf queues and its filters, with tc(8)'s
//! units, checked as a whole before anything is built.
//!
//! ```toml
//! qdisc = "htb"
//! default = "bulk"
//!
//! [[class]]
//! name = "root"
//! rate = "10mbit"
//!
//! [[class]]
//! name = "bulk"
//! parent = "root"
//! rate = "8mbit"
//! ceil = "10mbit"
//! ```
//!
//! [`Policy::parse`] reads and checks a policy; every problem found becomes a [`Diagnostic`] with
//! `file:line:col`, a message and a `help:` line saying what to write instead. All problems are
//! collected (not just the first); any error rejects the policy with a [`ConfigError`], warnings
//! travel with the accepted [`Policy`] ([`Policy::warnings`]). [`Policy::build`] then makes the
//! scheduler. The format is documented in `docs/policy-format.md`.
//!
//! A policy may also be embedded in a larger TOML document (a simulator scenario): deserialize the
//! table as a [`PolicyDoc`] and pass it to [`Policy::from_spanned_table`].
//!
//! Adding a scheduler kind means a new [`QdiscKind`] variant, its name in [`QdiscKind::KNOWN`],
//! and a match arm in the validator and in [`Policy::build`].

mod cake;
mod change;
pub mod csv;
mod diag;
mod doc_kind;
mod hfsc;
mod leaf;
mod link;
mod memory;
mod non_ip;
mod params;
mod raw;
mod render;
mod source;
mod trust;
mod validate;
mod values;

use std::path::Path;

use linkshare_core::cbq::{self, Cbq, CbqClassSpec, CbqParams};
use linkshare_core::classify::{ClassId, Classifier, FilterSpec};
use linkshare_core::htb::{Htb, HtbClassSpec, HtbParams};
use linkshare_core::qdisc::drr::{Drr, DrrClassSpec, DrrParams};
use linkshare_core::shard::{ShardConfig, ShardedHtb};
use linkshare_core::units::Rate;
use linkshare_core::{Packet, Qdisc};

pub use diag::{ConfigError, Diagnostic, Severity};
pub use doc_kind::{looks_like, wrong_kind, DocKind};
pub use hfsc::{HfscClass, HfscCompat};
pub use leaf::LeafKind;
pub use memory::MIN_FRAME;
pub use non_ip::NonIp;
pub use raw::PolicyDoc;
pub use source::{
    render_report, render_report_for, Source, ECHO_MAX_CHARS, SHOWN_PER_KIND, SHOWN_PER_SEVERITY,
};
pub use validate::ReadTable;

/// The root scheduler of a policy (`qdisc = "..."`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QdiscKind {
    /// Hierarchical Token Bucket.
    Htb,
    /// Class-Based Queueing (Floyd & Jacobson), with ALTQ's options: see [`CbqOptions`].
    Cbq,
    /// Hierarchical Fair Service Curve (Stoica, Zhang & Ng): see [`HfscClass`], [`HfscCompat`].
    Hfsc,
    /// Deficit round robin over flat classes, each with a `quantum` and a leaf
    /// (`qdisc = "drr"` with `[[class]]`; without classes `"drr"` is the flow-hash leaf).
    Drr,
    /// A single discipline without classes (`qdisc = "sfq"`): see [`Policy::root_leaf`].
    Leaf,
}

impl QdiscKind {
    /// Every kind, by the name written in policy files.
    pub const KNOWN: &'static [(&'static str, QdiscKind)] = &[
        ("htb", QdiscKind::Htb),
        ("cbq", QdiscKind::Cbq),
        ("hfsc", QdiscKind::Hfsc),
    ];

    pub fn from_name(name: &str) -> Option<QdiscKind> {
        let n = name.trim().to_ascii_lowercase();
        Self::KNOWN.iter().find(|(k, _)| *k == n).map(|(_, q)| *q)
    }

    /// The name of a classful kind; `"leaf"` for [`QdiscKind::Leaf`] (see [`Policy::kind_name`]).
    pub fn name(self) -> &'static str {
        match self {
            QdiscKind::Htb => "htb",
            QdiscKind::Cbq => "cbq",
            QdiscKind::Hfsc => "hfsc",
            QdiscKind::Drr => "drr",
            QdiscKind::Leaf => "leaf",
        }
    }

    /// Every name `qdisc =` accepts: the classful kinds, then the leaf disciplines.
    pub(crate) fn all_names() -> impl Iterator<Item = &'static str> {
        Self::KNOWN
            .iter()
            .map(|(n, _)| *n)
            .chain(LeafKind::KNOWN.iter().copied())
    }

    pub(crate) fn known_list() -> String {
        Self::all_names().collect::<Vec<_>>().join(", ")
    }
}

/// One class of a checked policy, with every default filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassInfo {
    /// Index in [`Policy::classes`] (file order); the scheduler's `ClassId`.
    pub id: ClassId,
    pub name: String,
    pub parent: Option<String>,
    pub parent_id: Option<ClassId>,
    /// Guaranteed rate.
    pub rate: Rate,
    /// Upper limit when borrowing (defaults to `rate`).
    pub ceil: Rate,
    /// Bytes (defaults to `linkshare_core::htb::default_burst(rate, mtu)`).
    pub burst: u32,
    /// Bytes (defaults to `default_burst(ceil, mtu)`).
    pub cburst: u32,
    /// 0 (served first) to 7.
    pub prio: u8,
    /// DRR quantum in bytes (defaults to rate/r2q clamped to 1000..=200000).
    pub quantum: u32,
    /// The leaf queue; meaningful only when `is_leaf`.
    pub leaf: LeafKind,
    pub is_leaf: bool,
    /// Ancestors above this class (0 for a root).
    pub depth: u8,
    /// HTB's level: 0 for leaves, `MAX_DEPTH - 1 - depth` for inner classes.
    pub level: u8,
    /// Children, in file order.
    pub children: Vec<ClassId>,
    /// Line of the `[[class]]` in the file.
    pub line: usize,
    /// CBQ's per-class parameters (`qdisc = "cbq"` only).
    pub cbq: Option<CbqClass>,
    /// HFSC's curves (`qdisc = "hfsc"` only).
    pub hfsc: Option<HfscClass>,
    /// Which of the numbers above the policy wrote (the others are defaults that follow the
    /// rates: [`Policy::change_rates`] recomputes them as a file edit would).
    pub written: Written,
}

/// Which of a class's numbers are written in its policy rather than derived from its rates.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub ceil: bool,
    pub burst: bool,
    pub cburst: bool,
    pub quantum: bool,
}

/// CBQ's option values are core's types: one definition for the file, the checks and the
/// scheduler ([`linkshare_core::cbq`], with the names a policy writes).
pub use linkshare_core::cbq::{
    Guideline as CbqGuideline, OfftimeUnit, Scheduler as CbqScheduler, UndertimeClock,
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

/// CBQ's per-class keys, as written (`None`: derived from the allocation when built).
#[derive(Clone, Debug, PartialEq)]
pub struct CbqClass {
    pub borrow: bool,
    pub maxburst: u32,
    pub minburst: u32,
    pub avgpkt: u32,
    pub maxidle: Option<linkshare_core::units::Duration>,
    pub minidle: Option<linkshare_core::units::Duration>,
    pub offtime: Option<linkshare_core::units::Duration>,
    pub extradelay: linkshare_core::units::Duration,
}

impl Default for CbqClass {
    /// ALTQ's defaults: may borrow, maxburst 16, minburst 2, avgpkt 1000 bytes.
    fn default() -> Self {
        CbqClass {
            borrow: true,
            maxburst: 16,
            minburst: 2,
            avgpkt: 1000,
            maxidle: None,
            minidle: None,
            offtime: None,
            extradelay: linkshare_core::units::Duration::ZERO,
        }
    }
}

/// What a scheduler is built for: the driver that will pull it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Driver {
    /// The driver's timer rate in Hz (0: an exact timer). CBQ's suspensions are rounded to it
    /// with `altq_compat`'s two-tick minimum; the simulator passes `[link] timer_hz`.
    pub timer_hz: u32,
}

/// One filter of a checked policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterInfo {
    /// Target class name; `spec.class` is its id.
    pub class: String,
    pub spec: FilterSpec,
    /// Line of the `[[filter]]` in the file.
    pub line: usize,
}

/// A policy's subscriber table, once checked: its subscribers are the classes from
/// `first_class` on (one leaf each, in row order) and the filters from `first_filter` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscribers {
    /// The CSV file, as diagnostics name it.
    pub file: String,
    pub first_class: ClassId,
    pub first_filter: usize,
    /// Each plan with its number of subscribers, in file order; then `("", n)` for the rows
    /// that give their own rates, if any.
    pub plans: Vec<(String, usize)>,
    /// Each subscriber's circuit id (the table's `id` or `circuit_id` column; empty: none), in
    /// row order (subscriber `k` is class `first_class + k`); empty without the column.
    pub ids: Vec<Box<str>>,
}

/// A checked policy, ready to build.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    origin: String,
    kind: QdiscKind,
    /// The discipline when the root is not classful (`qdisc = "fq_codel"`).
    root_leaf: Option<LeafKind>,
    /// CBQ's options (`qdisc = "cbq"`).
    cbq: Option<CbqOptions>,
    /// HFSC's compatibility choice (`qdisc = "hfsc"`).
    hfsc: Option<HfscCompat>,
    r2q: u32,
    mtu: u32,
    default: String,
    default_id: ClassId,
    classes: Vec<ClassInfo>,
    filters: Vec<FilterInfo>,
    warnings: Vec<Diagnostic>,
    /// `overhead`, `mpu`, `linklayer` (tc-stab).
    link: linkshare_core::linklayer::LinkLayer,
    /// `trust_dscp`, `wash` (this side's: the upload side holds its `upload_*` values).
    dscp: linkshare_core::trust::DscpTrust,
    /// The subscriber table (`subscribers = "…"`), if any.
    subscribers: Option<Box<Subscribers>>,
    /// The upload side, when the policy gives upload rates.
    upload: Option<Box<Policy>>,
    /// What the shaper does with frames that are not IP (`non_ip`).
    non_ip: NonIp,
}

/// Where the subscriber table `rel` (the policy's `subscribers = …`) of the policy file
/// `origin` is read from: as written when absolute, else beside the policy file.
pub fn subscriber_table_path(origin: &str, rel: &str) -> std::path::PathBuf {
    validate::subs::table_path(origin, rel)
}

impl Policy {
    /// Parse and check a policy. `origin` is the file name used in diagnostics; a subscriber
    /// table it names is read from the filesystem, relative to `origin`'s directory. A rejected
    /// file that looks like a scenario says so first (`linkshare sim` reads it).
    pub fn parse(text: &str, origin: &str) -> Result<Policy, ConfigError> {
        Self::parse_with(text, origin, &|p: &Path| std::fs::read_to_string(p))
    }

    /// [`Policy::parse`] with the subscriber table read by `files` (given the path the policy
    /// names, joined to `origin`'s directory).
    pub fn parse_with(text: &str, origin: &str, files: ReadTable) -> Result<Policy, ConfigError> {
        let parsed = toml::from_str::<PolicyDoc>(text)
            .map_err(|e| syntax_error(&e, text, origin))
            .and_then(|doc| validate::validate(&doc, text, origin, files));
        parsed.map_err(|mut e| {
            if let Some(d) = doc_kind::wrong_kind(text, origin, DocKind::Policy) {
                e.diagnostics.insert(0, d);
            }
            e
        })
    }

    /// Read, parse and check a policy file. A file that cannot be read gives one diagnostic at
    /// line 0, column 0.
    pub fn load(path: &Path) -> Result<Policy, ConfigError> {
        let origin = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, &origin),
            Err(e) => Err(ConfigError {
                diagnostics: vec![Diagnostic {
                    severity: Severity::Error,
                    file: origin,
                    line: 0,
                    col: 0,
                    message: format!("cannot read the policy: {e}"),
                    help: Some("check the path and its permissions".to_string()),
                }],
            }),
        }
    }

    /// Check a policy table embedded in a larger document. `text` and `origin` are that whole
    /// document, into which the spans of `doc` point.
    pub fn from_spanned_table(
        doc: PolicyDoc,
        text: &str,
        origin: &str,
    ) -> Result<Policy, ConfigError> {
        validate::validate(&doc, text, origin, &|p: &Path| std::fs::read_to_string(p))
    }

    /// The subscriber table, when the policy has one.
    pub fn subscribers(&self) -> Option<&Subscribers> {
        self.subscribers.as_deref()
    }

    /// Each subscriber's class name with its circuit id, for the subscribers that have one
    /// (the labels `stat` and `/metrics` carry).
    pub fn circuit_ids(&self) -> impl Iterator<Item = (&str, &str)> {
        let (first, ids) = match self.subscribers.as_deref() {
            Some(s) => (s.first_class as usize, s.ids.as_slice()),
            None => (0, &[][..]),
        };
        ids.iter()
            .enumerate()
            .filter(|(_, id)| !id.is_empty())
            .filter_map(move |(k, id)| Some((self.classes.get(first + k)?.name.as_str(), &**id)))
    }

    /// The upload side, when the policy gives upload rates: the same classes with their
    /// upload rates, and the filters mirrored (a subscriber matched by source address). `self`
    /// is then the download side (matched by destination).
    pub fn upload(&self) -> Option<&Policy> {
        self.upload.as_deref()
    }

    /// Take the upload side out of the policy (which is then the download side alone), for a
    /// driver that runs the two on their own and keeps each once.
    pub fn take_upload(&mut self) -> Option<Policy> {
        self.upload.take().map(|u| *u)
    }

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

    /// Warnings found while checking (the policy is usable).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The file name diagnostics use.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn kind(&self) -> QdiscKind {
        self.kind
    }

    /// The root's name as written: `"htb"`, `"sfq"`, `"fq_codel"`, …
    pub fn kind_name(&self) -> &'static str {
        match &self.root_leaf {
            Some(l) => l.name(),
            None => self.kind.name(),
        }
    }

    /// CBQ's options, for `qdisc = "cbq"`.
    pub fn cbq_options(&self) -> Option<&CbqOptions> {
        self.cbq.as_ref()
    }

    /// The discipline of a policy without classes (`qdisc = "sfq"`), with its parameters.
    pub fn root_leaf(&self) -> Option<&LeafKind> {
        self.root_leaf.as_ref()
    }

    /// The link layer below the shaper (`overhead`, `mpu`, `linklayer`): where packets are
    /// made, their accounted length is `link_layer().size(len)`.
    pub fn link_layer(&self) -> linkshare_core::linklayer::LinkLayer {
        self.link
    }

    /// What the shaper does with frames that are not IP (`non_ip`; shaped in the default class
    /// unless the policy says otherwise).
    pub fn non_ip(&self) -> NonIp {
        self.non_ip
    }

    /// Whether the DSCP of the packets this side shapes classifies them, and whether it is
    /// cleared (`trust_dscp`, `wash`; the upload side's `upload_trust_dscp`, `upload_wash`).
    pub fn dscp_trust(&self) -> linkshare_core::trust::DscpTrust {
        self.dscp
    }

    /// HTB parameters (`r2q`, `mtu`).
    pub fn htb_params(&self) -> HtbParams {
        HtbParams {
            r2q: self.r2q,
            mtu: self.mtu,
        }
    }

    /// Classes in file order; a class's index is its `ClassId` in the built scheduler.
    pub fn classes(&self) -> &[ClassInfo] {
        &self.classes
    }

    /// The root's rate: the sum of the top-level classes' ceilings (saturating), the rate the
    /// whole tree may send at. The one place it is computed (the router's device model and
    /// patches, the line-rate and link-rate warnings).
    pub fn root_rate(&self) -> Rate {
        Rate(
            self.classes
                .iter()
                .filter(|c| c.parent_id.is_none())
                .fold(0u64, |s, c| s.saturating_add(c.ceil.0)),
        )
    }

    /// Filters in file order (first match wins).
    pub fn filters(&self) -> &[FilterInfo] {
        &self.filters
    }

    /// Name of the class unmatched packets go to.
    pub fn default_class(&self) -> &str {
        &self.default
    }

    /// Id of the class unmatched packets go to.
    pub fn default_class_id(&self) -> ClassId {
        self.default_id
    }

    /// Id of the class with this name.
    pub fn class_id(&self, name: &str) -> Option<ClassId> {
        self.classes
            .iter()
            .position(|c| c.name == name)
            .map(|i| i as ClassId)
    }

    /// The class tree, rates and filters as `linkshare check` prints them.
    pub fn render_tree(&self) -> String {
        let mut out = self.render_one();
        if let Some(line) = render::plans_line(self) {
            out.push_str(&line);
        }
        if let Some(u) = &self.upload {
            out.push_str("\nupload side (the same classes; filters match the source):\n");
            out.push_str(&u.render_one());
        }
        out
    }

    /// One direction's tree and filters, with the link layer.
    fn render_one(&self) -> String {
        let tree = render::tree(self);
        let mut line = String::new();
        if !self.link.is_identity() {
            // The link layer on the line after the root's, with what it does to a full packet.
            let l = self.link;
            line = format!(
                "link layer {}  overhead={}  mpu={}  (a {}-byte packet is charged {} bytes)\n",
                l.framing.name(),
                l.overhead,
                l.mpu,
                self.mtu,
                l.size(self.mtu)
            );
        }
        let t = self.dscp;
        if !t.trust || t.wash {
            line.push_str(&format!(
                "dscp {}{}\n",
                if t.trust {
                    "trusted"
                } else {
                    "not trusted (classified as 0)"
                },
                if t.wash { ", washed to 0" } else { "" }
            ));
        }
        if line.is_empty() {
            return tree;
        }
        match tree.find('\n') {
            Some(i) => format!("{}{line}{}", &tree[..=i], &tree[i + 1..]),
            None => format!("{tree}\n{line}"),
        }
    }

    /// The filters as one-line descriptions (`udp dst 10.0.0.0/8 dport 5000-5010`), in order.
    pub fn filter_descriptions(&self) -> Vec<String> {
        self.filters
            .iter()
            .map(|f| render::filter_text(&f.spec))
            .collect()
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

    /// CBQ's qdisc-wide parameters for a driver: the link is the root classes' allocation, the
    /// timer is the driver's, and ALTQ's two-tick minimum suspension and `ifnow` clamp come with
    /// `altq_compat`.
    pub fn cbq_params(&self, driver: &Driver) -> Option<CbqParams> {
        let o = self.cbq.as_ref()?;
        let link = Rate(
            self.classes
                .iter()
                .filter(|c| c.parent_id.is_none())
                .map(|c| c.rate.0)
                .sum(),
        );
        let mut p = CbqParams::new(link);
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
                let k = c.cbq.clone().unwrap_or_default();
                let mut s = CbqClassSpec::new(&c.name, c.parent_id, c.rate, &params);
                s.prio = c.prio;
                s.borrow = k.borrow;
                s.maxburst = k.maxburst;
                s.minburst = k.minburst;
                s.avgpkt = k.avgpkt;
                s.maxidle = k.maxidle;
                s.minidle = k.minidle;
                s.offtime = k.offtime;
                s.extradelay = k.extradelay;
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

    fn build_error(&self, message: String, help: &str) -> ConfigError {
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

/// A TOML syntax error as a located diagnostic.
fn syntax_error(e: &toml::de::Error, text: &str, origin: &str) -> ConfigError {
    let index = source::LineIndex::new(text);
    let (line, col) = e.span().map(|s| index.line_col(s.start)).unwrap_or((1, 1));
    if let Some(d) = unquoted_unit(text, line, origin) {
        return ConfigError {
            diagnostics: vec![d],
        };
    }
    let message = raw::syntax_message(e.message());
    let help = if message.contains("duplicate key") {
        "each key may appear once per table; remove or rename the repeated one"
    } else if message.contains("dates and times") {
        "write rates and sizes as strings with a unit, e.g. \"10mbit\""
    } else {
        "fix the TOML syntax: strings need double quotes (rate = \"10mbit\"), tables are `[[class]]`"
    };
    ConfigError {
        diagnostics: vec![Diagnostic {
            severity: Severity::Error,
            file: origin.to_string(),
            line,
            col,
            message: format!("invalid TOML: {message}"),
            help: Some(help.to_string()),
        }],
    }
}

/// The commonest TOML mistake in a policy: a value with a unit written without quotes
/// (`rate = 10mbit`). toml only says "expected newline"; say what to write instead.
fn unquoted_unit(text: &str, line: usize, origin: &str) -> Option<Diagnostic> {
    let src = text.lines().nth(line.checked_sub(1)?)?;
    let (key, value) = src.split_once('=')?;
    let value = value.split('#').next().unwrap_or("").trim();
    let digits = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|&i| i > 0)?;
    if !value[digits..].chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let key = key.trim();
    let col = src.find(value).map(|i| src[..i].chars().count() + 1)?;
    Some(Diagnostic {
        severity: Severity::Error,
        file: origin.to_string(),
        line,
        col,
        message: format!("invalid TOML: `{value}` must be quoted"),
        help: Some(format!(
            "write `{key} = \"{value}\"`: a value with a unit is a string"
        )),
    })
}
