"""W1's level: d_align of the size Paper W reports, 3.9 at width 512 to 9.5 at width 3072 (its LLaMA-style
transformers), tested on the level and not only on the trend (W1).

The paper's numbers are its LLaMAs', so the level is tested on the families of ``LEVEL_FAMILIES``: per model
the mean d_align over its points (full view, train split) with the mean of their SEs, across models the
weighted mean with a 95 % t interval (``units``). Against the paper's band ``[3.9, 9.5]``: confirmed when
the interval lies inside it, refuted when it lies outside it (below 3.9: the row says how many orders of
magnitude), else not detectable with its limit and MDE. The widths measured are stated beside it: a model
narrower than the paper's 512 is expected below the band only by the width trend the paper reports (γ ≈ 0.5:
a factor 8 from width 8 to 512), never by orders of magnitude.
"""

from __future__ import annotations

import numpy as np

from ...figures.paper_values import PAPER_W_DALIGN
from ..common import CONFIRMED, NOT_DETECTABLE, REFUTED, Claim, NotMeasured, Result, Tables, below, only, table
from ..trend import null_bound
from ..units import Estimate, across_models, per_model
from .w1 import W1_COLUMNS, W1_SPLIT, W1_VIEW

LEVEL_FAMILIES = ("llama",)  # the families whose d_align the paper's numbers are about
BAND = (min(PAPER_W_DALIGN.values()), max(PAPER_W_DALIGN.values()))  # 3.9 (width 512) … 9.5 (width 3072)
READS = {"dalign": W1_COLUMNS}


def band_verdict(estimate: Estimate, band: tuple[float, float]) -> str:
    """CONFIRMED when the interval lies inside ``band``, REFUTED when it lies outside it, else NOT_DETECTABLE."""
    if estimate.hi < band[0] or estimate.lo > band[1]:
        return REFUTED
    return CONFIRMED if band[0] <= estimate.lo and estimate.hi <= band[1] else NOT_DETECTABLE


def rule_w1_level(tables: Tables) -> Result:
    """The mean d_align over models of ``LEVEL_FAMILIES`` against the paper's band (``band_verdict``)."""
    dalign = only(only(table(tables, "dalign", W1_COLUMNS), "view", W1_VIEW, "dalign"), "split", W1_SPLIT, "dalign")
    level = dalign[dalign["family"].isin(LEVEL_FAMILIES)]
    rows = level[np.isfinite(level["d_align"].astype(float)) & np.isfinite(level["d_align_se"].astype(float))]
    if rows.empty:
        raise NotMeasured(
            f"no {' or '.join(LEVEL_FAMILIES)} model in dalign (families {sorted(dalign['family'].unique())})"
        )
    mean = across_models(per_model(rows, "d_align", "d_align_se"))
    if not mean.measured:
        raise NotMeasured(f"d_align's level needs an interval: {mean.counted}, df {mean.df}")
    verdict = band_verdict(mean, BAND)
    widths = ", ".join(f"{w:g}" for w in sorted(rows["width"].unique()))
    statistic = (
        f"mean d_align {mean.text()} over {mean.counted} (widths {widths}) vs the paper's {BAND[0]:g}–{BAND[1]:g}"
    )
    if verdict == REFUTED and mean.hi < BAND[0]:
        statistic += f": {below(mean.hi, BAND[0])}"
    elif verdict == NOT_DETECTABLE:
        statistic += "; " + mean.null_text("mean d_align", null=BAND[0])
    detail = (
        f"view={W1_VIEW}, split={W1_SPLIT}, families {', '.join(LEVEL_FAMILIES)} (the paper's numbers are its LLaMAs' "
        f"at widths 512–3072); per model the mean over points, across models a weighted mean with a t interval "
        f"({mean.df} df); {len(rows)} of {len(level)} rows with a finite d_align and SE; rows: "
        + null_bound(rows, "d_align", "d_align_ucb", "d_align_se")
    )
    return Result(verdict, statistic, detail, (("mean d_align", mean),))


W1_LEVEL = Claim(
    "W1 level",
    f"d_align is about {BAND[0]:g} (width 512) to {BAND[1]:g} (width 3072) in LLaMA-style transformers.",
    f"every {'/'.join(LEVEL_FAMILIES)} row of d_align (view={W1_VIEW}, split={W1_SPLIT}) with its SE; per model the "
    f"mean over points; across models a weighted mean with a 95 % t interval: confirmed if it lies inside the "
    f"paper's {BAND[0]:g}–{BAND[1]:g}, refuted if outside it (how many orders below stated), else not detectable "
    f"with its limit and minimum detectable distance from {BAND[0]:g}",
    rule_w1_level,
    READS,
    figure="F4_dalign_vs_width",
)
