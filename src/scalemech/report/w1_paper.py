"""W1 at the paper's widths: the E10 width trend of d_align among models at least 512 wide, step by step.

At each snapshot step ``s``, ``trend`` (models the units) gives the slope of d_align on log₂ width, in
d_align's own units so that it compares with the paper's: 3.9 at 512 → 9.5 at 3072 is a slope of
``(9.5 − 3.9) / log₂ 6 ≈ 2.2`` per doubling. Beside it, the mean over models of each model's d_align (mean
over points) at the smallest and the largest width. The verdict is the slope's at step 0 (every width at
initialization); a null step states its bound (``null_bound``).
"""

from __future__ import annotations

import math

import pandas as pd

from ..figures.paper_values import PAPER_W_DALIGN
from .common import NOT_DETECTABLE, Claim, NotMeasured, Result, Tables, levels_present, only, table
from .trend import Trend, null_bound, trend
from .units import per_model
from .w1 import W1_SPLIT, W1_STRATA, W1_VIEW

PAPER_SLOPE = (PAPER_W_DALIGN[3072] - PAPER_W_DALIGN[512]) / math.log2(3072 / 512)  # d_align per doubling
MIN_PAPER_WIDTH = min(PAPER_W_DALIGN)


def width_means(rows: pd.DataFrame) -> pd.Series:
    """Mean over models of each model's mean d_align (over points), by width."""
    return per_model(rows, "d_align", None).groupby("width")["y"].mean()


def step_text(step: int, fit: Trend, means: pd.Series) -> str:
    """``step s: slope … ; d_align w₀ → w₁: m₀ → m₁`` (the smallest and the largest width measured)."""
    ends = f"{means.index[0]:g} → {means.index[-1]:g}: {means.iloc[0]:.3g} → {means.iloc[-1]:.3g}"
    return f"step {step}: slope {fit.slope.text()}, d_align {ends}"


def rule_w1_paper(tables: Tables) -> Result:
    """The step-0 slope decides (confirmed above 0, refuted below); every step's slope and means are stated."""
    columns = ["step", "view", "split", "n", "d_align", "d_align_se", "d_align_ucb"]
    trajectory = only(
        only(table(tables, "trajectory", columns), "view", W1_VIEW, "trajectory"), "split", W1_SPLIT, "trajectory"
    )
    wide = trajectory[trajectory["width"] >= MIN_PAPER_WIDTH]
    if wide.empty:
        widths = ", ".join(f"{w:g}" for w in sorted(trajectory["width"].unique()))
        raise NotMeasured(f"no trajectory rows at widths ≥ {MIN_PAPER_WIDTH} (widths {widths})")
    levels_present(wide, W1_STRATA, "width", f"trajectory at widths ≥ {MIN_PAPER_WIDTH}")
    parts = {int(step): rows for step, rows in wide.groupby("step")}
    if 0 not in parts:
        raise NotMeasured(f"no snapshot at step 0 (steps {sorted(parts)})")
    fits = {step: trend(rows, "d_align", "d_align_se", "width", W1_STRATA) for step, rows in parts.items()}
    texts = {step: step_text(step, fit, width_means(parts[step])) for step, fit in fits.items()}
    bounds = {
        step: f" ({null_bound(parts[step], 'd_align', 'd_align_ucb', 'd_align_se')})"
        for step, fit in fits.items()
        if fit.slope.verdict(sign=1) == NOT_DETECTABLE
    }
    last = max(parts)
    paper = f"paper: {PAPER_W_DALIGN[512]} → {PAPER_W_DALIGN[3072]}, slope ≈ {PAPER_SLOPE:.2g}"
    statistic = f"{texts[0]}; {texts[last]} ({paper})"
    detail = (
        f"view={W1_VIEW}, split={W1_SPLIT}, widths ≥ {MIN_PAPER_WIDTH}, d_align unscaled; at each step "
        f"{fits[0].detail(W1_STRATA)}. " + "; ".join(texts[step] + bounds.get(step, "") for step in sorted(parts))
    )
    return Result(fits[0].slope.verdict(sign=1), statistic, detail)


W1_PAPER = Claim(
    "W1 at the paper's widths",
    "d_align grows with width, from about 3.9 at width 512 to about 9.5 at width 3072 (LLaMA-style).",
    f"the W1 regression (view={W1_VIEW}, split={W1_SPLIT}, models the units, d_align in its own units) on the E10 "
    f"rows of models ≥ {MIN_PAPER_WIDTH} wide, at each snapshot step; confirmed (refuted) if the step-0 slope's 95 % "
    f"t interval is above (below) 0, else not detectable with the largest UCB of d_align; every step's slope and "
    f"the mean d_align at the smallest and largest width stated beside the paper's",
    rule_w1_paper,
)
