//! `linkshare web DIR` (issue 15 §3): the dashboard of `run --web` replays a simulator run's
//! output directory. A short simulation is written, replayed at 20 samples a second, and read
//! back over HTTP: the page carries the run's classes, `/events` streams snapshots whose live
//! rates move, and a directory that is not a run's output is refused with exit code 1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

/// A child killed when the test ends, pass or fail.
struct Kill(std::process::Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap_or_default();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn a_sim_run_replays_on_the_dashboard() {
    let dir = common::scratch("web-replay");
    let sc = common::write(
        &dir,
        "two.toml",
        "name = \"two\"\nduration = \"3s\"\nsample = \"100ms\"\n[link]\nrate = \"10mbit\"\ndelay = \"5ms\"\n\
         [policy]\nqdisc = \"htb\"\ndefault = \"b\"\n\
         [[policy.class]]\nname = \"root\"\nrate = \"10mbit\"\n\
         [[policy.class]]\nname = \"a\"\nparent = \"root\"\nrate = \"7mbit\"\nceil = \"10mbit\"\n\
         [[policy.class]]\nname = \"b\"\nparent = \"root\"\nrate = \"3mbit\"\nceil = \"10mbit\"\n\
         [[policy.filter]]\nclass = \"a\"\ndscp = \"af11\"\n\
         [[flow]]\nname = \"fa\"\nkind = \"udp\"\ndscp = \"af11\"\nrate = \"12mbit\"\nstart = \"1s\"\nstop = \"3s\"\n\
         [[flow]]\nname = \"fb\"\nkind = \"udp\"\nrate = \"12mbit\"\nstart = \"0s\"\nstop = \"3s\"\n",
    );
    let out = dir.join("out");
    let (code, _, err) = common::linkshare(&[
        "sim",
        sc.to_str().unwrap_or_default(),
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    assert_eq!(code, 0, "{err}");

    let child = Command::new(common::BIN)
        .args([
            "web",
            out.to_str().unwrap_or_default(),
            "--listen",
            "127.0.0.1:0",
            "--speed",
            "20",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut child = Kill(child);
    let mut line = String::new();
    let stderr = child.0.stderr.take().expect("stderr");
    BufReader::new(stderr)
        .read_line(&mut line)
        .unwrap_or_default();
    let addr = line
        .trim()
        .strip_prefix("linkshare: dashboard replay at http://")
        .and_then(|s| s.strip_suffix('/'))
        .unwrap_or_else(|| panic!("no address announced: {line:?}"))
        .to_string();

    let page = get(&addr, "/");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    for name in ["\"root\"", "\"a\"", "\"b\""] {
        assert!(page.contains(name), "{name} not in the page");
    }

    // The event stream: a few snapshots, and class a's live rate moves (idle first, then busy).
    let mut s = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("{e}"));
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap_or_default();
    write!(s, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n").unwrap_or_default();
    let mut rates = Vec::new();
    for l in BufReader::new(s).lines() {
        let Ok(l) = l else { break };
        let Some(json) = l.strip_prefix("data: ") else {
            continue;
        };
        let v: serde_json::Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
        let a = v["directions"][0]["classes"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "a").cloned())
            .unwrap_or_else(|| panic!("no class a: {v}"));
        assert_eq!(a["parent"], "root", "{a}");
        assert_eq!(a["rate_bps"], 7_000_000, "{a}");
        rates.push(a["live_rate_bps"].as_f64().unwrap_or(-1.0));
        if rates.len() == 40 {
            break;
        }
    }
    let lo = rates.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = rates.iter().cloned().fold(0.0, f64::max);
    assert!(
        rates.len() == 40 && hi > 5e6 && lo < 1e6,
        "class a's rates: {rates:?}"
    );

    // Not an output directory.
    let (code, _, err) = common::linkshare(&["web", dir.to_str().unwrap_or_default()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("summary.json"), "{err}");
}
