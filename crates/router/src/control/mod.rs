//! The control protocol, both ends: one JSON object per line each way over a Unix socket
//! (`{"cmd": "stat" | "policy" | "reload", "direction": "forward" | "reverse", …}` answered by
//! `{"ok": true, …}` or `{"ok": false, "error": …}`). The shaper serves it from its event loop
//! through [`server::Server`], which never blocks and bounds every client (see there); this
//! module turns request lines into answers and holds the client side ([`request`]).

pub mod server;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::Context;
use serde_json::{json, Value};

use crate::{sys, Shaper};

pub use server::{ControlStats, Server, MAX_REQUEST};

/// Direction index from a control request's `direction` (default forward).
fn direction_of(req: &Value) -> Result<usize, String> {
    match req.get("direction").and_then(Value::as_str) {
        None | Some("forward") => Ok(0),
        Some("reverse") => Ok(1),
        Some(o) => Err(format!(
            "unknown direction `{o}`: use \"forward\" or \"reverse\""
        )),
    }
}

impl Shaper {
    /// One turn of the control plane: accept, read, answer complete requests, write what the
    /// clients take. Never blocks.
    pub(crate) fn serve_control(&mut self) {
        let Some(mut srv) = self.control.take() else {
            return;
        };
        let now = sys::monotonic_ns();
        let reqs = srv.poll(now);
        self.control_stats = srv.stats;
        for (id, line) in reqs {
            let resp = self.handle_request(&line);
            srv.reply(id, &resp.to_string(), sys::monotonic_ns());
        }
        self.control = Some(srv);
    }

    /// The answer to one request line.
    pub(crate) fn handle_request(&mut self, line: &str) -> Value {
        let req: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return json!({"ok": false, "error": format!("bad request: {e}")}),
        };
        let d = match direction_of(&req) {
            Ok(d) => d,
            Err(e) => return json!({"ok": false, "error": e}),
        };
        match req.get("cmd").and_then(Value::as_str) {
            Some("stat") => json!({"ok": true, "stat": self.stat()}),
            Some("policy") => match &self.dirs[d].policy_text {
                Some((t, o)) => json!({"ok": true, "text": t, "origin": o,
                    "path": self.dirs[d].policy_path.as_ref().map(|p| p.display().to_string())}),
                None => json!({"ok": false, "error": "this direction is unshaped"}),
            },
            Some("reload") => {
                let res = if let Some(t) = req.get("text").and_then(Value::as_str) {
                    let origin = req
                        .get("origin")
                        .and_then(Value::as_str)
                        .unwrap_or("<control>");
                    self.reload(d, t, origin)
                } else if let Some(p) = req.get("path").and_then(Value::as_str) {
                    self.reload_path(d, Path::new(p))
                } else {
                    Err("reload needs `path` or `text`".to_string())
                };
                match res {
                    Ok(r) => json!({"ok": true, "report": r}),
                    Err(d) => json!({"ok": false, "error": "policy rejected", "diagnostics": d}),
                }
            }
            _ => json!({"ok": false, "error": "unknown command"}),
        }
    }
}

/// Send one request to a running shaper and return its response.
pub fn request(control: &Path, req: &Value) -> anyhow::Result<Value> {
    let line = req.to_string();
    if line.len() > MAX_REQUEST {
        anyhow::bail!(
            "request of {} bytes is longer than the control socket takes ({MAX_REQUEST}); \
             reload a policy this large by path (SIGHUP or `reload` of the file given at start)",
            line.len()
        );
    }
    let mut s = UnixStream::connect(control)
        .with_context(|| format!("no shaper listening on {}", control.display()))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    s.set_write_timeout(Some(std::time::Duration::from_secs(5)))?;
    writeln!(s, "{line}")?;
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply)?;
    serde_json::from_str(&reply).context("bad response from shaper")
}
