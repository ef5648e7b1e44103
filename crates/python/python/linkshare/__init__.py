"""linkshare from Python: simulations and sweeps of linkshare's simulator as pandas DataFrames.

    import linkshare
    r = linkshare.simulate("scenarios/two-agency.toml", seed=2)
    r.classes, r.flows, r.timeseries, r.rtt, r.summary
    df = linkshare.sweep("scenarios/seed002/table4.toml")            # the file's own [sweep]
    df = linkshare.sweep(path, {"flow.in.size": [64, 1500]}, seeds=10, executor="ray")
    linkshare.summarize(df)                                         # mean and CI over seeds

The simulator runs in Rust with the GIL released; see docs/python.md.
"""

from ._core import (
    Diagnostic,
    LinkshareError,
    Result,
    ScenarioError,
    SimulationError,
    check,
    simulate,
)
from ._stats import summarize
from ._sweep import SweepError, sweep

__all__ = [
    "Diagnostic",
    "LinkshareError",
    "Result",
    "ScenarioError",
    "SimulationError",
    "SweepError",
    "check",
    "simulate",
    "summarize",
    "sweep",
]
