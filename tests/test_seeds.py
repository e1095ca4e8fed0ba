"""Verdicts that survive a reseed: each claim judged on each seed alone, ``fragile`` where seeds disagree.

W1 (d_align grows with width) on synthetic dalign tables: 4 depths × 3 widths per seed, two points
per model, the width effect planted in the seeds named; the effect is ~13 SE of the per-seed slope,
so one seed alone decides it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from scalemech.report import CONFIRMED, FRAGILE, NOT_CONFIRMED, NOT_DETECTABLE, NOT_MEASURED, REFUTED, claims
from scalemech.report.seeds import by_seed, decided, of_seed

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


def test_the_verdict_is_fragile_only_when_seeds_measured_alone_disagree():
    assert decided(CONFIRMED, {0: CONFIRMED, 1: NOT_DETECTABLE}) == (
        FRAGILE,
        "seed 0: confirmed; seed 1: not detectable",
    )
    assert decided(NOT_DETECTABLE, {0: NOT_DETECTABLE, 1: NOT_CONFIRMED, 2: NOT_DETECTABLE})[0] == FRAGILE
    agree = decided(NOT_DETECTABLE, {0: CONFIRMED, 1: CONFIRMED})  # the pooled verdict stands
    assert agree == (NOT_DETECTABLE, "seed 0: confirmed; seed 1: confirmed")
    assert decided(REFUTED, {0: REFUTED, 1: NOT_MEASURED, 2: REFUTED}) == (
        REFUTED,
        "seed 0: refuted; seed 1: not measured; seed 2: refuted",
    )  # a seed not measured alone neither agrees nor disagrees
    verdict, cell = decided(CONFIRMED, {0: CONFIRMED, 1: NOT_MEASURED})
    assert verdict == CONFIRMED and cell.endswith("(fewer than two seeds measured alone: not checked against a reseed)")
    assert decided(CONFIRMED, {3: CONFIRMED}) == (CONFIRMED, "one seed (3): not checked against a reseed")
    assert decided(CONFIRMED, {}) == (CONFIRMED, "no seed column: not checked against a reseed")
    assert decided(NOT_MEASURED, {0: NOT_MEASURED, 1: CONFIRMED}) == (NOT_MEASURED, "")


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
    assert row["per_seed"] == "seed 0: confirmed; seed 1: not detectable"
    assert "fragile: the seeds alone disagree (seed 0: confirmed; seed 1: not detectable)" in row["detail"]
    assert row["detail"].endswith("all seeds together: confirmed")  # the pooled verdict, overruled
    assert "(24 models)" in row["statistic"]  # the pooled statistic is kept


def test_an_effect_in_both_seeds_is_confirmed_and_each_seed_says_so():
    row = w1({0: 1.0, 1: 1.0})
    assert row["verdict"] == CONFIRMED and row["per_seed"] == "seed 0: confirmed; seed 1: confirmed"
    assert "fragile" not in row["detail"]


def test_a_single_seed_keeps_the_pooled_verdict():
    row = w1({0: 1.0})
    assert row["verdict"] == CONFIRMED and row["per_seed"] == "one seed (0): not checked against a reseed"
    assert claims({}).set_index("claim").loc["W1", "per_seed"] == ""  # not measured: not judged per seed
