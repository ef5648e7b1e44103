"""Mean and confidence intervals over seeds.

`summarize(df)` groups a sweep's rows by everything but the seed (the axis columns, `kind` and
`name`) and gives, per figure, the mean, the standard deviation, the number of seeds and the
half-width of the confidence interval of the mean (Student's t: the runs under different seeds
are independent samples, `crates/sim/src/jitter.rs`).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Optional, Sequence

import pandas as pd

# Two-sided Student t quantiles for 1..30 degrees of freedom at 90 %, 95 % and 99 %.
_T = {
    0.90: [6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
           1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697],
    0.95: [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
           2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042],
    0.99: [63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012, 2.977, 2.947,
           2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750],
}


def t_quantile(ci: float, dof: int) -> float:
    """The two-sided t quantile for confidence `ci` (0.90, 0.95, 0.99 exact to 3 decimals up to
    30 degrees of freedom; the normal quantile beyond, or for another `ci`)."""
    if dof < 1:
        return math.nan
    table = _T.get(round(ci, 2))
    if table is not None and dof <= len(table):
        return table[dof - 1]
    return NormalDist().inv_cdf(0.5 + ci / 2)


def summarize(
    df: pd.DataFrame,
    figures: Optional[Sequence[str]] = None,
    *,
    ci: float = 0.95,
) -> pd.DataFrame:
    """Mean, std, n and the CI half-width (`<figure>_ci`) of each figure over seeds.

    `figures`: the columns to summarize (default: every numeric figure). Rows are grouped by the
    sweep's axis columns, `kind` and `name`.
    """
    axes = list(df.attrs.get("axes", []))
    keys = [c for c in axes + ["kind", "name"] if c in df.columns]
    if figures is None:
        skip = set(keys) | {"point", "seed"}
        figures = [c for c in df.columns if c not in skip and pd.api.types.is_numeric_dtype(df[c])]
    g = df.groupby(keys, sort=False, dropna=False)[list(figures)]
    mean, std, n = g.mean(), g.std(ddof=1), g.count()
    out = {}
    for f in figures:
        out[f] = mean[f]
        out[f"{f}_std"] = std[f]
        out[f"{f}_n"] = n[f]
        half = [t_quantile(ci, int(k) - 1) * s / math.sqrt(k) if k > 1 else math.nan for s, k in zip(std[f], n[f])]
        out[f"{f}_ci"] = pd.Series(half, index=mean.index)
    return pd.DataFrame(out).reset_index()
