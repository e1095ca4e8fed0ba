"""W1 along training (E10): d_align grows with width at equal step and at equal train loss.

Each part is a ``trend`` over every snapshot row, the values scaled within each (dataset, family, depth,
step or loss level) cell, so the decades d_align falls along training weigh alike; steps of one model
are not independent, so each model enters once, as the mean over its steps and points.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.tables import model_keys
from .common import NOT_DETECTABLE, Claim, Result, Tables, agreed, levels_present, only, table
from .trend import Trend, null_bound, trend
from .w1 import PAPER_W1, W1_SPLIT, W1_STRATA, W1_VIEW

W1_LOSS_LEVELS = 8  # train-loss levels per (dataset, family, depth) at which widths are compared
MATCHED = ["d_align", "d_align_lo", "d_align_hi", "d_align_se"]


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
    (none where it is empty); per model × point, ``MATCHED`` at each level's first crossing
    (``first_crossing``). Columns: model keys, point_index, level (0, 1, …), train_loss (ℓ), ``MATCHED``."""
    keys = model_keys() + ["point_index"]
    parts = []
    for _, stratum in trajectory.groupby(W1_STRATA):
        reach = stratum.groupby("model")["train_loss"].agg(["min", "max"])
        low, high = reach["min"].max(), reach["max"].min()
        if not low < high:
            continue
        levels = np.linspace(low, high, W1_LOSS_LEVELS)
        for key, series in stratum.sort_values("step").groupby(keys):
            at = first_crossing(series["train_loss"].to_numpy(float), series[MATCHED].to_numpy(float), levels)
            part = pd.DataFrame(at, columns=MATCHED).assign(level=range(len(levels)), train_loss=levels)
            parts.append(part.assign(**dict(zip(keys, key))))
    empty = pd.DataFrame(columns=keys + ["level", "train_loss"] + MATCHED)
    return pd.concat(parts, ignore_index=True) if parts else empty


def _part(rows: pd.DataFrame, at: str) -> Trend:
    return trend(rows, "d_align", "d_align_se", "width", W1_STRATA, scale_cells=W1_STRATA + [at])


def rule_w1_training(tables: Tables) -> Result:
    """The W1 slope at equal step and at equal train loss; the verdict needs both parts to agree."""
    columns = ["step", "train_loss", "view", "split", "n", *MATCHED, "d_align_ucb"]
    trajectory = only(
        only(table(tables, "trajectory", columns), "view", W1_VIEW, "trajectory"), "split", W1_SPLIT, "trajectory"
    )
    levels_present(trajectory, W1_STRATA, "width", "trajectory")
    step, loss = _part(trajectory, "step"), _part(at_matched_loss(trajectory), "level")
    verdict = agreed(step.slope.verdict(sign=1), loss.slope.verdict(sign=1))
    statistic = f"slope per width doubling: equal step {step.slope.text()}, equal loss {loss.slope.text()}"
    if verdict == NOT_DETECTABLE:
        last = trajectory[trajectory["step"] == trajectory.groupby("model")["step"].transform("max")]
        statistic += f"; last snapshot: {null_bound(last, 'd_align', 'd_align_ucb', 'd_align_se')}"
    detail = (
        f"{PAPER_W1[0].upper()}{PAPER_W1[1:]}. view={W1_VIEW}, split={W1_SPLIT}; d_align scaled within "
        f"(dataset, family, depth, step or level). At equal step: {step.detail(W1_STRATA)}. At equal train "
        f"loss ({W1_LOSS_LEVELS} levels per (dataset, family, depth) over the train-loss range all its models "
        f"reach, d_align and its SE interpolated at the first crossing): {loss.detail(W1_STRATA)}"
    )
    return Result(verdict, statistic, detail)


W1_TRAINING = Claim(
    "W1 along training",
    "d_align grows with width where the mechanism lives: early in training.",
    f"the W1 regression on every E10 snapshot row (view={W1_VIEW}, split={W1_SPLIT}), d_align scaled within each "
    f"(dataset, family, depth, step) cell, each model once (mean over steps and points); again at {W1_LOSS_LEVELS} "
    f"common train-loss levels per (dataset, family, depth), interpolated at the first crossing; confirmed "
    f"(refuted) if both slopes' 95 % t intervals are above (below) 0, not confirmed if they disagree, else not "
    f"detectable with the UCB of d_align at the last snapshot",
    rule_w1_training,
)
