"""Claims report: each verdict rule against tables built with, against and without the claimed trend.

``make_tables`` also feeds tests/test_plots.py: one synthetic grid of models with every tidy
table the figures and rules read, in the columns of the producers' contract (``CONTRACT``:
jackknife intervals of ‖μ‖², the bias-corrected D1 ratio with its low-rank flag, the two-sample
certificate, the held-out intervention). ``noise_tables`` builds small tables of pure noise.
"""

from __future__ import annotations

import itertools
import re
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scalemech import report
from scalemech.core.layout import table_path
from scalemech.core.tables import EARLY, columns, early_tables, model_keys, write_table
from scalemech.figures import FIGURES, make_figure
from scalemech.report import (
    CONFIRMED,
    NOT_CONFIRMED,
    NOT_DETECTABLE,
    NOT_MEASURED,
    REFUTED,
    claims,
    influence,
    write_report,
)
from scalemech.report.rules.w1_training import W1_LOSS_LEVELS, at_matched_loss, first_crossing
from scalemech.report.trend import null_bound
from scalemech.stats.powerlaw import powerlaw_table

DEPTHS, WIDTHS, POINTS = [8, 14, 20, 26], [1, 2, 4], [0, 1, 2]
CAPTIONS = Path(__file__).resolve().parents[1] / "workflow" / "report"
CONTRACT = {  # the tables' own columns, after the model keys, as the producers now write them
    "signal": [
        "point",
        "point_index",
        "split",
        "n",
        "mu_sq",
        "mu_sq_lo",
        "mu_sq_hi",
        "mu_sq_se",
        "mu_sq_ucb",
        "mu_norm",
        "block_grad_norm",
    ],
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
        "b_exact_ucb",
        "b_exact_common",
        "b_align",
        "mu_cross",
        "mu_cross_se",
        "mu_cross_lo",
        "mu_cross_hi",
        "v_mk",
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
PENDING = {  # the bounds and standard errors the report reads (tables written before they existed lack them)
    "signal": ["mu_sq_se", "mu_sq_ucb"],
    "dalign": ["d_2_se", "d_2_ucb", "d_align_se", "d_align_ucb"],
    "trajectory": ["d_2_se", "d_2_ucb", "d_align_se", "d_align_ucb"],
    "misalignment": ["mu_cross_se", "mu_cross_lo", "mu_cross_hi", "b_exact_ucb", "v_mk"],
}
BENCHMARKS = [
    "dim",
    "n",
    "repeats",
    "gram_seconds",
    "covariance_seconds",
    "gram_over_cov_time",
    "gram_over_cov_time_lo",
    "gram_over_cov_time_hi",
    "gram_bytes",
    "covariance_bytes",
]


def contract(name: str) -> list[str]:
    """The producers' columns of ``name`` and the ``PENDING`` ones the schema does not hold yet."""
    own = model_keys() + CONTRACT[name] if name in CONTRACT else columns(name)
    return own + [c for c in PENDING.get(name, []) if c not in own]


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


def _with_bounds(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """``name``'s SE from its ±20 % interval (a 1.96-SE half width) and its one-sided 95 % UCB."""
    se = 0.2 * frame[name].abs() / 1.96
    return frame.assign(**{f"{name}_se": se, f"{name}_ucb": frame[name] + 1.645 * se})


ADAPTATION_ARMS = ["grown", "control_tokens", "control_flops", "inplace", "lora"]


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
        test_loss_se=0.001,  # the evaluation SE D3 falls back on with one seed per cell
        steps=100,
        epochs=1,
        train_loss=wide - 0.1,  # the rebound in the generalization gap (Paper D's), not in the fit
        train_acc=0.5,
        test_acc=0.5,
        wall_seconds=1.0,
        examples_per_second=1e3,
        device="cpu",
        parameters=1000,
        tokens_per_parameter=np.nan,  # image classifiers, trained to a plateau (no accuracy floor for synth)
        loss_first=training["test_loss"] + 2,
        loss_late=training["test_loss"] - 0.1,
        loss_end=training["test_loss"] - 0.1,
        continued_rounds=0,
    )

    covariance = _points(_grid(families, point_index=POINTS))
    low_rank = covariance["point_index"] == max(POINTS)  # the last block before the head
    ratio = np.where(low_rank, 0.95, 0.02 if s > 0 else 0.8)  # ρ̄² = r/(3(1 − r)): 0.007 or 1.3
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
    signal = _with_bounds(signal, "mu_sq").assign(
        n=64, mu_norm=np.sqrt(signal["mu_sq"]), block_grad_norm=np.sqrt(signal["mu_sq"])
    )

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
    dalign = _with_bounds(_with_bounds(dalign, "d_align"), "d_2")

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
        mu_cross=float(s),  # E = μ_trᵀμ_te: positive with the claims, negative against them
        mu_cross_se=0.1 / width,  # E/SE = 10·s·width: rises with width (misalignment falls) or falls
        b_exact_ucb=np.minimum(2 * p, 1) if s > 0 else 0.9,
        v_mk=1 / (width**2 * M),  # E/√V = 2s·width·√(M/4): rises with width (misalignment falls) or falls
    )
    misalignment = misalignment.assign(
        mu_cross_lo=misalignment["mu_cross"] - 1.96 * misalignment["mu_cross_se"],
        mu_cross_hi=misalignment["mu_cross"] + 1.96 * misalignment["mu_cross_se"],
    )

    intervention = _points(_grid(families, point_index=POINTS, view=["full"], eta=[1e-3, 1e-2, 1e-1]))
    predicted = -intervention["eta"] * (1 + intervention["width"])
    observed = predicted * (0.97 - intervention["eta"]) if s > 0 else -0.4 * predicted
    heldout = predicted * (0.976 - intervention["eta"]) if s > 0 else -0.5 * predicted  # 97.5 % at the smallest η
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
    trajectory = _with_bounds(_with_bounds(trajectory, "d_align"), "d_2")
    growth = _points(_grid(families, point_index=POINTS, snapshot=["final", "signal"]))
    level = growth["point_index"].map({0: 1.0, 1: 3.0, 2: 2.0})  # the middle point predicted, and with s realized, best
    size = (1 + 0.01 * growth["depth"]) * (1 + 0.1 * growth["width"]) * np.where(growth["snapshot"] == "final", 1, 0.5)
    gain_old, gain_budget = s * 0.02 * level * size, s * 0.01 * size
    before = 2.0 + 0.01 * growth["depth"]
    grown = before - gain_old
    growth = growth.assign(
        snapshot_step=np.where(growth["snapshot"] == "final", 100, 4),
        steps=50,
        train_mode="all",
        n=64,
        mu_sq=0.1 * level,
        mu_sq_lo=0.05 * level,
        mu_sq_hi=0.15 * level,
        d_align=level,
        d_align_lo=0.5 * level,
        d_align_hi=1.5 * level,
        b_exact=0.1,
        b_exact_ucb=0.3,
        block_grad_norm=0.01 * level * size,
        verdict="grow here",
        certify_rank=4 - level,
        predicted_gain=0.01 * level * size,
        jump_step=0.1,
        jump_interior=True,
        fallback=growth["point_index"] == 0,
        lr_selected=0.1,
        lr_control_tokens=0.1,
        lr_control_flops=0.1,
        steps_control_flops=55,
        flops_grown=1.1e9,
        flops_control_tokens=1e9,
        flops_control_flops=1.1e9,
        train_loss_old=before - 0.1,
        train_loss_jump=before - 0.11,
        train_loss_grown=grown - 0.1,
        test_loss_old=before,
        test_loss_jump=before - 0.01,
        test_loss_grown=grown,
        test_loss_control_tokens=grown + gain_budget,
        test_loss_control_flops=grown + gain_budget,
        n_heldout=512,
        gain_old=gain_old,
        gain_old_se=0.001,
        gain_tokens=gain_budget,
        gain_tokens_se=0.001,
        gain_flops=gain_budget,
        gain_flops_se=0.001,
        control_change=gain_budget - gain_old,
        control_change_se=0.001,
    )
    growth["recommended"] = (growth["gain_tokens"] > 0.002) & (growth["gain_flops"] > 0.002)  # both by > 2 SE
    copied = {"best": "1", "best:2": "1,2", "pareto": "0", "every:2": "1,3", "adept": "2", "bi": "3", "top": "3",
              "layer.0": "0", "layer.1": "1", "layer.2": "2"}  # fmt: skip
    adaptation = _grid(families, placement=list(copied), arm=ADAPTATION_ARMS)
    wobble = 0.002 * np.sin(adaptation["depth"] + 3 * adaptation["width"])  # bases differ, within their SEs
    rival = ~adaptation["placement"].isin(["best", "best:2", "pareto"])
    vs_grown = np.where(adaptation["arm"] == "grown", 0.0, 1.0)
    points = adaptation["placement"].map(copied)
    two = points.str.contains(",")
    point = points.str.split(",").str[0].astype(float)  # one layer's point: realized forgetting rises with it
    predicted = np.where(two, np.nan, 0.001 * point)
    forgetting = 0.05 + wobble + np.where(adaptation["arm"] == "grown", s * 0.01 * point, 0.0)
    vs_pareto = adaptation["placement"].isin(["best", "adept", "bi"]) * (s * 0.05 + wobble)  # pareto forgets less
    adaptation = adaptation.assign(
        inserted=np.where(two, "2,4", "2"), copied=points, trainable_parameters=1000, steps=100, tokens=6400, flops=1e9,
        n_new=256, n_retain=256, new_loss_old=2.5, retain_loss_old=1.5, new_loss=2.2 + wobble,
        retain_loss=1.55 + wobble, gain=0.3 - wobble, gain_se=0.005, forgetting=forgetting, forgetting_se=0.005,
        vs_grown_new=vs_grown * (s * 0.05 + wobble), vs_grown_new_se=0.005,
        vs_grown_forgetting=vs_grown * (s * 0.05 + wobble), vs_grown_forgetting_se=0.005,
        vs_best_new=rival * (s * 0.05 + wobble), vs_best_new_se=0.005, vs_best_forgetting=rival * (s * 0.05 + wobble),
        vs_best_forgetting_se=0.005, equal_reference=np.where(two, "best:2", "best"),
        vs_equal_new=rival * (s * 0.05 + wobble), vs_equal_new_se=0.005,
        vs_equal_forgetting=rival * (s * 0.05 + wobble), vs_equal_forgetting_se=0.005,
        vs_pareto_new=vs_pareto, vs_pareto_new_se=0.005, vs_pareto_forgetting=vs_pareto, vs_pareto_forgetting_se=0.005,
        predicted_gain=0.5, predicted_gain_b=0.1, predicted_forgetting=predicted, recommended=s > 0, winner="grown",
    )  # fmt: skip
    dims = np.array([16, 64, 256, 1024])
    time_ratio = [4.0, 2.0, 0.6, 0.2] if s > 0 else [4.0, 5.0, 6.0, 8.0]
    benchmarks = pd.DataFrame(
        {
            "dim": dims,
            "n": 64,
            "repeats": 5,
            "gram_seconds": 0.01 * np.array(time_ratio),
            "covariance_seconds": 0.01,
            "gram_over_cov_time": time_ratio,
            "gram_over_cov_time_lo": 0.8 * np.array(time_ratio),
            "gram_over_cov_time_hi": 1.25 * np.array(time_ratio),
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
        trajectory=trajectory,
        growth=growth,
        adaptation=adaptation,
    )
    own = {name: frame[contract(name)] for name, frame in tables.items()}
    early = {name: own[name.removeprefix(EARLY)].assign(step=0) for name in early_tables()}  # the same at step 0
    return own | early | {"benchmarks": benchmarks[BENCHMARKS], "powerlaw": powerlaw_table(own["training"])}


CLAIM_IDS = [claim.id for claim in report.CLAIMS]  # the registry: a new claim is in every generic test
OWN_TESTS = {
    "D4",
    "W1 at the paper's widths",
    "W1 level",
    "W1 level early",
    "W2 level",
    "W2 level early",
}  # claims that need grids or levels make_tables lacks: tests/test_powerlaw.py, test_paper_widths.py, the levels'
# scenarios in test_rules_power.py
GRID_IDS = [claim for claim in CLAIM_IDS if claim not in OWN_TESTS]
DECIDED = (CONFIRMED, REFUTED)


def verdicts(tables: dict[str, pd.DataFrame], ids: list[str] = GRID_IDS) -> dict[str, str]:
    """The verdicts of the claims ``ids`` (by default those ``make_tables`` can decide)."""
    return {
        claim: verdict
        for claim, verdict in claims(tables)[["claim", "verdict"]].itertuples(index=False)
        if claim in ids
    }


def row(tables: dict[str, pd.DataFrame], claim: str) -> pd.Series:
    return claims(tables).set_index("claim").loc[claim]


def rule_verdict(claim: str, **replaced: pd.DataFrame) -> str:
    return verdicts(make_tables(1) | replaced)[claim]


# Each rule's power (noise, offsets, a planted effect and its opposite): tests/test_rules_power.py.


def test_claims_table_has_one_row_per_claim_and_short_statistics():
    table = claims(make_tables(1))
    columns = ["claim", "regime", "statement", "statistic", "rule", "verdict", "per_seed", "models", "detail"]
    assert list(table.columns) == columns
    regimes = table.set_index("claim")["regime"]
    assert regimes["W1"] == "trained" and regimes["W1 early"] == "early training: step 0" and regimes["D3"] == "trained"
    assert list(table["claim"]) == CLAIM_IDS and table["rule"].str.len().min() > 20
    papers = ["DWEG".index(claim[0]) for claim in CLAIM_IDS]  # report order: Paper D, Paper W, E8, growth
    assert papers == sorted(papers) and CLAIM_IDS[:5] == ["D1", "D1 early", "D2", "D2 early", "D3"]
    assert table["statistic"].str.len().max() <= 200, table["statistic"].str.len().max()
    assert set(table.set_index("claim").loc[GRID_IDS, "per_seed"]) == {"one seed (0): not checked against a reseed"}


@pytest.mark.parametrize("families", [("resnet",), ("resnet", "llama")])
def test_every_claim_is_confirmed_on_tables_with_the_claimed_trend(families):
    assert verdicts(make_tables(1, families)) == dict.fromkeys(GRID_IDS, CONFIRMED)


def test_every_claim_is_refuted_on_tables_against_the_claimed_trend():
    assert verdicts(make_tables(-1)) == dict.fromkeys(GRID_IDS, REFUTED)


def test_missing_tables_or_columns_are_not_measured_with_the_reason():
    assert verdicts({}, CLAIM_IDS) == dict.fromkeys(CLAIM_IDS, NOT_MEASURED)
    empty = {name: frame.iloc[:0] for name, frame in make_tables(1).items()}
    assert verdicts(empty, CLAIM_IDS) == dict.fromkeys(CLAIM_IDS, NOT_MEASURED)
    old = {name: frame.drop(columns=PENDING.get(name, [])) for name, frame in make_tables(1).items()}
    result = claims(old).set_index("claim")
    assert result.loc["W1", "verdict"] == NOT_MEASURED
    assert "needs column(s) d_align_se, d_align_ucb (rerun measure)" in result.loc["W1", "statistic"]


def test_too_few_depths_or_widths_are_not_measured():
    tables = make_tables(1)
    two_depths = {name: frame[frame["depth"] <= 14] if "depth" in frame else frame for name, frame in tables.items()}
    two_widths = {name: frame[frame["width"] <= 2] if "width" in frame else frame for name, frame in tables.items()}
    assert {k: verdicts(two_depths)[k] for k in ["D2", "D3"]} == dict.fromkeys(["D2", "D3"], NOT_MEASURED)
    assert {k: verdicts(two_widths)[k] for k in ["W1", "W2"]} == dict.fromkeys(["W1", "W2"], NOT_MEASURED)


def test_an_unbounded_row_is_counted_not_stated_as_the_bound():
    rows = pd.DataFrame({"d_align_ucb": [0.01, np.inf, 0.02], "d_align_se": 0.01, "n": 256})
    assert null_bound(rows, "d_align", "d_align_ucb", "d_align_se").startswith(
        "d_align < 0.02 (95 % UCB, 2/3 rows bounded)"
    )


def test_w2_reads_the_signal_to_noise_ratio_with_its_sign():
    """Where E is estimated ≤ 0 the producer writes no certificate (b_exact NaN); E/√V is then negative, not
    0, so a misalignment that rises with width is refuted (with E/√V cut at 0 the slope would be 0)."""
    against = make_tables(-1)["misalignment"].assign(b_exact=np.nan)
    assert rule_verdict("W2", misalignment=against) == REFUTED
    unknown = against.assign(v_mk=-1.0)  # V estimated ≤ 0 everywhere: no ratio, no slope
    assert rule_verdict("W2", misalignment=unknown) == NOT_MEASURED


def test_intermediate_outcomes_are_not_confirmed():
    tables = make_tables(1)
    training = tables["training"]
    no_rebound = training.assign(test_loss=3.0 - 0.01 * training["depth"] - 0.1 * training["width"])
    assert rule_verdict("D3", training=no_rebound) == NOT_CONFIRMED  # joint scaling holds, rebound absent
    vacuous = tables["misalignment"].assign(b_exact_ucb=0.9)  # the certificate is stated beside, not a gate
    assert rule_verdict("W2", misalignment=vacuous) == CONFIRMED
    assert "median B_exact UCB 0.9" in row(tables | {"misalignment": vacuous}, "W2")["statistic"]


def _timings(dims: list[int], ratio: list[float], spread: float = 1.25) -> pd.DataFrame:
    ratio = np.array(ratio)
    return pd.DataFrame(
        {"dim": dims, "gram_over_cov_time": ratio, "gram_over_cov_time_lo": ratio / spread,
         "gram_over_cov_time_hi": ratio * spread}
    )  # fmt: skip


def test_w5_is_judged_at_the_dims_this_run_measured():
    tables = make_tables(1)
    result = row(tables, "W5")
    assert "0.2 [0.16, 0.25] at D 1024" in result["detail"] and "crossover D ≈" in result["detail"]
    assert "memory ratio" in result["detail"] and "resnet 0.2 [0.16, 0.25]" in result["statistic"]
    assert "5 paired repeats" in result["detail"]
    far = _timings([64, 256, 1024, 65536], [6.0, 5.0, 4.0, 0.1])
    assert verdicts(tables | {"benchmarks": far})["W5"] == REFUTED
    nearest = claims(tables, benchmarks=_timings([4096], [1.5])).set_index("claim").loc["W5"]
    assert nearest["verdict"] == NOT_DETECTABLE and "nearest benchmarked D 4096" in nearest["detail"]
    with pytest.raises(ValueError, match="gram_over_cov_time_lo"):
        claims(tables, benchmarks={"dim": 4096, "gram_over_cov_time": 0.5})


def test_w5_decides_on_the_interval_not_the_point():
    """A ratio below 1 whose interval reaches above 1 is not detectable; one above 2 whose interval reaches
    below 2 is not refuted."""
    tables = make_tables(1)
    dims = sorted(tables["dalign"]["dim"].unique())
    assert verdicts(tables | {"benchmarks": _timings(dims, [0.9] * len(dims), 1.3)})["W5"] == NOT_DETECTABLE
    assert verdicts(tables | {"benchmarks": _timings(dims, [0.9] * len(dims), 1.05)})["W5"] == CONFIRMED
    assert verdicts(tables | {"benchmarks": _timings(dims, [2.4] * len(dims), 1.3)})["W5"] == NOT_DETECTABLE
    assert verdicts(tables | {"benchmarks": _timings(dims, [2.4] * len(dims), 1.1)})["W5"] == REFUTED


def test_each_row_counts_the_single_model_removals_that_change_its_verdict():
    """D2 confirmed on twelve models, none of which decides it alone; one model's ‖μ‖² blown up fifty times
    hides the decay, and removing that model (and only it) brings the verdict back."""
    tables = make_tables(1)
    d2 = next(claim for claim in report.CLAIMS if claim.id == "D2")
    signal = tables["signal"]
    models = signal["model"].nunique()
    assert influence.removals([d2], tables, [d2.judge(tables).verdict]) == [f"0 of {models}"]
    deep = (signal["depth"] == signal["depth"].max()) & (signal["width"] == signal["width"].min())
    outlier = {"signal": signal.assign(mu_sq=np.where(deep, 50 * signal["mu_sq"], signal["mu_sq"]))}
    verdict = d2.judge(outlier).verdict
    assert verdict != d2.judge(tables).verdict
    assert influence.removals([d2], outlier, [verdict]) == [f"1 of {models}"]


def test_verdicts_are_deterministic():
    first, second = claims(make_tables(1)), claims({k: v.copy() for k, v in make_tables(1).items()})
    pd.testing.assert_frame_equal(first, second)


def test_write_report_lists_all_claims_figures_and_captions(tmp_path):
    tables = make_tables(1)
    tables_dir, figures_dir = tmp_path / "results" / "tables", tmp_path / "figures"
    for name in FIGURES["F3_rebound"][1] + report.CLAIM_TABLES:
        if name in tables:
            write_contract_table(tables[name], tables_dir, name)
    tables["benchmarks"].to_csv(tables_dir / "benchmarks.csv", index=False)
    write_table(report.verdict_rows(tables_dir), tables_dir / "verdicts.csv", "verdicts")  # the verdict_table job's
    make_figure("F3_rebound", tables_dir, figures_dir, dpi=40)
    out = tmp_path / "results" / "report.md"
    decided = report.read_verdicts(tables_dir / "verdicts.csv")
    verdicts = write_report(tables_dir, figures_dir, out, captions_dir=CAPTIONS, verdicts=decided)
    assert verdicts["claim"].tolist() == [claim.id for claim in report.CLAIMS]
    assert set(verdicts["figure"]) == {*report.CLAIM_FIGURES.values(), ""}  # W5 has no figure
    text = out.read_text()
    assert "| claim | regime | verdict | per seed | models | one model out | deciding number | figure |" in text
    assert (
        verdicts.set_index("claim").loc["W1", "removals"] == f"0 of {verdicts.set_index('claim').loc['W1', 'models']}"
    )
    regimes = verdicts.set_index("claim")["regime"]
    for claim in GRID_IDS:  # each claim linked to its section; the CSV round trip changes nothing
        linked = f"| [{claim}](#{report.document.anchor(claim)}) | {regimes[claim]} | {CONFIRMED} |"
        assert linked in text and f"### {claim}\n" in text
    assert "| [F3](#f3_rebound) |" in text and "| [W1 along training](#w1-along-training) |" in text
    table = [line for line in text.splitlines() if line.startswith("| [")]
    cells = [cell for line in table for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
    assert len(table) == len(CLAIM_IDS) and max(map(len, cells)) <= 200, max(cells, key=len)
    assert "![F3_rebound](../figures/F3_rebound.png)" in text
    assert text.count("(figure not produced in this run)") == len(FIGURES) - 1
    for stem in [*FIGURES, "claims"]:
        assert (CAPTIONS / f"{stem}.rst").read_text().strip() in text


def test_verdict_summary_lists_every_claim_of_the_report(tmp_path):
    tables_dir = tmp_path / "tables"
    for name, frame in make_tables(1).items():
        write_contract_table(frame, tables_dir, name)
    out = tmp_path / "report.md"
    write_report(tables_dir, tmp_path / "figures", out, captions_dir=CAPTIONS, removals=False)
    summary = report.verdict_summary(out, tmp_path / "figures")
    assert str(out) in summary
    for claim in GRID_IDS:
        assert f"  {claim:<18} {CONFIRMED}" in summary, summary


def test_first_crossing_interpolates_where_the_loss_first_reaches_each_level():
    loss = np.array([3.0, 2.0, 2.5, 1.0])  # not monotone: 2.25 is reached three times
    values = np.array([[10.0, 1.0], [20.0, np.nan], [30.0, 3.0], [40.0, 4.0]])
    levels = np.array([2.25, 2.75, 0.5, 3.0, 1.0])
    expected = [[17.5, np.nan], [12.5, np.nan], [np.nan, np.nan], [10.0, 1.0], [40.0, 4.0]]
    np.testing.assert_allclose(first_crossing(loss, values, levels), expected)  # a NaN end of weight 0: ignored
    np.testing.assert_allclose(first_crossing(np.array([2.0, 2.0, 1.0]), values[:3], np.array([2.0])), [[10, 1]])
    assert np.isnan(first_crossing(loss[:1], values[:1], levels)).all()


def test_matched_loss_levels_span_the_range_every_model_reaches():
    trajectory = make_tables(1)["trajectory"].assign(train_loss=lambda f: 3 - 0.1 * f["width"] * np.log1p(f["step"]))
    matched = at_matched_loss(trajectory)
    reach = trajectory.groupby("model")["train_loss"].agg(["min", "max"])
    levels = np.linspace(reach["min"].max(), reach["max"].min(), W1_LOSS_LEVELS)
    for (model, point), rows in matched.groupby(["model", "point_index"]):
        np.testing.assert_allclose(rows.sort_values("level")["train_loss"], levels)
        series = trajectory[(trajectory["model"] == model) & (trajectory["point_index"] == point)].sort_values("step")
        for column in ["d_align", "d_align_se"]:  # monotone loss: np.interp on the reversed path
            brute = np.interp(levels, series["train_loss"][::-1], series[column][::-1])
            np.testing.assert_allclose(rows.sort_values("level")[column], brute, atol=1e-12)
    assert len(matched) == len(trajectory.groupby(["model", "point_index"])) * W1_LOSS_LEVELS


def test_the_contract_is_the_schema():
    """The columns these tests build are the producers' (tables.schema.yaml), plus the PENDING ones."""
    for name in CONTRACT:
        assert [c for c in contract(name) if c in columns(name)] == columns(name), name
        assert set(contract(name)) - set(columns(name)) <= set(PENDING.get(name, [])), name
    assert columns("benchmarks") == BENCHMARKS
