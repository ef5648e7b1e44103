//! The control protocol's messages, typed, for both ends (the shaper's server and the `linkshare`
//! CLI): one JSON object per line each way, a request answered by exactly one response.
//!
//! Principles:
//! * every message is an [`Envelope`]: the protocol version `v` beside the message's own fields;
//!   requests are tagged by `cmd`, responses by `reply` (serde's internally tagged enums);
//! * `hello` is the negotiation point and is frozen across versions: it is answered whatever the
//!   client's `v` (even none), with the server's version range, the requests it answers, its
//!   optional features and its size limits ([`Hello`]);
//! * any other request must carry a version in [`MIN_VERSION`]`..=`[`VERSION`]; an unversioned
//!   or unknown one gets an `error` of kind `unsupported_version`, never a guess;
//! * bad input is answered with an `error` reply — a kind a program can match and a message a
//!   person can read — never a panic or a silent default ([`parse_request`] is total).
//!
//! The wire format, with an example session, is in docs/router.md ("Control protocol").

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::select::Select;
use super::snapshot::Snapshot;

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;
/// The oldest version this build still answers.
pub const MIN_VERSION: u32 = 1;

/// The request names, as `cmd` spells them (the `hello` reply lists them).
pub const REQUESTS: &[&str] = &["hello", "stat", "policy", "reload"];
/// Optional behaviour a client may look for in the `hello` reply.
pub const FEATURES: &[&str] = &[
    // `reload` takes a policy's text (`source.from = "text"`) or a file path (`"file"`).
    "reload_text",
    "reload_file",
    // `reload` takes one class's new rates by name (`source.from = "change"`).
    "reload_change",
    // `direction = "reverse"` addresses the OUT -> IN policy.
    "reverse_direction",
    // Every class in `stat` names its parent and carries its id (`parent`, `parent_id`).
    "class_parents",
    // Drops by reason and ECN marks per class and per direction.
    "drops_by_reason",
    "ecn_marks",
    // `stat` takes `select` (class, parent, top N by rate/drops/backlog, pages of a snapshot).
    "stat_select",
];

/// A message with its protocol version: `{"v": 1, …the message's fields…}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub v: u32,
    #[serde(flatten)]
    pub body: T,
}

impl<T> Envelope<T> {
    /// `body` at this build's [`VERSION`].
    pub fn new(body: T) -> Envelope<T> {
        Envelope { v: VERSION, body }
    }
}

/// Which policy a request addresses: IN -> OUT (`forward`, the default) or OUT -> IN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    #[default]
    Forward,
    Reverse,
}

impl Direction {
    /// The shaper's index of the direction (0 forward, 1 reverse).
    pub fn index(self) -> usize {
        match self {
            Direction::Forward => 0,
            Direction::Reverse => 1,
        }
    }
}

/// Where a reloaded policy comes from: `{"from": "text", "text": …, "origin": …}`,
/// `{"from": "file", "path": …}`, or `{"from": "change", "class": …, "rate": …, "ceil": …}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case", deny_unknown_fields)]
pub enum PolicySource {
    /// The policy's text; `origin` names it in diagnostics (a file name, `class change …`).
    Text { text: String, origin: String },
    /// A file the shaper reads itself (and reloads again on SIGHUP).
    File { path: PathBuf },
    /// The running policy with one class's rate and/or ceil changed (tc units, e.g. "2mbit"):
    /// no text is sent, and the shaper compares nothing but that class. Answered
    /// `unsupported` by a shaper that does not hold its running policy (`--workers`): send the
    /// edited text instead.
    Change(ClassChange),
}

/// One class's new rates by name (`linkshare class change`, `PolicySource::Change`), and the
/// changes applied since a policy's text was loaded (`PolicyText::changes`): rates in tc's
/// units, unset ones left as the policy has them. The builder applies it (builder.rs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassChange {
    pub class: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceil: Option<String>,
}

/// A request, tagged by `cmd`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The server's versions, requests, features and limits. (Variants without fields are
    /// written `{}` so that an unknown field is refused for them too.)
    Hello {},
    /// The typed [`Snapshot`] of interfaces, directions and classes; `select` picks the
    /// classes (by name, parent, top N, page: control/select.rs), every class (first page)
    /// when left out.
    Stat {
        #[serde(default, skip_serializing_if = "Select::is_all")]
        select: Select,
    },
    /// The policy a direction runs, as text.
    Policy {
        #[serde(default)]
        direction: Direction,
    },
    /// Replace a direction's policy; the new scheduler adopts the old one's state.
    Reload {
        #[serde(default)]
        direction: Direction,
        source: PolicySource,
    },
}

/// The `hello` reply: what this server speaks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The newest protocol version the server speaks, and the oldest it still answers.
    pub version: u32,
    pub min_version: u32,
    /// The server's program and release, e.g. `linkshare 0.1.0`.
    pub server: String,
    /// The `cmd` names it answers.
    pub requests: Vec<String>,
    /// Optional behaviour ([`FEATURES`]).
    pub features: Vec<String>,
    /// The longest request line and reply it handles, in bytes.
    pub max_request_bytes: u64,
    pub max_reply_bytes: u64,
}

impl Hello {
    /// This build's answer.
    pub fn current() -> Hello {
        Hello {
            version: VERSION,
            min_version: MIN_VERSION,
            server: format!("linkshare {}", env!("CARGO_PKG_VERSION")),
            requests: REQUESTS.iter().map(|s| s.to_string()).collect(),
            features: FEATURES.iter().map(|s| s.to_string()).collect(),
            max_request_bytes: super::server::MAX_REQUEST as u64,
            max_reply_bytes: super::server::MAX_REPLY as u64,
        }
    }
}

/// The `policy` reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyText {
    pub direction: Direction,
    pub text: String,
    /// The name diagnostics give the text.
    pub origin: String,
    /// The file SIGHUP reloads, if the policy came from one.
    pub path: Option<PathBuf>,
    /// Class changes applied by name since `text` was loaded (`reload` of a `change`), oldest
    /// first: the running policy is `text` with these applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ClassChange>,
}

/// What a reload did (the `reloaded` reply). A reload that an HTB can apply in place (new
/// rates, bursts, quanta, FIFO limits, filters) touches only the classes in `changed`; any
/// other installs a new tree that takes over the old one's state (`Qdisc::adopt`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadReport {
    /// How many classes are present before and after and unchanged (queue, counters and state
    /// kept).
    pub kept: u64,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Classes present before and after whose parameters or filters changed (their queue and
    /// counters kept too), in class order.
    #[serde(default)]
    pub changed: Vec<String>,
    /// Whether the change was applied to the running tree in place (no new tree built).
    #[serde(default)]
    pub in_place: bool,
    /// Queued packets moved into the new scheduler.
    pub moved_packets: u64,
    /// Of those, packets whose class was gone and that went through the new filters.
    pub reclassified: u64,
    /// Packets lost on the way (refused by the new scheduler or dropped by the old while draining).
    pub dropped_packets: u64,
    /// The file the direction's policy was last read from (SIGHUP reloads it), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The names of the classes kept, for combining several workers' reports; not sent.
    #[serde(skip)]
    pub kept_names: Vec<String>,
    /// How many names `added`, `removed` and `changed` leave out: a reload of thousands of
    /// differences lists the first [`REPORT_NAMES`] of each, so that neither the reply nor its
    /// freeing on the loop grows with the policy.
    #[serde(default, skip_serializing_if = "Omitted::is_none")]
    pub omitted: Omitted,
}

/// Names a [`ReloadReport`]'s lists leave out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Omitted {
    #[serde(default)]
    pub added: u64,
    #[serde(default)]
    pub removed: u64,
    #[serde(default)]
    pub changed: u64,
}

impl Omitted {
    fn is_none(&self) -> bool {
        *self == Omitted::default()
    }
}

/// Names a reload's reply lists at most per list ([`ReloadReport::omitted`] counts the rest).
pub const REPORT_NAMES: usize = 100;

/// The first [`REPORT_NAMES`] of `names`, and how many were left out; the rest is handed to
/// `rest` (to be freed where the caller frees things: the builder thread).
pub fn cap_names(mut names: Vec<String>) -> (Vec<String>, u64) {
    if names.len() <= REPORT_NAMES {
        return (names, 0);
    }
    let left = (names.len() - REPORT_NAMES) as u64;
    names.truncate(REPORT_NAMES);
    names.shrink_to_fit();
    (names, left)
}

/// Names shown per list in [`ReloadReport::summary`].
pub const SUMMARY_NAMES: usize = 5;

impl ReloadReport {
    /// One line for people: what changed, as counts with the first few names of each list
    /// (never the classes kept), then the packets moved or lost, e.g.
    /// `in place: 1 changed (c17); 0 added, 0 removed, 99999 kept unchanged`.
    pub fn summary(&self) -> String {
        fn list(what: &str, names: &[String], omitted: u64) -> String {
            let total = names.len() as u64 + omitted;
            if names.is_empty() {
                return format!("{total} {what}");
            }
            let shown: Vec<&str> = names
                .iter()
                .take(SUMMARY_NAMES)
                .map(String::as_str)
                .collect();
            let more = match total.saturating_sub(shown.len() as u64) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            format!("{total} {what} ({}{more})", shown.join(", "))
        }
        let o = self.omitted;
        let mut s = format!(
            "{}: {}; {}, {}, {} kept unchanged",
            if self.in_place {
                "in place"
            } else {
                "new tree"
            },
            list("changed", &self.changed, o.changed),
            list("added", &self.added, o.added),
            list("removed", &self.removed, o.removed),
            self.kept
        );
        // In place, packets move only when a removed class held some (classified again).
        if !self.in_place || self.reclassified > 0 || self.dropped_packets > 0 {
            s.push_str(&format!(
                "; moved {} queued packets ({} classified again), dropped {}",
                self.moved_packets, self.reclassified, self.dropped_packets
            ));
        }
        s
    }
}

/// What went wrong, for programs to match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Not a JSON object, a field missing or of the wrong type, an unknown field.
    BadRequest,
    /// A `cmd` the server does not answer.
    UnknownRequest,
    /// No `v`, or one outside the server's range (see `hello`).
    UnsupportedVersion,
    /// A request or reply longer than the server's limits.
    TooLarge,
    /// The direction has no policy.
    Unshaped,
    /// The policy failed validation; the running one stays (`diagnostics` says why).
    PolicyRejected,
    /// A file could not be read.
    Io,
    /// The server cannot do this (e.g. read files, for a server without a file system).
    Unsupported,
    /// A newer reload of the same direction came before this one was built; the newer one is
    /// the one installed.
    Superseded,
    /// A kind this build does not know (a newer server's).
    #[serde(other)]
    Other,
}

/// The `error` reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub kind: ErrorKind,
    pub message: String,
    /// `linkshare check`'s rendering of a rejected policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<String>,
}

impl ErrorReply {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ErrorReply {
        ErrorReply {
            kind,
            message: message.into(),
            diagnostics: None,
        }
    }
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = serde_json::to_value(self.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        write!(f, "{} ({kind})", self.message)
    }
}

/// A response, tagged by `reply`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Response {
    Hello(Hello),
    Stat(Box<Snapshot>),
    Policy(PolicyText),
    Reloaded(ReloadReport),
    Error(ErrorReply),
}

impl Response {
    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Response {
        Response::Error(ErrorReply::new(kind, message))
    }

    /// The line that goes on the wire (without its newline). Serialising these types cannot fail
    /// (string keys, no non-finite floats reach it: see [`Snapshot`]); if it ever did, the
    /// client gets an error reply rather than nothing.
    pub fn to_line(&self) -> String {
        serde_json::to_string(&Envelope::new(self)).unwrap_or_else(|e| {
            let r = Response::error(ErrorKind::Other, format!("reply not serialisable: {e}"));
            serde_json::to_string(&Envelope::new(&r)).unwrap_or_else(|_| {
                format!(
                    r#"{{"v":{VERSION},"reply":"error","kind":"other","message":"reply not serialisable"}}"#
                )
            })
        })
    }
}

/// The fields read before the whole request: its version and name.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    v: Option<u64>,
    #[serde(default)]
    cmd: Option<String>,
}

/// A request line, checked step by step so that each failure gets its own kind: not an object
/// (`bad_request`), `hello` (answered at any version), the version, the request's name, then its
/// fields. Total: any text gives a request or an error.
pub fn parse_request(line: &str) -> Result<Request, ErrorReply> {
    let head: Head = serde_json::from_str(line).map_err(|e| {
        ErrorReply::new(
            ErrorKind::BadRequest,
            format!("not a request (one JSON object per line, with `v` and `cmd`): {e}"),
        )
    })?;
    if head.cmd.as_deref() == Some("hello") {
        return Ok(Request::Hello {});
    }
    match head.v {
        None => {
            return Err(ErrorReply::new(
                ErrorKind::UnsupportedVersion,
                format!(
                    "the request has no protocol version `v` (a client older than control protocol \
                     {MIN_VERSION}?): this shaper speaks versions {MIN_VERSION} to {VERSION}; \
                     use a linkshare of the same release, or ask `{{\"cmd\":\"hello\"}}`"
                ),
            ))
        }
        Some(v) if v < u64::from(MIN_VERSION) || v > u64::from(VERSION) => {
            return Err(ErrorReply::new(
                ErrorKind::UnsupportedVersion,
                format!(
                    "control protocol version {v} is not spoken here: this shaper speaks versions \
                     {MIN_VERSION} to {VERSION}"
                ),
            ))
        }
        Some(_) => {}
    }
    let Some(cmd) = head.cmd else {
        return Err(ErrorReply::new(
            ErrorKind::BadRequest,
            "the request has no `cmd`",
        ));
    };
    if !REQUESTS.contains(&cmd.as_str()) {
        let mut shown: String = cmd.chars().take(64).collect();
        if shown.len() < cmd.len() {
            shown.push('…');
        }
        return Err(ErrorReply::new(
            ErrorKind::UnknownRequest,
            format!(
                "unknown request `{shown}`: this shaper answers {}",
                REQUESTS.join(", ")
            ),
        ));
    }
    serde_json::from_str::<Envelope<Request>>(line)
        .map(|e| e.body)
        .map_err(|e| ErrorReply::new(ErrorKind::BadRequest, format!("bad `{cmd}` request: {e}")))
}

/// A response line as the client reads it: the version must be this build's.
pub fn parse_response(line: &str) -> Result<Response, String> {
    let head: Head = serde_json::from_str(line).map_err(|e| format!("not a response: {e}"))?;
    match head.v {
        Some(v) if v == u64::from(VERSION) => {}
        Some(v) => {
            return Err(format!(
                "the shaper answered in control protocol version {v}; this linkshare speaks \
                 {VERSION}: use a linkshare of the shaper's release"
            ))
        }
        None => {
            return Err(
                "the shaper's reply has no protocol version (an older linkshare?): use a \
                 linkshare of the shaper's release"
                    .to_string(),
            )
        }
    }
    serde_json::from_str::<Envelope<Response>>(line)
        .map(|e| e.body)
        .map_err(|e| format!("bad response: {e}"))
}

#[cfg(test)]
#[path = "proto_tests.rs"]
mod tests;
