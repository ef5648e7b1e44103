//! A checked policy: its classes ([`ClassInfo`]) and filters ([`FilterInfo`]) with every
//! default filled in, its subscriber table and upload side, and the ways in: [`Policy::parse`],
//! [`Policy::load`] and [`Policy::from_spanned_table`].
//!
//! Principles: a [`Policy`] exists only once checked (the validator in `validate/` is the one
//! constructor, and every problem it finds is a located diagnostic); it is plain data that
//! drivers read and build from, and each class's index is its `ClassId` in whatever scheduler
//! is built from it. Building is in `build.rs`, the text `check` prints in `render.rs`.

use std::path::Path;

use linkshare_core::classify::{ClassId, FilterSpec};
use linkshare_core::units::Rate;

use crate::raw::syntax_error;
use crate::{
    doc_kind, validate, CbqClassOptions, CbqOptions, ConfigError, Diagnostic, DocKind, HfscClass,
    HfscCompat, LeafKind, NonIp, PolicyDoc, QdiscKind, ReadTable, Severity,
};

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
    pub cbq: Option<CbqClassOptions>,
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
    pub(crate) origin: String,
    pub(crate) kind: QdiscKind,
    /// The discipline when the root is not classful (`qdisc = "fq_codel"`).
    pub(crate) root_leaf: Option<LeafKind>,
    /// CBQ's options (`qdisc = "cbq"`).
    pub(crate) cbq: Option<CbqOptions>,
    /// HFSC's compatibility choice (`qdisc = "hfsc"`).
    pub(crate) hfsc: Option<HfscCompat>,
    pub(crate) r2q: u32,
    pub(crate) mtu: u32,
    pub(crate) default: String,
    pub(crate) default_id: ClassId,
    pub(crate) classes: Vec<ClassInfo>,
    pub(crate) filters: Vec<FilterInfo>,
    pub(crate) warnings: Vec<Diagnostic>,
    /// `overhead`, `mpu`, `linklayer` (tc-stab).
    pub(crate) link: linkshare_core::linklayer::LinkLayer,
    /// `trust_dscp`, `wash` (this side's: the upload side holds its `upload_*` values).
    pub(crate) dscp: linkshare_core::trust::DscpTrust,
    /// The subscriber table (`subscribers = "…"`), if any.
    pub(crate) subscribers: Option<Box<Subscribers>>,
    /// The upload side, when the policy gives upload rates.
    pub(crate) upload: Option<Box<Policy>>,
    /// What the shaper does with frames that are not IP (`non_ip`).
    pub(crate) non_ip: NonIp,
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

    /// Classes in file order; a class's index is its `ClassId` in the built scheduler.
    pub fn classes(&self) -> &[ClassInfo] {
        &self.classes
    }

    /// The root's rate: the sum of the top-level classes' ceilings (saturating), the rate the
    /// whole tree may send at. The one place it is computed (the router's device model and
    /// patches, the line-rate and link-rate warnings).
    pub fn root_rate(&self) -> Rate {
        validate::root_rate_of(&self.classes)
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
}
