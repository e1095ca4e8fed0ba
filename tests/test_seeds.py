"""Verdicts that survive a reseed: the seeds' estimates compared, ``fragile`` where the seeds disagree.

W1 (d_align grows with width) on synthetic dalign tables: 4 depths × 3 widths per seed, two points
per model, the width effect planted in the seeds named; the effect is ~13 SE of the per-seed slope,
so one seed alone decides it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scalemech.report import CONFIRMED, FRAGILE, NOT_DETECTABLE, NOT_MEASURED, REFUTED, claims
from scalemech.report.common import Result
from scalemech.report.seeds import by_seed, decided, disagreement, of_seed
from scalemech.report.units import Estimate

DEPTHS, WIDTHS, POINTS = (8, 14, 20, 26), (1, 2, 4), (0, 1)
ROW_SE, MODEL_SD = 0.1, 0.2


def dalign(effects: dict[int, float], rng_seed: int = 0) -> pd.DataFrame:
    """dalign rows (view full, split train): d_align = 10 + effects[seed]·log₂ width + model and row noise."""
    rng, rows = np.random.default_rng(rng_seed), []
    for seed, depth, width in itertools.product(effects, DEPTHS, WIDTHS):
        model = f"resnet-d{depth}-w{width}-s{seed}"
        level = 10 + effects[seed] * np.log2(width) + rng.normal(0, MODEL_SD)
        for point in POINTS:
            value = level + rng.normal(0, ROW_SE)
            rows.append(
                dict(run="test", dataset="synth", family="resnet", depth=depth, width=width, seed=seed, model=model,
                     point_index=point, view="full", split="train", n=256, d_align=value, d_align_se=ROW_SE,
                     d_align_ucb=value + 1.645 * ROW_SE)
            )  # fmt: skip
    return pd.DataFrame(rows)


def w1(effects: dict[int, float]) -> pd.Series:
    return claims({"dalign": dalign(effects)}).set_index("claim").loc["W1"]


def alone(verdict: str, value: float = 1.0, se: float = 0.2, df: int = 5) -> Result:
    """A seed's result deciding on one slope ``value`` ± ``se`` with ``df`` residual df."""
    half = stats.t.ppf(0.975, df) * se if df >= 2 else np.nan
    return Result(verdict, "", "", (("slope", Estimate(value, value - half, value + half, df + 2, df, se)),))


def test_the_verdict_is_fragile_only_when_the_seeds_disagree():
    # a seed without the power to decide alone does not make the claim fragile: its estimate agrees
    verdict, cell = decided(CONFIRMED, {0: alone(CONFIRMED, 1.0), 1: alone(NOT_DETECTABLE, 0.6, 0.3)})
    assert verdict == CONFIRMED and cell.startswith("seed 0: confirmed; seed 1: not detectable; seeds agree")
    # the same verdicts from estimates 6 SE apart: the seeds differ
    verdict, cell = decided(CONFIRMED, {0: alone(CONFIRMED, 1.0, 0.1), 1: alone(NOT_DETECTABLE, 0.0, 0.1)})
    assert verdict == FRAGILE and "seeds differ (Welch p = " in cell
    p = disagreement({0: alone(CONFIRMED, 1.0, 0.1), 1: alone(NOT_DETECTABLE, 0.0, 0.1)})
    welch = stats.ttest_ind_from_stats(1.0, 0.1 * np.sqrt(6), 6, 0.0, 0.1 * np.sqrt(6), 6, equal_var=False).pvalue
    assert p == pytest.approx(welch)  # two seeds: Welch's t test of their difference
    # opposite decided verdicts are fragile whatever the test says
    assert decided(CONFIRMED, {0: alone(CONFIRMED, 0.1, 1.0), 1: alone(REFUTED, -0.1, 1.0)})[0] == FRAGILE
    assert decided(NOT_DETECTABLE, {0: alone(NOT_DETECTABLE), 1: alone(NOT_DETECTABLE)})[0] == NOT_DETECTABLE


def test_a_seed_too_small_to_judge_alone_leaves_the_claim_unchecked():
    verdict, cell = decided(CONFIRMED, {0: alone(NOT_DETECTABLE, df=1), 1: alone(NOT_DETECTABLE, df=1)})
    assert verdict == CONFIRMED
    assert cell == "seed 0: too few models alone; seed 1: too few models alone (not checked against a reseed)"
    verdict, cell = decided(REFUTED, {0: alone(REFUTED, -1), 1: Result(NOT_MEASURED, "no table")})
    assert verdict == REFUTED and cell.endswith("seed 1: not measured (not checked against a reseed)")
    assert decided(CONFIRMED, {3: alone(CONFIRMED)}) == (CONFIRMED, "one seed (3): not checked against a reseed")
    assert decided(CONFIRMED, {}) == (CONFIRMED, "no seed column: not checked against a reseed")
    assert decided(NOT_MEASURED, {0: Result(NOT_MEASURED, ""), 1: alone(CONFIRMED)}) == (NOT_MEASURED, "")
    bare = decided(CONFIRMED, {0: Result(CONFIRMED, ""), 1: Result(REFUTED, "")})  # a rule without estimates
    assert bare == (FRAGILE, "seed 0: confirmed; seed 1: refuted; no estimates to compare (opposite verdicts only)")


def test_each_seed_alone_has_its_rows_and_its_own_fits():
    grid = pd.DataFrame(
        [
            dict(run="test", dataset="synth", family="resnet", depth=d, width=w, seed=s, model=f"d{d}-w{w}-s{s}",
                 test_loss=1 + 2 * d**-0.5 + w**-1.0 + 0.01 * s + 1e-3 * np.sin(d * w))
            for s, d, w in itertools.product((0, 1), (2, 4, 8, 16), (1, 2, 4))
        ]
    )  # fmt: skip
    bench = pd.DataFrame({"dim": [64], "gram_over_cov_time": [0.5]})
    tables = {"training": grid, "powerlaw": pd.DataFrame({"stale": [1]}), "benchmarks": bench}
    alone = of_seed(tables, 1)
    assert set(alone["training"]["seed"]) == {1} and alone["benchmarks"] is bench  # no seed column: as it was
    assert alone["powerlaw"]["models"].eq(12).all()  # fitted again on seed 1's 12 models
    assert "powerlaw" not in of_seed({"powerlaw": tables["powerlaw"]}, 1)  # nothing to fit it on
    single = {"training": grid[grid["seed"] == 0]}
    assert list(by_seed(tables)) == [0, 1] and by_seed(single) == {0: single}  # one seed: the tables themselves


def test_an_effect_in_one_seed_only_is_fragile():
    row = w1({0: 1.0, 1: 0.0})
    assert row["verdict"] == FRAGILE
    assert row["per_seed"].startswith("seed 0: confirmed; seed 1: not detectable; seeds differ (Welch p = ")
    assert "fragile: the seeds disagree (seed 0: confirmed; seed 1: not detectable; seeds differ" in row["detail"]
    assert row["detail"].endswith("all seeds together: confirmed")  # the pooled verdict, overruled
    assert "(24 models)" in row["statistic"]  # the pooled statistic is kept


def test_an_effect_in_both_seeds_is_confirmed_and_each_seed_says_so():
    row = w1({0: 1.0, 1: 1.0})
    assert row["verdict"] == CONFIRMED and row["per_seed"].startswith(
        "seed 0: confirmed; seed 1: confirmed; seeds agree"
    )
    assert "fragile" not in row["detail"]


def test_a_single_seed_keeps_the_pooled_verdict():
    row = w1({0: 1.0})
    assert row["verdict"] == CONFIRMED and row["per_seed"] == "one seed (0): not checked against a reseed"
    assert claims({}).set_index("claim").loc["W1", "per_seed"] == ""  # not measured: not judged per seed
