"""Claims report: each verdict rule against tables built with and against the claimed trend.

``make_tables`` also feeds tests/test_plots.py: one synthetic grid of models with every tidy
table the figures and rules read.
"""

from __future__ import annotations

import itertools
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scalemech import report
from scalemech.plots import FIGURES, make_figure, table_path
from scalemech.report import CONFIRMED, NOT_CONFIRMED, NOT_MEASURED, REFUTED, claims, spearman, write_report
from scalemech.tables import columns, write_table

DEPTHS, WIDTHS, POINTS = [8, 14, 20, 26], [1, 2, 4], [0, 1, 2]
CAPTIONS = Path(__file__).resolve().parents[1] / "workflow" / "report"


def _grid(families: tuple[str, ...], depths=DEPTHS, widths=WIDTHS, **axes) -> pd.DataFrame:
    """One row per model (dataset synth, seed 0) × every combination of ``axes``."""
    rows = []
    for family, depth, width in itertools.product(families, depths, widths):
        model = dict(run="test", dataset="synth", family=family, depth=depth, width=width, seed=0,
                     model=f"{family}-d{depth}-w{width}-s0")
        for combo in itertools.product(*axes.values()):
            rows.append({**model, **dict(zip(axes, combo))})
    return pd.DataFrame(rows)


def _points(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(point=[f"block{i}" for i in frame["point_index"]])


@cache
def make_tables(trend: int = 1, families: tuple[str, ...] = ("resnet",)) -> dict[str, pd.DataFrame]:
    """Every table, built with (``trend=1``) or against (``trend=-1``) each claim (cached: do not modify)."""
    s = trend
    training = _grid(families)
    narrow = 2.0 + 0.002 * (training["depth"] - 14) ** 2  # rebound: interior minimum at depth 14
    wide = 2.0 - 0.005 * training["depth"] - s * 0.1 * np.log2(training["width"])
    training["test_loss"] = np.where((training["width"] == 1) & (s > 0), narrow, wide)
    training = training.assign(steps=100, epochs=1, train_loss=training["test_loss"] - 0.1, train_acc=0.5, test_acc=0.5,
                               wall_seconds=1.0, examples_per_second=1e3, device="cpu")

    covariance = _points(_grid(families, point_index=POINTS))
    covariance = covariance.assign(n=256, dim=4, offdiag_ratio=0.2 if s > 0 else 0.8, offdiag_ratio_null=0.05,
                                   offdiag_ratio_null_sd=0.01)
    covmats = _points(_grid(families, point_index=POINTS, row=range(4), col=range(4)))
    covmats["corr"] = np.where(covmats["row"] == covmats["col"], 1.0, 0.1 * s * (covmats["row"] - covmats["col"]))

    signal = _points(_grid(families, point_index=POINTS, split=["train", "test"]))
    signal["mu_sq"] = np.exp(-s * 0.1 * signal["depth"]) * signal["width"] * (1 + 0.1 * signal["point_index"])
    signal = signal.assign(n=64, mu_norm=np.sqrt(signal["mu_sq"]), block_grad_norm=np.sqrt(signal["mu_sq"]))

    dalign = _points(_grid(families, point_index=POINTS, split=["train", "test"], view=["full", "pooled"]))
    d_align = 3.0 * dalign["width"].astype(float) ** s * (1 + 0.01 * dalign["depth"])
    dalign = dalign.assign(n=64, dim=128, mu_sq=1.0, mu_four=1.0, mu_sigma_mu=1.0, tr_sigma_sq=1.0)
    for name, value in {"d_align": d_align, "d_par": 2 * d_align, "d_2": d_align}.items():
        dalign = dalign.assign(**{name: value, f"{name}_lo": 0.8 * value, f"{name}_hi": 1.2 * value})

    misalignment = _points(_grid(families, point_index=POINTS, view=["full"], MK=[(4, 4), (16, 16), (64, 64), (16, 64)],
                                 stats_split=["train", "test"]))
    misalignment[["M", "K"]] = misalignment.pop("MK").tolist()
    width, M = misalignment["width"].astype(float), misalignment["M"].astype(float)
    p = 0.4 / (1 + width ** s * (M / 4) ** (0.5 * s))
    misalignment = misalignment.assign(draws=1000, p_misalign=p, p_lo=0.9 * p, p_hi=np.minimum(1.1 * p, 1),
                                       b_exact=np.minimum(1.5 * p, 1) if s > 0 else 0.4 * p,
                                       b_align=np.minimum(2 * p, 1) if s > 0 else 0.5 * p)

    intervention = _points(_grid(families, point_index=POINTS, view=["full"], eta=[1e-3, 1e-2, 1e-1]))
    predicted = -intervention["eta"] * (1 + intervention["width"])
    observed = predicted * (0.97 - intervention["eta"]) if s > 0 else -0.5 * predicted
    intervention = intervention.assign(step_fraction=10 * intervention["eta"], predicted=predicted, observed=observed,
                                       ratio=observed / predicted, sign_agree=np.sign(observed) == np.sign(predicted))

    expansion = _points(_grid(families, point_index=POINTS))
    old = 2.0 + 0.01 * expansion["depth"]
    expansion = expansion.assign(steps=50, train_mode="block", jump_step=0.1, train_loss_old=old - 0.1,
                                 test_loss_old=old,
                                 train_loss_jump=old - 0.12, test_loss_jump=old - 0.01, train_loss_new=old - 0.15,
                                 test_loss_new=old - 0.05 * s, train_loss_selected=old - 0.15,
                                 test_loss_selected=old - 0.05 * s, train_loss_control=old - 0.11,
                                 test_loss_control=old - 0.01, delta_r_test=0.01, delta_erm=0.03,
                                 fallback=expansion["point_index"] == 0)
    benchmarks = pd.DataFrame({"dim": [1024, 16384], "gram_over_cov_time": [0.5, 0.1] if s > 0 else [3.0, 5.0]})
    tables = dict(training=training, covariance=covariance, covmats=covmats, signal=signal, dalign=dalign,
                  misalignment=misalignment, intervention=intervention, expansion=expansion)
    return {name: frame[columns(name)] for name, frame in tables.items()} | {"benchmarks": benchmarks}


def verdicts(tables: dict[str, pd.DataFrame]) -> dict[str, str]:
    return dict(claims(tables)[["claim", "verdict"]].itertuples(index=False))


CLAIM_IDS = ["D1", "D2", "D3", "W1", "W2", "W3", "W4", "W5"]


def test_spearman_matches_rank_difference_formula():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=30), rng.normal(size=30) + np.linspace(0, 2, 30)
    d = np.argsort(np.argsort(x)) - np.argsort(np.argsort(y))  # rank differences (no ties)
    assert spearman(x, y) == pytest.approx(1 - 6 * np.sum(d**2) / (30 * (30**2 - 1)))
    assert np.isnan(spearman([1, 2, 3], [5, 5, 5]))


def test_claims_table_has_one_row_per_claim_and_the_columns():
    table = claims(make_tables(1))
    assert list(table.columns) == ["claim", "statement", "statistic", "rule", "verdict"]
    assert list(table["claim"]) == CLAIM_IDS
    assert table["rule"].str.len().min() > 20


@pytest.mark.parametrize("families", [("resnet",), ("resnet", "llama")])
def test_every_claim_is_confirmed_on_tables_with_the_claimed_trend(families):
    assert verdicts(make_tables(1, families)) == dict.fromkeys(CLAIM_IDS, CONFIRMED)


def test_every_claim_is_refuted_on_tables_against_the_claimed_trend():
    assert verdicts(make_tables(-1)) == dict.fromkeys(CLAIM_IDS, REFUTED)


def test_missing_or_empty_tables_are_not_measured():
    assert verdicts({}) == dict.fromkeys(CLAIM_IDS, NOT_MEASURED)
    empty = {name: frame.iloc[:0] for name, frame in make_tables(1).items()}
    assert verdicts(empty) == dict.fromkeys(CLAIM_IDS, NOT_MEASURED)


def test_too_few_depths_or_widths_are_not_measured():
    tables = make_tables(1)
    two_depths = {name: frame[frame["depth"] <= 14] if "depth" in frame else frame for name, frame in tables.items()}
    two_widths = {name: frame[frame["width"] <= 2] if "width" in frame else frame for name, frame in tables.items()}
    assert {k: verdicts(two_depths)[k] for k in ["D2", "D3"]} == dict.fromkeys(["D2", "D3"], NOT_MEASURED)
    assert {k: verdicts(two_widths)[k] for k in ["W1", "W2"]} == dict.fromkeys(["W1", "W2"], NOT_MEASURED)


def test_intermediate_outcomes_are_not_confirmed():
    tables = make_tables(1)
    noisy = tables["covariance"].assign(offdiag_ratio=0.8, offdiag_ratio_null=0.75, offdiag_ratio_null_sd=0.1)
    assert rule_verdict("D1", covariance=noisy) == NOT_CONFIRMED  # large off-diagonal energy, but sampling noise
    training = tables["training"]
    no_rebound = training.assign(test_loss=3.0 - 0.01 * training["depth"] - 0.1 * training["width"])
    assert rule_verdict("D3", training=no_rebound) == NOT_CONFIRMED  # joint scaling holds, rebound absent
    loose = tables["misalignment"].assign(b_exact=tables["misalignment"]["b_align"] * 1.01)
    assert rule_verdict("W2", misalignment=loose) == NOT_CONFIRMED  # B_exact above B_align
    wide_bars = tables["dalign"].assign(d_align_lo=0.0, d_align_hi=100.0)
    assert rule_verdict("W1", dalign=wide_bars) == NOT_CONFIRMED  # a trend within the estimation error
    halfway = tables["intervention"].assign(ratio=0.7)
    assert rule_verdict("W4", intervention=halfway) == NOT_CONFIRMED


def rule_verdict(claim: str, **replaced: pd.DataFrame) -> str:
    return verdicts(make_tables(1) | replaced)[claim]


def test_verdicts_are_deterministic_and_statistics_report_numbers():
    first, second = claims(make_tables(1)), claims({k: v.copy() for k, v in make_tables(1).items()})
    pd.testing.assert_frame_equal(first, second)
    w1 = first.set_index("claim").loc["W1", "statistic"]
    assert "ρ(width, d_align) 1.00" in w1


def test_benchmarks_argument_overrides_the_table():
    tables = make_tables(1)
    slower = claims(tables, benchmarks={"dim": 4096, "gram_over_cov_time": 1.5})
    assert slower.set_index("claim").loc["W5", "verdict"] == NOT_CONFIRMED
    with pytest.raises(ValueError, match="gram_over_cov_time"):
        claims(tables, benchmarks={"dim": 4096})


def test_write_report_lists_all_claims_figures_and_captions(tmp_path):
    tables = make_tables(1)
    tables_dir, figures_dir = tmp_path / "results" / "tables", tmp_path / "figures"
    for name in FIGURES["F3_rebound"][1] + report.CLAIM_TABLES:
        write_table(tables[name], table_path(tables_dir, name), name)
    tables["benchmarks"].to_csv(tables_dir / "benchmarks.csv", index=False)
    make_figure("F3_rebound", tables_dir, figures_dir, dpi=40)
    out = write_report(tables_dir, figures_dir, tmp_path / "results" / "report.md", captions_dir=CAPTIONS)
    text = out.read_text()
    for claim in CLAIM_IDS:
        assert f"| {claim} |" in text
    assert text.count(CONFIRMED) >= len(CLAIM_IDS)
    assert "![F3_rebound](../figures/F3_rebound.png)" in text
    assert (out.parent / "../figures/F3_rebound.png").exists()
    assert text.count("(figure not produced in this run)") == len(FIGURES) - 1
    for stem in [*FIGURES, "claims"]:
        assert (CAPTIONS / f"{stem}.rst").read_text().strip() in text
