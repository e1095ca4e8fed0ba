"""W1 at the paper's widths: the E10 width trend of d_align among models at least 512 wide, step by step,
its size tested against Paper W's.

Paper W's 3.9 at width 512 → 9.5 at 3072 is a growth ``d_align ∝ width^γ`` with
``γ = log₂(9.5/3.9)/log₂ 6 ≈ 0.50`` (≈ 2.2 in d_align per doubling between those widths). At each
snapshot step, per model the mean d_align over its points, then ``log₂`` of it (SE by the delta method,
``s/(y ln 2)``; a model whose mean is ≤ 0 is counted and left out), so strata of any magnitude are on
one scale before they share a variance; across models the weighted regression on log₂ width with one
intercept per stratum (``units``) gives γ̂ with a 95 % t interval. The verdict is step 0's (every width
at initialization): confirmed when the interval lies above 0 and holds the paper's γ, refuted when it
excludes the paper's γ (growth smaller, none, or larger), else not detectable. Beside it, the mean
over models of d_align at the smallest and the largest width, every step's γ̂ in the detail.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...figures.paper_values import PAPER_W_DALIGN
from ..common import CONFIRMED, NOT_DETECTABLE, REFUTED, Claim, NotMeasured, Result, Tables, levels_present, only, table
from ..units import Estimate, across_models, per_model
from .w1 import W1_SPLIT, W1_STRATA, W1_VIEW

PAPER_SLOPE = (PAPER_W_DALIGN[3072] - PAPER_W_DALIGN[512]) / math.log2(3072 / 512)  # d_align per doubling
PAPER_EXPONENT = math.log2(PAPER_W_DALIGN[3072] / PAPER_W_DALIGN[512]) / math.log2(3072 / 512)  # γ
MIN_PAPER_WIDTH = min(PAPER_W_DALIGN)
READS = {"trajectory": ["point_index", "step", "view", "split", "d_align", "d_align_se"]}


def exponent(rows: pd.DataFrame) -> tuple[Estimate, int, pd.Series]:
    """γ̂ of one step (module doc), the number of models left out (mean d_align ≤ 0), and the mean over
    models of each model's mean d_align by width (rows with a finite d_align and SE)."""
    finite = rows[np.isfinite(rows["d_align"].astype(float)) & np.isfinite(rows["d_align_se"].astype(float))]
    units = per_model(finite, "d_align", "d_align_se")
    positive = units[units["y"] > 0]
    logged = positive.assign(y=np.log2(positive["y"]), s=positive["s"] / (positive["y"] * math.log(2)))
    means = units.groupby("width")["y"].mean()
    return across_models(logged, "width", W1_STRATA), len(units) - len(positive), means


def size_verdict(estimate: Estimate) -> str:
    """CONFIRMED: above 0 and holding the paper's γ; REFUTED: excluding it; else NOT_DETECTABLE."""
    if not np.isfinite(estimate.lo):
        return NOT_DETECTABLE
    if estimate.hi < PAPER_EXPONENT or estimate.lo > PAPER_EXPONENT:
        return REFUTED
    return CONFIRMED if estimate.lo > 0 else NOT_DETECTABLE


def step_text(step: int, fit: Estimate, means: pd.Series) -> str:
    """``step s: γ … ; d_align w₀ → w₁: m₀ → m₁`` (the smallest and the largest width measured)."""
    ends = f"{means.index[0]:g} → {means.index[-1]:g}: {means.iloc[0]:.3g} → {means.iloc[-1]:.3g}"
    return f"step {step}: γ {fit.text(2)}, d_align {ends}"


def rule_w1_paper(tables: Tables) -> Result:
    """Step 0's exponent γ̂ against the paper's (confirmed, refuted or not detectable: ``size_verdict``);
    every step's γ̂ and means are stated."""
    trajectory = only(
        only(table(tables, "trajectory", READS["trajectory"]), "view", W1_VIEW, "trajectory"),
        "split",
        W1_SPLIT,
        "trajectory",
    )
    wide = trajectory[trajectory["width"] >= MIN_PAPER_WIDTH]
    if wide.empty:
        widths = ", ".join(f"{w:g}" for w in sorted(trajectory["width"].unique()))
        raise NotMeasured(f"no trajectory rows at widths ≥ {MIN_PAPER_WIDTH} (widths {widths})")
    levels_present(wide, W1_STRATA, "width", f"trajectory at widths ≥ {MIN_PAPER_WIDTH}")
    parts = {int(step): rows for step, rows in wide.groupby("step")}
    if 0 not in parts:
        raise NotMeasured(f"no snapshot at step 0 (steps {sorted(parts)})")
    fits = {step: exponent(rows) for step, rows in parts.items()}
    texts = {step: step_text(step, fit, means) for step, (fit, _, means) in fits.items()}
    first, dropped, _ = fits[0]
    verdict = size_verdict(first)
    last = max(parts)
    paper = f"paper: {PAPER_W_DALIGN[512]} → {PAPER_W_DALIGN[3072]}, γ ≈ {PAPER_EXPONENT:.2f}"
    statistic = f"{texts[0]}; {texts[last]} ({paper})"
    if verdict == NOT_DETECTABLE:
        statistic += f"; {first.null_text('γ')}"
    elif verdict == REFUTED:
        statistic += f"; {'below' if first.hi < PAPER_EXPONENT else 'above'} the paper's γ"
    detail = (
        f"view={W1_VIEW}, split={W1_SPLIT}, widths ≥ {MIN_PAPER_WIDTH}; at each step per model the mean d_align "
        f"over points, log₂ of it (SE s/(y ln 2)), a weighted regression on log₂ width across {first.counted} "
        f"with one intercept per ({', '.join(W1_STRATA)}), t with {first.df} df ({dropped} models with a mean "
        f"d_align ≤ 0 left out at step 0); the paper's values are γ ≈ {PAPER_EXPONENT:.3f}, ≈ {PAPER_SLOPE:.2g} "
        f"in d_align per doubling. "
        + "; ".join(f"{texts[step]} ({size_verdict(fits[step][0])})" for step in sorted(parts))
    )
    return Result(verdict, statistic, detail, (("γ at step 0", first),))


W1_PAPER = Claim(
    "W1 at the paper's widths",
    "d_align grows with width, from about 3.9 at width 512 to about 9.5 at width 3072 (LLaMA-style).",
    f"the E10 rows of models ≥ {MIN_PAPER_WIDTH} wide (view={W1_VIEW}, split={W1_SPLIT}) at each snapshot step: "
    f"per model the mean d_align, its log₂; across models a regression on log₂ width with one intercept per "
    f"(dataset, family, depth): the exponent γ of d_align ∝ width^γ with a 95 % t interval; at step 0, confirmed "
    f"if the interval is above 0 and holds the paper's γ = log₂(9.5/3.9)/log₂ 6 ≈ {PAPER_EXPONENT:.2f}, refuted if "
    f"it excludes it, else not detectable with its limit and MDE; every step's γ and the mean d_align at the "
    f"smallest and largest width stated beside the paper's",
    rule_w1_paper,
    READS,
    figure="F9_dalign_at_paper_widths",
    regime="initialization (E10's step 0)",
)
