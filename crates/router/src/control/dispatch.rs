//! Request lines to responses, for any shaper-like state: [`answer`] parses a line
//! ([`proto::parse_request`]) and calls the matching method of a [`Handler`]. The running shaper is
//! one handler (`single/serve.rs`); [`Offline`] is another — a shaper's policies and schedulers
//! without interfaces, files or clock — which the tests and the `control` fuzz target drive
//! through the same code path as the socket.

use linkshare_core::Time;

use super::proto::{
    self, Direction, ErrorKind, ErrorReply, Hello, PolicySource, PolicyText, ReloadReport, Request,
    Response,
};
use super::snapshot::{DirectionSnapshot, Snapshot};
use super::stat;
use crate::{adopt_state, load_sched, Sched};

/// What a control request can ask of a shaper.
pub trait Handler {
    /// The `stat` reply.
    fn snapshot(&mut self) -> Snapshot;
    /// The policy direction `d` runs.
    fn policy(&self, d: Direction) -> Result<PolicyText, ErrorReply>;
    /// Replace direction `d`'s policy; on error the running one stays.
    fn reload(&mut self, d: Direction, src: PolicySource) -> Result<ReloadReport, ErrorReply>;
}

/// The response to one request line. Total: every line gets a response.
pub fn answer(h: &mut dyn Handler, line: &str) -> Response {
    match proto::parse_request(line) {
        Err(e) => Response::Error(e),
        Ok(req) => respond(h, req),
    }
}

/// The response to one parsed request.
pub fn respond(h: &mut dyn Handler, req: Request) -> Response {
    match req {
        Request::Hello {} => Response::Hello(Hello::current()),
        Request::Stat { select } => Response::Stat(Box::new(select.apply(&h.snapshot()))),
        Request::Policy { direction } => match h.policy(direction) {
            Ok(p) => Response::Policy(p),
            Err(e) => Response::Error(e),
        },
        Request::Reload { direction, source } => match h.reload(direction, source) {
            Ok(r) => Response::Reloaded(r),
            Err(e) => Response::Error(e),
        },
    }
}

/// A rejected policy: `check`'s diagnostics in the reply.
pub(crate) fn rejected(diagnostics: String) -> ErrorReply {
    ErrorReply {
        kind: ErrorKind::PolicyRejected,
        message: "policy rejected".to_string(),
        diagnostics: Some(diagnostics),
    }
}

pub(crate) fn unshaped(d: Direction) -> ErrorReply {
    let which = match d {
        Direction::Forward => "forward",
        Direction::Reverse => "reverse",
    };
    ErrorReply::new(
        ErrorKind::Unshaped,
        format!("the {which} direction is unshaped"),
    )
}

/// One direction of an [`Offline`] shaper.
struct OfflineDir {
    sched: Sched,
    text: String,
    origin: String,
}

/// A shaper without interfaces: two directions' schedulers built from policy text, answering
/// `stat`, `policy` and `reload` by text like the real one (file reloads are refused: it has no
/// file system). Its clock advances one millisecond per reload.
#[derive(Default)]
pub struct Offline {
    dirs: [Option<OfflineDir>; 2],
    now: Time,
}

impl Offline {
    /// An offline shaper running `forward` (policy text) on its forward direction.
    pub fn new(forward: &str, origin: &str) -> Result<Offline, String> {
        let (_, sched) = load_sched(forward, origin)?;
        let mut o = Offline::default();
        o.dirs[0] = Some(OfflineDir {
            sched,
            text: forward.to_string(),
            origin: origin.to_string(),
        });
        Ok(o)
    }
}

impl Handler for Offline {
    fn snapshot(&mut self) -> Snapshot {
        let names = ["in", "out"];
        let directions = (0..2)
            .map(|i| {
                let mut d = DirectionSnapshot {
                    from: names[i].to_string(),
                    to: names[1 - i].to_string(),
                    ..DirectionSnapshot::default()
                };
                if let Some(o) = &self.dirs[i] {
                    stat::fill_sched(&mut d, &o.sched);
                }
                d
            })
            .collect::<Vec<_>>();
        Snapshot {
            kind: directions[0].kind.clone(),
            directions,
            ..Snapshot::default()
        }
    }

    fn policy(&self, d: Direction) -> Result<PolicyText, ErrorReply> {
        let o = self.dirs[d.index()].as_ref().ok_or_else(|| unshaped(d))?;
        Ok(PolicyText {
            direction: d,
            text: o.text.clone(),
            origin: o.origin.clone(),
            path: None,
            changes: Vec::new(),
        })
    }

    fn reload(&mut self, d: Direction, src: PolicySource) -> Result<ReloadReport, ErrorReply> {
        let (text, origin) = match src {
            PolicySource::Text { text, origin } => (text, origin),
            PolicySource::File { .. } => {
                return Err(ErrorReply::new(
                    ErrorKind::Unsupported,
                    "this shaper has no file system: reload by text",
                ))
            }
            PolicySource::Change(_) => {
                return Err(ErrorReply::new(
                    ErrorKind::Unsupported,
                    "this shaper does not change classes by name: reload by text",
                ))
            }
        };
        let (_, mut new) = load_sched(&text, &origin).map_err(rejected)?;
        self.now = Time(self.now.0.saturating_add(1_000_000));
        let report = match self.dirs[d.index()].take() {
            Some(mut old) => adopt_state(&mut new, &mut old.sched, self.now),
            None => ReloadReport::default(),
        };
        self.dirs[d.index()] = Some(OfflineDir {
            sched: new,
            text,
            origin,
        });
        Ok(report)
    }
}
