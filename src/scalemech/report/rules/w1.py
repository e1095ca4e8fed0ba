"""W1: d_align grows with width (final checkpoints, full view, train split)."""

from __future__ import annotations

from ..common import NOT_DETECTABLE, Claim, Result, Tables, levels_present, only, table
from ..trend import null_bound, trend

W1_VIEW, W1_SPLIT = "full", "train"
W1_STRATA = ["dataset", "family", "depth"]
W1_COLUMNS = ["point_index", "view", "split", "n", "d_align", "d_align_se", "d_align_ucb"]
READS = {"dalign": W1_COLUMNS}
PAPER_W1 = "paper: 3.9 at width 512 → 9.5 at 3072"


def rule_w1(tables: Tables) -> Result:
    """Slope of d_align (in each stratum's RMS units) on log₂ width across models: confirmed above 0."""
    dalign = table(tables, "dalign", W1_COLUMNS)
    dalign = only(only(dalign, "view", W1_VIEW, "dalign"), "split", W1_SPLIT, "dalign")
    levels_present(dalign, W1_STRATA, "width", "dalign")
    fit = trend(dalign, "d_align", "d_align_se", "width", W1_STRATA, scale_cells=W1_STRATA)
    verdict = fit.slope.verdict(sign=1)
    statistic = fit.text("d_align", "width")
    detail = f"view={W1_VIEW}, split={W1_SPLIT}: {fit.detail(W1_STRATA)}"
    if verdict == NOT_DETECTABLE:
        statistic += f"; {fit.slope.null_text('slope')}"
        detail += f"; rows: {null_bound(dalign, 'd_align', 'd_align_ucb', 'd_align_se')} ({PAPER_W1})"
    return Result(verdict, statistic, detail, (("slope", fit.slope),))


W1 = Claim(
    "W1",
    "d_align grows with width.",
    f"every row of d_align (view={W1_VIEW}, split={W1_SPLIT}) with its SE, scaled by its (dataset, family, depth) "
    f"stratum's RMS; per model the mean over points; across models a weighted regression on log₂ width, one "
    f"intercept per stratum: confirmed if the slope's 95 % t interval is above 0, refuted if below, else not "
    f"detectable with the slope's limit and the minimum detectable slope (80 % power) at the run's number of "
    f"models (the largest row UCB of d_align beside the paper's values in the detail)",
    rule_w1,
    READS,
    figure="F4_dalign_vs_width",
)
