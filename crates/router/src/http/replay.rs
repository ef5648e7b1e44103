//! The dashboard replaying a finished run (`linkshare web DIR`): the output directory of
//! `linkshare sim` or `linkshare lab` (its `summary.json` and `timeseries.csv`, docs/outputs.md)
//! becomes a sequence of [`Snapshot`]s, one per sample, which the very page of `run --web`
//! (web.rs, dashboard.html) shows as if the link were live — a what-if run and the real shaper
//! look the same on screen.
//!
//! Principles: the files are read once and checked with errors that name the file and line;
//! nothing here knows the page (it only renders snapshots); serving uses the same non-blocking
//! HTTP server as the shaper (mod.rs) in a small epoll loop of its own, one sample per second
//! times `--speed`, starting over at the end.
//!
//! What maps where: each class of `summary.json` keeps its name, parent, assigned rate (`rate`)
//! and ceil; per sample, `timeseries.csv`'s `rate_bps` is the class's live rate, `bytes` and
//! `drops` accumulate into its sent bytes and drops, `backlog_bytes` is its backlog.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::{bail, Context};
use serde_json::Value;

use super::{web, Http};
use crate::control::snapshot::{ClassSnapshot, DirectionSnapshot, Snapshot};
use crate::sys;

/// The snapshots of a run's output directory, in time order.
pub fn frames(dir: &Path) -> anyhow::Result<Vec<Snapshot>> {
    let sp = dir.join("summary.json");
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(&sp).with_context(|| format!("cannot read {}", sp.display()))?,
    )
    .with_context(|| format!("{}: not a linkshare summary", sp.display()))?;
    let tp = dir.join("timeseries.csv");
    let csv =
        std::fs::read_to_string(&tp).with_context(|| format!("cannot read {}", tp.display()))?;
    frames_from(&summary, &csv, &tp.display().to_string())
}

/// [`frames`] from the two files' contents (`origin` names the CSV in errors).
pub fn frames_from(summary: &Value, csv: &str, origin: &str) -> anyhow::Result<Vec<Snapshot>> {
    let Some(classes) = summary.get("classes").and_then(Value::as_object) else {
        bail!("summary.json has no `classes` object: not a linkshare sim/lab output directory");
    };
    let names: Vec<&String> = classes.keys().collect();
    let id_of = |n: &str| names.iter().position(|x| x.as_str() == n).map(|i| i as u32);
    let base: Vec<ClassSnapshot> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let c = &classes[n.as_str()];
            let f = |k: &str| c.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            let parent = c.get("parent").and_then(Value::as_str).map(str::to_string);
            ClassSnapshot {
                name: n.to_string(),
                id: i as u32,
                parent_id: parent.as_deref().and_then(id_of),
                parent,
                rate_bps: f("assigned_rate_bps") as u64,
                ceil_bps: f("ceil_bps") as u64,
                mode: "replay".into(),
                ..ClassSnapshot::default()
            }
        })
        .collect();
    let leaves: Vec<bool> = base
        .iter()
        .map(|c| !base.iter().any(|x| x.parent_id == Some(c.id)))
        .collect();

    // time → class → (bytes, rate, backlog, drops), in file order of times.
    let mut samples: BTreeMap<u64, Vec<(u32, [f64; 4])>> = BTreeMap::new();
    let mut lines = csv.lines().enumerate();
    let header = lines.next().map(|(_, l)| l).unwrap_or_default();
    let cols: Vec<&str> = header.split(',').collect();
    let col = |name: &str| {
        cols.iter()
            .position(|c| *c == name)
            .with_context(|| format!("{origin}:1: no `{name}` column"))
    };
    let (t, kind, name) = (col("time_s")?, col("kind")?, col("name")?);
    let (bytes, rate, backlog, drops) = (
        col("bytes")?,
        col("rate_bps")?,
        col("backlog_bytes")?,
        col("drops")?,
    );
    for (i, line) in lines {
        let f: Vec<&str> = line.split(',').collect();
        if f.get(kind) != Some(&"class") {
            continue;
        }
        let num = |k: usize| -> anyhow::Result<f64> {
            f.get(k)
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite())
                .with_context(|| format!("{origin}:{}: column {} is not a number", i + 1, k + 1))
        };
        let Some(id) = f.get(name).and_then(|n| id_of(n)) else {
            continue;
        };
        let at = (num(t)?.max(0.0) * 1e6).round() as u64;
        let v = [num(bytes)?, num(rate)?, num(backlog)?, num(drops)?];
        samples.entry(at).or_default().push((id, v));
    }
    if samples.is_empty() {
        bail!("{origin}: no class samples to replay");
    }
    let mut sent = vec![0u64; base.len()];
    let mut dropped = vec![0u64; base.len()];
    let scenario = summary
        .get("scenario")
        .and_then(Value::as_str)
        .unwrap_or("run");
    let kind_name = summary
        .get("qdisc")
        .and_then(|q| q.get("kind").or(Some(q)))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(samples
        .into_iter()
        .map(|(at_us, rows)| {
            let mut classes = base.clone();
            for (id, [b, r, bl, d]) in rows {
                let k = id as usize;
                sent[k] = sent[k].saturating_add(b as u64);
                dropped[k] = dropped[k].saturating_add(d as u64);
                let c = &mut classes[k];
                c.live_rate_bps = r;
                c.backlog_bytes = bl as u64;
            }
            for (k, c) in classes.iter_mut().enumerate() {
                c.sent_bytes = sent[k];
                c.drops = dropped[k];
                c.leaf = leaves[k];
            }
            Snapshot {
                uptime_s: at_us as f64 / 1e6,
                policy: Some(format!("replay of {scenario}")),
                kind: kind_name.clone(),
                directions: vec![DirectionSnapshot {
                    from: "replay".into(),
                    to: scenario.to_string(),
                    shaped: true,
                    kind: kind_name.clone(),
                    classes,
                    ..DirectionSnapshot::default()
                }],
                ..Snapshot::default()
            }
        })
        .collect())
}

/// Serve the dashboard on `addr`, replaying `frames` at `speed` samples per second (looping),
/// until the process is stopped.
pub fn serve(frames: &[Snapshot], addr: SocketAddr, speed: f64) -> anyhow::Result<()> {
    const T_LISTEN: u64 = 1;
    const T_CLIENT: u64 = 2;
    if frames.is_empty() {
        bail!("nothing to replay");
    }
    let step_ns = (web::EVENT_NS as f64 / speed.clamp(0.01, 1000.0)) as u64;
    let mut h = Http::bind(addr)?;
    let ep = sys::epoll_create()?;
    sys::epoll_add(ep.as_raw_fd(), h.listen_fd(), T_LISTEN)?;
    h.attach(ep.as_raw_fd(), T_CLIENT);
    super::announce(&h, "dashboard replay", "/");
    let start = sys::monotonic_ns();
    let mut ready = Vec::new();
    loop {
        sys::epoll_wait(ep.as_raw_fd(), &mut ready, 50)?;
        let now = sys::monotonic_ns();
        let i = (now.saturating_sub(start) / step_ns.max(1)) as usize % frames.len();
        let before = h.streams();
        h.serve(now, &mut |req| {
            web::route(req, &mut || std::sync::Arc::new(frames[i].clone()))
        });
        if h.streams() > before
            || (h.streams() > 0 && now.saturating_sub(h.last_event_ns) >= step_ns)
        {
            h.broadcast(&web::event(&frames[i]), now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUMMARY: &str = r#"{"scenario":"two","qdisc":{"kind":"htb"},"classes":{
        "root":{"parent":null,"assigned_rate_bps":10000000.0,"ceil_bps":10000000.0},
        "a":{"parent":"root","assigned_rate_bps":7000000.0,"ceil_bps":10000000.0},
        "b":{"parent":"root","assigned_rate_bps":3000000.0,"ceil_bps":10000000.0}}}"#;
    const CSV: &str = "time_s,kind,name,bytes,rate_bps,backlog_bytes,drops\n\
        0.5,class,a,100,1600,10,0\n0.5,class,b,50,800,0,1\n0.5,flow,x,1,1,1,1\n\
        1.0,class,a,200,3200,20,2\n1.0,class,b,50,800,0,0\n";

    #[test]
    fn a_run_becomes_one_snapshot_per_sample() {
        let s: Value = serde_json::from_str(SUMMARY).unwrap_or_default();
        let f = frames_from(&s, CSV, "t.csv").unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(f.len(), 2);
        let d = &f[1].directions[0];
        let a = d.classes.iter().find(|c| c.name == "a").expect("a");
        assert_eq!(
            (a.parent.as_deref(), a.rate_bps, a.ceil_bps),
            (Some("root"), 7_000_000, 10_000_000)
        );
        assert_eq!(
            (a.live_rate_bps, a.sent_bytes, a.drops, a.backlog_bytes),
            (3200.0, 300, 2, 20)
        );
        let root = d.classes.iter().find(|c| c.name == "root").expect("root");
        assert!(!root.leaf && a.leaf);
        assert_eq!(a.parent_id, Some(root.id));
        assert_eq!((f[0].uptime_s, f[1].uptime_s), (0.5, 1.0));
        assert_eq!(d.kind.as_deref(), Some("htb"));
    }

    #[test]
    fn bad_files_are_named() {
        let s: Value = serde_json::from_str(SUMMARY).unwrap_or_default();
        let e = frames_from(
            &s,
            "time_s,kind,name,bytes,rate_bps,backlog_bytes,drops\n0.5,class,a,x,1,1,1\n",
            "t.csv",
        )
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default();
        assert_eq!(e, "t.csv:2: column 4 is not a number");
        let e = frames_from(&s, "time,kind\n", "t.csv")
            .err()
            .map(|e| format!("{e:#}"));
        assert_eq!(e.as_deref(), Some("t.csv:1: no `time_s` column"));
        let e = frames_from(&Value::Null, CSV, "t.csv")
            .err()
            .map(|e| format!("{e:#}"));
        assert!(e.unwrap_or_default().contains("no `classes` object"));
    }
}
