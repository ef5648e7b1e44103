"""Figures of the Python package (run by scripts/bench-python; prints one line per figure).

1. Per-point overhead of `linkshare.simulate` over the same run in Rust alone (the CLI's
   in-process run: parse, check, simulate), on a short scenario, best of 5 rounds.
2. DataFrame construction from the native column buffers for 10^6 time-series rows.
3. A 1,000-point sweep on one process (one thread) and on 2 Ray and 2 Dask workers.
"""

import argparse
import concurrent.futures as cf
import os
import time

import numpy as np

import linkshare
from linkshare import _native
from linkshare._core import _frame, source_of

POINT = """
name = "bench"
duration = "{dur}"
sample = "10ms"
[link]
rate = "10mbit"
delay = "5ms"
[policy]
qdisc = {{ type = "pfifo", limit = 64 }}
[[flow]]
name = "t"
kind = "tcp"
[[flow]]
name = "u"
kind = "udp"
rate = "4mbit"
size = 800
"""


def overhead(n: int) -> None:
    src = source_of(POINT.format(dur="100ms"))
    linkshare.simulate(src)  # warm up
    best_py, best_rs = float("inf"), float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            linkshare.simulate(src)
        best_py = min(best_py, (time.perf_counter() - t) / n)
        best_rs = min(best_rs, _native.time_runs(*src.args, n) / n)
    t = time.perf_counter()
    for _ in range(n):
        r = linkshare.simulate(src)
        r.classes, r.flows
    tables = (time.perf_counter() - t) / n
    print(f"simulate: {best_py * 1e3:.3f} ms/point, Rust alone {best_rs * 1e3:.3f} ms/point, "
          f"overhead {(best_py - best_rs) * 1e3:.3f} ms/point (target <= 5 ms); "
          f"with .classes and .flows built: {tables * 1e3:.3f} ms/point")


def frames(rows: int) -> None:
    names = [f"f{i}" for i in range(100)]
    cols = {
        "time_s": ("f64", np.arange(rows, dtype="<f8").tobytes()),
        "kind": ("names", (np.arange(rows) % 2).astype("<u4").tobytes(), ["class", "flow"]),
        "name": ("names", (np.arange(rows) % 100).astype("<u4").tobytes(), names),
        "bytes": ("u64", np.arange(rows, dtype="<u8").tobytes()),
        "rate_bps": ("f64", np.ones(rows, dtype="<f8").tobytes()),
        "backlog_bytes": ("u64", np.zeros(rows, dtype="<u8").tobytes()),
        "drops": ("u64", np.zeros(rows, dtype="<u8").tobytes()),
        "rtt_ms": ("f64", np.full(rows, np.nan, dtype="<f8").tobytes()),
    }
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        df = _frame(cols)
        best = min(best, time.perf_counter() - t)
    assert len(df) == rows
    # And end to end on a run at the default row budget (500 000 rows).
    many = "duration = \"50s\"\nsample = \"1ms\"\n[link]\nrate = \"100mbit\"\n" + "".join(
        f"[[flow]]\nname = \"u{i}\"\nkind = \"udp\"\nrate = \"100kbit\"\nsize = 1000\n" for i in range(9)
    )
    r = linkshare.simulate(many)
    t = time.perf_counter()
    n = len(r.timeseries)
    real = time.perf_counter() - t
    print(f"DataFrame of {rows:,} time-series rows from column buffers: {best * 1e3:.1f} ms (target <= 1 s); "
          f"a run's .timeseries ({n:,} rows, native columns + frame): {real * 1e3:.1f} ms")


def sweep_rates(points: int, workers: int) -> None:
    scenario = POINT.format(dur="10s")
    sizes = list(range(200, 200 + points))
    grid = {"flow.u.size": sizes}

    def timed(label, **kw):
        t = time.perf_counter()
        df = linkshare.sweep(scenario, grid, progress=False, **kw)
        dt = time.perf_counter() - t
        assert df.attrs["ran"] == points
        print(f"sweep of {points} points, {label}: {dt:.2f} s ({points / dt:.1f} points/s)")
        return dt, df

    with cf.ThreadPoolExecutor(1) as one:
        base, ref = timed("1 process, 1 thread", executor=one)
    local, df = timed(f"local threads ({os.cpu_count()})")
    assert df.equals(ref)
    print(f"  local threads: {base / local:.2f}x the single-thread rate")
    try:
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        linkshare.sweep(scenario, {"flow.u.size": sizes[:workers * 4]}, executor="ray", progress=False)  # warm workers
        dt, df = timed(f"Ray, {workers} workers", executor="ray")
        ray.shutdown()
        assert df.equals(ref)
        print(f"  Ray: {base / dt:.2f}x the single-process rate (target >= 1.8x)")
    except ImportError:
        print("Ray not installed: skipped")
    try:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as c, Client(c) as client:
            linkshare.sweep(scenario, {"flow.u.size": sizes[:workers * 4]}, executor=client, progress=False)
            dt, df = timed(f"Dask, {workers} workers", executor=client)
        assert df.equals(ref)
        print(f"  Dask: {base / dt:.2f}x the single-process rate (target >= 1.8x)")
    except ImportError:
        print("Dask not installed: skipped")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=200, help="runs per round of the overhead figure")
    a = ap.parse_args()
    overhead(a.runs)
    frames(a.rows)
    sweep_rates(a.points, a.workers)


if __name__ == "__main__":
    main()
