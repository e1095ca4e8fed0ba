"""Claims report: each verdict rule against tables built with, against and without the claimed trend.

``make_tables`` also feeds tests/test_plots.py: one synthetic grid of models with every tidy
table the figures and rules read, in the columns of the producers' contract (``CONTRACT``:
jackknife intervals of ‖μ‖², the bias-corrected D1 ratio with its low-rank flag, the two-sample
certificate, the held-out intervention). ``noise_tables`` builds small tables of pure noise.
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
from scalemech.report import (
    CONFIRMED,
    NOT_CONFIRMED,
    NOT_DETECTABLE,
    NOT_MEASURED,
    REFUTED,
    NotMeasured,
    claims,
    spearman,
    write_report,
)
from scalemech.tables import columns, model_keys, write_table

DEPTHS, WIDTHS, POINTS = [8, 14, 20, 26], [1, 2, 4], [0, 1, 2]
CAPTIONS = Path(__file__).resolve().parents[1] / "workflow" / "report"
CONTRACT = {  # the tables' own columns, after the model keys, as the producers now write them
    "signal": ["point", "point_index", "split", "n", "mu_sq", "mu_sq_lo", "mu_sq_hi", "mu_norm", "block_grad_norm"],
    "covariance": [
        "point",
        "point_index",
        "n",
        "dim",
        "offdiag_ratio",
        "offdiag_ratio_plugin",
        "offdiag_ratio_null",
        "offdiag_ratio_null_sd",
        "low_rank",
    ],
    "misalignment": [
        "point",
        "point_index",
        "view",
        "M",
        "K",
        "draws",
        "p_misalign",
        "p_lo",
        "p_hi",
        "b_exact",
        "b_exact_common",
        "b_align",
        "mu_cross",
    ],
    "intervention": [
        "point",
        "point_index",
        "view",
        "step_fraction",
        "eta",
        "predicted",
        "observed",
        "ratio",
        "sign_agree",
        "observed_heldout",
        "ratio_heldout",
        "sign_agree_heldout",
    ],
}
BENCHMARKS = ["dim", "n", "gram_seconds", "covariance_seconds", "gram_over_cov_time", "gram_bytes", "covariance_bytes"]
TREND_CLAIMS = ["D2", "W1", "W2", "W3"]
RULES = {"D2": report.rule_d2, "W1": report.rule_w1, "W2": report.rule_w2, "W3": report.rule_w3}


def contract(name: str) -> list[str]:
    return model_keys() + CONTRACT[name] if name in CONTRACT else columns(name)


def write_contract_table(frame: pd.DataFrame, folder: Path, name: str) -> None:
    """Write ``frame`` as the workflow does (``test_the_contract_is_the_schema`` keeps the two equal)."""
    write_table(frame, table_path(folder, name), name)


def _grid(families: tuple[str, ...], depths=DEPTHS, widths=WIDTHS, **axes) -> pd.DataFrame:
    """One row per model (dataset synth, seed 0) × every combination of ``axes``."""
    rows = []
    for family, depth, width in itertools.product(families, depths, widths):
        model = dict(
            run="test",
            dataset="synth",
            family=family,
            depth=depth,
            width=width,
            seed=0,
            model=f"{family}-d{depth}-w{width}-s0",
        )
        for combo in itertools.product(*axes.values()):
            rows.append({**model, **dict(zip(axes, combo))})
    return pd.DataFrame(rows)


def _points(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(point=[f"block{i}" for i in frame["point_index"]])


def _with_intervals(
    frame: pd.DataFrame, values: dict[str, pd.Series], low: float = 0.8, high: float = 1.2
) -> pd.DataFrame:
    for name, value in values.items():
        frame = frame.assign(**{name: value, f"{name}_lo": low * value, f"{name}_hi": high * value})
    return frame


@cache
def make_tables(trend: int = 1, families: tuple[str, ...] = ("resnet",)) -> dict[str, pd.DataFrame]:
    """Every table, built with (``trend=1``) or against (``trend=-1``) each claim, signal far above
    noise and tight intervals (cached: do not modify)."""
    s = trend
    training = _grid(families)
    narrow = 2.0 + 0.002 * (training["depth"] - 14) ** 2  # rebound: interior minimum at depth 14
    wide = 2.0 - 0.005 * training["depth"] - s * 0.1 * np.log2(training["width"])
    training["test_loss"] = np.where((training["width"] == 1) & (s > 0), narrow, wide)
    training = training.assign(
        steps=100,
        epochs=1,
        train_loss=training["test_loss"] - 0.1,
        train_acc=0.5,
        test_acc=0.5,
        wall_seconds=1.0,
        examples_per_second=1e3,
        device="cpu",
    )

    covariance = _points(_grid(families, point_index=POINTS))
    low_rank = covariance["point_index"] == max(POINTS)  # the last block before the head
    ratio = np.where(low_rank, 0.95, 0.2 if s > 0 else 0.8)
    covariance = covariance.assign(
        n=256,
        dim=4,
        offdiag_ratio=ratio,
        offdiag_ratio_plugin=ratio + 0.1,
        offdiag_ratio_null=0.0,
        offdiag_ratio_null_sd=0.01,
        low_rank=low_rank,
    )
    covmats = _points(_grid(families, point_index=POINTS, row=range(4), col=range(4)))
    covmats["corr"] = np.where(covmats["row"] == covmats["col"], 1.0, 0.1 * s * (covmats["row"] - covmats["col"]))

    signal = _points(_grid(families, point_index=POINTS, split=["train", "test"]))
    mu_sq = np.exp(-s * 0.1 * signal["depth"]) * signal["width"] * (1 + 0.1 * signal["point_index"])
    signal = _with_intervals(signal, {"mu_sq": mu_sq})
    signal = signal.assign(n=64, mu_norm=np.sqrt(signal["mu_sq"]), block_grad_norm=np.sqrt(signal["mu_sq"]))

    dalign = _points(_grid(families, point_index=POINTS, split=["train", "test"], view=["full", "pooled"]))
    d_align = 3.0 * dalign["width"].astype(float) ** s * (1 + 0.01 * dalign["depth"])
    dalign = dalign.assign(
        n=64,
        dim=np.where(dalign["view"] == "full", 256, 16) * dalign["width"],
        mu_sq=1.0,
        mu_four=1.0,
        mu_sigma_mu=1.0,
        tr_sigma_sq=1.0,
    )
    dalign = _with_intervals(dalign, {"d_align": d_align, "d_par": 2 * d_align, "d_2": d_align})

    grid_mk = [(4, 4), (16, 16), (64, 64), (16, 64)]
    misalignment = _points(_grid(families, point_index=POINTS, view=["full"], MK=grid_mk))
    misalignment[["M", "K"]] = misalignment.pop("MK").tolist()
    width, M = misalignment["width"].astype(float), misalignment["M"].astype(float)
    p = 0.4 / (1 + width**s * (M / 4) ** (0.5 * s))
    misalignment = misalignment.assign(
        draws=1000,
        p_misalign=p,
        p_lo=0.9 * p,
        p_hi=np.minimum(1.1 * p, 1),
        b_exact=np.minimum(1.5 * p, 1) if s > 0 else 0.4 * p,
        b_exact_common=np.minimum(1.6 * p, 1) if s > 0 else 0.45 * p,
        b_align=np.minimum(2 * p, 1) if s > 0 else 0.5 * p,
        mu_cross=1.0,
    )

    intervention = _points(_grid(families, point_index=POINTS, view=["full"], eta=[1e-3, 1e-2, 1e-1]))
    predicted = -intervention["eta"] * (1 + intervention["width"])
    observed = predicted * (0.97 - intervention["eta"])
    heldout = predicted * (0.96 - intervention["eta"]) if s > 0 else -0.5 * predicted
    intervention = intervention.assign(
        step_fraction=10 * intervention["eta"],
        predicted=predicted,
        observed=observed,
        ratio=observed / predicted,
        sign_agree=np.sign(observed) == np.sign(predicted),
        observed_heldout=heldout,
        ratio_heldout=heldout / predicted,
        sign_agree_heldout=np.sign(heldout) == np.sign(predicted),
    )

    expansion = _points(_grid(families, point_index=POINTS))
    old = 2.0 + 0.01 * expansion["depth"]
    expansion = expansion.assign(
        steps=50,
        train_mode="block",
        jump_step=0.1,
        jump_interior=True,
        train_loss_old=old - 0.1,
        test_loss_old=old,
        train_loss_jump=old - 0.12,
        test_loss_jump=old - 0.01,
        train_loss_new=old - 0.15,
        test_loss_new=old - 0.05 * s,
        train_loss_selected=old - 0.15,
        test_loss_selected=old - 0.05 * s,
        train_loss_control=old - 0.11,
        test_loss_control=old - 0.01,
        delta_r_test=0.01,
        delta_erm=0.03,
        fallback=expansion["point_index"] == 0,
        se_test_selected_minus_old=0.005,
        se_test_control_minus_old=0.005,
        se_test_selected_minus_control=0.005,
    )
    trajectory = _points(_grid(families, point_index=POINTS, split=["train"], view=["full"], step=[0, 1, 4, 100]))
    early = trajectory["step"] < 100  # the signal is optimized away by the end
    d_align = np.where(early, 3.0 * trajectory["width"].astype(float) ** s * (1 + 0.1 * trajectory["point_index"]), 0)
    trajectory = _with_intervals(
        trajectory.assign(train_loss=2.0 / (1 + trajectory["step"]), test_loss=2.1 / (1 + trajectory["step"]), n=64),
        {
            "d_align": pd.Series(d_align, index=trajectory.index),
            "mu_sq": pd.Series(np.where(early, 1.0, 0.0), index=trajectory.index),
        },
    )
    trajectory = trajectory.assign(
        d_align_lo=np.where(early, trajectory["d_align_lo"], -0.1),
        d_par=2 * trajectory["d_align"],
        d_2=trajectory["d_align"],
    )
    dims = np.array([16, 64, 256, 1024])
    time_ratio = [4.0, 2.0, 0.6, 0.2] if s > 0 else [4.0, 5.0, 6.0, 8.0]
    benchmarks = pd.DataFrame(
        {
            "dim": dims,
            "n": 64,
            "gram_seconds": 0.01 * np.array(time_ratio),
            "covariance_seconds": 0.01,
            "gram_over_cov_time": time_ratio,
            "gram_bytes": 8 * 64**2,
            "covariance_bytes": 8 * dims**2,
        }
    )
    tables = dict(
        training=training,
        covariance=covariance,
        covmats=covmats,
        signal=signal,
        dalign=dalign,
        misalignment=misalignment,
        intervention=intervention,
        expansion=expansion,
        trajectory=trajectory,
    )
    return {name: frame[contract(name)] for name, frame in tables.items()} | {"benchmarks": benchmarks[BENCHMARKS]}


@cache
def _noise_grids() -> dict[str, pd.DataFrame]:
    """The rows of ``noise_tables`` (cached: do not modify): 9 models × 2 points (× 3 M = K)."""
    depths, widths, points = [8, 14, 20], [1, 2, 4], [0, 1]
    signal = _points(_grid(("resnet",), depths, widths, point_index=points, split=["test"]))
    dalign = _points(_grid(("resnet",), depths, widths, point_index=points, split=["train"], view=["full"]))
    misalignment = _points(_grid(("resnet",), depths, widths, point_index=points, view=["full"], M=[4, 16, 64]))
    return dict(
        signal=signal.assign(n=64, mu_norm=np.nan, block_grad_norm=np.nan),
        dalign=dalign.assign(n=64, dim=128, mu_sq=0.0, mu_four=0.0, mu_sigma_mu=1.0, tr_sigma_sq=1.0),
        misalignment=misalignment.assign(K=misalignment["M"], draws=1000, b_exact_common=0.9),
    )


def noise_tables(seed: int, detectable: bool = False) -> dict[str, pd.DataFrame]:
    """Small signal, dalign and misalignment tables without any trend: random point estimates whose
    intervals all contain the null (0; 1/2 for P), a few NaN; ``detectable``: random estimates with
    tight intervals clear of the null (a signal, but none that depends on depth, width or M)."""
    rng = np.random.default_rng(seed)

    def estimates(
        frame: pd.DataFrame, name: str, null: float = 0.0, spread: float = 1.0, bounds: tuple[str, str] | None = None
    ) -> pd.DataFrame:
        frame = frame.copy()
        n = len(frame)
        if detectable:
            value = null + spread * rng.uniform(0.2, 1.0, n) * (-1 if null else 1)
            half = 0.05 * np.abs(value - null)
            lo, hi = value - half, value + half
        else:
            value = null + spread * rng.normal(0, 0.5, n)
            half = spread * rng.uniform(0.05, 0.5, n)
            lo, hi = np.minimum(value, null) - half, np.maximum(value, null) + half
        low, high = bounds or (f"{name}_lo", f"{name}_hi")
        frame[name], frame[low], frame[high] = value, lo, hi
        return frame

    grids = _noise_grids()
    signal = estimates(grids["signal"], "mu_sq")
    dalign = estimates(grids["dalign"], "d_align", spread=5.0)
    if not detectable:
        dalign.loc[dalign.index[::7], ["d_align", "d_align_lo", "d_align_hi"]] = np.nan  # ‖μ‖² estimate ≤ 0
    for q in ("d_par", "d_2"):
        for b in ("", "_lo", "_hi"):
            dalign[f"{q}{b}"] = dalign[f"d_align{b}"]
    misalignment = estimates(grids["misalignment"], "p_misalign", 0.5, 0.4, ("p_lo", "p_hi"))
    n = len(misalignment)
    misalignment["p_lo"], misalignment["p_hi"] = misalignment["p_lo"].clip(0, 1), misalignment["p_hi"].clip(0, 1)
    misalignment["b_exact"] = np.where(rng.random(n) < 0.5, np.nan, rng.uniform(0.9, 1.0, n))
    misalignment["b_align"], misalignment["mu_cross"] = rng.uniform(0.9, 1.0, n), rng.normal(0, 1e-3, n)
    return {
        name: frame[contract(name)]
        for name, frame in dict(signal=signal, dalign=dalign, misalignment=misalignment).items()
    }


def verdicts(tables: dict[str, pd.DataFrame]) -> dict[str, str]:
    return dict(claims(tables)[["claim", "verdict"]].itertuples(index=False))


def statistic(tables: dict[str, pd.DataFrame], claim: str) -> str:
    return claims(tables).set_index("claim").loc[claim, "statistic"]


def rule_verdict(claim: str, **replaced: pd.DataFrame) -> str:
    return verdicts(make_tables(1) | replaced)[claim]


def quick_verdict(claim: str, tables: dict[str, pd.DataFrame]) -> str:
    """One trend rule alone (the noise tests run it hundreds of times)."""
    try:
        return RULES[claim](tables)[1]
    except NotMeasured:
        return NOT_MEASURED


CLAIM_IDS = ["D1", "D2", "D3", "W1", "W1 along training", "W2", "W3", "W4", "W5", "E8"]


def test_the_contract_is_the_schema():
    """The columns these tests build are the ones the producers write (tables.schema.yaml)."""
    assert {name: columns(name) for name in CONTRACT} == {name: contract(name) for name in CONTRACT}
    assert columns("benchmarks") == BENCHMARKS


def test_spearman_matches_rank_difference_formula():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=30), rng.normal(size=30) + np.linspace(0, 2, 30)
    d = np.argsort(np.argsort(x)) - np.argsort(np.argsort(y))  # rank differences (no ties)
    assert spearman(x, y) == pytest.approx(1 - 6 * np.sum(d**2) / (30 * (30**2 - 1)))
    assert np.isnan(spearman([1, 2, 3], [5, 5, 5]))


def test_row_spearman_matches_spearman_with_ties():
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 4, size=(50, 7)).astype(float), rng.integers(0, 3, size=(50, 7)).astype(float)
    expected = [spearman(a, b) for a, b in zip(x, y, strict=True)]
    np.testing.assert_allclose(report._row_spearman(x, y), expected, equal_nan=True)


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


def test_pure_noise_is_not_detectable_for_every_trend_claim():
    seen = {claim: set() for claim in TREND_CLAIMS}
    for seed in range(100):
        tables = noise_tables(seed)
        for claim in TREND_CLAIMS:
            seen[claim].add(quick_verdict(claim, tables))
    assert seen == {claim: {NOT_DETECTABLE} for claim in TREND_CLAIMS}


def test_a_signal_without_a_trend_rarely_gives_a_verdict():
    """Intervals clear of the null but estimates random: only ρ's own interval stands between the
    noise and a verdict (a majority of group signs, the old rule, gives one about half the time)."""
    decided = {claim: 0 for claim in TREND_CLAIMS}
    for seed in range(40):
        tables = noise_tables(1000 + seed, detectable=True)
        for claim in TREND_CLAIMS:
            decided[claim] += quick_verdict(claim, tables) in (CONFIRMED, REFUTED)
    assert all(count <= 4 for count in decided.values()), decided


def test_statistics_count_usable_rows_and_why_the_others_are_not():
    tables = noise_tables(0)
    text = report.rule_w1(tables)[0]
    nan = int(tables["dalign"]["d_align"].isna().sum())
    assert nan > 0 and f"{nan}: undetermined: the estimate of ‖μ‖² is ≤ 0" in text
    assert f"0 of {len(tables['dalign'])} rows usable" in text and "interval contains 0" in text
    assert "rows usable" in report.rule_d2(tables)[0] and "interval contains 0.5" in report.rule_w3(tables)[0]


def test_nan_rows_are_counted_not_dropped():
    tables = make_tables(1)
    dalign = tables["dalign"].copy()
    gone = dalign.index[(dalign["view"] == "full") & (dalign["split"] == "train") & (dalign["point_index"] == 0)]
    dalign.loc[gone, ["d_align", "d_align_lo", "d_align_hi"]] = np.nan
    w1 = statistic(tables | {"dalign": dalign}, "W1")
    assert f"{2 * len(gone)} of {3 * len(gone)} rows usable ({len(gone)}: undetermined" in w1
    signal = tables["signal"].assign(
        mu_sq=np.where(tables["signal"]["point_index"] == 0, np.nan, tables["signal"]["mu_sq"])
    )
    assert "12: undetermined: no ‖μ‖² estimate" in statistic(tables | {"signal": signal}, "D2")
    misalignment = tables["misalignment"].assign(
        b_exact=np.where(tables["misalignment"]["point_index"] == 0, np.nan, tables["misalignment"]["b_exact"])
    )
    w2 = statistic(tables | {"misalignment": misalignment}, "W2")
    assert "48 without (no certificate" in w2 and "of the 96 rows with one" in w2
    assert rule_verdict("W2", misalignment=misalignment) == CONFIRMED  # rows without a certificate do not fail it
    intervention = tables["intervention"].assign(sign_agree_heldout=np.nan)
    assert rule_verdict("W4", intervention=intervention) == NOT_MEASURED


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


def test_too_few_usable_levels_are_not_detectable():
    signal = make_tables(1)["signal"]
    deep = signal["depth"] >= 20  # the decayed signal of deep models no longer clears 0
    hidden = signal.assign(mu_sq_lo=np.where(deep, -signal["mu_sq"], signal["mu_sq_lo"]))
    assert rule_verdict("D2", signal=hidden) == NOT_DETECTABLE


def test_a_trend_within_its_own_noise_is_not_detectable():
    """Three widths, one depth, one seed: ρ = 1 can happen by chance (1 in 6), and p says so."""
    tables = make_tables(1)
    one_depth = tables["dalign"][tables["dalign"]["depth"] == 8]
    assert rule_verdict("W1", dalign=one_depth) == NOT_DETECTABLE
    assert "permutation p = 0.3" in statistic(tables | {"dalign": one_depth}, "W1")


def test_intermediate_outcomes_are_not_confirmed():
    tables = make_tables(1)
    training = tables["training"]
    no_rebound = training.assign(test_loss=3.0 - 0.01 * training["depth"] - 0.1 * training["width"])
    assert rule_verdict("D3", training=no_rebound) == NOT_CONFIRMED  # joint scaling holds, rebound absent
    loose = tables["misalignment"].assign(b_exact_common=tables["misalignment"]["b_align"] * 1.01)
    assert rule_verdict("W2", misalignment=loose) == NOT_CONFIRMED  # one-sample B_exact above B_align
    vacuous = tables["misalignment"].assign(b_exact=0.9, b_exact_common=0.9, b_align=0.95)
    assert rule_verdict("W2", misalignment=vacuous) == NOT_CONFIRMED  # the bounds hold, but say nothing
    wide_bars = tables["dalign"].assign(d_align_lo=0.01 * tables["dalign"]["d_align"], d_align_hi=100.0)
    assert rule_verdict("W1", dalign=wide_bars) == NOT_CONFIRMED  # a trend, but the extremes overlap
    halfway = tables["intervention"].assign(ratio_heldout=0.7)
    assert rule_verdict("W4", intervention=halfway) == NOT_CONFIRMED


def test_d1_uses_the_corrected_ratio_against_its_null_without_low_rank_points():
    covariance = make_tables(1)["covariance"]
    text = statistic(make_tables(1), "D1")
    assert f"{int(covariance['low_rank'].sum())}: low-rank by construction, excluded" in text
    mostly_low_rank = covariance.assign(low_rank=covariance["point_index"] > 0)  # their ratio 0.95 is not judged
    assert rule_verdict("D1", covariance=mostly_low_rank) == CONFIRMED
    biased = covariance.assign(offdiag_ratio_plugin=0.9)  # a large plug-in ratio is its p/n bias
    assert rule_verdict("D1", covariance=biased) == CONFIRMED
    within = covariance.assign(offdiag_ratio=0.01, offdiag_ratio_null=0.0, offdiag_ratio_null_sd=0.02)
    assert rule_verdict("D1", covariance=within) == CONFIRMED  # diagonal to within a resolution of 0.04
    blurred = covariance.assign(offdiag_ratio=0.8, offdiag_ratio_null=0.75, offdiag_ratio_null_sd=0.1)
    assert rule_verdict("D1", covariance=blurred) == NOT_DETECTABLE  # the null band (0.95) hides any share
    only_low_rank = covariance.assign(low_rank=True)
    assert rule_verdict("D1", covariance=only_low_rank) == NOT_MEASURED


def test_w2_certificates_are_checked_where_defined_and_their_failure_refutes():
    misalignment = make_tables(1)["misalignment"]
    broken = misalignment.assign(b_exact=0.5 * misalignment["p_lo"])  # the two-sample bound below the data
    assert rule_verdict("W2", misalignment=broken) == REFUTED
    text = statistic(make_tables(1), "W2")
    assert "this model's own gradient pools" in text and "non-vacuous" in text
    assert "p_lo ≤ B_exact (two-sample) in 100.0% of the 144 rows with one" in text


def test_w4_is_judged_held_out_and_not_by_the_same_pool():
    intervention = make_tables(1)["intervention"]
    rng = np.random.default_rng(0)
    coin = rng.random(len(intervention)) < 0.5
    heldout = intervention["predicted"] * np.where(coin, 1.0, -1.0)
    noise = intervention.assign(
        observed_heldout=heldout, ratio_heldout=heldout / intervention["predicted"], sign_agree_heldout=coin
    )
    unmatched = make_tables(1)["signal"].assign(n=256)  # no certificate at these pool sizes: judged against 1/2
    assert rule_verdict("W4", intervention=noise, signal=unmatched) == NOT_DETECTABLE  # same-pool ratio 0.97 or not
    assert rule_verdict("W4", intervention=noise) == REFUTED  # coin flips where B_exact promises ≤ 12 % misalignment
    text = statistic(make_tables(1), "W4")
    assert "first-order consistency check of the implementation" in text and "Wilson" in text


def test_w4_sign_disagreement_above_the_certificate_of_the_pool_sizes_refutes():
    tables = make_tables(1)  # pools of n = 64 train and test examples: the misalignment rows at M = K = 64
    intervention = tables["intervention"]
    agree = (intervention["point_index"] != 0) | (intervention["depth"] > 8)  # 3 of 36 disagree
    heldout = intervention["predicted"] * np.where(agree, 0.95, -0.95)
    intervention = intervention.assign(
        observed_heldout=heldout, ratio_heldout=heldout / intervention["predicted"], sign_agree_heldout=agree
    )
    tight = tables["misalignment"].assign(b_exact=1e-3)
    assert verdicts(tables | {"intervention": intervention, "misalignment": tight})["W4"] == REFUTED
    loose = tables["misalignment"].assign(b_exact=0.2)
    result = claims(tables | {"intervention": intervention, "misalignment": loose}).set_index("claim").loc["W4"]
    assert "36 of these rows have a B_exact at the same (point, view, M, K)" in result["statistic"]
    assert result["verdict"] == NOT_CONFIRMED  # signs agree in 92 % < 95 %, within the certificate
    larger_pools = tables["signal"].assign(n=256)  # no misalignment row at M = K = 256: judged against 1/2
    result = claims(tables | {"intervention": intervention, "misalignment": tight, "signal": larger_pools})
    assert "so judged against 1/2 only" in result.set_index("claim").loc["W4", "statistic"]
    assert result.set_index("claim").loc["W4", "verdict"] == NOT_CONFIRMED


def test_w5_is_judged_at_the_dims_this_run_measured():
    tables = make_tables(1)
    text = statistic(tables, "W5")
    assert "0.2 at D 1024" in text and "crossover D ≈" in text and "memory ratio" in text
    # cheap only far beyond the measured dims: the old rule (largest D benchmarked) would confirm
    far = pd.DataFrame({"dim": [64, 256, 1024, 65536], "gram_over_cov_time": [6.0, 5.0, 4.0, 0.1]})
    assert verdicts(tables | {"benchmarks": far})["W5"] == REFUTED
    nearest = claims(tables, benchmarks={"dim": 4096, "gram_over_cov_time": 1.5}).set_index("claim").loc["W5"]
    assert nearest["verdict"] == NOT_DETECTABLE and "nearest benchmarked D 4096" in nearest["statistic"]
    with pytest.raises(ValueError, match="gram_over_cov_time"):
        claims(tables, benchmarks={"dim": 4096})


def test_verdicts_are_deterministic_and_statistics_report_numbers():
    first, second = claims(make_tables(1)), claims({k: v.copy() for k, v in make_tables(1).items()})
    pd.testing.assert_frame_equal(first, second)
    w1 = first.set_index("claim").loc["W1", "statistic"]
    assert "36 of 36 rows usable; ρ(width, d_align) = 1.00 [1.00, 1.00]" in w1


def test_write_report_lists_all_claims_figures_and_captions(tmp_path):
    tables = make_tables(1)
    tables_dir, figures_dir = tmp_path / "results" / "tables", tmp_path / "figures"
    for name in FIGURES["F3_rebound"][1] + report.CLAIM_TABLES:
        write_contract_table(tables[name], tables_dir, name)
    tables["benchmarks"].to_csv(tables_dir / "benchmarks.csv", index=False)
    make_figure("F3_rebound", tables_dir, figures_dir, dpi=40)
    out = tmp_path / "results" / "report.md"
    verdicts = write_report(tables_dir, figures_dir, out, captions_dir=CAPTIONS)
    assert verdicts["claim"].tolist() == [claim.id for claim in report.CLAIMS]
    text = out.read_text()
    for claim in CLAIM_IDS:
        assert f"| {claim} |" in text
    assert text.count(f"| {CONFIRMED} |") == len(CLAIM_IDS)  # the CSV round trip (bools, NaN) changes nothing
    assert "![F3_rebound](../figures/F3_rebound.png)" in text
    assert (out.parent / "../figures/F3_rebound.png").exists()
    assert text.count("(figure not produced in this run)") == len(FIGURES) - 1
    for stem in [*FIGURES, "claims"]:
        assert (CAPTIONS / f"{stem}.rst").read_text().strip() in text


def test_verdict_summary_lists_every_claim_of_the_report(tmp_path):
    tables_dir = tmp_path / "tables"
    for name, frame in make_tables(1).items():
        write_contract_table(frame, tables_dir, name)
    out = tmp_path / "report.md"
    write_report(tables_dir, tmp_path / "figures", out, captions_dir=CAPTIONS)
    summary = report.verdict_summary(out, tmp_path / "figures")
    assert str(out) in summary
    for claim in CLAIM_IDS:
        assert f"  {claim:<18} {CONFIRMED}" in summary, summary


def trajectory_table(loss, d_align, steps=range(11)) -> pd.DataFrame:
    """A full-view train-split trajectory of the ``make_tables`` grid: train loss ``loss(width, step)``,
    d_align ``d_align(train_loss, width)`` with a ±20 % interval, except at step 0 where the interval
    contains 0 (initialization not measurable)."""
    frame = _points(_grid(("resnet",), point_index=POINTS, split=["train"], view=["full"], step=list(steps)))
    width, step = frame["width"].astype(float), frame["step"].astype(float)
    train_loss = loss(width, step)
    d = pd.Series(d_align(train_loss, width), index=frame.index)
    frame = _with_intervals(
        frame.assign(train_loss=train_loss, test_loss=train_loss + 0.1, n=64),
        {"d_align": d, "mu_sq": pd.Series(1.0, index=frame.index)},
    )
    frame = frame.assign(d_align_lo=np.where(step == 0, -d, frame["d_align_lo"]), d_par=2 * d, d_2=d)
    return frame[contract("trajectory")]


def test_first_crossing_interpolates_where_the_loss_first_reaches_each_level():
    loss = np.array([3.0, 2.0, 2.5, 1.0])  # not monotone: 2.25 is reached three times
    values = np.array([[10.0, 1.0], [20.0, np.nan], [30.0, 3.0], [40.0, 4.0]])
    levels = np.array([2.25, 2.75, 0.5, 3.0, 1.0])
    expected = [[17.5, np.nan], [12.5, np.nan], [np.nan, np.nan], [10.0, 1.0], [40.0, 4.0]]
    np.testing.assert_allclose(report.first_crossing(loss, values, levels), expected)  # a NaN end of weight 0: ignored
    np.testing.assert_allclose(report.first_crossing(np.array([2.0, 2.0, 1.0]), values[:3], np.array([2.0])), [[10, 1]])
    assert np.isnan(report.first_crossing(loss[:1], values[:1], levels)).all()


def test_matched_loss_levels_span_the_range_every_model_reaches():
    tables = make_tables(1)
    trajectory = tables["trajectory"].assign(train_loss=lambda f: 3 - 0.1 * f["width"] * np.log1p(f["step"]))
    matched = report.at_matched_loss(trajectory)
    reach = trajectory.groupby("model")["train_loss"].agg(["min", "max"])
    levels = np.linspace(reach["min"].max(), reach["max"].min(), report.W1_LOSS_LEVELS)
    for (model, point), rows in matched.groupby(["model", "point_index"]):
        np.testing.assert_allclose(rows.sort_values("level")["train_loss"], levels)
        series = trajectory[(trajectory["model"] == model) & (trajectory["point_index"] == point)].sort_values("step")
        for column in ["d_align", "d_align_lo", "d_align_hi"]:  # monotone loss: np.interp on the reversed path
            brute = np.interp(levels, series["train_loss"][::-1], series[column][::-1])
            np.testing.assert_allclose(rows.sort_values("level")[column], brute, atol=1e-12)
    assert len(matched) == len(trajectory.groupby(["model", "point_index"])) * report.W1_LOSS_LEVELS


def test_w1_along_training_states_both_parts_and_confirms_when_they_agree():
    text = statistic(make_tables(1), "W1 along training")
    assert text.count(f"[{CONFIRMED}]") == 2 and "At equal step: 3 of 4 (dataset, family, step) measurable" in text
    assert f"At equal train loss ({report.W1_LOSS_LEVELS} levels per (dataset, family, depth)" in text
    assert "(dataset, family, depth, level) measurable" in text and "resnet 4" in text  # last measurable step


@pytest.mark.parametrize("sign", [1, -1])
def test_w1_along_training_is_not_confirmed_when_step_and_matched_loss_disagree(sign):
    """Wider models train faster. d_align ∝ exp(−4·sign·L)·width^(−0.1·sign): at equal step the wider
    model (lower loss) has the larger d_align for sign 1, at equal loss the smaller; sign −1: the reverse."""
    trajectory = trajectory_table(
        lambda w, s: 3 - 0.05 * w * s, lambda loss, w: np.exp(-4 * sign * loss) * w ** (-0.1 * sign)
    )
    text, verdict = report.rule_w1_training({"trajectory": trajectory})
    step_part, loss_part = text.split("At equal train loss")
    assert f"[{CONFIRMED if sign > 0 else REFUTED}]" in step_part
    assert f"[{REFUTED if sign > 0 else CONFIRMED}]" in loss_part
    assert verdict == NOT_CONFIRMED


def test_w1_along_training_is_not_detectable_when_a_part_cannot_be_judged():
    no_common_loss = trajectory_table(lambda w, s: 10 / w - 0.01 * s, lambda loss, w: w)  # disjoint loss ranges
    text, verdict = report.rule_w1_training({"trajectory": no_common_loss})
    assert f"[{CONFIRMED}]" in text and "0 of 0 (dataset, family, depth, level) measurable" in text
    assert verdict == NOT_DETECTABLE
    trajectory = make_tables(1)["trajectory"]
    noise = trajectory.assign(d_align_lo=-trajectory["d_align_hi"])  # every interval contains 0
    text, verdict = report.rule_w1_training({"trajectory": noise})
    assert "0 of 4 (dataset, family, step) measurable" in text and verdict == NOT_DETECTABLE
    assert rule_verdict("W1 along training", trajectory=make_tables(-1)["trajectory"]) == REFUTED


def _expansion(gain: np.ndarray, se: float | np.ndarray) -> pd.DataFrame:
    """The ``make_tables`` expansion rows with L_test(control) − L_test(selected) = ``gain`` and its SE ``se``."""
    expansion = make_tables(1)["expansion"]
    return expansion.assign(test_loss_selected=expansion["test_loss_control"] - gain, se_test_selected_minus_control=se)


def test_e8_counts_a_gain_only_beyond_two_evaluation_standard_errors():
    assert report.E8_NOISE_SES == 2.0
    gain = np.full(36, 0.04)
    assert rule_verdict("E8", expansion=_expansion(gain, 0.0199)) == CONFIRMED
    within = claims(make_tables(1) | {"expansion": _expansion(gain, 0.0201)}).set_index("claim").loc["E8"]
    assert within["verdict"] == NOT_DETECTABLE
    assert "0 of 36 rows usable (36: interval contains 0)" in within["statistic"]
    assert "at most half the rows are clear of evaluation noise" in within["statistic"]
    assert rule_verdict("E8", expansion=_expansion(-gain, 0.0199)) == REFUTED


def test_e8_wins_among_usable_rows_decide_with_a_wilson_interval():
    rng = np.random.default_rng(0)
    sign = np.where(rng.permutation(36) < 18, 1.0, -1.0)  # half wins, half losses, all beyond noise
    text = statistic(make_tables(1) | {"expansion": _expansion(0.04 * sign, 0.005)}, "E8")
    assert "36 of 36 rows usable" in text and "wins (gain > 0) 18 of 36 usable (Wilson 34%–66%)" in text
    assert rule_verdict("E8", expansion=_expansion(0.04 * sign, 0.005)) == NOT_DETECTABLE
    few = np.where(np.arange(36) < 16, 0.04, 0.001)  # 16 clear wins, 20 within noise: not a majority
    assert rule_verdict("E8", expansion=_expansion(few, 0.005)) == NOT_DETECTABLE
    many = np.where(np.arange(36) < 20, 0.04, 0.001)  # 20 of 36 usable, all wins
    assert rule_verdict("E8", expansion=_expansion(many, 0.005)) == CONFIRMED


def test_e8_without_evaluation_noise_is_counted_or_not_measured():
    gain = np.full(36, 0.04)
    se = np.where(np.arange(36) < 20, np.nan, 0.005)
    text = statistic(make_tables(1) | {"expansion": _expansion(gain, se)}, "E8")
    assert "16 of 36 rows usable (20: no interval)" in text
    old = make_tables(1)["expansion"].drop(columns=report.E8_SE)  # a table written before the SE columns
    result = claims(make_tables(1) | {"expansion": old}).set_index("claim").loc["E8"]
    assert result["verdict"] == NOT_MEASURED and report.E8_SE in result["statistic"]
