"""Scenarios in, results out: `simulate`, `check`, `Result` and the errors.

A scenario is a path (str or os.PathLike naming an existing file), TOML text, or a dict with
the file's structure. Overrides set keys by the dotted paths a `[sweep]` axis uses
(`flow.in.size`, `policy.class.c.rate`, `link.timer_hz`); None removes a key (its default
applies).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from . import _native

ScenarioLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]


@dataclass(frozen=True)
class Diagnostic:
    """One problem of a scenario or policy: where it is, what it is and how to fix it."""

    severity: str
    file: str
    line: int
    col: int
    message: str
    help: Optional[str] = None

    def __str__(self) -> str:
        where = self.file if self.line == 0 else f"{self.file}:{self.line}:{self.col}"
        text = f"{where}: {self.severity}: {self.message}"
        return text + (f"\n  help: {self.help}" if self.help else "")


class LinkshareError(Exception):
    """Base of linkshare's errors; `.diagnostics` lists what was found (may be empty)."""

    def __init__(self, message: str, diagnostics: Sequence[Diagnostic] = ()):
        super().__init__(message)
        self.diagnostics = list(diagnostics)


class ScenarioError(LinkshareError, ValueError):
    """The scenario (with its overrides) or its policy is invalid."""


class SimulationError(LinkshareError, RuntimeError):
    """A valid scenario's run failed (e.g. it stopped making progress)."""


def _raise_native(e: Exception) -> None:
    kind, message, diags = e.args
    ds = [Diagnostic(*d) for d in diags]
    cls = ScenarioError if kind == "scenario" else SimulationError
    raise cls(message, ds) from None


@dataclass(frozen=True)
class Source:
    """A scenario's text and where it came from (plain data: it travels to workers)."""

    text: str
    origin: str
    base_dir: str
    default_name: str

    @property
    def args(self) -> Tuple[str, str, str, str]:
        return (self.text, self.origin, self.base_dir, self.default_name)


def _looks_like_path(s: str) -> bool:
    return "\n" not in s and "=" not in s and (s.endswith(".toml") or os.path.exists(s))


def source_of(scenario: ScenarioLike) -> Source:
    """A `Source` from a path, TOML text or a dict."""
    if isinstance(scenario, Source):
        return scenario
    if isinstance(scenario, Mapping):
        return Source(_native.dict_to_toml(dict(scenario)), "<dict>", os.getcwd(), "scenario")
    if isinstance(scenario, os.PathLike) or (isinstance(scenario, str) and _looks_like_path(scenario)):
        p = Path(scenario)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise ScenarioError(
                f"{p}: cannot read the scenario: {e.strerror or e}",
                [Diagnostic("error", str(p), 0, 0, f"cannot read the scenario: {e.strerror or e}", "check the path")],
            ) from None
        return Source(text, str(p), str(p.parent.resolve()), p.stem)
    if isinstance(scenario, str):
        return Source(scenario, "<string>", os.getcwd(), "scenario")
    raise TypeError(f"a scenario is a path, TOML text or a dict, not {type(scenario).__name__}")


def edits_of(overrides: Optional[Mapping[str, Any]]):
    if overrides is None:
        return []
    if not isinstance(overrides, Mapping):
        raise TypeError("overrides is a dict of dotted keys to values, e.g. {'flow.in.size': 64}")
    return [(str(k), v) for k, v in overrides.items()]


def _frame(cols: Mapping[str, Any]) -> pd.DataFrame:
    """A DataFrame from the native column buffers (no loop per row)."""
    data = {}
    for name, col in cols.items():
        tag = col[0]
        if tag == "f64":
            data[name] = np.frombuffer(col[1], dtype="<f8")
        elif tag == "u64":
            data[name] = np.frombuffer(col[1], dtype="<u8")
        else:
            codes = np.frombuffer(col[1], dtype="<u4").astype(np.int32)
            data[name] = pd.Categorical.from_codes(codes, categories=list(col[2]))
    return pd.DataFrame(data, copy=False)


#: Figures only classes have, and only flows have (the rest are common).
CLASS_ONLY = ("ceil_bps", "overlimits", "lends", "borrows")
FLOW_ONLY = ("retransmits", "timeouts", "cwnd_reductions") + tuple(
    f"{m}_{s}" for m in ("rtt", "owd") for s in ("min_ms", "mean_ms", "p50_ms", "p99_ms", "max_ms", "samples")
)


def _figures_frame(fig: Mapping[str, list], kind: str) -> pd.DataFrame:
    """The rows of one kind (a handful: one per class or flow), index `name`; the columns the
    kind never has (a class's RTT, a flow's ceil) are left out."""
    keep = [i for i, k in enumerate(fig["kind"]) if k == kind]
    skip = set(FLOW_ONLY if kind == "class" else CLASS_ONLY) | {"kind", "name"}
    data = {c: [v[i] for i in keep] for c, v in fig.items() if c not in skip}
    index = pd.Index([fig["name"][i] for i in keep], name="name")
    return pd.DataFrame(data, index=index)


class Result:
    """What one run produced.

    `classes` and `flows`: one row per class / flow (index: name) with every figure of the
    summary; `timeseries`: the sampled rates, backlogs, drops and RTT (`timeseries.csv`); `rtt`:
    every RTT probe; `summary`: `summary.json` as a dict. Tables are built on first use.
    """

    def __init__(self, native: Any):
        self._native = native
        self._cache: dict = {}

    def _get(self, key: str, build):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    @property
    def summary(self) -> dict:
        """`summary.json` as a dict (docs/outputs.md)."""
        return self._get("summary", lambda: json.loads(self._native.summary_json()))

    @property
    def classes(self) -> pd.DataFrame:
        """One row per class: rate, bytes, packets, drops, loss, ceil, overlimits, lends, borrows."""
        return self._get("classes", lambda: _figures_frame(self._figures, "class"))

    @property
    def flows(self) -> pd.DataFrame:
        """One row per flow: goodput, loss, retransmits, RTT and one-way delay percentiles."""
        return self._get("flows", lambda: _figures_frame(self._figures, "flow"))

    @property
    def _figures(self) -> dict:
        return self._get("figures", lambda: self._native.figures())

    @property
    def timeseries(self) -> pd.DataFrame:
        """Columns time_s, kind, name, bytes, rate_bps, backlog_bytes, drops, rtt_ms."""
        return self._get("timeseries", lambda: _frame(self._native.timeseries()))

    @property
    def rtt(self) -> pd.DataFrame:
        """Every RTT probe: time_s, flow, rtt_ms."""
        return self._get("rtt", lambda: _frame(self._native.rtt()))

    def arrow(self, table: str):
        """One of "classes", "flows", "timeseries", "rtt" as a pyarrow Table."""
        import pyarrow as pa

        if table not in ("classes", "flows", "timeseries", "rtt"):
            raise ValueError(f"no table {table!r}: classes, flows, timeseries or rtt")
        df = getattr(self, table)
        return pa.Table.from_pandas(df, preserve_index=table in ("classes", "flows"))

    def report(self, dir: Union[str, "os.PathLike[str]"]) -> list:
        """Write the report (summary.json, timeseries.csv, plots, report.html) into `dir`."""
        return self._native.write_report(str(dir))

    def __repr__(self) -> str:
        s = self.summary
        return f"<linkshare.Result {s['scenario']!r} seed={s['seed']} {len(s['classes'])} classes, {len(s['flows'])} flows>"


def simulate(
    scenario: ScenarioLike,
    *,
    seed: Optional[int] = None,
    overrides: Optional[Mapping[str, Any]] = None,
) -> Result:
    """Run one scenario (a path, TOML text or a dict) and return its `Result`.

    `seed` replaces the scenario's seed (a seed other than 1 also jitters flow starts and ACKs);
    `overrides` sets keys by dotted path, e.g. `{"flow.in.size": 64, "policy.class.c.rate":
    "2mbit"}`. A file with a `[sweep]` runs without it (as `linkshare sim --point 0`).
    Raises `ScenarioError` (with `.diagnostics`) or `SimulationError`.
    """
    src = source_of(scenario)
    try:
        native = _native.run(*src.args, edits_of(overrides), seed)
    except _native.NativeError as e:
        _raise_native(e)
    return Result(native)


def check(policy: ScenarioLike) -> list:
    """Check a policy (a path, TOML text or a dict): its errors and warnings as `Diagnostic`s.

    An empty list means the policy is valid without warnings; any diagnostic whose severity is
    "error" means it is invalid.
    """
    src = source_of(policy)
    _valid, diags = _native.check_policy(src.text, src.origin)
    return [Diagnostic(*d) for d in diags]
