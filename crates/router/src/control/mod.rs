//! The control protocol, both ends: typed messages ([`proto`]: `Request`, `Response`, versioned,
//! one JSON object per line each way over a Unix socket; `stat` answers with a [`Snapshot`]). The
//! shaper serves it from its event loop through [`server::Server`], which never blocks and bounds
//! every client (see there); [`dispatch`] turns request lines into responses for any
//! [`Handler`] — the running shaper (single/serve.rs) or an [`Offline`] one (tests, fuzzing).
//! The client side is [`call`]. Wire format and an example session: docs/router.md, "Control
//! protocol".

pub(crate) mod copier;
pub mod dispatch;
pub mod proto;
pub(crate) mod raw;
pub mod select;
pub mod server;
pub mod snapshot;
pub(crate) mod stat;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::Context;

pub use dispatch::{answer, respond, Handler, Offline};
pub use proto::{
    ClassChange, Direction, Envelope, ErrorKind, ErrorReply, Hello, PolicySource, PolicyText,
    ReloadReport, Request, Response,
};
pub use select::{Select, TopBy};
pub use server::{ControlStats, Server, MAX_REPLY, MAX_REQUEST};
pub use snapshot::Snapshot;

/// How long a client waits for a reply.
const REPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a client waits for a reload's reply: a 1,000,000-subscriber policy is parsed,
/// checked and built in under a minute on a quiet machine.
const RELOAD_REPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Send one request to a running shaper and return its response (an `error` response is `Ok`:
/// the caller decides; a socket, size or version problem is `Err`).
pub fn call(control: &Path, req: &Request) -> anyhow::Result<Response> {
    let line = serde_json::to_string(&Envelope::new(req)).context("cannot encode the request")?;
    if line.len() > MAX_REQUEST {
        anyhow::bail!(
            "request of {} bytes is longer than the control socket takes ({MAX_REQUEST}); \
             reload a policy this large by path (SIGHUP or `reload` of the file given at start)",
            line.len()
        );
    }
    let mut s = UnixStream::connect(control)
        .with_context(|| format!("no shaper listening on {}", control.display()))?;
    // A reload is answered once built, off the loop: a large policy on a busy machine takes
    // longer than any other request.
    let wait = match req {
        Request::Reload { .. } => RELOAD_REPLY_WAIT,
        _ => REPLY_WAIT,
    };
    s.set_read_timeout(Some(wait))?;
    s.set_write_timeout(Some(REPLY_WAIT))?;
    writeln!(s, "{line}")?;
    let mut reply = String::new();
    // The reply is one line of at most MAX_REPLY bytes (plus its newline and slack).
    BufReader::new(s.take(MAX_REPLY as u64 + 1024))
        .read_line(&mut reply)
        .with_context(|| {
            format!(
                "no reply from the shaper on {} within {} s",
                control.display(),
                wait.as_secs()
            )
        })?;
    if reply.is_empty() {
        anyhow::bail!("the shaper closed the connection without a reply");
    }
    proto::parse_response(reply.trim_end()).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `call`, for a reply other than `error` (which becomes the `Err`, kind and message).
pub fn call_ok(control: &Path, req: &Request) -> anyhow::Result<Response> {
    match call(control, req)? {
        Response::Error(e) => Err(anyhow::Error::new(ShaperError(e))),
        r => Ok(r),
    }
}

/// The running shaper's snapshot (`stat`), every class: fetched page by page
/// ([`select::MAX_PAGE`] classes per direction each) from one snapshot.
pub fn stat(control: &Path) -> anyhow::Result<Snapshot> {
    stat_select(control, &Select::default())
}

/// The classes `select` picks from the running shaper's snapshot; without a `limit` or `top`,
/// every page of one snapshot (its `seq`), appended.
pub fn stat_select(control: &Path, select: &Select) -> anyhow::Result<Snapshot> {
    let fullest = |s: &Snapshot| s.directions.iter().map(|d| d.classes.len()).max();
    let mut out = stat_page(control, select.clone())?;
    if select.limit.is_some() || select.top.is_some() {
        return Ok(out);
    }
    let mut offset = select.offset;
    let mut got = fullest(&out).unwrap_or(0);
    // A page is full (MAX_PAGE in some direction) until the last one.
    while got >= select::MAX_PAGE {
        offset += got;
        let next = stat_page(
            control,
            Select {
                offset,
                seq: Some(out.seq),
                ..select.clone()
            },
        )?;
        got = fullest(&next).unwrap_or(0);
        for (a, b) in out.directions.iter_mut().zip(next.directions) {
            a.classes.extend(b.classes);
        }
    }
    Ok(out)
}

fn stat_page(control: &Path, select: Select) -> anyhow::Result<Snapshot> {
    match call_ok(control, &Request::Stat { select })? {
        Response::Stat(s) => Ok(*s),
        r => anyhow::bail!("the shaper answered `stat` with {}", reply_name(&r)),
    }
}

/// An `error` reply as an error value (`downcast_ref::<ShaperError>()` reads its kind).
#[derive(Debug)]
pub struct ShaperError(pub ErrorReply);

impl std::fmt::Display for ShaperError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the shaper refused: {}", self.0)
    }
}

impl std::error::Error for ShaperError {}

/// The `reply` tag of a response, for messages.
pub fn reply_name(r: &Response) -> &'static str {
    match r {
        Response::Hello(_) => "hello",
        Response::Stat(_) => "stat",
        Response::Policy(_) => "policy",
        Response::Reloaded(_) => "reloaded",
        Response::Error(_) => "error",
    }
}
