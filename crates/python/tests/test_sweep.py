"""linkshare.sweep: grids, the file's own [sweep], executors, the campaign cache, failures."""

import concurrent.futures as cf

import pandas as pd
import pytest

import linkshare


def test_grid_rows_and_typed_axes(small):
    df = linkshare.sweep(small, {"flow.u.size": [200, 1000], "policy.class.rt.rate": ["2mbit", "4mbit"]})
    assert df.attrs["ran"] == 4 and df.attrs["cached"] == 0
    assert df["flow.u.size"].dtype == "int64"
    assert list(df["point"].unique()) == [1, 2, 3, 4]
    # One row per class and flow of each point.
    assert len(df) == 4 * 6
    first = df[(df["point"] == 2) & (df["name"] == "rt")].iloc[0]
    assert first["flow.u.size"] == 200 and first["policy.class.rt.rate"] == "4mbit"
    assert first["assigned_rate_bps"] == 4e6
    # The point equals simulate() with the same overrides.
    r = linkshare.simulate(small, overrides={"flow.u.size": 200, "policy.class.rt.rate": "4mbit"})
    row = df[(df["point"] == 2) & (df["name"] == "t")].iloc[0]
    assert row["rate_bps"] == pytest.approx(r.flows.loc["t", "rate_bps"])
    assert row["rtt_p99_ms"] == pytest.approx(r.flows.loc["t", "rtt_p99_ms"])


def test_file_sweep_seed002(root):
    # The file's own 144 points, each 1 s instead of 5 (overrides apply to every point).
    df = linkshare.sweep(root / "scenarios" / "seed002" / "table4.toml", overrides={"duration": "1s"}, progress=False)
    assert df.attrs["ran"] == 144
    assert df.attrs["axes"] == ["clock", "burst", "size", "offered"]
    assert df["size"].dtype == "int64"  # typed: the axis has no labels of its own
    assert set(df["clock"]) == {"100Hz", "1000Hz", "exact"}  # chosen labels stay labels
    c = df[(df["kind"] == "class") & (df["clock"] == "exact") & (df["size"] == 1500) & (df["offered"] == "50")]
    # The exact clock holds the class's 30 Mbit/s at every size (within 2 %: in a 1 s run the
    # class's initial burst weighs 5 times more than in the file's 5 s).
    assert ((c["rate_bps"] / 30e6 - 1).abs() < 0.02).all()
    hz100 = df[(df["kind"] == "class") & (df["clock"] == "100Hz") & (df["burst"] == "default") & (df["offered"] == "50")]
    assert (hz100["rate_bps"] < 0.9 * 30e6).all()


def test_executor_and_threads_agree(small):
    grid = {"flow.u.size": [100, 500, 1000]}
    local = linkshare.sweep(small, grid, seeds=2)
    with cf.ThreadPoolExecutor(2) as ex:
        other = linkshare.sweep(small, grid, seeds=2, executor=ex, chunksize=2)
    pd.testing.assert_frame_equal(local, other)
    with cf.ProcessPoolExecutor(2) as ex:
        procs = linkshare.sweep(small, grid, seeds=2, executor=ex)
    pd.testing.assert_frame_equal(local, procs)


def test_campaign_runs_only_missing_points(small, tmp_path):
    grid = {"flow.u.size": [200, 1000]}
    a = linkshare.sweep(small, grid, seeds=2, campaign=tmp_path)
    assert (a.attrs["ran"], a.attrs["cached"]) == (4, 0)
    b = linkshare.sweep(small, grid, seeds=2, campaign=tmp_path)
    assert (b.attrs["ran"], b.attrs["cached"]) == (0, 4)
    pd.testing.assert_frame_equal(a, b)
    c = linkshare.sweep(small, {"flow.u.size": [200, 1000, 1400]}, seeds=3, campaign=tmp_path)
    assert (c.attrs["ran"], c.attrs["cached"]) == (5, 4)
    fresh = linkshare.sweep(small, {"flow.u.size": [200, 1000, 1400]}, seeds=3)
    pd.testing.assert_frame_equal(c, fresh)
    # Another scenario text is another campaign key.
    d = linkshare.sweep(small.replace('"3mbit"', '"2mbit"'), grid, seeds=2, campaign=tmp_path)
    assert d.attrs["ran"] == 4


def test_a_failing_point_keeps_the_others(small, tmp_path):
    grid = {"flow.u.size": [500, 99999, 1000]}
    with pytest.raises(linkshare.SweepError) as e:
        linkshare.sweep(small, grid, campaign=tmp_path)
    err = e.value
    assert len(err.failures) == 1
    f = err.failures[0]
    assert f["params"] == {"flow.u.size": 99999} and f["point"] == 2
    assert "size" in f["message"]
    assert sorted(err.frame["point"].unique()) == [1, 3]
    with pytest.warns(UserWarning, match="1 of 3 runs failed"):
        df = linkshare.sweep(small, grid, errors="warn", campaign=tmp_path)
    assert df.attrs["cached"] == 2 and len(df.attrs["failures"]) == 1


def test_progress_callback(small):
    seen = []
    linkshare.sweep(small, {"flow.u.size": [200, 400, 600]}, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (3, 3) and len(seen) == 3


def test_bad_arguments(small):
    with pytest.raises(linkshare.ScenarioError, match="no \\[sweep\\]"):
        linkshare.sweep(small)
    with pytest.raises(TypeError):
        linkshare.sweep(small, {"flow.u.size": 64})
    with pytest.raises(ValueError):
        linkshare.sweep(small, {"flow.u.size": [64]}, seeds=0)
    with pytest.raises(TypeError):
        linkshare.sweep(small, {"flow.u.size": [64]}, executor=3)


def test_guided_chunks_cover_every_point_and_shrink():
    from linkshare._sweep import _guided

    for n, workers in [(1, 2), (7, 2), (1000, 2), (1000, 8), (129, 1)]:
        items = list(range(n))
        chunks = _guided(items, workers)
        assert [x for c in chunks for x in c] == items  # every point once, in order
        sizes = [len(c) for c in chunks]
        assert all(1 <= s <= 64 for s in sizes)
        assert sizes == sorted(sizes, reverse=True)  # shrinking: the last ones are small
        assert sizes[-1] == 1
    # Much work: few round trips.
    assert len(_guided(list(range(1000)), 2)) < 40


_FIFO = """
name = "fifo"
duration = "200ms"
[link]
rate = "10mbit"
delay = "5ms"
{policy}
[[flow]]
name = "t"
kind = "tcp"
"""


def test_policy_written_as_an_implicit_table():
    # `[policy.qdisc]` without a `[policy]` line (an implicit TOML table) is the same policy as
    # the inline table, in simulate and in a sweep.
    explicit = _FIFO.format(policy='[policy]\nqdisc = { type = "pfifo", limit = 64 }')
    implicit = _FIFO.format(policy='[policy.qdisc]\ntype = "pfifo"\nlimit = 64')
    a = linkshare.simulate(explicit)
    b = linkshare.simulate(implicit)
    pd.testing.assert_frame_equal(a.classes, b.classes)
    pd.testing.assert_frame_equal(a.flows, b.flows)
    grid = {"policy.qdisc.limit": [16, 64]}
    pd.testing.assert_frame_equal(linkshare.sweep(explicit, grid), linkshare.sweep(implicit, grid))
