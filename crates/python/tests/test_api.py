"""linkshare.simulate / check / Result: types, errors, determinism."""

import pandas as pd
import pytest

import linkshare


def test_simulate_returns_typed_tables(small):
    r = linkshare.simulate(small)
    assert isinstance(r.summary, dict) and r.summary["scenario"] == "small"
    assert set(r.classes.index) == {"root", "bulk", "rt"}
    assert set(r.flows.index) == {"t", "u", "p"}
    assert r.flows.loc["u", "class"] == "rt"
    # Every figure of the summary is a column, with the summary's values.
    t = r.summary["flows"]["t"]
    assert r.flows.loc["t", "rate_bps"] == pytest.approx(t["goodput_bps"])
    assert r.flows.loc["t", "rtt_p99_ms"] == pytest.approx(t["rtt_ms"]["p99"])
    assert r.flows.loc["t", "retransmits"] == t["retransmits"]
    assert r.flows.loc["u", "owd_p50_ms"] == pytest.approx(r.summary["flows"]["u"]["owd_ms"]["p50"])
    assert pd.isna(r.flows.loc["u", "retransmits"])
    assert "ceil_bps" in r.classes.columns and "rtt_p99_ms" not in r.classes.columns
    ts = r.timeseries
    assert list(ts.columns) == ["time_s", "kind", "name", "bytes", "rate_bps", "backlog_bytes", "drops", "rtt_ms"]
    assert ts["time_s"].dtype == "float64" and ts["bytes"].dtype == "uint64"
    assert set(ts["name"].cat.categories) >= {"t", "u", "p", "bulk"}
    assert len(ts) == 50 * (3 + 3)  # 50 samples of 3 classes and 3 flows
    assert (ts[ts["name"] == "t"]["rtt_ms"].dropna() > 10).all()  # 2 × 5 ms propagation at least
    assert len(r.rtt) > 0 and set(r.rtt["flow"].unique()) <= {"t", "p"}


def test_path_dict_and_text_are_the_same_scenario(small, tmp_path):
    p = tmp_path / "small.toml"
    p.write_text(small)
    a = linkshare.simulate(p).summary
    b = linkshare.simulate(str(p)).summary
    c = linkshare.simulate(small).summary
    assert a == b
    assert a["flows"] == c["flows"] and a["classes"] == c["classes"]
    d = linkshare.simulate(
        {
            "duration": "1s",
            "link": {"rate": "10mbit"},
            "policy": {"qdisc": {"type": "pfifo", "limit": 64}},
            "flow": [{"name": "u", "kind": "udp", "rate": "12mbit", "size": 1000}],
        }
    )
    assert d.flows.loc["u", "drops"] > 0


def test_seeds_and_overrides(small):
    a = linkshare.simulate(small, seed=2)
    b = linkshare.simulate(small, seed=2)
    c = linkshare.simulate(small, seed=3)
    assert a.summary == b.summary
    pd.testing.assert_frame_equal(a.timeseries, b.timeseries)
    assert a.summary["seed"] == 2
    # A TCP-only figure changes with the seed (start offsets and ACK jitter).
    assert a.summary["flows"]["t"] != c.summary["flows"]["t"]
    o = linkshare.simulate(small, overrides={"flow.u.size": 1000, "policy.class.rt.rate": "2mbit"})
    assert o.summary["classes"]["rt"]["assigned_rate_bps"] == 2e6
    assert o.flows.loc["u", "packets"] < a.flows.loc["u", "packets"]


def test_errors_carry_diagnostics(small, tmp_path):
    with pytest.raises(linkshare.ScenarioError) as e:
        linkshare.simulate(small.replace('rate = "3mbit"', 'rate = "3 parsecs"'))
    d = e.value.diagnostics[0]
    assert isinstance(d, linkshare.Diagnostic)
    assert d.line > 0 and d.col > 0 and d.file == "<string>"
    assert "rate" in d.message
    with pytest.raises(linkshare.ScenarioError) as e:
        linkshare.simulate(small, overrides={"flow.nope.size": 64})
    assert "no [[flow]] is named `nope`" in str(e.value)
    assert e.value.diagnostics and e.value.diagnostics[0].help
    with pytest.raises(linkshare.ScenarioError):
        linkshare.simulate(tmp_path / "missing.toml")
    with pytest.raises(TypeError):
        linkshare.simulate(small, overrides={"flow.u.size": object()})
    with pytest.raises(TypeError):
        linkshare.simulate(42)


def test_check_policy(root):
    assert [d for d in linkshare.check(root / "policies" / "example.toml") if d.severity == "error"] == []
    ds = linkshare.check('qdisc = "htb"\ndefault = "a"\n[[class]]\nname = "a"\nrate = "fast"\n')
    assert ds and ds[0].severity == "error" and ds[0].line == 5
    assert ds[0].help
    assert "5:" in str(ds[0])


def test_report_and_arrow(small, tmp_path):
    r = linkshare.simulate(small)
    files = r.report(tmp_path / "out")
    assert any(f.endswith("report.html") for f in files)
    assert (tmp_path / "out" / "summary.json").exists()
    pa = pytest.importorskip("pyarrow")
    t = r.arrow("timeseries")
    assert isinstance(t, pa.Table) and t.num_rows == len(r.timeseries)
    with pytest.raises(ValueError):
        r.arrow("nope")


def test_summarize_gives_a_ci_over_seeds(small):
    df = linkshare.sweep(small, {"flow.u.rate": ["1mbit", "3mbit"]}, seeds=4)
    s = linkshare.summarize(df, ["rate_bps"])
    t = s[(s["kind"] == "flow") & (s["name"] == "t")]
    assert len(t) == 2 and (t["rate_bps_n"] == 4).all()
    assert (t["rate_bps_ci"] > 0).all()
    mean = df[(df["name"] == "t") & (df["flow.u.rate"] == "1mbit")]["rate_bps"].mean()
    assert t.iloc[0]["rate_bps"] == pytest.approx(mean)
