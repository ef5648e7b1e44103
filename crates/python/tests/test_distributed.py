"""The same sweep on a local Ray cluster and a Dask LocalCluster equals the local run.

Both are required in CI (scripts/test-python installs them); set LINKSHARE_ALLOW_NO_CLUSTER=1 to
skip where Ray or Dask are not installed.
"""

import os

import pandas as pd
import pytest

import linkshare

ALLOW_SKIP = os.environ.get("LINKSHARE_ALLOW_NO_CLUSTER") == "1"


def _need(module):
    try:
        return __import__(module)
    except ImportError:
        if ALLOW_SKIP:
            pytest.skip(f"{module} is not installed")
        raise


#: 10 packet sizes × 12 seeds = 120 runs of a scenario with TCP, UDP and ping (seeds other than
#: 1 jitter every flow, so the rows differ from run to run and must still match exactly).
GRID = {"flow.u.size": [100 * k for k in range(1, 11)]}
SEEDS = 12


@pytest.fixture(scope="module")
def grid_local(small_module):
    local = linkshare.sweep(small_module, GRID, seeds=SEEDS, overrides={"duration": "200ms"}, progress=False)
    assert local.attrs["ran"] == 120
    return local


def _run(small, executor):
    return linkshare.sweep(small, GRID, seeds=SEEDS, overrides={"duration": "200ms"}, executor=executor, progress=False)


def test_ray_local_cluster_equals_local(small_module, grid_local):
    ray = _need("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        df = _run(small_module, "ray")
        # The remote function is made once per process: a second sweep reuses it.
        again = _run(small_module, "ray")
    finally:
        ray.shutdown()
    assert df.attrs["ran"] == 120
    pd.testing.assert_frame_equal(grid_local, df)
    pd.testing.assert_frame_equal(grid_local, again)
    # And on a new cluster after a shutdown, where Ray must export it again.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        small = linkshare.sweep(small_module, {"flow.u.size": [100, 200]}, overrides={"duration": "200ms"},
                                executor="ray", progress=False)
    finally:
        ray.shutdown()
    assert small.attrs["ran"] == 2


def test_dask_local_cluster_equals_local(small_module, grid_local):
    _need("distributed")
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            df = _run(small_module, client)
            # A second sweep of the same scenario right after the first: its scattered copy of
            # the scenario must not be the first one's (released when that sweep ends).
            again = _run(small_module, client)
    assert df.attrs["ran"] == 120
    pd.testing.assert_frame_equal(grid_local, df)
    pd.testing.assert_frame_equal(grid_local, again)
