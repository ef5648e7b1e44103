//! The validation tests of issue 3: the simulator against numbers that can be computed by hand.

use linkshare_sim::model::SimResult;
use linkshare_sim::{run, Scenario};

fn sim(text: &str) -> SimResult {
    let sc = Scenario::parse(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    run(&sc, None).unwrap_or_else(|e| panic!("{e}"))
}

/// Seed 001, footnote 5: a window-limited TCP flow gets `window / RTT`.
#[test]
fn tcp_window_over_rtt() {
    for (window, delay_ms) in [(14_600u64, 10u64), (8 * 1460, 25), (44 * 1460, 5)] {
        let r = sim(&format!(
            r#"
            duration = "10s"
            [link]
            rate = "1gbit"
            delay = "{delay_ms}ms"
            [[flow]]
            name = "t"
            kind = "tcp"
            window = {window}
            "#
        ));
        let f = &r.summary.flows["t"];
        // RTT: propagation both ways + serialisation of one full segment at 1 Gbit/s.
        let rtt = 2.0 * delay_ms as f64 / 1e3 + 1500.0 * 8.0 / 1e9;
        let expect = window as f64 * 8.0 / rtt;
        let err = (f.goodput_bps / expect - 1.0).abs();
        assert!(
            err < 0.03,
            "window {window} delay {delay_ms}ms: {} vs {expect} ({err})",
            f.goodput_bps
        );
        assert_eq!(f.retransmits, 0);
        let rtt_ms = f.rtt_ms.as_ref().unwrap();
        assert!((rtt_ms.min - rtt * 1e3).abs() < 0.01, "{rtt_ms:?}");
    }
}

/// One NewReno flow through 10 Mbit/s: a BDP of buffer keeps the link busy, a tiny buffer shows
/// the sawtooth (repeated window reductions) and retransmissions.
#[test]
fn newreno_utilisation_and_sawtooth() {
    // RTT 20 ms × 10 Mbit/s = 25 000 bytes ≈ 17 packets.
    let scn = |queue: u32| {
        format!(
            r#"
            duration = "20s"
            [link]
            rate = "10mbit"
            delay = "10ms"
            queue = {queue}
            [[flow]]
            name = "t"
            kind = "tcp"
            "#
        )
    };
    let r = sim(&scn(17));
    let u = r.summary.link.utilisation;
    assert!(u >= 0.90, "utilisation {u}");
    let f = &r.summary.flows["t"];
    assert!(
        f.cwnd_reductions >= 5,
        "a loss-driven flow backs off repeatedly: {f:?}"
    );

    let r = sim(&scn(3));
    let f = &r.summary.flows["t"];
    assert!(f.retransmits >= 20, "{f:?}");
    assert!(f.cwnd_reductions >= 20, "sawtooth: {f:?}");
    assert!(f.packets_lost >= 20, "{f:?}");
    // Goodput cannot exceed what the link carried.
    assert!(f.goodput_bps < 10e6);
    // The per-interval rate oscillates: the sawtooth shows in the time series.
    let rates: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| s.name == "t")
        .map(|s| s.rate_bps)
        .collect();
    let max = rates.iter().cloned().fold(0.0, f64::max);
    let min = rates[5..].iter().cloned().fold(f64::MAX, f64::min);
    assert!(max > min * 1.1, "rates {min}..{max}");
}

/// UDP at a constant rate below the link rate: no loss, and each packet's one-way delay is
/// exactly propagation + transmission + the wait behind the other flow's packet.
#[test]
fn udp_cbr_delay_is_exact() {
    for device_buffer in [0u64, 3000, 20_000] {
        let r = sim(&format!(
            r#"
            duration = "5s"
            [link]
            rate = "10mbit"
            delay = "5ms"
            device_buffer = {device_buffer}
            [[flow]]
            name = "a"
            kind = "udp"
            rate = "1mbit"
            size = 1000
            [[flow]]
            name = "b"
            kind = "udp"
            rate = "1mbit"
            size = 1000
            extra_delay = "3ms"
            [[flow]]
            name = "c"
            kind = "udp"
            rate = "1mbit"
            size = 500
            start = "3ms"
            "#
        ));
        // a: 1000 B every 8 ms from t = 0; tx = 0.8 ms; alone on the link.
        // c: 500 B (tx 0.4 ms) every 4 ms from t = 3 ms, alone on the link.
        // b: 1000 B every 8 ms, reaching the router 3 ms after it is sent, i.e. at 3 + 8k ms, at
        // the same instant as a packet of c that was scheduled first: b waits for c's
        // transmission (in the device buffer when it holds a full packet, else in the queue).
        let tx = |b: f64| b * 8.0 / 10e6 * 1e3;
        let a = r.summary.flows["a"].owd_ms.clone().unwrap();
        let b = r.summary.flows["b"].owd_ms.clone().unwrap();
        let c = r.summary.flows["c"].owd_ms.clone().unwrap();
        let close = |x: f64, y: f64| (x - y).abs() < 1e-6;
        assert!(
            close(a.min, 5.0 + tx(1000.0)) && close(a.max, a.min),
            "{a:?}"
        );
        assert!(
            close(c.min, 5.0 + tx(500.0)) && close(c.max, c.min),
            "{c:?}"
        );
        assert!(
            close(b.min, 3.0 + 5.0 + tx(1000.0) + tx(500.0)) && close(b.max, b.min),
            "{b:?}"
        );
        for f in r.summary.flows.values() {
            assert_eq!(f.packets_lost, 0);
        }
        // Sends at 0, 8, …, 4992 ms (a, b) and 3, 7, …, 4999 ms (c).
        assert_eq!(r.summary.flows["a"].packets_sent, 625);
        assert_eq!(r.summary.flows["b"].packets_sent, 625);
        assert_eq!(r.summary.flows["c"].packets_sent, 1250);
    }
}

/// Same scenario, same seed: identical results; another seed: different (Poisson traffic).
#[test]
fn determinism() {
    let text = |seed: u64| {
        format!(
            r#"
            duration = "3s"
            seed = {seed}
            sample = "100ms"
            [link]
            rate = "20mbit"
            delay = "4ms"
            device_buffer = "6k"
            queue = 40
            [[flow]]
            name = "bulk"
            kind = "tcp"
            count = 3
            [[flow]]
            name = "cubic"
            kind = "tcp"
            cc = "cubic"
            delayed_ack = true
            [[flow]]
            name = "noise"
            kind = "udp"
            rate = "6mbit"
            size = "imix"
            pattern = "poisson"
            [[flow]]
            name = "probe"
            kind = "ping"
            interval = "10ms"
            "#
        )
    };
    let a = sim(&text(7));
    let b = sim(&text(7));
    assert_eq!(a.summary, b.summary);
    assert_eq!(a.samples, b.samples);
    assert_eq!(a.rtt_points, b.rtt_points);
    let c = sim(&text(8));
    assert_ne!(a.summary.flows["noise"], c.summary.flows["noise"]);
}

/// A ping's RTT point is placed at the instant its probe was sent (as the lab's pinger places
/// it), so a per-phase figure describes the queue the probe met in that phase.
#[test]
fn ping_points_sit_at_their_send_time() {
    let r = sim(r#"
        duration = "2s"
        [link]
        rate = "10mbit"
        delay = "20ms"
        [[flow]]
        name = "p"
        kind = "ping"
        interval = "100ms"
        start = "500ms"
        "#);
    let pts: Vec<(f64, f64)> = r
        .rtt_points
        .iter()
        .filter(|(_, f, _)| f == "p")
        .map(|(t, _, ms)| (*t, *ms))
        .collect();
    assert!(pts.len() >= 14, "{pts:?}");
    for (k, (t, ms)) in pts.iter().enumerate() {
        // Sent at 0.5 + 0.1 k s; back 40 ms and two transmissions later.
        assert!((t - (0.5 + 0.1 * k as f64)).abs() < 1e-6, "{k}: {t}");
        assert!(*ms > 40.0 && *ms < 41.0, "{k}: {ms}");
    }
}
