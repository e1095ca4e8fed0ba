"""W1 along training (E10): d_align grows with width early in training, judged at equal step.

Two comparisons, each a ``trend`` over every snapshot row, the values scaled within each (dataset,
family, depth, step or loss level) cell, so the decades d_align falls along training weigh alike;
steps of one model are not independent, so each model enters once, as the mean over its steps and points.

- **Equal step** (decides): widths after the same number of optimizer updates. The mean gradient is
  removed by the updates (docs/science.md §7.6: d_align falls below 1 within 5 AdamW steps), so the
  step is the clock of what is measured; this comparison tests the width effect at a given amount of
  training.
- **Equal train loss** (reported, not decided on): widths at the same fit. It reacts to training
  speed: a wider model reaches a loss in fewer steps, so at equal loss it sits earlier in training,
  where d_align has decayed less, and the comparison shows a width effect even where there is none at
  equal step. It is stated beside the verdict so that a reader sees when the two disagree.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...core.tables import model_keys
from ..common import NOT_DETECTABLE, Claim, Result, Tables, levels_present, only, table
from ..trend import Trend, null_bound, trend
from .w1 import PAPER_W1, W1_SPLIT, W1_STRATA, W1_VIEW

W1_LOSS_LEVELS = 8  # train-loss levels per (dataset, family, depth) at which widths are compared
MATCHED = ["d_align", "d_align_lo", "d_align_hi", "d_align_se"]
READS = {"trajectory": ["point_index", "step", "train_loss", "view", "split", "n", *MATCHED, "d_align_ucb"]}


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
    names, values, losses = [], [], []
    for _, stratum in trajectory.groupby(W1_STRATA):
        reach = stratum.groupby("model")["train_loss"].agg(["min", "max"])
        low, high = reach["min"].max(), reach["max"].min()
        if not low < high:
            continue
        levels = np.linspace(low, high, W1_LOSS_LEVELS)
        ordered = stratum.assign(series=stratum.groupby(keys, sort=False).ngroup()).sort_values(["series", "step"])
        series = ordered["series"].to_numpy()
        loss, matched = ordered["train_loss"].to_numpy(float), ordered[MATCHED].to_numpy(float)
        starts = np.flatnonzero(np.r_[True, series[1:] != series[:-1]])
        for start, stop in zip(starts, np.r_[starts[1:], len(series)]):
            values.append(first_crossing(loss[start:stop], matched[start:stop], levels))
            losses.append(levels)
        names += list(ordered.iloc[starts][keys].itertuples(index=False, name=None))
    if not names:
        return pd.DataFrame(columns=keys + ["level", "train_loss"] + MATCHED)
    frame = pd.DataFrame(names, columns=keys).loc[np.repeat(np.arange(len(names)), W1_LOSS_LEVELS)]
    return frame.reset_index(drop=True).assign(
        level=np.tile(np.arange(W1_LOSS_LEVELS), len(names)),
        train_loss=np.concatenate(losses),
        **dict(zip(MATCHED, np.concatenate(values).T)),
    )[keys + ["level", "train_loss"] + MATCHED]


def _part(rows: pd.DataFrame, at: str) -> Trend:
    return trend(rows, "d_align", "d_align_se", "width", W1_STRATA, scale_cells=W1_STRATA + [at])


def rule_w1_training(tables: Tables) -> Result:
    """The W1 slope at equal step decides (confirmed above 0, refuted below); the slope at equal train
    loss is stated beside it, not decided on (it reacts to training speed: module doc)."""
    trajectory = only(
        only(table(tables, "trajectory", READS["trajectory"]), "view", W1_VIEW, "trajectory"),
        "split",
        W1_SPLIT,
        "trajectory",
    )
    levels_present(trajectory, W1_STRATA, "width", "trajectory")
    step, loss = _part(trajectory, "step"), _part(at_matched_loss(trajectory), "level")
    verdict = step.slope.verdict(sign=1)
    statistic = (
        f"slope per width doubling at equal step {step.slope.text()} ({step.slope.counted}); equal loss "
        f"{loss.slope.text()} (description)"
    )
    last = trajectory[trajectory["step"] == trajectory.groupby("model")["step"].transform("max")]
    if verdict == NOT_DETECTABLE:
        statistic += "; " + step.slope.null_text("slope")
    detail = (
        f"{PAPER_W1[0].upper()}{PAPER_W1[1:]}. view={W1_VIEW}, split={W1_SPLIT}; d_align scaled within "
        f"(dataset, family, depth, step or level). At equal step (decides: widths after the same number of "
        f"updates): {step.detail(W1_STRATA)}. At equal train loss (widths at the same fit; a faster-training "
        f"width sits earlier in training there, so this part also shows training speed; {W1_LOSS_LEVELS} levels "
        f"per (dataset, family, depth) over the train-loss range all its models reach, d_align and its SE "
        f"interpolated at the first crossing): {loss.detail(W1_STRATA)}; equal-loss verdict alone: "
        f"{loss.slope.verdict(sign=1)}"
    )
    if verdict == NOT_DETECTABLE:
        detail += f"; last snapshot rows: {null_bound(last, 'd_align', 'd_align_ucb', 'd_align_se')}"
    return Result(verdict, statistic, detail, (("slope at equal step", step.slope),))


W1_TRAINING = Claim(
    "W1 along training",
    "d_align grows with width where the mechanism lives: early in training.",
    f"the W1 regression on every E10 snapshot row (view={W1_VIEW}, split={W1_SPLIT}), d_align scaled within each "
    f"(dataset, family, depth, step) cell, each model once (mean over steps and points), at equal step: "
    f"confirmed (refuted) if the slope's 95 % t interval is above (below) 0, else not detectable with its limit "
    f"and minimum detectable slope; the same at {W1_LOSS_LEVELS} common train-loss levels per (dataset, family, "
    f"depth), interpolated at the first crossing, is reported and not decided on (it reacts to training speed)",
    rule_w1_training,
    READS,
    figure="F8_dalign_over_training",
    regime="along training (every E10 snapshot)",
)
