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


@pytest.fixture(scope="module")
def table4(root):
    path = root / "scenarios" / "seed002" / "table4.toml"
    local = linkshare.sweep(path, progress=False)
    assert local.attrs["ran"] >= 100
    return path, local


def test_ray_local_cluster_equals_local(table4):
    ray = _need("ray")
    path, local = table4
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        df = linkshare.sweep(path, executor="ray", progress=False)
    finally:
        ray.shutdown()
    assert df.attrs["ran"] == 144
    pd.testing.assert_frame_equal(local, df)


def test_dask_local_cluster_equals_local(table4):
    _need("distributed")
    from distributed import Client, LocalCluster

    path, local = table4
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            df = linkshare.sweep(path, executor=client, progress=False)
    assert df.attrs["ran"] == 144
    pd.testing.assert_frame_equal(local, df)
