"""Sweeps: a grid of points × seeds, run on local threads, an Executor, Ray or Dask, as one
DataFrame; a campaign directory keeps every point's result so a sweep resumes or extends.

Each task is plain data (the scenario's text, the edits of its point, its seed) and a task's
result is the point's figures (`Result.classes`/`flows` columns), so a worker on another
machine needs only the `linkshare` package. The simulator is deterministic per seed, so where a
point runs does not change its row: a sweep on Ray or Dask equals the local one.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import itertools
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

from . import _native
from ._core import Diagnostic, LinkshareError, ScenarioError, Source, _raise_native, edits_of, source_of

Edits = List[Tuple[str, Any]]


class SweepError(LinkshareError):
    """Some points failed. `.failures`: one dict per failed point and seed (its parameters,
    seed, message and diagnostics); `.frame`: the DataFrame of every point that ran."""

    def __init__(self, message: str, failures: List[dict], frame: pd.DataFrame):
        super().__init__(message)
        self.failures = failures
        self.frame = frame


def _rust_label(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _file_points(src: Source) -> Tuple[List[str], List[Tuple[list, Edits]]]:
    """The scenario's own [sweep]: axis names and, per point, its axis values and edits."""
    try:
        axes, pts = _native.sweep_points(*src.args)
    except _native.NativeError as e:
        _raise_native(e)
    if not axes:
        raise ScenarioError(f"{src.origin}: the scenario has no [sweep]: give a grid")
    # An axis whose labels are its values' own text keeps the typed values; an axis with chosen
    # labels (or list values) shows the labels.
    typed = [
        all(not isinstance(p[1][a], (list, dict)) and p[0][a] == _rust_label(p[1][a]) for p in pts)
        for a in range(len(axes))
    ]
    points = [([v if typed[a] else lab[a] for a, v in enumerate(vals)], list(edits)) for lab, vals, edits in pts]
    return list(axes), points


def _grid_points(grid: Mapping[str, Sequence[Any]]) -> Tuple[List[str], List[Tuple[list, Edits]]]:
    keys = [str(k) for k in grid]
    values = []
    for k in keys:
        v = grid[k]
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise TypeError(f"grid[{k!r}] must be a list of values, e.g. [64, 1500]")
        v = list(v)
        if not v:
            raise ValueError(f"grid[{k!r}] is empty")
        values.append(v)
    # The first key varies slowest, as in a [sweep].
    points = [(list(combo), list(zip(keys, combo))) for combo in itertools.product(*values)]
    return keys, points


def _seeds(seeds: Union[None, int, Sequence[int]]) -> List[Optional[int]]:
    if seeds is None:
        return [None]
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError("seeds must be at least 1 (seeds=N runs seeds 1..N)")
        return list(range(1, seeds + 1))
    out = [int(s) for s in seeds]
    if not out:
        raise ValueError("seeds is empty")
    return out


def _jsonable(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"cannot store {type(o).__name__} in a campaign")


class _Campaign:
    """DIR/points/<key>.json, one file per point and seed, keyed by the scenario's text, the
    point's edits and the seed (ns-3 SEM's model: run only what is missing)."""

    def __init__(self, root: Union[str, "os.PathLike[str]"], src: Source):
        self.dir = Path(root) / "points"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.scenario = hashlib.sha256(src.text.encode()).hexdigest()

    def key(self, edits: Edits, seed: Optional[int]) -> str:
        doc = {"scenario": self.scenario, "edits": [[k, v] for k, v in edits], "seed": seed}
        text = json.dumps(doc, sort_keys=True, default=_jsonable)
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str) -> Optional[Tuple[dict, int]]:
        p = self.dir / f"{key}.json"
        try:
            d = json.loads(p.read_text())
            return d["figures"], d["seed"]
        except (OSError, ValueError, KeyError):
            return None

    def put(self, key: str, edits: Edits, seed: Optional[int], figures: dict, used: int) -> None:
        p = self.dir / f"{key}.json"
        tmp = p.with_suffix(f".tmp{os.getpid()}")
        doc = {"edits": [[k, v] for k, v in edits], "seed": used, "figures": figures}
        tmp.write_text(json.dumps(doc, default=_jsonable))
        os.replace(tmp, p)


def _run_chunk(src_args: tuple, items: list) -> list:
    """Run tasks `(index, edits, seed)`; one outcome each, a failure never stops the others."""
    out = []
    for ti, edits, seed in items:
        try:
            figs, used = _native.run_figures(*src_args, edits, seed)
            out.append((ti, True, figs, used))
        except _native.NativeError as e:
            _kind, message, diags = e.args
            out.append((ti, False, message, [tuple(d) for d in diags]))
        except Exception as e:  # a bad override value (TypeError), never lose the others
            out.append((ti, False, f"{type(e).__name__}: {e}", []))
    return out


def _chunks(items: list, n: int) -> List[list]:
    return [items[i : i + n] for i in range(0, len(items), n)]


def _guided(items: list, workers: int, most: int = 64) -> List[list]:
    """Chunks that shrink as the work left does (guided self-scheduling: each is the work left
    over twice the workers, at most `most`, at least one point): few round trips while there is
    much to do, and small last chunks so that the workers finish together."""
    out, i, n = [], 0, len(items)
    while i < n:
        size = max(1, min(most, (n - i) // (2 * max(1, workers))))
        out.append(items[i : i + size])
        i += size
    return out


def _split(items: list, chunksize: Optional[int], workers: int) -> List[list]:
    return _chunks(items, chunksize) if chunksize else _guided(items, workers)


def _dispatch(executor: Any, src_args: tuple, todo: list, chunksize: Optional[int], tick: Callable[[int], None]):
    """Run `todo` on `executor`; yields each chunk's outcomes as they finish."""
    if executor is None:
        workers = os.cpu_count() or 1
        with cf.ThreadPoolExecutor(max_workers=workers) as pool:
            yield from _futures(pool, src_args, _chunks(todo, chunksize or 1), tick)
        return
    if isinstance(executor, cf.Executor):
        yield from _futures(executor, src_args, _split(todo, chunksize, _executor_workers(executor)), tick)
        return
    if isinstance(executor, str) and (executor == "ray" or executor.startswith("ray://") or ":" in executor):
        yield from _ray(executor, src_args, todo, chunksize, tick)
        return
    if executor == "dask" or _is_dask_client(executor):
        yield from _dask(executor, src_args, todo, chunksize, tick)
        return
    raise TypeError(
        "executor must be None (local threads), a concurrent.futures.Executor, "
        f"'ray' or a Ray address, 'dask' or a dask.distributed Client, not {executor!r}"
    )


def _executor_workers(executor: cf.Executor) -> int:
    return int(getattr(executor, "_max_workers", 0) or os.cpu_count() or 1)


# One remote function per process: `ray.remote` exports the function to the cluster on its first
# call, and Ray re-exports it by itself when the cluster changes.
_RAY_REMOTE = None


def _futures(pool: cf.Executor, src_args: tuple, chunks: List[list], tick):
    futs = [pool.submit(_run_chunk, src_args, c) for c in chunks]
    for f in cf.as_completed(futs):
        out = f.result()
        tick(len(out))
        yield out


def _ray(executor: str, src_args: tuple, todo: list, chunksize, tick):
    import ray

    if not ray.is_initialized():
        ray.init(address=None if executor == "ray" else executor)
    global _RAY_REMOTE
    if _RAY_REMOTE is None:
        _RAY_REMOTE = ray.remote(_run_chunk)
    workers = int(ray.cluster_resources().get("CPU", 1))
    src_ref = ray.put(src_args)
    pending = [_RAY_REMOTE.remote(src_ref, c) for c in _split(todo, chunksize, workers)]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            out = ray.get(ref)
            tick(len(out))
            yield out


def _is_dask_client(x: Any) -> bool:
    return type(x).__name__ == "Client" and type(x).__module__.startswith("distributed")


def _dask(executor: Any, src_args: tuple, todo: list, chunksize, tick):
    from distributed import Client, as_completed, get_client

    if executor == "dask":
        try:
            client = get_client()
        except ValueError:
            client = Client()
    else:
        client = executor
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    # hash=False: a key of its own, so a sweep that follows one of the same scenario does not
    # share (and lose, when the first releases it) the first one's copy.
    src_fut = client.scatter(src_args, broadcast=True, hash=False)
    futs = [
        client.submit(_run_chunk, src_fut, c, pure=False)
        for c in _split(todo, chunksize, workers)
    ]
    # with_results: results fetched in batches as they finish, not one round trip each.
    for _f, out in as_completed(futs, with_results=True):
        tick(len(out))
        yield out


def _progress_bar(progress: Any, total: int) -> Tuple[Callable[[int], None], Callable[[], None]]:
    """`tick(n)` and `close()`: tqdm when installed (auto on for 100 points or more), or the
    caller's `progress(done, total)`."""
    if callable(progress):
        done = [0]

        def tick(n: int) -> None:
            done[0] += n
            progress(done[0], total)

        return tick, lambda: None
    if progress is False or (progress is None and total < 100):
        return (lambda n: None), (lambda: None)
    try:
        from tqdm.auto import tqdm
    except ImportError:
        if progress:
            warnings.warn("progress=True needs tqdm (pip install tqdm)", stacklevel=3)
        return (lambda n: None), (lambda: None)
    bar = tqdm(total=total, unit="run", file=sys.stderr)
    return bar.update, bar.close


def sweep(
    scenario: Any,
    grid: Optional[Mapping[str, Sequence[Any]]] = None,
    *,
    seeds: Union[None, int, Sequence[int]] = None,
    overrides: Optional[Mapping[str, Any]] = None,
    executor: Any = None,
    campaign: Union[None, str, "os.PathLike[str]"] = None,
    progress: Any = None,
    errors: str = "raise",
    chunksize: Optional[int] = None,
) -> pd.DataFrame:
    """Run every point of a grid, for every seed, and return one DataFrame.

    `grid` maps dotted keys to lists of values (`{"flow.in.size": [64, 1500]}`, first key
    slowest); without it the scenario's own `[sweep]` is the grid (axis columns named as its
    axes). `seeds`: None (the file's seed), N (seeds 1..N) or a list. `executor`: None (local
    threads), a `concurrent.futures.Executor`, "ray" or a Ray address, "dask" or a
    `dask.distributed.Client`. `campaign=DIR` stores each point's result and runs only the
    missing ones. `progress`: tqdm (auto from 100 runs), True/False or a callable(done, total).

    One row per point, seed and class/flow: `point`, the axis columns (typed values), `seed`,
    then every figure (`kind`, `name`, `rate_bps`, …, `rtt_p99_ms`, …; docs/outputs.md).
    `df.attrs["ran"]` and `df.attrs["cached"]` count the runs done now and taken from the
    campaign. A failing point does not stop the others: with `errors="raise"` a `SweepError`
    carries the failures (parameters, seed, message) and the frame of the rest; "warn" warns
    and returns the frame, with the failures in `df.attrs["failures"]`.
    """
    if errors not in ("raise", "warn"):
        raise ValueError("errors must be 'raise' or 'warn'")
    src = source_of(scenario)
    axes, points = _file_points(src) if grid is None else _grid_points(grid)
    seed_list = _seeds(seeds)
    base = edits_of(overrides)
    tasks = [(pi, base + edits, seed) for pi, (_vals, edits) in enumerate(points) for seed in seed_list]

    store = _Campaign(campaign, src) if campaign is not None else None
    keys: List[Optional[str]] = [None] * len(tasks)
    outcomes: Dict[int, tuple] = {}
    todo = []
    for ti, (_pi, edits, seed) in enumerate(tasks):
        if store is not None:
            keys[ti] = store.key(edits, seed)
            hit = store.get(keys[ti])
            if hit is not None:
                outcomes[ti] = (True, hit[0], hit[1])
                continue
        todo.append((ti, edits, seed))
    cached = len(outcomes)

    tick, close = _progress_bar(progress, len(todo))
    try:
        for chunk in _dispatch(executor, src.args, todo, chunksize, tick) if todo else ():
            for ti, ok, a, b in chunk:
                outcomes[ti] = (ok, a, b)
                if ok and store is not None:
                    store.put(keys[ti], tasks[ti][1], tasks[ti][2], a, b)
    finally:
        close()

    columns: Dict[str, list] = {"point": [], **{a: [] for a in axes}, "seed": []}
    figure_cols: Optional[List[str]] = None
    failures = []
    for ti, (pi, edits, seed) in enumerate(tasks):
        ok, a, b = outcomes[ti]
        if not ok:
            failures.append(
                {
                    "point": pi + 1,
                    "params": dict(zip(axes, points[pi][0])),
                    "seed": seed,
                    "message": a,
                    "diagnostics": [Diagnostic(*d) for d in b],
                }
            )
            continue
        figs, used = a, b
        if figure_cols is None:
            figure_cols = list(figs)
            for c in figure_cols:
                columns[c] = []
        n = len(figs["kind"])
        columns["point"].extend([pi + 1] * n)
        for ax, v in zip(axes, points[pi][0]):
            columns[ax].extend([v] * n)
        columns["seed"].extend([used] * n)
        for c in figure_cols:
            columns[c].extend(figs.get(c, [None] * n))
    df = pd.DataFrame(columns)
    df.attrs["ran"] = len(todo)
    df.attrs["cached"] = cached
    df.attrs["axes"] = list(axes)
    if failures:
        df.attrs["failures"] = failures
        lines = [f"point {f['point']} {f['params']} seed {f['seed']}: {f['message']}" for f in failures[:5]]
        more = f"\n… and {len(failures) - 5} more" if len(failures) > 5 else ""
        msg = f"{len(failures)} of {len(tasks)} runs failed:\n" + "\n".join(lines) + more
        if errors == "raise":
            raise SweepError(msg, failures, df)
        warnings.warn(msg, stacklevel=2)
    return df
