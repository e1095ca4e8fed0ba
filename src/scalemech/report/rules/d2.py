"""D2: the first-order signal ‖μ‖² decays as depth grows (test split)."""

from __future__ import annotations

from ..common import NOT_DETECTABLE, Claim, Result, Tables, levels_present, only, table
from ..trend import null_bound, trend

D2_SPLIT = "test"
D2_STRATA = ["dataset", "family", "width"]
READS = {"signal": ["point_index", "split", "n", "mu_sq", "mu_sq_se", "mu_sq_ucb"]}


def rule_d2(tables: Tables) -> Result:
    """Slope of ‖μ‖² (in each stratum's RMS units) on log₂ depth across models: confirmed below 0."""
    signal = table(tables, "signal", READS["signal"])
    signal = only(signal, "split", D2_SPLIT, "signal")
    levels_present(signal, D2_STRATA, "depth", "signal")
    fit = trend(signal, "mu_sq", "mu_sq_se", "depth", D2_STRATA, scale_cells=D2_STRATA)
    verdict = fit.slope.verdict(sign=-1)
    statistic = fit.text("‖μ‖²", "depth")
    detail = f"{D2_SPLIT} split: {fit.detail(D2_STRATA)}"
    if verdict == NOT_DETECTABLE:
        statistic += "; " + fit.slope.null_text("slope", sign=-1)
        detail += "; rows: " + null_bound(signal, "‖μ‖²", "mu_sq_ucb", "mu_sq_se")
    return Result(verdict, statistic, detail, (("slope", fit.slope),))


D2 = Claim(
    "D2",
    "The first-order activation-gradient signal decays as depth grows.",
    "every test-split row of ‖μ‖² with its SE, scaled by its (dataset, family, width) stratum's RMS; per model the "
    "mean over points; across models a weighted regression on log₂ depth, one intercept per stratum: confirmed "
    "if the slope's 95 % t interval is below 0, refuted if above, else not detectable with the slope's limit and the "
    "minimum detectable slope (80 % power) at the run's number of models (each row's ‖μ‖² UCB in the detail)",
    rule_d2,
    READS,
    figure="F2_signal_decay",
)
