"""W5: d_align is cheap: the Gram U-statistics against forming the D×D covariance, from the benchmarks
table, judged at the dims this run measured (dalign's ``dim``, per family).

The benchmarks table has, per benchmarked D, the geometric mean of time(Gram)/time(covariance) over paired
repeats and its 95 % t interval (``stats.cost``). Between benchmarked D the ratio and both limits are
interpolated log–log. At each family's largest D: cheaper when the interval's upper limit is ≤ 1, more
than twice slower when its lower limit is > 2; the claim is confirmed when most families are cheaper,
refuted when most are twice slower, else not detectable."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..common import CONFIRMED, NOT_DETECTABLE, REFUTED, Claim, NotMeasured, Result, Tables, table

# benchmarks: time(Gram U-statistics) / time(D×D covariance) per D with its interval; 0 where the covariance
# cannot be formed. Optional: n (examples; the rows nearest the measured n are used), gram_bytes, covariance_bytes.
RATIO = "gram_over_cov_time"
LIMITS = [RATIO, f"{RATIO}_lo", f"{RATIO}_hi"]
BENCHMARK_COLUMNS = ["dim", *LIMITS]
READS = {"benchmarks": BENCHMARK_COLUMNS}
W5_MAX_TIME_RATIO = 1.0  # Gram route no slower than forming the covariance
W5_REFUTE_TIME_RATIO = 2.0  # Gram route more than twice slower


def _nearest(bench: pd.DataFrame, dim: float) -> pd.Series:
    """The benchmark row nearest ``dim`` in log D."""
    return bench.iloc[int(np.argmin(np.abs(np.log(bench["dim"].to_numpy(float)) - math.log(dim))))]


def _time_ratio(bench: pd.DataFrame, dim: float) -> tuple[np.ndarray, str]:
    """time(Gram)/time(covariance) and its limits (``LIMITS``) at ``dim``: log–log interpolation between the
    benchmarked D around it, else the nearest benchmarked D (said in the text); 0 means the covariance could
    not be formed."""
    dims, ratios = bench["dim"].to_numpy(float), bench[LIMITS].to_numpy(float)
    below, above = dims[dims <= dim], dims[dims >= dim]
    if len(below) and len(above):
        a, b = below.max(), above.min()
        ra, rb = ratios[dims == a][0], ratios[dims == b][0]
        if a == b:
            return ra, "measured"
        if (ra > 0).all() and (rb > 0).all():
            t = (math.log(dim) - math.log(a)) / (math.log(b) - math.log(a))
            return np.exp((1 - t) * np.log(ra) + t * np.log(rb)), f"interpolated {a:g}–{b:g}"
    row = _nearest(bench, dim)
    return row[LIMITS].to_numpy(float), f"nearest benchmarked D {row['dim']:g}"


def _crossover(bench: pd.DataFrame) -> str:
    """Where Gram turns cheaper than the covariance (time ratio crosses 1, log–log interpolation)."""
    dims, ratios = bench["dim"].to_numpy(float), bench[RATIO].to_numpy(float)
    cheaper = ratios <= W5_MAX_TIME_RATIO
    if cheaper.all():
        return f"≤ {dims[0]:g} (cheaper at every benchmarked D)"
    if not cheaper[-1]:
        return f"> {dims[-1]:g} (not cheaper at the largest benchmarked D)"
    i = int(np.flatnonzero(~cheaper)[-1])  # last D where Gram is slower; i + 1 is cheaper
    a, b, ra, rb = dims[i], dims[i + 1], ratios[i], ratios[i + 1]
    if rb <= 0:
        return f"between {a:g} and {b:g}"
    t = math.log(ra) / (math.log(ra) - math.log(rb))
    return f"≈ {math.exp((1 - t) * math.log(a) + t * math.log(b)):.3g}"


def _text(ratio: np.ndarray) -> str:
    return f"{ratio[0]:.3g} [{ratio[1]:.3g}, {ratio[2]:.3g}]"


def rule_w5(tables: Tables) -> Result:
    """Per family, the Gram/covariance time ratio's interval at the largest D that family measured
    (dalign's dim): cheaper when its upper limit is ≤ 1, twice slower when its lower limit is > 2."""
    bench = tables.get("benchmarks")
    if bench is None or bench.empty:
        raise NotMeasured("no benchmarks timing (Gram U-statistics vs D×D covariance)")
    missing = [c for c in BENCHMARK_COLUMNS if c not in bench.columns]
    if missing:
        raise ValueError(f"benchmarks lack column(s) {missing}; need {BENCHMARK_COLUMNS} (rerun cost_table)")
    try:
        dalign = table(tables, "dalign", ["view", "n", "dim"]).dropna(subset=["dim"])
    except NotMeasured as why:
        raise NotMeasured(f"{why}: W5 judges the benchmarks at the dims this run measured") from None
    if dalign.empty:
        raise NotMeasured("dalign has no dims: nothing to compare the benchmarks with")
    bench = bench.dropna(subset=BENCHMARK_COLUMNS)
    parts, largest = [], {}
    for family, rows in dalign.groupby("family"):
        near = bench
        if "n" in bench.columns and bench["n"].notna().any():
            n = rows["n"].median()
            gap = (bench["n"] - n).abs()
            near = bench[gap == gap.min()]
        near = near.groupby("dim", as_index=False).median(numeric_only=True).sort_values("dim")
        at = [(dim, *_time_ratio(near, dim)) for dim in sorted(rows["dim"].unique())]
        memory = ""
        if {"gram_bytes", "covariance_bytes"} <= set(near.columns):
            row = _nearest(near, at[-1][0])
            if row["covariance_bytes"] > 0:
                memory = f", memory ratio {row['gram_bytes'] / row['covariance_bytes']:.3g} (at D {row['dim']:g})"
        shown = ", ".join(f"{_text(r)} at D {d:g}" + (f" ({h})" if h != "measured" else "") for d, r, h in at)
        repeats = f", {near['repeats'].min():g} paired repeats" if "repeats" in near else ""
        n_text = (
            f" (benchmarks at n = {near['n'].iloc[0]:g}{repeats})" if "n" in near and near["n"].notna().all() else ""
        )
        parts.append(f"{family}: time(Gram)/time(covariance) {shown}{n_text}; crossover D {_crossover(near)}{memory}")
        largest[family] = at[-1][1]
    cheaper = sum(ratio[2] <= W5_MAX_TIME_RATIO for ratio in largest.values())
    slower = sum(ratio[1] > W5_REFUTE_TIME_RATIO for ratio in largest.values())
    statistic = (
        "time(Gram)/time(covariance) [95 % interval] at each family's largest measured D: "
        + ", ".join(f"{family} {_text(ratio)}" for family, ratio in largest.items())
        + f"; cheaper in {cheaper}/{len(largest)} families, more than twice slower in {slower}"
    )
    if cheaper > len(largest) / 2:
        return Result(CONFIRMED, statistic, "; ".join(parts))
    verdict = REFUTED if slower > len(largest) / 2 else NOT_DETECTABLE
    return Result(verdict, statistic, "; ".join(parts))


W5 = Claim(
    "W5",
    "d_align is cheap: a few forward/backward passes, never forming the D×D covariance.",
    f"time(Gram)/time(covariance) from the benchmarks at the dims this run measured (dalign's dim, per family; "
    f"log–log interpolation, else the nearest benchmarked D): the geometric mean over paired repeated timings "
    f"with its 95 % t interval, judged at each family's largest D: confirmed if the upper limit is "
    f"≤ {W5_MAX_TIME_RATIO:g} in most families, refuted if the lower limit is > {W5_REFUTE_TIME_RATIO:g} in most, "
    f"else not detectable",
    rule_w5,
    READS,
    regime="none: the method's cost",
)
