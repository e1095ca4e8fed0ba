"""The claims report: each claim of Papers D and W (docs/science.md §2–3) beside this run's statistic and verdict.

A verdict comes from a rule fixed in code before any data are seen: one small function per
claim, its thresholds named constants, its one-line description printed in the report
(docs/science.md §6: nothing is tuned to make a verdict pass). Verdicts (docs/science.md §6–7):

- ``confirmed``: the statistic meets the rule, beyond its own uncertainty;
- ``not confirmed``: a part of the claim fails although its statistic is measured;
- ``refuted``: the statistic points clearly the other way (the rule says what "clearly" is);
- ``not detectable``: the intervals of the statistic the claim rests on mostly contain the null
  value (0 for ‖μ‖² and d_align, 1/2 for a misalignment probability or a sign agreement), or a
  trend's ρ has an interval that contains 0: the data neither confirm nor refute. D1 is a claim of
  smallness: a ratio within its permutation null is not detectable only where the null band is
  wider than ``D1_MAX_OFFDIAG`` (else the covariance is diagonal to within that resolution);
- ``not measured in this configuration``: the table is missing or empty, or it has too few
  distinct widths/depths/sample sizes for the rule.

Every row counts. A rule's statistic says how many rows it could use and why the others were not
usable ("12 of 27 rows usable (15: interval contains 0)"); a NaN estimate is an outcome of its
own ("undetermined: the estimate of ‖μ‖² is ≤ 0"), counted in the text, never silently dropped.

Trends (D2, W1, W2, W3) use only the rows whose interval excludes the null: the median over a
model's usable insertion points is one unit, and ρ̄, the mean over groups (strata) of Spearman's
ρ, gets a percentile interval from a stratified bootstrap over units and a two-sided
within-stratum permutation p-value (``TREND_DRAWS`` draws each, seed ``TREND_SEED``: the
report is deterministic). A trend is confirmed or refuted only when the interval excludes 0
and p < ``TREND_ALPHA``.

``write_report`` writes ``report.md``: the claims table, then every figure of
``scalemech.plots.FIGURES`` with its caption from ``workflow/report/<stem>.rst``.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd

from .plots import D1_BAND_SDS, FIGURES, as_flag, default_mk, table_path
from .tables import check_columns, model_keys, read_table

CONFIRMED, NOT_CONFIRMED, REFUTED = "confirmed", "not confirmed", "refuted"
NOT_DETECTABLE = "not detectable"
NOT_MEASURED = "not measured in this configuration"
CLAIM_TABLES = ["covariance", "signal", "training", "dalign", "misalignment", "intervention", "expansion", "trajectory"]
# benchmarks: time(Gram U-statistics) / time(D×D covariance) per D; 0 where the covariance cannot be formed.
# Optional: n (examples; the rows nearest the measured n are used), gram_bytes, covariance_bytes.
BENCHMARK_COLUMNS = ["dim", "gram_over_cov_time"]

MIN_LEVELS = 3  # distinct depths, widths or sample sizes a trend needs (two points are only a sign)
MAJORITY = 0.5  # "most": more than this fraction
TREND_DRAWS, TREND_LEVEL, TREND_SEED, TREND_ALPHA = 1000, 0.95, 0, 0.05  # ρ̄: bootstrap and permutation
D1_MAX_OFFDIAG = 0.5  # off-diagonal share of ‖Σ‖²_F (bias-corrected) that still counts as "close to diagonal"
D1_NULL_SDS = D1_BAND_SDS  # a corrected ratio above null + this many sd is off-diagonal structure (F1 draws it)
D2_SPLIT = "test"
D3_TOL = 0.01  # relative change of test loss that counts as a fall or a rise
W1_VIEW, W1_SPLIT = "full", "train"
W2_VIEW = "full"
P_NULL = 0.5  # misalignment probability of a direction that carries no signal (a coin flip)
W2_CERT_FRACTION = 0.95  # rows (with a certificate) whose Wilson lower bound p_lo stays ≤ the bound
VACUOUS = 0.5  # a certificate B ≥ this says nothing a coin flip would not
BOUND_TOL = 1e-9  # float slack in p_lo ≤ B and B_exact ≤ B_align
WILSON_LEVEL = 0.95
W4_MIN_SIGN_AGREE = 0.95
W4_RATIO_RANGE = (0.9, 1.1)  # median held-out observed/predicted at the smallest η (paper: 0.96–0.99)
W5_MAX_TIME_RATIO = 1.0  # Gram route no slower than forming the covariance
W5_REFUTE_TIME_RATIO = 2.0  # Gram route more than twice slower
W1_LOSS_LEVELS = 8  # train-loss levels per (dataset, family, depth) at which "W1 along training" compares widths
E8_NOISE_SES = 2.0  # an expansion gain counts (win or loss) only beyond this many evaluation SEs
E8_SE = "se_test_selected_minus_control"  # paired SE of L_test(selected) − L_test(control) over the test examples


class NotMeasured(Exception):
    """The tables cannot test a claim; the message says why."""


@dataclass(frozen=True)
class Claim:
    """A claim of the papers and the rule that judges it."""

    id: str
    statement: str  # what the paper says
    rule: str  # one line: how the verdict is reached
    evaluate: Callable[[Mapping[str, pd.DataFrame]], tuple[str, str]]  # tables -> (statistic, verdict)


# -- helpers -----------------------------------------------------------------------------
def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - (counts - 1) / 2)[inverse]


def spearman(x, y) -> float:
    """Spearman's ρ: the Pearson correlation of average ranks; NaN when x or y is constant."""
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    if len(rx) < 2 or rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _row_ranks(values: np.ndarray) -> np.ndarray:
    """(B, n) -> average ranks within each row (ties share their mean rank), 1-based."""
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    n = values.shape[1]
    position = np.broadcast_to(np.arange(1, n + 1, dtype=float), values.shape)
    starts = np.ones(values.shape, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ends = np.ones(values.shape, dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, position, n + 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty(values.shape)
    np.put_along_axis(ranks, order, (first + last) / 2, axis=1)
    return ranks


def _row_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(B, n), (B, n) -> (B,) Spearman ρ per row; NaN where a row of x or y is constant."""
    rx, ry = _row_ranks(x), _row_ranks(y)
    rx, ry = rx - rx.mean(1, keepdims=True), ry - ry.mean(1, keepdims=True)
    scale = np.sqrt((rx**2).sum(1) * (ry**2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale > 0, (rx * ry).sum(1) / np.where(scale > 0, scale, 1), np.nan)


def _finite_mean(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """Mean over ``axis`` of the finite entries; NaN where there are none (no warning)."""
    finite = np.isfinite(values)
    count = finite.sum(axis)
    total = np.where(finite, values, 0.0).sum(axis)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def wilson(successes: int, trials: int, level: float = WILSON_LEVEL) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927); (0, 1) when there are no trials."""
    if trials < 1:
        return 0.0, 1.0
    z = NormalDist().inv_cdf((1 + level) / 2)
    p = successes / trials
    centre, half = p + z * z / (2 * trials), z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials**2))
    return max(0.0, (centre - half) / (1 + z * z / trials)), min(1.0, (centre + half) / (1 + z * z / trials))


def _table(tables: Mapping[str, pd.DataFrame], name: str, required: list[str]) -> pd.DataFrame:
    """``tables[name]`` with the ``required`` columns (all rows, NaN included); NotMeasured if missing or empty."""
    frame = tables.get(name)
    if frame is None or frame.empty:
        raise NotMeasured(f"no {name} table")
    return check_columns(frame, name, required=model_keys() + required)


def _only(frame: pd.DataFrame, column: str, value: object, table: str) -> pd.DataFrame:
    rows = frame[frame[column] == value]
    if rows.empty:
        raise NotMeasured(f"{table} has no rows with {column}={value!r} (has {sorted(frame[column].unique())})")
    return rows


def _levels_present(frame: pd.DataFrame, strata: list[str], x: str, table: str, what: str) -> None:
    """NotMeasured unless some stratum of ``frame`` has ≥ MIN_LEVELS distinct ``x`` (NaN rows included)."""
    if frame.empty or frame.groupby(strata)[x].nunique().max() < MIN_LEVELS:
        raise NotMeasured(f"no {what} of {table} has ≥ {MIN_LEVELS} values of {x}")


@dataclass(frozen=True)
class Rows:
    """The rows of one statistic, split into the usable ones and the rest, with why."""

    usable: pd.DataFrame
    total: int
    reasons: dict[str, int]  # why a row is not usable -> how many

    @property
    def detectable(self) -> bool:
        """Most rows are usable (their interval excludes the null)."""
        return self.total > 0 and len(self.usable) / self.total > MAJORITY

    def text(self) -> str:
        why = "; ".join(f"{count}: {reason}" for reason, count in self.reasons.items() if count)
        return f"{len(self.usable)} of {self.total} rows usable" + (f" ({why})" if why else "")


def sort_rows(
    frame: pd.DataFrame, value: str, lo: str, hi: str, null: float, undetermined: str, two_sided: bool = False
) -> Rows:
    """Usable rows: ``value`` finite and its interval ``[lo, hi]`` above ``null`` (``two_sided``: above or
    below it). The rest are counted as undetermined (NaN estimate: ``undetermined`` says what that
    means), without an interval, with an interval containing the null, or (one-sided) below it."""
    v, low, high = (frame[c].astype(float).to_numpy() for c in (value, lo, hi))
    nan = ~np.isfinite(v)
    bounded = ~nan & np.isfinite(low) & np.isfinite(high)
    above, below = bounded & (low > null), bounded & (high < null)
    usable = above | below if two_sided else above
    reasons = {
        f"interval contains {null:g}": int((bounded & ~above & ~below).sum()),
        f"interval below {null:g}": 0 if two_sided else int(below.sum()),
        f"undetermined: {undetermined}": int(nan.sum()),
        "no interval": int((~nan & ~bounded).sum()),
    }
    return Rows(frame[usable], len(frame), reasons)


@dataclass(frozen=True)
class Trend:
    """ρ̄ (mean over strata of Spearman ρ) with its bootstrap interval and permutation p-value."""

    rho: float
    lo: float
    hi: float
    p: float
    strata: int
    units: int

    def verdict(self, sign: int) -> str:
        """CONFIRMED/REFUTED only when the interval excludes 0 on one side and p < TREND_ALPHA."""
        if not (np.isfinite(self.lo) and np.isfinite(self.hi) and self.p < TREND_ALPHA):
            return NOT_DETECTABLE
        if sign * self.lo > 0 and sign * self.hi > 0:
            return CONFIRMED
        if sign * self.lo < 0 and sign * self.hi < 0:
            return REFUTED
        return NOT_DETECTABLE

    def text(self, x: str, y: str, strata: str, units: str) -> str:
        return (
            f"ρ({x}, {y}) = {self.rho:.2f} [{self.lo:.2f}, {self.hi:.2f}] (mean over {self.strata} {strata}, "
            f"{self.units} {units}; {TREND_LEVEL:.0%} stratified bootstrap over {units}), "
            f"permutation p = {self.p:.3f}"
        )


def trend(strata: Sequence[tuple[np.ndarray, np.ndarray]], seed: int = TREND_SEED) -> Trend:
    """ρ̄ over ``strata`` (each: x and y of its units), a percentile interval from ``TREND_DRAWS``
    bootstrap resamples of the units within each stratum, and the two-sided p-value of ρ̄ under
    ``TREND_DRAWS`` random permutations of y within each stratum (seeded: deterministic)."""
    rng = np.random.default_rng(seed)
    observed = _finite_mean(np.array([spearman(x, y) for x, y in strata]))
    boots, perms = [], []
    for x, y in strata:
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        pick = rng.integers(0, len(x), size=(TREND_DRAWS, len(x)))  # (draws, units)
        boots.append(_row_spearman(x[pick], y[pick]))
        shuffled = rng.permuted(np.broadcast_to(y, (TREND_DRAWS, len(y))), axis=1)
        perms.append(_row_spearman(np.broadcast_to(x, shuffled.shape), shuffled))
    boot, perm = _finite_mean(np.array(boots)), _finite_mean(np.array(perms))  # (draws,) each
    boot, perm = boot[np.isfinite(boot)], perm[np.isfinite(perm)]
    tail = (1 - TREND_LEVEL) / 2
    lo, hi = np.quantile(boot, [tail, 1 - tail]) if len(boot) > TREND_DRAWS / 2 else (np.nan, np.nan)
    p = (1 + np.sum(np.abs(perm) >= abs(observed) - 1e-12)) / (1 + len(perm)) if np.isfinite(observed) else 1.0
    return Trend(float(observed), float(lo), float(hi), float(p), len(strata), sum(len(x) for x, _ in strata))


def judge_trend(
    rows: Rows, value: str, x: str, strata: list[str], sign: int, y_name: str, strata_name: str, by: Sequence[str] = ()
) -> tuple[str, str]:
    """Trend verdict over the usable rows: not detectable when most rows are not usable, or when no
    stratum keeps ≥ MIN_LEVELS values of ``x``; else ``Trend.verdict``. Units: models (× ``by``),
    each the median of ``value`` over its usable insertion points. Returns (text, verdict)."""
    statistic = rows.text()
    if not rows.detectable:
        return f"{statistic}: most intervals contain the null, so no trend is computed", NOT_DETECTABLE
    units = rows.usable.groupby(model_keys() + list(by), as_index=False)[value].median()
    groups = [
        (g[x].to_numpy(float), g[value].to_numpy(float))
        for _, g in units.groupby(strata)
        if g[x].nunique() >= MIN_LEVELS
    ]
    if not groups:
        return f"{statistic}; no {strata_name} keeps ≥ {MIN_LEVELS} values of {x} among the usable rows", NOT_DETECTABLE
    result = trend(groups)
    unit_name = "models" if not by else f"model × {', '.join(by)} units"
    return f"{statistic}; {result.text(x, y_name, strata_name, unit_name)}", result.verdict(sign)


# -- rules -------------------------------------------------------------------------------
def rule_d1(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Bias-corrected off-diagonal energy ratio against its permutation null at the same n, p;
    low-rank points excluded."""
    cov = _table(
        tables,
        "covariance",
        [
            "point_index",
            "offdiag_ratio",
            "offdiag_ratio_plugin",
            "offdiag_ratio_null",
            "offdiag_ratio_null_sd",
            "low_rank",
        ],
    )
    low_rank = as_flag(cov["low_rank"]) == 1
    ratio, null, sd = (cov[c].astype(float) for c in ("offdiag_ratio", "offdiag_ratio_null", "offdiag_ratio_null_sd"))
    undetermined = ~low_rank & ~(np.isfinite(ratio) & np.isfinite(null) & np.isfinite(sd))
    judged = ~low_rank & ~undetermined
    if not judged.any():
        raise NotMeasured(
            f"covariance has no row to judge ({int(low_rank.sum())} low-rank by construction, "
            f"{int(undetermined.sum())} with a NaN ratio or null)"
        )
    threshold = null + D1_NULL_SDS * sd  # above: off-diagonal structure beyond sampling noise
    structure = judged & (ratio > threshold)
    median, band = ratio[judged].median(), threshold[judged & ~structure].median()
    statistic = (
        f"{int(judged.sum())} of {len(cov)} model×point rows judged ({int(low_rank.sum())}: low-rank by "
        f"construction, excluded; {int(undetermined.sum())}: undetermined, NaN ratio or null); off-diagonal "
        f"structure (corrected ratio > null + {D1_NULL_SDS:g} sd) in {int(structure.sum())} of them; median "
        f"corrected ratio {median:.3g} (plug-in {cov['offdiag_ratio_plugin'][judged].median():.3g}, null "
        f"{null[judged].median():.3g})"
    )
    if structure[judged].mean() > MAJORITY:
        return statistic, CONFIRMED if median <= D1_MAX_OFFDIAG else REFUTED
    statistic += f"; rows within the null resolve shares above null + {D1_NULL_SDS:g} sd = {band:.3g} (median)"
    return statistic, CONFIRMED if band <= D1_MAX_OFFDIAG else NOT_DETECTABLE


def rule_d2(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Per (dataset, family, width): ρ(depth, ‖μ‖²) on the test split over the rows whose interval excludes 0."""
    signal = _table(tables, "signal", ["point_index", "split", "mu_sq", "mu_sq_lo", "mu_sq_hi"])
    signal = _only(signal, "split", D2_SPLIT, "signal")
    _levels_present(signal, ["dataset", "family", "width"], "depth", "signal", "(dataset, family, width)")
    rows = sort_rows(signal, "mu_sq", "mu_sq_lo", "mu_sq_hi", 0.0, "no ‖μ‖² estimate")
    text, verdict = judge_trend(
        rows, "mu_sq", "depth", ["dataset", "family", "width"], -1, "‖μ‖²", "(dataset, family, width) groups"
    )
    return f"{D2_SPLIT} split: {text}", verdict


def _rebound(losses: np.ndarray) -> bool:
    """Interior minimum with a fall before it and a rise after it, each > D3_TOL relative."""
    best = int(np.argmin(losses))
    margin = losses[best] + D3_TOL * abs(losses[best])
    return 0 < best < len(losses) - 1 and losses[0] > margin and losses[-1] > margin


def rule_d3(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Per (dataset, family): rebound in depth at the smallest width, and best grid cell at the largest width."""
    training = _table(tables, "training", ["test_loss"])
    finite = training.dropna(subset=["test_loss"])
    if finite.empty:
        raise NotMeasured("training table has only NaN test losses")
    grid = finite.groupby(["dataset", "family", "depth", "width"], as_index=False)["test_loss"].mean()
    parts = []
    for (dataset, family), g in grid.groupby(["dataset", "family"]):
        narrow = g[g["width"] == g["width"].min()].sort_values("depth")
        if narrow["depth"].nunique() < MIN_LEVELS or g["width"].nunique() < 2:
            continue
        best_width = g.loc[g["test_loss"].idxmin(), "width"]
        parts.append(
            (
                f"{dataset}/{family}",
                _rebound(narrow["test_loss"].to_numpy()),
                best_width == g["width"].max(),
                best_width == g["width"].min(),
                best_width,
            )
        )
    if not parts:
        raise NotMeasured(f"no (dataset, family) has ≥ {MIN_LEVELS} depths at its smallest width and ≥ 2 widths")
    statistic = "; ".join(
        f"{name}: rebound at smallest width {'yes' if rebound else 'no'}, best test loss at width "
        f"{best:g} ({'the largest' if joint else 'not the largest'})"
        for name, rebound, joint, _, best in parts
    )
    missing = len(training) - len(finite)
    if missing:
        statistic += f"; {missing} of {len(training)} models undetermined (NaN test loss)"
    if all(rebound and joint for _, rebound, joint, _, _ in parts):
        return statistic, CONFIRMED
    return statistic, REFUTED if all(smallest for *_, smallest, _ in parts) else NOT_CONFIRMED


def rule_w1(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Per (dataset, family, depth): ρ(width, d_align) over the rows whose interval excludes 0, and whether
    the widest usable model's interval lies above the narrowest one's."""
    dalign = _table(tables, "dalign", ["point_index", "view", "split", "d_align", "d_align_lo", "d_align_hi"])
    dalign = _only(_only(dalign, "view", W1_VIEW, "dalign"), "split", W1_SPLIT, "dalign")
    _levels_present(dalign, ["dataset", "family", "depth"], "width", "dalign", "(dataset, family, depth)")
    rows = sort_rows(dalign, "d_align", "d_align_lo", "d_align_hi", 0.0, "the estimate of ‖μ‖² is ≤ 0")
    text, verdict = judge_trend(
        rows, "d_align", "width", ["dataset", "family", "depth"], +1, "d_align", "(dataset, family, depth) groups"
    )
    text = f"view={W1_VIEW}, split={W1_SPLIT}: {text}"
    if verdict != CONFIRMED:
        return text, verdict
    models = rows.usable.groupby(model_keys(), as_index=False)[["d_align_lo", "d_align_hi"]].median()
    separated = [
        s["d_align_lo"].iloc[-1] > s["d_align_hi"].iloc[0]
        for _, s in models.sort_values("width").groupby(["dataset", "family", "depth"])
        if s["width"].nunique() >= 2
    ]
    text += f"; widest usable model's interval above the narrowest's at {sum(separated)}/{len(separated)} depths"
    return text, CONFIRMED if separated and np.mean(separated) > MAJORITY else NOT_CONFIRMED


def _measurable(rows: pd.DataFrame, group: list[str]) -> pd.Series:
    """Per ``group``: whether most of its rows have a d_align interval above 0."""
    above = rows["d_align_lo"].astype(float) > 0
    return above.groupby([rows[c] for c in group]).mean() > MAJORITY


def first_crossing(loss: np.ndarray, values: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """(n,), (n, k), (L,) -> (L, k): ``values`` along the snapshot order where ``loss`` first reaches each
    level ℓ: on the first segment i with ℓ between loss_i and loss_{i+1}, ``(1 − t)·v_i + t·v_{i+1}`` with
    ``t = (ℓ − loss_i) / (loss_{i+1} − loss_i)`` (0 on a flat segment; an end of weight 0 is ignored, NaN or
    not). NaN where the loss never reaches ℓ."""
    out = np.full((len(levels), values.shape[1]), np.nan)
    if len(loss) < 2:
        return out
    a, b = loss[:-1], loss[1:]
    hit = (np.minimum(a, b) <= levels[:, None]) & (levels[:, None] <= np.maximum(a, b))  # (L, n − 1)
    reached = hit.any(1)
    i = hit.argmax(1)[reached]
    span = b[i] - a[i]
    t = np.divide(levels[reached] - a[i], span, out=np.zeros_like(span), where=span != 0)
    weights = np.stack([1 - t, t])[..., None]  # (2, L', 1)
    ends = np.stack([values[i], values[i + 1]])  # (2, L', k)
    out[reached] = np.where(weights > 0, weights * ends, 0.0).sum(0)
    return out


def at_matched_loss(trajectory: pd.DataFrame) -> pd.DataFrame:
    """The trajectory at common train losses. Per (dataset, family, depth): ``W1_LOSS_LEVELS`` levels
    evenly spaced over the range every model's trajectory reaches, ``[max_m min_s L, min_m max_s L]``
    (none where it is empty); per model × point, d_align and its interval at each level's first
    crossing (``first_crossing``). Columns: model keys, point_index, level (0, 1, …), train_loss (ℓ),
    d_align, d_align_lo, d_align_hi."""
    keys, values = model_keys() + ["point_index"], ["d_align", "d_align_lo", "d_align_hi"]
    parts = []
    for _, stratum in trajectory.groupby(["dataset", "family", "depth"]):
        reach = stratum.groupby("model")["train_loss"].agg(["min", "max"])
        low, high = reach["min"].max(), reach["max"].min()
        if not low < high:
            continue
        levels = np.linspace(low, high, W1_LOSS_LEVELS)
        for key, series in stratum.sort_values("step").groupby(keys):
            at = first_crossing(series["train_loss"].to_numpy(float), series[values].to_numpy(float), levels)
            part = pd.DataFrame(at, columns=values).assign(level=range(len(levels)), train_loss=levels)
            parts.append(part.assign(**dict(zip(keys, key))))
    return (
        pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=keys + ["level", "train_loss"] + values)
    )


def _w1_at(frame: pd.DataFrame, at: str, group: list[str], what: str) -> tuple[str, str]:
    """W1's trend at each ``at`` (step or train-loss level) of the ``group``s where most d_align intervals
    exclude 0: strata (dataset, family, depth, ``at``), units model × ``at``. Returns (text, verdict)."""
    measurable = _measurable(frame, group)
    keep = measurable[measurable].reset_index()[group]
    head = f"{len(keep)} of {len(measurable)} {what} measurable"
    rows = frame.merge(keep, on=group)
    if rows.empty:
        return f"{head}, so no trend is computed", NOT_DETECTABLE
    text, verdict = judge_trend(
        sort_rows(rows, "d_align", "d_align_lo", "d_align_hi", 0.0, "the estimate of ‖μ‖² is ≤ 0"),
        "d_align",
        "width",
        ["dataset", "family", "depth", at],
        +1,
        "d_align",
        f"(dataset, family, depth, {at}) groups",
        by=[at],
    )
    return f"{head}: {text}", verdict


def agreed(*verdicts: str) -> str:
    """One verdict from parts that must agree: their common verdict; NOT_CONFIRMED when one part
    confirms and another refutes; else NOT_DETECTABLE (some part's interval contains 0)."""
    if len(set(verdicts)) == 1:
        return verdicts[0]
    return NOT_CONFIRMED if {CONFIRMED, REFUTED} <= set(verdicts) else NOT_DETECTABLE


def rule_w1_training(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """W1 along training, at equal step and at equal train loss (``at_matched_loss``): ρ(width, d_align)
    where most d_align intervals exclude 0; the verdict needs both parts to agree (``agreed``). Each
    family's last measurable step is stated."""
    trajectory = _table(
        tables, "trajectory", ["step", "train_loss", "view", "split", "d_align", "d_align_lo", "d_align_hi"]
    )
    trajectory = _only(_only(trajectory, "view", W1_VIEW, "trajectory"), "split", W1_SPLIT, "trajectory")
    _levels_present(trajectory, ["dataset", "family", "depth"], "width", "trajectory", "(dataset, family, depth)")
    detectable = _measurable(trajectory, ["dataset", "family", "step"])
    last = {
        f"{d}/{f}": int(s.index.get_level_values("step")[s.to_numpy()].max()) if s.any() else None
        for (d, f), s in detectable.groupby(level=["dataset", "family"])
    }
    last_text = "last step with most d_align intervals above 0: " + ", ".join(
        f"{k} {'none' if v is None else v}" for k, v in last.items()
    )
    step_text, step_verdict = _w1_at(trajectory, "step", ["dataset", "family", "step"], "(dataset, family, step)")
    matched = at_matched_loss(trajectory)
    loss_text, loss_verdict = _w1_at(
        matched, "level", ["dataset", "family", "depth", "level"], "(dataset, family, depth, level)"
    )
    return (
        f"view={W1_VIEW}, split={W1_SPLIT}. At equal step: {step_text} [{step_verdict}]. At equal train loss "
        f"({W1_LOSS_LEVELS} levels per (dataset, family, depth) over the train-loss range all its models reach; "
        f"{len(matched)} rows): {loss_text} [{loss_verdict}]. {last_text}",
        agreed(step_verdict, loss_verdict),
    )


def rule_expansion(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Per (model, point): gain = L_test(control) − L_test(selected), the selected model's test-loss change
    from the old model minus the control's; usable when |gain| > E8_NOISE_SES evaluation SEs (paired,
    per-example, test examples); the share of wins (gain > 0) among usable rows with its Wilson interval."""
    expansion = _table(tables, "expansion", ["test_loss_selected", "test_loss_control", "test_loss_old"])
    gain = (expansion["test_loss_control"] - expansion["test_loss_selected"]).astype(float)
    if E8_SE not in expansion.columns:
        raise NotMeasured(
            f"expansion has no evaluation-noise column {E8_SE} (a table from before it was recorded); selected "
            f"below the control's test loss in {int((gain > 0).sum())} of {len(gain)} rows, noise unknown"
        )
    noise = E8_NOISE_SES * expansion[E8_SE].astype(float)
    frame = expansion.assign(gain=gain, gain_lo=gain - noise, gain_hi=gain + noise)
    rows = sort_rows(frame, "gain", "gain_lo", "gain_hi", 0.0, "NaN test loss", two_sided=True)
    wins, usable = int((rows.usable["gain"] > 0).sum()), len(rows.usable)
    lo, hi = wilson(wins, usable)
    text = (
        f"gain = L_test(control) − L_test(selected) ± {E8_NOISE_SES:g} evaluation SE ({E8_SE}): {rows.text()}; "
        f"wins (gain > 0) {wins} of {usable} usable (Wilson {lo:.0%}–{hi:.0%}); median gain "
        f"{gain.median():.3g}, median SE {expansion[E8_SE].median():.3g}"
    )
    if not rows.detectable:
        return f"{text}; at most half the rows are clear of evaluation noise", NOT_DETECTABLE
    return text, CONFIRMED if lo > P_NULL else REFUTED if hi < P_NULL else NOT_DETECTABLE


MISALIGNMENT_VALUES = ["M", "K", "draws", "p_misalign", "p_lo", "p_hi", "b_exact", "b_exact_common", "b_align"]
P_TEXT = (
    "P = share of the draws of M train and K test examples (without replacement) from this model's own "
    "gradient pools with μ_Mᵀg_K ≤ 0"
)


def _misalignment(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    frame = _table(tables, "misalignment", ["point_index", "view", *MISALIGNMENT_VALUES])
    return _only(frame, "view", W2_VIEW, "misalignment")


def _p_rows(frame: pd.DataFrame) -> Rows:
    return sort_rows(frame, "p_misalign", "p_lo", "p_hi", P_NULL, "no draws", two_sided=True)


def _certificate(frame: pd.DataFrame, bound: str, name: str, missing: str) -> tuple[str, float, int]:
    """Text, fraction of rows with a certificate where Wilson p_lo ≤ it (NaN if none), count of such rows."""
    has = frame[bound].notna() & frame["p_lo"].notna()
    defined = frame[has]
    holds = float((defined["p_lo"] <= defined[bound] + BOUND_TOL).mean()) if len(defined) else math.nan
    text = (
        f"p_lo ≤ {name} in {holds:.1%} of the {len(defined)} rows with one, non-vacuous (< {VACUOUS:g}) "
        f"in {(defined[bound] < VACUOUS).mean() if len(defined) else math.nan:.0%}, "
        f"{int((~has).sum())} without ({missing})"
    )
    return text, holds, len(defined)


def rule_w2(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """At the default (M, K): ρ(width, P) over the rows whose Wilson interval excludes 1/2; Wilson p_lo
    below the two-sample B_exact and below B_align (each in ≥ W2_CERT_FRACTION of the rows that have one)."""
    frame = _misalignment(tables)
    M, K = default_mk(frame)
    fixed = frame[(frame["M"] == M) & (frame["K"] == K)]
    _levels_present(
        fixed, ["dataset", "family", "depth"], "width", "misalignment", f"(dataset, family, depth) at M={M}, K={K}"
    )
    text, verdict = judge_trend(
        _p_rows(fixed),
        "p_misalign",
        "width",
        ["dataset", "family", "depth"],
        -1,
        "P",
        "(dataset, family, depth) groups",
    )
    exact, exact_holds, exact_n = _certificate(
        frame, "b_exact", "B_exact (two-sample)", "no certificate: μ_trᵀμ_te or its square not above 0, or Var ≤ 0"
    )
    align, align_holds, align_n = _certificate(frame, "b_align", "B_align (one-sample)", "d_align undetermined")
    both = frame.dropna(subset=["b_exact_common", "b_align"])
    ordered = (both["b_exact_common"] <= both["b_align"] + BOUND_TOL).mean() if len(both) else math.nan
    at_mk = fixed["b_exact"].dropna()
    informative = (at_mk < VACUOUS).mean() if len(at_mk) else math.nan
    statistic = (
        f"{P_TEXT}. At M={M}, K={K}: {text}. Certificates over all {len(frame)} rows (every M, K): {exact}; "
        f"{align}; one-sample B_exact ≤ B_align in {ordered:.1%}; B_exact non-vacuous in {informative:.0%} "
        f"of the rows with one at M={M}, K={K}"
    )
    if any(n and holds < W2_CERT_FRACTION for holds, n in ((exact_holds, exact_n), (align_holds, align_n))):
        return statistic, REFUTED
    if verdict != CONFIRMED:
        return statistic, verdict
    certified = exact_n and align_n and ordered == 1 and informative > MAJORITY
    return statistic, CONFIRMED if certified else NOT_CONFIRMED


def rule_w3(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Per model: ρ(M, P) over the M = K rows whose Wilson interval excludes 1/2."""
    frame = _misalignment(tables)
    square = frame[frame["M"] == frame["K"]]
    if square.empty:
        raise NotMeasured("misalignment has no rows with M = K")
    _levels_present(square, model_keys(), "M", "misalignment", "model (M = K rows)")
    text, verdict = judge_trend(_p_rows(square), "p_misalign", "M", model_keys(), -1, "P", "models", by=["M"])
    return f"{P_TEXT}; M = K rows: {text}", verdict


def _pool_sizes(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame | None:
    """Per model × point: M = the train pool's size and K = the (measured) test pool's, from the
    signal table's ``n`` per split: the sizes behind the intervention's μ_M and g_A. None if unknown."""
    signal = tables.get("signal")
    if signal is None or signal.empty or not {"split", "n", "point_index"} <= set(signal.columns):
        return None
    keys = model_keys() + ["point_index"]
    sizes = signal.pivot_table(index=keys, columns="split", values="n", aggfunc="first")
    if not {"train", "test"} <= set(sizes.columns):
        return None
    return sizes[["train", "test"]].set_axis(["M", "K"], axis=1).reset_index().dropna()


def rule_w4(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """At the smallest η of each model × point × view: held-out sign agreement (Wilson interval against 1/2 and,
    where the misalignment row of the same (point, view, M, K) exists, against B_exact) and held-out ratio."""
    frame = _table(
        tables,
        "intervention",
        [
            "point_index",
            "view",
            "eta",
            "ratio",
            "sign_agree",
            "observed_heldout",
            "ratio_heldout",
            "sign_agree_heldout",
        ],
    )
    frame = frame[np.isfinite(frame["eta"].astype(float))]
    if frame.empty:
        raise NotMeasured("intervention has no finite η")
    series = model_keys() + ["point_index", "view"]
    smallest = frame[frame["eta"] == frame.groupby(series)["eta"].transform("min")]
    agree = as_flag(smallest["sign_agree_heldout"])
    determined = smallest[agree.notna() & np.isfinite(smallest["ratio_heldout"].astype(float))]
    same = as_flag(smallest["sign_agree"])
    check = (
        f"first-order consistency check of the implementation (same test pool for prediction and outcome): "
        f"signs agree in {same.mean():.1%}, median observed/predicted {smallest['ratio'].median():.3f}"
    )
    if determined.empty:
        raise NotMeasured(
            f"intervention has no held-out measurement at the smallest η ({len(smallest)} rows undetermined); {check}"
        )
    k, n = int(as_flag(determined["sign_agree_heldout"]).sum()), len(determined)
    lo, hi = wilson(k, n)
    ratio = determined["ratio_heldout"].median()
    statistic = (
        f"held out (prediction from test pool A, outcome on test pool B) at the smallest η: {n} of "
        f"{len(smallest)} rows determined ({len(smallest) - n}: undetermined, NaN held-out value); signs "
        f"agree in {k}/{n} = {k / n:.1%} (Wilson {lo:.1%}–{hi:.1%}), median observed/predicted {ratio:.3f}"
    )
    violated = False
    sizes = _pool_sizes(tables)
    if not {"M", "K"} <= set(determined.columns) and sizes is not None:
        determined = determined.merge(sizes, on=model_keys() + ["point_index"], how="left")
    misalignment = tables.get("misalignment")
    if {"M", "K"} <= set(determined.columns) and misalignment is not None and not misalignment.empty:
        keys = model_keys() + ["point_index", "view", "M", "K"]
        bounds = misalignment.dropna(subset=["b_exact"]).groupby(keys, as_index=False)["b_exact"].first()
        matched = determined.merge(bounds, on=keys)
        if len(matched):
            m_k = int(as_flag(matched["sign_agree_heldout"]).sum())
            disagree_lo = 1 - wilson(m_k, len(matched))[1]
            bound = matched["b_exact"].mean()
            violated = disagree_lo > bound + BOUND_TOL
            statistic += (
                f"; {len(matched)} of these rows have a B_exact at the same (point, view, M, K) (M, K: the "
                f"pool sizes): sign disagreement {1 - m_k / len(matched):.1%} (Wilson lower "
                f"{disagree_lo:.1%}) against mean B_exact {bound:.3f}"
            )
        else:
            statistic += (
                "; no misalignment row with a B_exact at the intervention's (point, view, M, K) (M, K: "
                "the pool sizes), so judged against 1/2 only"
            )
    statistic += f"; {check}"
    low, high = W4_RATIO_RANGE
    if violated or hi < P_NULL:  # (a median ratio ≤ 0 is the same as agreement ≤ 1/2: ratio > 0 iff signs agree)
        return statistic, REFUTED
    if lo <= P_NULL:
        return statistic, NOT_DETECTABLE
    return statistic, CONFIRMED if k / n >= W4_MIN_SIGN_AGREE and low <= ratio <= high else NOT_CONFIRMED


def _nearest(bench: pd.DataFrame, dim: float) -> pd.Series:
    """The benchmark row nearest ``dim`` in log D."""
    return bench.iloc[int(np.argmin(np.abs(np.log(bench["dim"].to_numpy(float)) - math.log(dim))))]


def _time_ratio(bench: pd.DataFrame, dim: float) -> tuple[float, str]:
    """time(Gram)/time(covariance) at ``dim``: log–log interpolation between the benchmarked D around it,
    else the nearest benchmarked D (said in the text); 0 means the covariance could not be formed."""
    dims, ratios = bench["dim"].to_numpy(float), bench["gram_over_cov_time"].to_numpy(float)
    below, above = dims[dims <= dim], dims[dims >= dim]
    if len(below) and len(above):
        a, b = below.max(), above.min()
        ra, rb = ratios[dims == a][0], ratios[dims == b][0]
        if a == b:
            return float(ra), "measured"
        if ra > 0 and rb > 0:
            t = (math.log(dim) - math.log(a)) / (math.log(b) - math.log(a))
            return float(math.exp((1 - t) * math.log(ra) + t * math.log(rb))), f"interpolated {a:g}–{b:g}"
    row = _nearest(bench, dim)
    return float(row["gram_over_cov_time"]), f"nearest benchmarked D {row['dim']:g}"


def _crossover(bench: pd.DataFrame) -> str:
    """Where Gram turns cheaper than the covariance (time ratio crosses 1, log–log interpolation)."""
    dims, ratios = bench["dim"].to_numpy(float), bench["gram_over_cov_time"].to_numpy(float)
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


def rule_w5(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Per family, Gram/covariance time ratio at the largest D that family measured (dalign's dim)."""
    bench = tables.get("benchmarks")
    if bench is None or bench.empty:
        raise NotMeasured("no benchmarks timing (Gram U-statistics vs D×D covariance)")
    missing = [c for c in BENCHMARK_COLUMNS if c not in bench.columns]
    if missing:
        raise ValueError(f"benchmarks lack column(s) {missing}; need {BENCHMARK_COLUMNS}")
    try:
        dalign = _table(tables, "dalign", ["view", "n", "dim"]).dropna(subset=["dim"])
    except NotMeasured as why:
        raise NotMeasured(f"{why}: W5 judges the benchmarks at the dims this run measured") from None
    if dalign.empty:
        raise NotMeasured("dalign has no dims: nothing to compare the benchmarks with")
    bench = bench.dropna(subset=BENCHMARK_COLUMNS)
    parts, verdicts = [], []
    for family, rows in dalign.groupby("family"):
        near = bench
        if "n" in bench.columns and bench["n"].notna().any():
            n = rows["n"].median()
            gap = (bench["n"] - n).abs()
            near = bench[gap == gap.min()]
        near = near.groupby("dim", as_index=False).median(numeric_only=True).sort_values("dim")
        dims = sorted(rows["dim"].unique())
        at = [(dim, *_time_ratio(near, dim)) for dim in dims]
        largest, ratio, how = at[-1]
        memory = ""
        if {"gram_bytes", "covariance_bytes"} <= set(near.columns):
            row = _nearest(near, largest)
            if row["covariance_bytes"] > 0:
                memory = f", memory ratio {row['gram_bytes'] / row['covariance_bytes']:.3g} (at D {row['dim']:g})"
        shown = ", ".join(f"{r:.3g} at D {d:g}" + (f" ({h})" if h != "measured" else "") for d, r, h in at)
        n_text = f" (benchmarks at n = {near['n'].iloc[0]:g})" if "n" in near and near["n"].notna().all() else ""
        parts.append(f"{family}: time(Gram)/time(covariance) {shown}{n_text}; crossover D {_crossover(near)}{memory}")
        verdicts.append(ratio)
    ratios = np.array(verdicts)
    statistic = "; ".join(parts) + (
        f" — judged at each family's largest measured D: cheaper in "
        f"{int((ratios <= W5_MAX_TIME_RATIO).sum())}/{len(ratios)} families"
    )
    if (ratios <= W5_MAX_TIME_RATIO).mean() > MAJORITY:
        return statistic, CONFIRMED
    return statistic, REFUTED if (ratios > W5_REFUTE_TIME_RATIO).mean() > MAJORITY else NOT_DETECTABLE


TREND_RULE = (
    f"only rows whose interval excludes the null; per model the median over its usable points; ρ̄ = mean "
    f"over groups with ≥ {MIN_LEVELS} levels of Spearman ρ, {TREND_LEVEL:.0%} stratified bootstrap interval "
    f"and within-group permutation p ({TREND_DRAWS} draws, seed {TREND_SEED}); not detectable if at most "
    f"half the rows are usable, or ρ̄'s interval contains 0, or p ≥ {TREND_ALPHA:g}"
)
CLAIMS = [
    Claim(
        "D1",
        "The activation-gradient covariance is close to diagonal.",
        f"bias-corrected ‖Σ−diag Σ‖²_F / ‖Σ‖²_F (pooled view) per model × point, low-rank points excluded: if most "
        f"rows exceed their permutation null + {D1_NULL_SDS:g} sd (same n, p), confirmed when the median ratio ≤ "
        f"{D1_MAX_OFFDIAG}, refuted when above; if most rows are within the null, confirmed when null + "
        f"{D1_NULL_SDS:g} sd ≤ {D1_MAX_OFFDIAG} (the test resolves such a share), else not detectable",
        rule_d1,
    ),
    Claim(
        "D2",
        "The first-order activation-gradient signal decays as depth grows.",
        f"ρ(depth, ‖μ‖²) on the {D2_SPLIT} split per (dataset, family, width), {TREND_RULE}; confirmed if the "
        f"interval is below 0, refuted if above",
        rule_d2,
    ),
    Claim(
        "D3",
        "Test loss improves when depth and width grow together; depth alone at too small a width rebounds.",
        f"per (dataset, family), test loss mean over seeds: confirmed if at the smallest width test loss falls then "
        f"rises with depth (interior minimum, both changes > {D3_TOL:.0%}) and the best grid cell is at the largest "
        f"width, in all; refuted if the best cell is at the smallest width in all",
        rule_d3,
    ),
    Claim(
        "W1",
        "d_align grows with width.",
        f"ρ(width, d_align) (view={W1_VIEW}, split={W1_SPLIT}) per (dataset, family, depth), {TREND_RULE}; confirmed "
        f"if the interval is above 0 and the widest usable model's d_align interval lies above the narrowest's at "
        f"most depths, refuted if the interval is below 0",
        rule_w1,
    ),
    Claim(
        "W1 along training",
        "d_align grows with width where the mechanism lives: early in training.",
        f"the W1 trend on the E10 snapshots (view={W1_VIEW}, split={W1_SPLIT}) in two parts: at equal step, "
        f"strata (dataset, family, depth, step), at the steps where most d_align intervals of a family exclude 0; "
        f"at equal train loss, strata (dataset, family, depth, level) at {W1_LOSS_LEVELS} levels evenly spaced over "
        f"the train-loss range every model of the (dataset, family, depth) reaches, each model's d_align and "
        f"interval interpolated linearly along its steps where its train loss first reaches the level, at the "
        f"levels where most intervals exclude 0; {TREND_RULE}; confirmed (refuted) if both parts are, not "
        f"confirmed if one confirms and the other refutes, else not detectable; the last measurable step per "
        f"family is stated",
        rule_w1_training,
    ),
    Claim(
        "W2",
        "Misalignment falls with width at fixed (M, K); B_exact and B_align bound it, B_align conservatively.",
        f"P over draws from the model's own pools, at the largest M = K with some P > 0 (view={W2_VIEW}): "
        f"ρ(width, P) per (dataset, family, depth), {TREND_RULE.replace('the null', str(P_NULL))}; refuted if "
        f"Wilson p_lo > B_exact (two-sample) or > B_align in more than {1 - W2_CERT_FRACTION:.0%} of the rows with "
        f"that certificate (rows without one counted apart), or if the ρ interval is above 0; confirmed if it is "
        f"below 0, both certificates hold, one-sample B_exact ≤ B_align, and B_exact < {VACUOUS:g} in most rows "
        f"at that (M, K); else not confirmed",
        rule_w2,
    ),
    Claim(
        "W3",
        "Larger M, K lower misalignment further.",
        f"per model, ρ(M, P) over M = K, {TREND_RULE.replace('the null', str(P_NULL))}; confirmed if the interval "
        f"is below 0, refuted if above",
        rule_w3,
    ),
    Claim(
        "W4",
        "A zero-init residual step along −μ_M changes test loss with the predicted sign and keeps 96–99 % "
        "of the predicted magnitude at small η.",
        f"held out (prediction from test pool A, loss change on an independent test pool B), at each series' "
        f"smallest η: refuted if the Wilson interval of sign agreement is below {P_NULL:g}, or if the disagreement "
        f"rate exceeds the mean B_exact of the same (point, view, M, K) (M, K: the train and test pool sizes, where "
        f"the misalignment table has them) beyond its Wilson interval; not detectable if the interval contains "
        f"{P_NULL:g}; confirmed if signs agree in ≥ {W4_MIN_SIGN_AGREE:.0%} and "
        f"the median held-out ratio is in [{W4_RATIO_RANGE[0]}, {W4_RATIO_RANGE[1]}]; the same-pool ratio is "
        f"reported as a consistency check only",
        rule_w4,
    ),
    Claim(
        "W5",
        "d_align is cheap: a few forward/backward passes, never forming the D×D covariance.",
        f"time(Gram)/time(covariance) from the benchmarks at the dims this run measured (dalign's dim, per family; "
        f"log–log interpolation, else the nearest benchmarked D), judged at each family's largest D: confirmed if "
        f"≤ {W5_MAX_TIME_RATIO:g} in most families, refuted if > {W5_REFUTE_TIME_RATIO:g} in most, else not "
        f"detectable",
        rule_w5,
    ),
    Claim(
        "E8",
        "Inserting a zero-initialized block (jumpboard, training, fallback) lowers test loss beyond what the "
        "same extra training gives the old model (Paper D).",
        f"per (model, point): gain = L_test(control) − L_test(selected expanded model) = the selected model's "
        f"test-loss drop from the old model minus the control's (both trained the same steps on the same "
        f"batches); a row is usable when |gain| > {E8_NOISE_SES:g} evaluation SEs (sd/√n of the per-example "
        f"differences selected − control on the test examples); not detectable if at most half the rows are "
        f"usable; confirmed if the {WILSON_LEVEL:.0%} Wilson interval of the share of wins (gain > 0) among the "
        f"usable rows is above {P_NULL:g}, refuted if below, else not detectable; not measured without the SE "
        f"column",
        rule_expansion,
    ),
]


def claims(
    tables: Mapping[str, pd.DataFrame], benchmarks: pd.DataFrame | Mapping[str, float] | None = None
) -> pd.DataFrame:
    """One row per claim: claim, statement, statistic, rule, verdict.

    ``benchmarks`` (columns ``BENCHMARK_COLUMNS``, or one dict of them) overrides ``tables['benchmarks']``.
    """
    tables = dict(tables)
    if benchmarks is not None:
        tables["benchmarks"] = benchmarks if isinstance(benchmarks, pd.DataFrame) else pd.DataFrame([dict(benchmarks)])
    rows = []
    for claim in CLAIMS:
        try:
            statistic, verdict = claim.evaluate(tables)
        except NotMeasured as why:
            statistic, verdict = str(why), NOT_MEASURED
        rows.append(
            {
                "claim": claim.id,
                "statement": claim.statement,
                "statistic": statistic,
                "rule": claim.rule,
                "verdict": verdict,
            }
        )
    return pd.DataFrame(rows, columns=["claim", "statement", "statistic", "rule", "verdict"])


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _markdown(frame: pd.DataFrame) -> str:
    """A GitHub markdown table of ``frame`` (pipes in cells escaped)."""
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def _caption(captions_dir: Path, stem: str) -> str:
    path = captions_dir / f"{stem}.rst"
    return path.read_text().strip() if path.exists() else f"(no caption: {path} is missing)"


def verdict_summary(report_md: str | Path, figures_dir: str | Path) -> str:
    """A few lines for the end of a run: where the report and figures are, and each claim's verdict
    (read back from the report's claims table)."""
    lines = Path(report_md).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| claim |")) + 2  # past the rule line
    table = itertools.takewhile(lambda line: line.startswith("| "), lines[start:])
    cells = [re.split(r"(?<!\\)\|", line) for line in table]
    rows = [f"  {c[1].strip():<18} {c[-2].strip()}" for c in cells]
    return "\n".join(
        [
            f"report:  {report_md}",
            f"figures: {figures_dir}/",
            "verdicts:",
            *rows,
            "HTML report: snakemake --report report.zip",
        ]
    )


def runtime_section(runtime: pd.DataFrame, top: int = 5) -> list[str]:
    """Markdown lines: the run's total wall and CPU time over its jobs and the ``top`` longest jobs."""
    longest = runtime.sort_values("wall_seconds", ascending=False).head(top)
    rows = "\n".join(
        f"| {r.step} | {r.job} | {r.wall_seconds:.1f} | {r.cpu_seconds:.1f} | {r.max_rss_mb:.0f} |"
        for r in longest.itertuples()
    )
    return [
        "## Runtime",
        "",
        f"{len(runtime)} jobs: {runtime['wall_seconds'].sum():.0f} s of job wall time, "
        f"{runtime['cpu_seconds'].sum():.0f} s of CPU time (Snakemake's benchmark records; "
        f"`tables/runtime.csv`). The longest jobs:",
        "",
        "| step | job | wall s | CPU s | max RSS MB |",
        "|---|---|---|---|---|",
        rows,
        "",
    ]


def write_report(
    tables_dir: str | Path,
    figures_dir: str | Path,
    out_md: str | Path,
    *,
    captions_dir: str | Path = "workflow/report",
    benchmarks: pd.DataFrame | Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Write ``out_md``: the claims table from the tables in ``tables_dir`` (missing ones count as
    not measured; ``benchmarks.csv`` there is read if present), then each figure of ``figures_dir``
    (relative PNG link) with its caption ``captions_dir/<stem>.rst`` (claims table: ``claims.rst``);
    return the claims table."""
    tables_dir, figures_dir, out_md, captions_dir = map(Path, (tables_dir, figures_dir, out_md, captions_dir))
    tables = {name: read_table(path, name) for name in CLAIM_TABLES if (path := table_path(tables_dir, name)).exists()}
    if benchmarks is None and (tables_dir / "benchmarks.csv").exists():
        benchmarks = pd.read_csv(tables_dir / "benchmarks.csv")
    verdicts = claims(tables, benchmarks)
    lines = ["# Claims report", "", _caption(captions_dir, "claims"), "", _markdown(verdicts), "", "## Figures", ""]
    for stem in FIGURES:
        png = figures_dir / f"{stem}.png"
        lines.append(f"### {stem}")
        lines.append("")
        lines.append(
            f"![{stem}]({Path(os.path.relpath(png, out_md.parent)).as_posix()})"
            if png.exists()
            else "(figure not produced in this run)"
        )
        lines += ["", _caption(captions_dir, stem), ""]
    if (runtime := table_path(tables_dir, "runtime")).exists():
        lines += runtime_section(read_table(runtime, "runtime"))
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text("\n".join(lines))
    return verdicts
