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
from scalemech.core.tables import columns, model_keys, write_table
from scalemech.figures import FIGURES, make_figure
from scalemech.report import CONFIRMED, NOT_CONFIRMED, NOT_DETECTABLE, NOT_MEASURED, REFUTED, claims, write_report
from scalemech.report.d1 import D1_MAX_MEAN_SQ_CORR, rule_d1
from scalemech.report.d2 import rule_d2
from scalemech.report.e8 import rule_expansion
from scalemech.report.misalignment import rule_w2, rule_w3
from scalemech.report.trend import null_bound
from scalemech.report.w1 import rule_w1
from scalemech.report.w1_training import W1_LOSS_LEVELS, at_matched_loss, first_crossing, rule_w1_training
from scalemech.report.w4 import rule_w4
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
    "misalignment": ["mu_cross_se", "mu_cross_lo", "mu_cross_hi", "b_exact_ucb"],
}
BENCHMARKS = ["dim", "n", "gram_seconds", "covariance_seconds", "gram_over_cov_time", "gram_bytes", "covariance_bytes"]


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
    )
    misalignment = misalignment.assign(
        mu_cross_lo=misalignment["mu_cross"] - 1.96 * misalignment["mu_cross_se"],
        mu_cross_hi=misalignment["mu_cross"] + 1.96 * misalignment["mu_cross_se"],
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
        lr_selected=0.1,
        lr_control=0.1,
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
    own = {name: frame[contract(name)] for name, frame in tables.items()}
    return own | {"benchmarks": benchmarks[BENCHMARKS], "powerlaw": powerlaw_table(own["training"])}


CLAIM_IDS = [
    "D1",
    "D2",
    "D3",
    "D4",
    "W1",
    "W1 along training",
    "W1 at the paper's widths",
    "W2",
    "W3",
    "W4",
    "W5",
    "E8",
]
OWN_TESTS = {
    "D4",
    "W1 at the paper's widths",
}  # need grids make_tables lacks: tests/test_powerlaw.py, test_paper_widths.py
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


# -- synthetic draws: every claim's deciding quantity with a planted effect, noise, or per-model offsets --
MODELS = _grid(("resnet",), depths=[8, 14, 20], widths=[1, 2, 4, 8])  # 12 models, 3 per (depth) stratum
SEEDS = 20  # seeded draws per scenario
FALSE_MAX = 3  # confirmed + refuted allowed without an effect: a valid 5 % test exceeds it with P ≈ 0.016


def false_decisions(counts: dict[str, int]) -> int:
    return counts[CONFIRMED] + counts[REFUTED]


def draw(
    x: str, slope: float, seed: int, offset_sd: float = 0.0, steps: tuple[int, ...] = (0,), points=POINTS, se=0.3
) -> pd.DataFrame:
    """Rows model × point × step with value = 1 + slope·log₂(x / min x) + a per-model offset (sd
    ``offset_sd``, the same at every point and step) + row noise of sd ``se``, and the column ``se``."""
    rng = np.random.default_rng(seed)
    models = pd.concat([MODELS, MODELS.assign(seed=1, model=MODELS["model"] + "b")], ignore_index=True)
    models = models.assign(offset=rng.normal(0, offset_sd, len(models)) if offset_sd else 0.0)
    rows = _points(models.merge(pd.DataFrame({"point_index": points}), how="cross")).merge(
        pd.DataFrame({"step": list(steps)}), how="cross"
    )
    level = np.log2(rows[x] / rows[x].min())
    return rows.assign(value=1 + slope * level + rows["offset"] + rng.normal(0, se, len(rows)), se=se)


def w1_tables(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    d = rows["value"]
    return {
        "dalign": rows.assign(
            view="full", split="train", n=256, d_align=d, d_align_se=rows["se"], d_align_ucb=d + 1.645 * rows["se"]
        )
    }


def d2_tables(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    m = rows["value"]
    return {"signal": rows.assign(split="test", n=256, mu_sq=m, mu_sq_se=rows["se"], mu_sq_ucb=m + 1.645 * rows["se"])}


def trajectory_tables(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """d_align decays along training (×0.1 per step index); every model's train loss is 2/(1 + step)."""
    decay = 0.1 ** rows["step"].rank(method="dense")
    d, se = rows["value"] * decay, rows["se"] * decay
    trajectory = rows.assign(
        view="full",
        split="train",
        n=256,
        train_loss=2 / (1 + rows["step"]),
        d_align=d,
        d_align_se=se,
        d_align_ucb=d + 1.645 * se,
        d_align_lo=d - 2 * se,
        d_align_hi=d + 2 * se,
    )
    return {"trajectory": trajectory}


def w2_tables(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """E/SE = the value (SE 1 in units of E's own SE) at M = K = 64, pools of 64."""
    return {
        "misalignment": rows.assign(
            view="full", M=64, K=64, p_misalign=0.1, mu_cross=rows["value"], mu_cross_se=1.0, b_exact_ucb=0.2
        )
    }


TRENDS = {  # claim -> (rule, x, the paper's sign, tables from rows)
    "D2": (rule_d2, "depth", -1, d2_tables),
    "W1": (rule_w1, "width", 1, w1_tables),
    "W1 along training": (rule_w1_training, "width", 1, trajectory_tables),
    "W2": (rule_w2, "width", 1, w2_tables),
}


def trend_rates(claim: str, slope: float, offset_sd: float = 0.0) -> dict[str, int]:
    rule, x, _, tables = TRENDS[claim]
    steps = (1, 4, 16) if claim == "W1 along training" else (0,)
    strata = {"depth": "width", "width": "depth"}[x]
    counts = {v: 0 for v in (CONFIRMED, REFUTED, NOT_DETECTABLE, NOT_CONFIRMED)}
    for seed in range(SEEDS):
        rows = draw(x, slope, seed, offset_sd, steps)
        assert rows[strata].nunique() >= 3
        counts[rule(tables(rows)).verdict] += 1
    return counts


@pytest.mark.parametrize("claim", list(TRENDS))
def test_trend_claims_noise_planted_opposite_and_persistent_offsets(claim):
    """Noise and per-model offsets without a trend: confirmed/refuted at most at the nominal rate;
    a moderate slope (0.3 per doubling, row SE 0.3) in the paper's direction: confirmed in ≥ 80 %."""
    sign = TRENDS[claim][2]
    noise, offsets = trend_rates(claim, 0.0), trend_rates(claim, 0.0, offset_sd=0.5)
    planted, opposite = trend_rates(claim, 0.3 * sign), trend_rates(claim, -0.3 * sign)
    print(claim, "noise", noise, "offsets", offsets, "planted", planted, "opposite", opposite)
    assert false_decisions(noise) <= FALSE_MAX, noise
    assert false_decisions(offsets) <= FALSE_MAX, offsets
    assert planted[CONFIRMED] >= 0.8 * SEEDS and planted[REFUTED] == 0, planted
    assert opposite[REFUTED] >= 0.8 * SEEDS and opposite[CONFIRMED] == 0, opposite


def rates(rule, tables_of_seed) -> dict[str, int]:
    counts = {v: 0 for v in (CONFIRMED, REFUTED, NOT_DETECTABLE, NOT_CONFIRMED)}
    for seed in range(SEEDS):
        counts[rule(tables_of_seed(seed)).verdict] += 1
    return counts


def e_tables(mean: float, offset_sd: float = 0.0):
    """W3: E/SE per model × point = ``mean`` + per-model offset + noise (SE 1), every M = K."""

    def tables(seed: int) -> dict[str, pd.DataFrame]:
        rows = draw("width", 0.0, seed, offset_sd, se=1.0).assign(value=lambda f: f["value"] - 1 + mean)
        grid = rows.merge(pd.DataFrame({"M": [4, 16, 64]}), how="cross")
        return {
            "misalignment": grid.assign(
                view="full", K=grid["M"], p_misalign=0.1, mu_cross=grid["value"], mu_cross_se=1.0, b_exact_ucb=0.3
            )
        }

    return tables


def test_w3_is_judged_on_e_over_models():
    """E/SE of 0.5 per row: confirmed; −0.5: refuted; 0 (with or without per-model offsets): rarely decided."""
    noise, offsets = rates(rule_w3, e_tables(0.0)), rates(rule_w3, e_tables(0.0, 1.0))
    planted, opposite = rates(rule_w3, e_tables(0.5)), rates(rule_w3, e_tables(-0.5))
    print("W3", noise, offsets, planted, opposite)
    assert false_decisions(noise) <= FALSE_MAX and false_decisions(offsets) <= FALSE_MAX
    assert planted[CONFIRMED] >= 0.8 * SEEDS and opposite[REFUTED] >= 0.8 * SEEDS


def expansion_tables(gain: float, control_change: float = -0.01, families=("resnet", "llama")):
    """E8 rows with a paired gain of ``gain`` evaluation SEs per row (SE 0.01) plus noise of one SE."""

    def tables(seed: int) -> dict[str, pd.DataFrame]:
        rng = np.random.default_rng(seed)
        rows = _points(_grid(families, depths=[8, 14, 20], widths=[1, 2], point_index=POINTS))
        n, se = len(rows), 0.01
        old = np.full(n, 2.0)
        control = old + control_change + rng.normal(0, se, n)
        return {
            "expansion": rows.assign(
                test_loss_old=old,
                test_loss_control=control,
                test_loss_selected=control - se * (gain + rng.normal(0, 1, n)),
                se_test_selected_minus_control=se,
                se_test_control_minus_old=se,
            )
        }

    return tables


def test_e8_aggregates_rows_per_family_and_checks_the_control():
    """A gain of 1.5 SE per row (the old per-row 2-SE gate found it in 1 of 30 draws): confirmed."""
    noise, planted = rates(rule_expansion, expansion_tables(0.0)), rates(rule_expansion, expansion_tables(1.5))
    opposite, damaged = (
        rates(rule_expansion, expansion_tables(-1.5)),
        rates(rule_expansion, expansion_tables(1.5, 0.05)),
    )
    print("E8", noise, planted, opposite, damaged)
    assert false_decisions(noise) <= FALSE_MAX
    assert planted[CONFIRMED] >= 0.8 * SEEDS and opposite[REFUTED] >= 0.8 * SEEDS
    assert damaged[CONFIRMED] == 0 and damaged[NOT_CONFIRMED] >= 0.8 * SEEDS  # a win over a damaged control
    resnet_wins = expansion_tables(1.5, families=("resnet",))(0)["expansion"]
    llama_loses = expansion_tables(-1.5, families=("llama",))(0)["expansion"]
    mixed = rule_expansion({"expansion": pd.concat([resnet_wins, llama_loses])})
    assert mixed.verdict == NOT_CONFIRMED and "resnet: gain" in mixed.statistic and "llama: gain" in mixed.statistic


def intervention_tables(agree: float, ratio: float = 0.97):
    """W4 rows at one η whose held-out signs agree with probability ``agree``."""

    def tables(seed: int) -> dict[str, pd.DataFrame]:
        rng = np.random.default_rng(seed)
        rows = _points(_grid(("resnet",), depths=[8, 14, 20], widths=[1, 2, 4], point_index=POINTS, view=["full"]))
        hit = rng.random(len(rows)) < agree
        return {
            "intervention": rows.assign(
                eta=1e-3,
                sign_agree_heldout=hit,
                ratio_heldout=np.where(hit, ratio, -ratio) + rng.normal(0, 0.05, len(rows)),
            )
        }

    return tables


def test_w4_sign_agreement_is_clustered_by_model():
    noise, planted, opposite = (rates(rule_w4, intervention_tables(a)) for a in (0.5, 0.99, 0.1))
    print("W4", noise, planted, opposite)
    assert false_decisions(noise) <= FALSE_MAX
    assert planted[CONFIRMED] >= 0.8 * SEEDS and opposite[REFUTED] >= 0.8 * SEEDS
    halfway = intervention_tables(0.99, ratio=0.7)(0)
    assert rule_w4(halfway).verdict == NOT_CONFIRMED  # signs agree, magnitude not kept


def covariance_tables(rho2: float, dim: int = 8):
    """D1 rows whose bias-corrected share r gives a mean squared off-diagonal correlation ``rho2`` ± noise."""

    def tables(seed: int) -> dict[str, pd.DataFrame]:
        rng = np.random.default_rng(seed)
        rows = _points(_grid(("resnet",), depths=[8, 14, 20], widths=[1, 2, 4], point_index=POINTS))
        sd_rho2 = 0.02
        r2 = rho2 + rng.normal(0, sd_rho2, len(rows))
        ratio = (dim - 1) * r2 / (1 + (dim - 1) * r2)
        return {
            "covariance": rows.assign(
                dim=dim,
                offdiag_ratio=ratio,
                low_rank=False,
                offdiag_ratio_null_sd=sd_rho2 * (dim - 1) * (1 - ratio) ** 2,
            )
        }

    return tables


@pytest.mark.parametrize("dim", [8, 128])
def test_d1_is_judged_on_a_p_invariant_statistic(dim):
    """The same correlations give the same verdict at p = 8 and 128 (the share r itself rises with p)."""
    small, large = rates(rule_d1, covariance_tables(0.01, dim)), rates(rule_d1, covariance_tables(0.2, dim))
    edge = rates(rule_d1, covariance_tables(D1_MAX_MEAN_SQ_CORR, dim))
    print("D1", dim, small, large, edge)
    assert small[CONFIRMED] >= 0.8 * SEEDS and large[REFUTED] >= 0.8 * SEEDS
    assert false_decisions(edge) <= FALSE_MAX


def test_claims_table_has_one_row_per_claim_and_short_statistics():
    table = claims(make_tables(1))
    assert list(table.columns) == ["claim", "statement", "statistic", "rule", "verdict", "detail"]
    assert list(table["claim"]) == CLAIM_IDS and table["rule"].str.len().min() > 20
    assert table["statistic"].str.len().max() <= 200, table["statistic"].str.len().max()


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


def test_a_null_states_its_bound_and_the_papers_values():
    rows = draw("width", 0.0, 0)
    tables = w1_tables(rows)
    result = rule_w1(tables)
    if result.verdict == NOT_DETECTABLE:
        bound = tables["dalign"]["d_align_ucb"].max()
        assert f"d_align < {bound:.2g} (95 % UCB, every row)" in result.statistic
        assert "MDE 0.75 at n = 256" in result.statistic and "3.9 at width 512" in result.statistic
    assert "24 models" in result.statistic and f"{len(rows)} rows (0 without" in result.detail


def test_an_unbounded_row_is_counted_not_stated_as_the_bound():
    rows = pd.DataFrame({"d_align_ucb": [0.01, np.inf, 0.02], "d_align_se": 0.01, "n": 256})
    assert null_bound(rows, "d_align", "d_align_ucb", "d_align_se").startswith(
        "d_align < 0.02 (95 % UCB, 2/3 rows bounded)"
    )


def test_intermediate_outcomes_are_not_confirmed():
    tables = make_tables(1)
    training = tables["training"]
    no_rebound = training.assign(test_loss=3.0 - 0.01 * training["depth"] - 0.1 * training["width"])
    assert rule_verdict("D3", training=no_rebound) == NOT_CONFIRMED  # joint scaling holds, rebound absent
    vacuous = tables["misalignment"].assign(b_exact_ucb=0.9)
    assert rule_verdict("W2", misalignment=vacuous) == NOT_CONFIRMED  # misalignment falls, the bound says nothing


def test_w5_is_judged_at_the_dims_this_run_measured():
    tables = make_tables(1)
    result = row(tables, "W5")
    assert "0.2 at D 1024" in result["detail"] and "crossover D ≈" in result["detail"]
    assert "memory ratio" in result["detail"] and "resnet 0.2" in result["statistic"]
    far = pd.DataFrame({"dim": [64, 256, 1024, 65536], "gram_over_cov_time": [6.0, 5.0, 4.0, 0.1]})
    assert verdicts(tables | {"benchmarks": far})["W5"] == REFUTED
    nearest = claims(tables, benchmarks={"dim": 4096, "gram_over_cov_time": 1.5}).set_index("claim").loc["W5"]
    assert nearest["verdict"] == NOT_DETECTABLE and "nearest benchmarked D 4096" in nearest["detail"]
    with pytest.raises(ValueError, match="gram_over_cov_time"):
        claims(tables, benchmarks={"dim": 4096})


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
    make_figure("F3_rebound", tables_dir, figures_dir, dpi=40)
    out = tmp_path / "results" / "report.md"
    verdicts = write_report(tables_dir, figures_dir, out, captions_dir=CAPTIONS)
    assert verdicts["claim"].tolist() == [claim.id for claim in report.CLAIMS]
    text = out.read_text()
    assert "| claim | verdict | deciding number | figure |" in text
    for claim in GRID_IDS:  # each claim linked to its section; the CSV round trip changes nothing
        assert f"| [{claim}](#{report.document.anchor(claim)}) | {CONFIRMED} |" in text and f"### {claim}\n" in text
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
    write_report(tables_dir, tmp_path / "figures", out, captions_dir=CAPTIONS)
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
