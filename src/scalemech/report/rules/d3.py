"""D3: test loss improves when depth and width grow together; depth alone at too small a width rebounds.

Per (dataset, family), on the cells (depth, width) the grids hold (a full grid or not: the rebound needs
≥ 3 depths at the smallest width, the position ≥ 2 widths): each cell's mean test loss over its ``n`` seeds
with an SE. From the seeds where some cells have ≥ 2: the within-cell variance pooled over those cells
(t with Σ(n − 1) df), ``SE = √(pooled/n)`` for every cell, so a cell left with one seed (its other model
failed the training criterion) keeps an SE, the seed spread its sister cells show, and the detail names it.
Where no cell has two seeds, from the evaluation SE ``test_loss_se`` (the per-example test losses' ``sd/√n``,
training's metrics; normal; it covers only the test-set draw, so the verdict is about these trained models,
not the recipe's seed spread). With one seed a cell and no evaluation SE the claim is not measured.
Two contrasts, each decided by its interval:

- **rebound** at the smallest width: the best interior depth ``j*`` against both ends, ``fall = L(d₁) −
  L(j*)`` and ``rise = L(d_k) − L(j*)``; shown when both lower bounds are above 0 (one-sided 2.5 %,
  Bonferroni over the interior depths ``j*`` is chosen from) and the rise is one of generalization: the
  gap ``G = L − L_train`` (test minus train loss, each model's, its cells' SEs as the test loss's, or √2
  times the evaluation SE) rises too, ``G(d_k) − G(j*)`` with its lower bound above 0. Paper D's rebound is
  a generalization cost; a rise of test loss that the train loss carries (a deep narrow model that fits its
  training set worse) is underfitting, and the part says so and stays not detectable. Refuted when every
  interior depth is above one end (each of the two at 1.25 %);
- **best cell's position**: the best cell at the largest width ``b*`` against every other cell,
  ``margin = min_c L(c) − L(b*)``; shown when every ``L(c) − L(b*)`` has its lower bound above 0
  (Bonferroni over the cells ``b*`` is chosen from), refuted when some other cell is below every
  largest-width cell (Bonferroni over the other cells).

Parts and families combine by ``common.combined``: confirmed when all are, refuted when one is (not
confirmed when another is confirmed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ..common import (
    CONFIRMED,
    MIN_LEVELS,
    NOT_DETECTABLE,
    POWER,
    REFUTED,
    Claim,
    NotMeasured,
    Result,
    Tables,
    combined,
    table,
)

ALPHA = 0.025  # one-sided level per direction (a 95 % two-sided interval)
MIN_SEEDS = 2  # seeds per cell for an SE from the seeds
EVALUATION_SE = "test_loss_se"  # optional: the evaluation SE of one model's test loss
GAP = "gap"  # test minus train loss, the generalization gap a rebound must carry
READS = {"training": ["test_loss", "train_loss", EVALUATION_SE]}


@dataclass(frozen=True)
class Grid:
    """One (dataset, family)'s cells: mean test loss ``loss`` and its ``se`` by (depth, width), the
    t degrees of freedom (inf: normal) and where the SE comes from."""

    loss: pd.Series
    se: pd.Series
    df: float
    source: str
    models: int

    def contrast(self, a: tuple, b: tuple) -> tuple[float, float]:
        """``L(a) − L(b)`` and its SE (the cells independent)."""
        return float(self.loss[a] - self.loss[b]), float(np.hypot(self.se[a], self.se[b]))

    def lower(self, a: tuple, b: tuple, alpha: float) -> float:
        """One-sided ``1 − alpha`` lower bound of ``L(a) − L(b)``."""
        value, se = self.contrast(a, b)
        return value - stats.t.ppf(1 - alpha, self.df) * se

    def interval(self, a: tuple, b: tuple, alpha: float) -> str:
        value, se = self.contrast(a, b)
        q = stats.t.ppf(1 - alpha, self.df) * se
        return f"{value:.3g} [{value - q:.3g}, {value + q:.3g}]"

    def mde(self, a: tuple, b: tuple, alpha: float) -> float:
        return float((stats.t.ppf(1 - alpha, self.df) + stats.t.ppf(POWER, self.df)) * self.contrast(a, b)[1])


def grid(rows: pd.DataFrame, column: str = "test_loss", evaluation: float = 1.0) -> Grid | str:
    """The cells of one (dataset, family) with their SEs (module doc) of ``column``, or why none; without seeds
    the evaluation SE times ``evaluation`` (the gap's: √2, a train subset evaluated as the test set is)."""
    cells = rows.groupby(["depth", "width"])[column]
    mean, n = cells.mean(), cells.count()
    if n.max() >= MIN_SEEDS:
        seeded = n >= MIN_SEEDS
        df = float((n[seeded] - 1).sum())
        pooled = float(((n - 1) * cells.var(ddof=1).fillna(0.0))[seeded].sum() / df)
        alone = tuple(n.index[~seeded])
        source = f"seeds ({n.min()}–{n.max()} per cell, t with {df:g} df)"
        if alone:
            cells_text = ", ".join(f"d{d:g}-w{w:g}" for d, w in alone)
            source += f"; one seed left in {cells_text}: its SE the seed spread pooled over the other cells"
        return Grid(mean, np.sqrt(pooled / n), df, source, len(rows))
    if EVALUATION_SE in rows and np.isfinite(rows[EVALUATION_SE].astype(float)).all():
        se = np.sqrt(rows.groupby(["depth", "width"])[EVALUATION_SE].agg(lambda s: np.mean(s**2)) / n)
        return Grid(mean, evaluation * se, np.inf, "evaluation SE (test-set draw only, normal)", len(rows))
    return f"{n.min()} seed(s) in some cell and no evaluation SE ({EVALUATION_SE})"


@dataclass(frozen=True)
class Part:
    """A part's verdict, its deciding contrast (``short``, the front page's), how it was reached, the MDE."""

    verdict: str
    short: str
    text: str
    mde: float


def rebound(g: Grid, gap: Grid, width: float) -> Part:
    """The rebound part at ``width`` (module doc): test loss ``g`` down then up with depth, and the rise carried
    by the generalization ``gap``."""
    depths = sorted(d for d, w in g.loss.index if w == width)
    ends, interior = ((depths[0], width), (depths[-1], width)), [(d, width) for d in depths[1:-1]]
    best = min(interior, key=lambda cell: g.loss[cell])
    alpha = ALPHA / len(interior)
    generalization = gap.lower(ends[1], best, alpha) > 0
    rebounds = all(g.lower(end, best, alpha) > 0 for end in ends)
    if rebounds:
        verdict = CONFIRMED if generalization else NOT_DETECTABLE
    elif all(any(g.lower(j, end, ALPHA / 2) > 0 for end in ends) for j in interior):
        verdict = REFUTED
    else:
        verdict = NOT_DETECTABLE
    rise, gap_rise = g.interval(ends[1], best, alpha), gap.interval(ends[1], best, alpha)
    carried = ": underfitting not excluded" if rebounds and not generalization else ""
    short = f"rise {rise}, gap {gap_rise}{carried}"
    text = (
        f"at width {width:g}, best interior depth {best[0]:g}: fall {g.interval(ends[0], best, alpha)}, rise {rise};"
        f" the gap test − train loss rises {gap_rise}{carried}"
    )
    return Part(verdict, short, text, max(*(g.mde(end, best, alpha) for end in ends), gap.mde(ends[1], best, alpha)))


def position(g: Grid, width: float) -> Part:
    """The best cell's position (module doc): is the best cell at the largest ``width``?"""
    largest = [cell for cell in g.loss.index if cell[1] == width]
    others = [cell for cell in g.loss.index if cell[1] != width]
    best, rival = min(largest, key=lambda c: g.loss[c]), min(others, key=lambda c: g.loss[c])
    if all(g.lower(c, best, ALPHA / len(largest)) > 0 for c in others):
        verdict = CONFIRMED
    elif all(g.lower(b, rival, ALPHA / len(others)) > 0 for b in largest):
        verdict = REFUTED
    else:
        verdict = NOT_DETECTABLE
    margin = g.interval(rival, best, ALPHA / len(largest))
    text = (
        f"best cell at width {width:g} (depth {best[0]:g}) against the best elsewhere (depth {rival[0]:g}, width "
        f"{rival[1]:g}): margin {margin}"
    )
    return Part(verdict, f"margin {margin}", text, g.mde(rival, best, ALPHA / len(largest)))


def rule_d3(tables: Tables) -> Result:
    """Per (dataset, family) the rebound at the smallest width and the best cell at the largest width,
    each decided by its intervals; ``combined`` over parts and families."""
    training = table(tables, "training", ["test_loss", "train_loss"])
    finite = training.dropna(subset=["test_loss", "train_loss"]).assign(
        **{GAP: lambda t: t["test_loss"].astype(float) - t["train_loss"].astype(float)}
    )
    if finite.empty:
        raise NotMeasured("training table has only NaN test losses")
    parts, skipped = [], []
    for (dataset, family), rows in finite.groupby(["dataset", "family"]):
        narrow = rows[rows["width"] == rows["width"].min()]
        if narrow["depth"].nunique() < MIN_LEVELS or rows["width"].nunique() < 2:
            continue
        name = f"{dataset}/{family}"
        g, gap = grid(rows), grid(rows, GAP, evaluation=np.sqrt(2.0))
        if isinstance(g, str):
            skipped.append(f"{name}: {g}")
            continue
        parts.append((name, g, rebound(g, gap, rows["width"].min()), position(g, rows["width"].max())))
    if not parts:
        why = (
            "; ".join(skipped) or f"no (dataset, family) has ≥ {MIN_LEVELS} depths at its smallest width and ≥ 2 widths"
        )
        raise NotMeasured(f"D3 needs an SE of each cell's test loss: {why}" if skipped else why)
    verdict = combined(*[combined(r.verdict, p.verdict) for _, _, r, p in parts])
    statistic = "; ".join(
        f"{name}: rebound {r.verdict} ({r.short}), best cell at the widest {p.verdict} ({p.short})"
        for name, _, r, p in parts
    )
    if verdict == NOT_DETECTABLE:
        statistic += "; contrast MDE " + ", ".join(f"{max(r.mde, p.mde):.2g}" for _, _, r, p in parts)
    detail = "; ".join(
        f"{name}: {g.models} models in {len(g.loss)} cells, SE from {g.source}; rebound {r.verdict}: {r.text} (MDE "
        f"{r.mde:.2g}); position {p.verdict}: {p.text} (MDE {p.mde:.2g})"
        for name, g, r, p in parts
    )
    detail += "".join(f"; {why}" for why in skipped)
    detail += f"; {len(training) - len(finite)} of {len(training)} models with a NaN test or train loss"
    return Result(verdict, statistic, detail)


D3 = Claim(
    "D3",
    "Test loss improves when depth and width grow together; depth alone at too small a width rebounds.",
    "per (dataset, family), each depth × width cell's mean test loss with its SE (the seeds' within-cell variance "
    "pooled over the cells with ≥ 2 seeds, a cell left with one seed included; with one seed a cell everywhere, the"
    " evaluation SE over test examples; neither: not measured); rebound: at the smallest width the best interior "
    "depth below both the shallowest and the deepest (one-sided 97.5 % bounds, Bonferroni over interior depths) "
    "with the rise carried by the gap test − train loss (its lower bound above 0: a generalization cost, not "
    "underfitting), refuted if every interior depth is above an end; position: the best cell at the largest width "
    "below every other cell (Bonferroni over its choice), refuted if another cell is below all of them; confirmed if "
    "both parts"
    " are in every (dataset, family), refuted if any part is (not confirmed if another is confirmed), else not "
    "detectable with the contrasts' MDE",
    rule_d3,
    READS,
    figure="F3_rebound",
)
