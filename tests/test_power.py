"""The design's power against the papers' effects (``report.power``): the effects in the rules' units, the MDE
carried from a measured run to a design, and the generated design tables of docs/science.md."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_rules_power import CASES, CONFIGURED, DESIGN, intervention_tables, w1_tables, w3_tables

from scalemech.config import load_config
from scalemech.pipeline import readme
from scalemech.report import power
from scalemech.report.rules.w1_paper import PAPER_EXPONENT

ROOT = Path(__file__).resolve().parents[1]


def test_a_laws_slope_in_rms_units_is_the_regression_on_log2_x():
    design = pd.DataFrame({"dataset": "d", "family": "f", "depth": [2, 2, 2, 4], "width": [8, 16, 32, 8]})
    widths = np.array([8.0, 16.0, 32.0])
    y = widths**PAPER_EXPONENT / np.sqrt(np.mean(widths ** (2 * PAPER_EXPONENT)))
    brute = np.polyfit(np.log2(widths), y, 1)[0]  # the one stratum with ≥ 2 widths
    assert power.law_slope(design, "width", ("dataset", "family", "depth"), PAPER_EXPONENT) == pytest.approx(brute)


def judged(build) -> dict:
    tables = build(1.0, False, np.random.default_rng(3))
    return tables, {
        case.rule.id: case.rule.judge(tables) for case in CASES.values() if case.rule.reads.keys() <= tables.keys()
    }


@pytest.mark.parametrize("build", [w1_tables, w3_tables, intervention_tables])
def test_at_the_runs_own_design_the_mde_is_the_rules(build):
    """Noise measured on a run, carried to the very same design, gives back each rule's printed MDE."""
    tables, results = judged(build)
    measured = power.noise(results, tables, CONFIGURED)
    table = power.design_table(CONFIGURED, measured, "a test").set_index("claim")
    assert len(measured), results
    for claim, result in results.items():
        if claim not in table.index:
            continue
        printed = max(e.mde(len(result.estimates)) for _, e in result.estimates)
        assert table.loc[claim, "mde"] == pytest.approx(printed, rel=1e-6), claim


def test_a_larger_pool_shrinks_the_noise_of_an_estimate_but_not_of_a_z_score():
    tables, results = judged(w3_tables)
    measured = power.noise(results, tables, CONFIGURED)
    bigger = CONFIGURED | {"measure": CONFIGURED["measure"] | {"train_pool": 4 * CONFIGURED["measure"]["train_pool"]}}
    before, after = (power.design_table(c, measured, "t").set_index("claim").loc["W3"] for c in (CONFIGURED, bigger))
    assert after["mde"] == pytest.approx(before["mde"])  # E/SE: its noise is 1 at any pool
    assert after["effect"] == pytest.approx(before["effect"] * math.sqrt(4000 * 4000 / 8001 / (1000 * 1000 / 2001)))
    w1 = measured.assign(claim="W1 level", regime="trained", z=np.nan)
    one, four = (power.design_table(c, w1, "t").iloc[0] for c in (CONFIGURED, bigger))
    assert four["mde"] == pytest.approx(one["mde"] / 2)


def test_an_unresolved_relative_statistic_has_almost_no_effect_in_its_units():
    """D2 and W1 divide by their stratum's RMS: where the run's rows are zero within noise the paper's law is
    a small share of that RMS, whatever the pool."""
    row = pd.DataFrame([dict(claim="W1", regime="trained", sigma=1.0, pool=1000, seeds=2.0, z=0.05, level=np.nan,
                             parts=1)])  # fmt: skip
    table = power.design_table(CONFIGURED, row, "t").iloc[0]
    law = power.law_slope(power.architectures(CONFIGURED), "width", ("dataset", "family", "depth"), PAPER_EXPONENT)
    assert table["effect"] == pytest.approx(law * 0.05 / math.sqrt(1 + 0.05**2))
    assert table["ratio"] > 10 and "zero within noise" in table["note"]


def test_a_ratio_above_one_says_what_it_would_take():
    """Above 1 the row says how many architectures would bring the ratio to 1 (MDE ∝ 1/√architectures), and
    where the rows are resolved that no pool size would; at or below 1 nothing."""
    assert power.needed(0.9, 9, 5.0) == ""
    text = power.needed(2.0, 9, 5.0)
    assert "about 36 architectures (now 9)" in text and "no pool reduces" in text
    assert "no pool" not in power.needed(2.0, 9, 0.5) and "no pool" not in power.needed(2.0, 9, float("nan"))
    design = power.architectures(CONFIGURED)
    row = pd.DataFrame([dict(claim="W1", regime="trained", sigma=1.0, pool=1000, seeds=2.0, z=5.0, level=np.nan,
                             parts=1)])  # fmt: skip
    table = power.design_table(CONFIGURED, row, "t").iloc[0]
    wanted = math.ceil(len(design) * table["ratio"] ** 2)
    assert table["ratio"] <= 1 or f"about {wanted} architectures (now {len(design)})" in table["note"]


def test_the_preface_names_what_the_design_decides():
    table = pd.DataFrame(
        {"claim": ["W1", "W1 along training", "W4"], "regime": ["trained", "along", "trained"], "effect": 1.0}
    ).assign(mde=[3.0, 0.5, 0.1], ratio=[3.0, 0.5, 2.0], note="")
    assert power.decidable(table) == (["W1 along training (along)"], ["W4 (2×)"])
    text = power.preface(table, "a run", "quick")[0]
    assert "decide W1 along training (along)" in text and "make standard" in text and text.startswith(power.QUICK)
    assert "make standard" not in power.preface(table, "a run", "standard")[0]


@pytest.mark.parametrize("run", readme.DESIGNED)
def test_the_design_tables_of_science_md_are_generated(run):
    """docs/science.md's design blocks are ``make docs``'s (``readme.design_block``) from the configs and the
    recorded noise."""
    text = (ROOT / "docs" / "science.md").read_text()
    assert readme.design_block(run) in text


def test_the_standard_design_spans_the_ranges_the_issue_asks_for():
    """The rebound's depths span ≥ 2.5 doublings at the smallest width; llama widths ≥ 3 doublings; every
    architecture as many seeds (the reseed check's power against one seed's artifact)."""
    design = power.architectures(load_config(ROOT / "config" / "standard.yaml"))
    resnet = design[design["family"] == "resnet"]
    narrow = resnet[resnet["width"] == resnet["width"].min()]
    assert math.log2(narrow["depth"].max() / narrow["depth"].min()) >= 2.5
    llama = design[design["family"] == "llama"]
    assert math.log2(llama["width"].max() / llama["width"].min()) >= 3 and design["seeds"].nunique() == 1
    assert len(DESIGN)  # the quick design loads too
