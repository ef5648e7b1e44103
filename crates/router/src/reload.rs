//! Policies in and out of the running shaper: parse and build a policy with `check`'s
//! diagnostics, replace a direction's scheduler with the new one adopting the old one's state
//! (`Qdisc::adopt`: kept classes keep queue, counters and tokens or estimators, for every discipline),
//! and SIGHUP's reload of the files given at start. A policy that fails validation changes
//! nothing. See docs/router.md, "Reload".

use std::path::Path;

use crate::control::proto::ReloadReport;
use crate::{default_device_buffer, root_rate, Sched, Shaper};
use linkshare_config::{ConfigError, Policy};
use linkshare_core::Time;

/// Diagnostics of an invalid policy, rendered like `linkshare check`.
pub fn render_config_error(text: &str, e: &ConfigError) -> String {
    // One index of the text for every diagnostic, at most 20 shown per severity.
    let mut s = linkshare_config::render_report(text, &e.diagnostics);
    let n = e.errors().count();
    let w = e.warnings().count();
    s.push_str(&format!(
        "policy is invalid: {n} error{}{}",
        if n == 1 { "" } else { "s" },
        match w {
            0 => String::new(),
            1 => ", 1 warning".to_string(),
            w => format!(", {w} warnings"),
        }
    ));
    s
}

/// Parse and build a policy; `Err` carries the rendered diagnostics.
pub fn load_sched(text: &str, origin: &str) -> Result<(Policy, Sched), String> {
    let p = Policy::parse(text, origin).map_err(|e| render_config_error(text, &e))?;
    let s = if p.kind_name() == "htb" {
        Sched::Htb(Box::new(
            p.build_htb().map_err(|e| render_config_error(text, &e))?,
        ))
    } else {
        Sched::Other(p.build().map_err(|e| render_config_error(text, &e))?)
    };
    Ok((p, s))
}

/// The new scheduler takes over the old one's state through `Qdisc::adopt` (every discipline:
/// HTB and CBQ keep kept classes' queues, counters and tokens or estimators; PRIO and DRR their
/// bands' and classes'; any other pair requeues and continues the counters). What the old one
/// dropped on the way is collected and counted.
pub fn adopt_state(new: &mut Sched, old: &mut Sched, now: Time) -> ReloadReport {
    let r = new.q().adopt(old.q(), now);
    let mut dropped = r.dropped_packets;
    while old.q().take_dropped().is_some() {
        dropped += 1;
    }
    while new.q().take_dropped().is_some() {
        dropped += 1;
    }
    ReloadReport {
        kept: r.kept,
        added: r.added,
        removed: r.removed,
        moved_packets: r.moved_packets,
        reclassified: r.reclassified,
        dropped_packets: dropped,
    }
}

impl Shaper {
    /// Replace direction `d`'s policy with `text`; the new scheduler adopts the old one's state.
    /// On error the running policy is untouched and the error is rendered like `linkshare check`.
    pub fn reload(&mut self, d: usize, text: &str, origin: &str) -> Result<ReloadReport, String> {
        let (policy, mut new) = match load_sched(text, origin) {
            Ok(x) => x,
            Err(e) => {
                self.reloads.failed += 1;
                return Err(e);
            }
        };
        self.reloads.ok += 1;
        let now = self.now();
        let old = self.dirs[d].sched.take();
        let report = match (old, &mut new) {
            (Some(mut o), n) => adopt_state(n, &mut o, now),
            (None, _) => ReloadReport::default(),
        };
        self.dirs[d].link_bps = root_rate(&new);
        self.dirs[d].device_buffer = self.dirs[d]
            .device_buffer_opt
            .unwrap_or(default_device_buffer(self.dirs[d].link_bps));
        self.dirs[d].sched = Some(new);
        self.dirs[d].link = policy.link_layer();
        self.dirs[d].sync_egress();
        self.dirs[d].live.clear();
        self.dirs[d].eligible = None;
        self.dirs[d].policy_text = Some((text.to_string(), origin.to_string()));
        Ok(report)
    }

    pub(crate) fn reload_path(&mut self, d: usize, path: &Path) -> Result<ReloadReport, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let r = self.reload(d, &text, &path.display().to_string())?;
        self.dirs[d].policy_path = Some(path.to_path_buf());
        Ok(r)
    }

    /// SIGHUP: reload every policy file given at start (or last reloaded by path).
    pub(crate) fn on_sighup(&mut self) {
        crate::notify::tell(&crate::notify::reloading_message(crate::sys::monotonic_ns()));
        for d in 0..2 {
            let Some(p) = self.dirs[d].policy_path.clone() else {
                continue;
            };
            match self.reload_path(d, &p) {
                Ok(_) => eprintln!("linkshare: reloaded {}", p.display()),
                Err(e) => eprintln!("{e}\nlinkshare: kept the running policy"),
            }
        }
        crate::notify::tell(&format!(
            "READY=1\nSTATUS=shaping {} -> {}",
            self.names[0], self.names[1]
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_policy_renders_check_diagnostics() {
        let bad = "qdisc = \"htb\"\ndefault = \"x\"\n[[class]]\nname = \"root\"\nrate = \"fast\"\n";
        let Err(d) = load_sched(bad, "bad.toml") else {
            panic!("accepted an invalid policy")
        };
        assert!(d.contains("bad.toml"), "{d}");
        assert!(d.contains("policy is invalid"), "{d}");
    }
}
