"""Every verdict rule has teeth: it decides on a real effect and stays undecided on noise.

Each rule is fed synthetic tables built like the quick run's (``QUICK``: its 12 models, their measured
points, views, (M, K), η and snapshot steps, one seed) with the columns it reads (its module's
``READS``) drawn anew in four scenarios, ``DRAWS`` seeded draws each:

- **noise**: the deciding quantity at the rule's null, row noise of the run's kind;
- **offsets**: the same plus a persistent per-model offset (``OFFSET`` × the model-level noise), no trend;
- **planted**: the quantity ``PLANT`` standard errors of the rule's own cross-model estimate away from
  the null in the paper's direction (the SE computed from the design: ``slope_se``, ``mean_se``);
- **opposite**: as far the other way.

Pass: noise and offsets at most 10 % decisive verdicts, planted confirmed and opposite refuted in at
least ``HIT_MIN`` draws (70 %). A rule whose tests are exact at 5 % still exceeds ``FALSE_MAX`` = 3 of 30
by chance 6 % of the time, so a null scenario over it is drawn ``RETRY`` times as often again, and the
share over all its draws must stay at most 10 % (which a 5 % rule exceeds with probability ≈ 1 %, a
20 % rule stays under with probability < 1 %). W1 at the paper's widths tests a size (its null is the
paper's exponent, not 0), D3 needs seeds (its grid is one model per cell), W5 times the machine (no
sampling model): their scenarios are stated at their cases. ``test_reads_are_all_a_rule_needs`` runs
every rule on its tables cut to the model keys and its ``READS`` columns.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scalemech.core.tables import model_keys
from scalemech.report import CONFIRMED, NOT_CONFIRMED, NOT_DETECTABLE, REFUTED
from scalemech.stats import powerlaw

DRAWS = 30
FALSE_MAX = 3  # decisive verdicts allowed in DRAWS without an effect (10 %)
RETRY = 3  # a null scenario over FALSE_MAX is drawn RETRY × DRAWS times more
HIT_MIN = 21  # planted confirmations / opposite refutations required (70 %)
PLANT = 4.0  # planted effect in SEs of the rule's cross-model estimate
OFFSET = 3.0  # per-model offset sd, in units of the model-level noise
SCENARIOS = {"noise": (0.0, False), "offsets": (0.0, True), "planted": (PLANT, False), "opposite": (-PLANT, False)}

# The quick run (config/config.yaml): (dataset, family, depth, widths, measured point indices), seed 0.
QUICK = (
    ("mnist5k", "resnet", 8, (0.5, 1.0, 1.5), (0, 1, 2)),
    ("mnist5k", "resnet", 14, (0.5, 1.0, 1.5), (1, 3, 5)),
    ("mnist5k", "resnet", 20, (0.5, 1.0, 1.5), (2, 5, 8)),
    ("pystdlib", "llama", 2, (32.0, 64.0, 128.0), (0, 1)),
)
QUICK_STEPS = {"resnet": (0, 1, 2, 3, 5, 10, 17, 30, 52, 92), "llama": (0, 1, 2, 4, 8, 16, 31, 62, 123, 244)}
QUICK_MK = (1, 2, 4, 8, 16, 32)  # misalignment's M = K (the grid stops at pool/8)
QUICK_STEP_FRACTIONS = (1e-4, 1e-3, 1e-2)  # intervention's η per series
EXPANSION_POINTS = 2  # E8: the first two points of each model (the run grows at every point: more power)
# config/paper-widths.yaml: 2-layer llamas 512…3072 wide, two seeds, both points; its first and last snapshot
PAPER_WIDTHS, PAPER_SEEDS, PAPER_STEPS = (512, 768, 1024, 1536, 2048, 3072), (0, 1), (0, 16)
PAPER_GRID = (("pystdlib", "llama", 2, PAPER_WIDTHS, (0, 1)),)


@cache
def models(grid=QUICK, seeds=(0,)) -> pd.DataFrame:
    """One row per model: the model keys, ``points`` (its measured point indices), ``x0`` (its
    stratum's smallest width) and ``level`` (log₂ width / that width)."""
    rows = []
    for dataset, family, depth, widths, points in grid:
        for width in widths:
            for seed in seeds:
                model = f"{family}-d{depth}-w{width:g}-s{seed}"
                rows.append(
                    dict(run="synthetic", dataset=dataset, family=family, depth=depth, width=width, seed=seed,
                         model=model, points=points, level=np.log2(width / min(widths)))
                )  # fmt: skip
    return pd.DataFrame(rows)


def per_point(frame: pd.DataFrame, first: int | None = None) -> pd.DataFrame:
    """``frame`` (one row per model) × its points (``point_index``, ``point``), the first ``first`` if given."""
    out = frame.assign(point_index=[list(p)[:first] for p in frame["points"]]).explode("point_index")
    out = out.assign(point_index=out["point_index"].astype(int))
    return out.assign(point=[f"block{i}" for i in out["point_index"]]).drop(columns="points").reset_index(drop=True)


def cross(frame: pd.DataFrame, **axes) -> pd.DataFrame:
    for name, values in axes.items():
        frame = frame.merge(pd.DataFrame({name: list(values)}), how="cross")
    return frame


@cache
def layout(kind: str) -> pd.DataFrame:
    """The rows of one table of the quick run (cached: the builders never modify it)."""
    base = models()
    if kind == "trajectory":
        return trajectory_rows(base)
    if kind == "paper trajectory":
        return per_point(models(PAPER_GRID, PAPER_SEEDS)).merge(pd.DataFrame({"step": PAPER_STEPS}), how="cross")
    if kind == "misalignment":
        return misalignment_rows(base)
    return {
        "covariance": lambda: per_point(base),
        "signal": lambda: cross(per_point(base), split=["train", "test"]),
        "dalign": lambda: cross(per_point(base), split=["train", "test"], view=["full", "pooled"]),
        "intervention": lambda: cross(per_point(base), view=["full", "pooled"], step_fraction=QUICK_STEP_FRACTIONS),
        "growth": lambda: per_point(base, EXPANSION_POINTS),
    }[kind]()


def offsets(frame: pd.DataFrame, sd: float, rng: np.random.Generator) -> pd.Series:
    """A persistent offset per model (0 when ``sd`` is 0), aligned to ``frame``'s rows."""
    names = frame["model"].unique()
    table = dict(zip(names, rng.normal(0, sd, len(names)) if sd else np.zeros(len(names))))
    return frame["model"].map(table).astype(float)


def design(units: pd.DataFrame, x: str, strata: list[str]) -> np.ndarray:
    labels = units[strata].astype(str).agg("/".join, axis=1)
    return np.column_stack([pd.get_dummies(labels, dtype=float).to_numpy(), np.log2(units[x].to_numpy(float))])


def slope_se(units: pd.DataFrame, x: str, strata: list[str], variance: np.ndarray) -> float:
    """SE of the OLS slope on log₂ ``x`` with one intercept per stratum, unit ``i`` of variance
    ``variance[i]`` (the sandwich: the rules' weights are equal when every row has the same SE)."""
    X = design(units, x, strata)
    bread = np.linalg.pinv(X.T @ X)
    return float(np.sqrt((bread @ X.T @ np.diag(variance) @ X @ bread)[-1, -1]))


def mean_se(variance: np.ndarray) -> float:
    """SE of the unweighted mean of units of variance ``variance``."""
    return float(np.sqrt(np.sum(variance)) / len(variance))


def point_counts(frame: pd.DataFrame) -> np.ndarray:
    return np.array([len(p) for p in frame["points"]], float)


@dataclass(frozen=True)
class Case:
    """A rule, its module, and tables of a draw: ``build(k, offset, rng)`` puts the deciding quantity
    ``k`` SEs of the rule's estimate from its null (in the paper's direction), with per-model offsets
    if ``offset``."""

    module: str
    rule: str
    build: Callable[[float, bool, np.random.Generator], dict[str, pd.DataFrame]]

    def evaluate(self, tables: dict[str, pd.DataFrame]):
        return getattr(importlib.import_module(f"scalemech.report.{self.module}"), self.rule)(tables)

    @property
    def reads(self) -> dict[str, list[str]] | None:
        return getattr(importlib.import_module(f"scalemech.report.{self.module}"), "READS", None)


# -- the rules' tables --------------------------------------------------------------------------------

D1_NULL, D1_ROW_SE = 0.05, 0.005  # ρ̄² at the threshold; SE of one row's ρ̄² (the run's: 0.002–0.01)


def d1_tables(k: float, offset: bool, rng) -> dict:
    """Covariance rows: ρ̄² = 0.05 − k·SE + noise; the last point of each ResNet low-rank (as in the run)."""
    base = models()
    resnet = base["family"] == "resnet"
    counts = np.where(resnet, point_counts(base) - 1, point_counts(base))
    se = mean_se(D1_ROW_SE**2 / counts)
    rows = layout("covariance")
    position = rows.groupby("model").cumcount()
    low_rank = (rows["family"] == "resnet") & (position == 2)
    dim = np.where(rows["family"] == "resnet", 16 * rows["width"] * 2.0**position, rows["width"]).astype(float)
    model_sd = D1_ROW_SE / np.sqrt(2)
    rho2 = (
        D1_NULL - k * se + offsets(rows, OFFSET * model_sd if offset else 0, rng) + rng.normal(0, D1_ROW_SE, len(rows))
    )
    rho2 = np.where(low_rank, 0.5, np.abs(rho2))
    r = (dim - 1) * rho2 / (1 + (dim - 1) * rho2)
    return {
        "covariance": rows.assign(
            n=1000,
            dim=dim,
            offdiag_ratio=r,
            offdiag_ratio_null_sd=D1_ROW_SE * (dim - 1) * (1 - r) ** 2,
            low_rank=low_rank,
        )
    }


D2_ROW_SE = 0.3  # relative SE of one row's ‖μ‖² (the run's median)


def d2_tables(k: float, offset: bool, rng) -> dict:
    """Signal rows (train and test): ‖μ‖² = 1 − k·SE·log₂(depth/8) + noise (decay: the paper's sign is −)."""
    base = models()
    resnet = base[base["family"] == "resnet"]
    se = slope_se(resnet, "depth", ["dataset", "family", "width"], D2_ROW_SE**2 / point_counts(resnet))
    rows = layout("signal")
    level = np.log2(rows["depth"] / rows.groupby(["dataset", "family"])["depth"].transform("min"))
    model_sd = D2_ROW_SE / np.sqrt(3)
    mu_sq = 1 - k * se * level + offsets(rows, OFFSET * model_sd if offset else 0, rng)
    mu_sq = mu_sq + rng.normal(0, D2_ROW_SE, len(rows))
    return {"signal": rows.assign(n=1000, mu_sq=mu_sq, mu_sq_se=D2_ROW_SE, mu_sq_ucb=mu_sq + 1.645 * D2_ROW_SE)}


W1_ROW_SE = 0.5  # relative SE of one row's d_align (the run's median: 0.6)
W1_STRATA = ["dataset", "family", "depth"]


def w1_se(frame: pd.DataFrame, row_se: float, rows_per_point: int = 1) -> float:
    return slope_se(frame, "width", W1_STRATA, row_se**2 / (point_counts(frame) * rows_per_point))


def w1_tables(k: float, offset: bool, rng) -> dict:
    """dalign rows (train/test × full/pooled): d_align = 1 + k·SE·log₂(width/smallest) + noise."""
    base = models()
    se = w1_se(base, W1_ROW_SE)
    rows = layout("dalign")
    model_sd = W1_ROW_SE / np.sqrt(3)
    d = 1 + k * se * rows["level"] + offsets(rows, OFFSET * model_sd if offset else 0, rng)
    d = d + rng.normal(0, W1_ROW_SE, len(rows))
    return {"dalign": rows.assign(n=1000, d_align=d, d_align_se=W1_ROW_SE, d_align_ucb=d + 1.645 * W1_ROW_SE)}


def trajectory_rows(base: pd.DataFrame) -> pd.DataFrame:
    rows = [
        per_point(base[base["family"] == family]).merge(pd.DataFrame({"step": steps}), how="cross")
        for family, steps in QUICK_STEPS.items()
    ]
    rows = pd.concat(rows, ignore_index=True)
    return rows.assign(rank=rows.groupby("family")["step"].rank(method="dense") - 1)


def trajectory_tables(k: float, offset: bool, rng, speed: float = 0.0, step_clock: bool = True) -> dict:
    """E10 rows (full view, train split) at the run's snapshot steps: d_align = decay · (1 + k·SE·log₂(width/
    smallest) + noise), ``decay`` falling ×0.3 per snapshot (as d_align does in the run); train loss
    2.4·exp(−t·(1 + speed·log₂(width/smallest))), t the step over the last step: wider models train
    faster by ``speed``. ``step_clock`` False: d_align decays with the loss reached, not with the step."""
    base = models()
    steps = len(QUICK_STEPS["resnet"])
    se = w1_se(base, W1_ROW_SE, steps)
    rows = layout("trajectory")
    last = rows.groupby("family")["step"].transform("max")
    progress = rows["step"] / last * (1 + speed * rows["level"])
    loss = 2.4 * np.exp(-3 * progress)
    decay = 0.3 ** (rows["rank"] if step_clock else 9 * progress)
    model_sd = W1_ROW_SE / np.sqrt(3 * steps)
    value = 1 + k * se * rows["level"] + offsets(rows, OFFSET * model_sd if offset else 0, rng)
    value = value + rng.normal(0, W1_ROW_SE, len(rows))
    d, s = decay * value, decay * W1_ROW_SE
    trajectory = rows.drop(columns="rank").assign(
        view="full", split="train", n=96, train_loss=loss, test_loss=loss + 0.05, d_align=d, d_align_se=s,
        d_align_ucb=d + 1.645 * s, d_align_lo=d - 1.96 * s, d_align_hi=d + 1.96 * s,
    )  # fmt: skip
    return {"trajectory": trajectory}


PAPER_GAMMA = np.log2(9.5 / 3.9) / np.log2(3072 / 512)  # Paper W's d_align ∝ width^γ


def paper_width_tables(k: float, offset: bool, rng) -> dict:
    """E10 rows at Paper W's widths (config/paper-widths.yaml): d_align = 3.9·(width/512)^γ, γ = the
    paper's exponent + (k − PLANT)·SE with SE = γ_paper/PLANT (planted: the paper's; noise: 0), relative
    noise, halving each step."""
    base = models(PAPER_GRID, PAPER_SEEDS)
    x = np.log2(base["width"] / 512)
    se = PAPER_GAMMA / PLANT
    relative = se * np.sqrt(((x - x.mean()) ** 2).sum()) * np.sqrt(2) * np.log(2)  # per row, log scale
    gamma = PAPER_GAMMA + (k - PLANT) * se
    rows = layout("paper trajectory")
    noise = rng.normal(0, relative, len(rows)) + offsets(rows, OFFSET * relative / np.sqrt(2) if offset else 0, rng)
    d = (
        3.9
        * (rows["width"] / 512) ** gamma
        * np.exp(noise)
        * 0.5 ** rows.groupby("model")["step"].rank(method="dense").sub(1)
    )
    s = relative * d
    trajectory = rows.assign(
        view="full", split="train", n=32, train_loss=6.0 - 0.1 * rows["step"], d_align=d, d_align_se=s,
        d_align_ucb=d + 1.645 * s, d_align_lo=d - 1.96 * s, d_align_hi=d + 1.96 * s,
    )  # fmt: skip
    return {"trajectory": trajectory}


W2_R, W2_ROW_SE, W2_V = 0.25, 0.08, 1e-8  # E/√V at M = K = 32 (the run's 0.04–0.36), its row SE, V(32, 32)


def misalignment_rows(base: pd.DataFrame) -> pd.DataFrame:
    rows = cross(per_point(base), view=["full", "pooled"], M=QUICK_MK)
    return rows.assign(K=rows["M"], draws=10000)


def certificate_columns(rows: pd.DataFrame, e: pd.Series, e_se: float, v32: float) -> pd.DataFrame:
    """b_exact = V/(V + E²) with V(M, K) = v32·32/M (NaN where E ≤ 0, as the table has it), its UCB,
    P̂ ≈ Φ(−E/√V), E and its SE."""
    v = v32 * 32 / rows["M"]
    b = np.where(e > 0, v / (v + e**2), np.nan)
    z = e / np.sqrt(v)
    return rows.assign(
        p_misalign=stats.norm.cdf(-z),
        b_exact=b,
        b_exact_ucb=np.minimum(1.0, np.where(e > 0, b, 1.0) + 0.05),
        mu_cross=e,
        mu_cross_se=e_se,
    )


def w2_tables(k: float, offset: bool, rng) -> dict:
    """Misalignment rows: at M = K = 32, E/√V = 0.25 + k·SE·log₂(width/smallest) + noise per point × view."""
    base = models()
    se = w1_se(base, W2_ROW_SE)
    rows = layout("misalignment")
    unit = rows.drop_duplicates(["model", "point_index", "view"])[["model", "point_index", "view", "level"]]
    model_sd = W2_ROW_SE / np.sqrt(3)
    r = W2_R + k * se * unit["level"] + offsets(unit, OFFSET * model_sd if offset else 0, rng)
    unit = unit.assign(e=(r + rng.normal(0, W2_ROW_SE, len(unit))) * np.sqrt(W2_V))
    rows = rows.merge(unit.drop(columns="level"), on=["model", "point_index", "view"])
    return {"misalignment": certificate_columns(rows, rows["e"], W2_ROW_SE * np.sqrt(W2_V), W2_V).drop(columns="e")}


def w3_tables(k: float, offset: bool, rng) -> dict:
    """Misalignment rows: E/SE per point × view = k·SE + noise of sd 1 (E's own SE)."""
    base = models()
    se = mean_se(1 / point_counts(base))
    rows = layout("misalignment")
    unit = rows.drop_duplicates(["model", "point_index", "view"])[["model", "point_index", "view"]]
    t = k * se + offsets(unit, OFFSET / np.sqrt(3) if offset else 0, rng) + rng.normal(0, 1, len(unit))
    rows = rows.merge(unit.assign(e=t * 1e-5), on=["model", "point_index", "view"])
    return {"misalignment": certificate_columns(rows, rows["e"], 1e-5, 1e-10).drop(columns="e")}


W4_SIGN_BAND, W4_RATIO_BAND = (0.95, 1.0), (0.96, 0.99)  # held-out sign agreement; observed/predicted (paper)


def intervention_tables(k: float, offset: bool, rng) -> dict:
    """Intervention rows (full/pooled × the run's three η): at the smallest η the held-out signs agree with
    probability p and the observed/predicted ratio is centred on ρ, each a model effect plus row noise.
    k = 0: both at the lower edge of their band (0.95, 0.96); k > 0: p = 0.995 (4 SE would pass 1) and ρ at
    the ratio band's centre, 4 SE inside; k < 0: both 4 SE below their band."""
    base = models()
    rows = layout("intervention")
    smallest = rows["step_fraction"] == min(QUICK_STEP_FRACTIONS)
    per_model = 2 * point_counts(base)  # rows at the smallest η
    sign_se = np.sqrt(np.sum(W4_SIGN_BAND[0] * (1 - W4_SIGN_BAND[0]) / per_model)) / len(base)
    ratio_se = (W4_RATIO_BAND[1] - W4_RATIO_BAND[0]) / 2 / PLANT  # the band's half width is 4 SE
    model_sd = ratio_se * np.sqrt(len(base)) / 1.2533  # the median of model medians has SE ≈ 1.25·sd/√G
    if k > 0:
        p, rho = 0.995, sum(W4_RATIO_BAND) / 2
    else:
        p, rho = W4_SIGN_BAND[0] + k * sign_se, W4_RATIO_BAND[0] + k * ratio_se
    p_model = np.clip(p + offsets(rows, OFFSET * sign_se * np.sqrt(len(base)) if offset else 0, rng), 0, 1)
    agree = rng.random(len(rows)) < p_model
    ratio = rho + offsets(rows, model_sd * np.sqrt(1 + (OFFSET**2 if offset else 0)), rng)
    ratio = ratio + rng.normal(0, model_sd / 4, len(rows))
    ratio = np.where(agree, ratio, -ratio)
    ratio = np.where(smallest, ratio, ratio * (1 - 20 * rows["step_fraction"]))
    predicted = -1e-4 * (1 + rows["step_fraction"])
    eta = rows["step_fraction"] * 20 * (1 + rows["point_index"] / 10)
    return {
        "intervention": rows.assign(
            eta=eta,
            predicted=predicted,
            observed=ratio * predicted,
            ratio=ratio,
            sign_agree=agree,
            observed_heldout=ratio * predicted,
            ratio_heldout=ratio,
            sign_agree_heldout=agree,
        )  # fmt: skip
    }


E8_SE = {"resnet": 0.003, "llama": 0.0005}  # the run's paired evaluation SE of a gain, per family


def expansion_tables(k: float, offset: bool, rng, families: dict[str, float] | None = None) -> dict:
    """E8's rows of the growth table (two points per model at the final snapshot): gain = se_family·(δ +
    noise of sd 1), δ = k·SE of the mean over all models of the per-model gain in SE units (or
    ``families``: δ per family in those units); the control improves f_old by 2 SE (no damage). Beside
    them the signal snapshot's rows, gains of 100 SE against the final rows' sign: E8 reads the final ones."""
    base = models()
    rows = layout("growth")
    se_units = mean_se(np.full(len(base), 1 / EXPANSION_POINTS))
    delta = rows["family"].map(families) if families else k * se_units
    model_sd = 1 / np.sqrt(EXPANSION_POINTS)
    scale = rows["family"].map(E8_SE)
    gain = scale * (delta + offsets(rows, OFFSET * model_sd if offset else 0, rng) + rng.normal(0, 1, len(rows)))
    control = -2 * scale + rng.normal(0, 1, len(rows)) * scale
    final = rows.assign(
        snapshot="final", gain_tokens=gain, gain_tokens_se=scale, control_change=control, control_change_se=scale
    )
    signal = final.assign(snapshot="signal", gain_tokens=-100 * np.sign(gain.mean()) * scale)
    return {"growth": pd.concat([final, signal], ignore_index=True)}


GROWTH_SNAPSHOTS = ("final", "signal")
G1_STEP = 0.19  # gain per rank step of predicted_gain, in row SEs per k: k = PLANT puts the mean z ≈ 4 SEs from 0
G2_STEP = 0.4  # the certificate's point's extra gain, in row SEs per k (k = PLANT: ≥ 4 SEs of each contrast)


def growth_frame(rng, gain_rank: float = 0.0, chosen_extra: float = 0.0, offset: bool = False) -> pd.DataFrame:
    """Growth rows (the run's models and points × two snapshots): predicted_gain log-normal, "grow here"
    with certify_rank by predicted_gain except the lowest point of each model × snapshot ("weak", no rank);
    gain_old = se_family·(``gain_rank``·(rank of predicted_gain − mean rank) + ``chosen_extra`` at the
    certificate's point + a per-model offset if ``offset`` + noise of sd 1); the budget gains noise, the
    control 2 SE better than f_old."""
    rows = cross(per_point(models()), snapshot=GROWTH_SNAPSHOTS)
    unit = ["model", "snapshot"]
    predicted = np.exp(rng.normal(0, 1, len(rows)))
    rows = rows.assign(predicted_gain=predicted, block_grad_norm=predicted)
    rank = rows.groupby(unit)["predicted_gain"].rank(ascending=False)
    weak = rank == rows.groupby(unit)["predicted_gain"].transform("size")
    scale = rows["family"].map(E8_SE)
    centred = rank.groupby([rows[c] for c in unit]).transform("mean") - rank  # + for high predicted gain
    shift = offsets(rows, OFFSET / np.sqrt(len(GROWTH_SNAPSHOTS)) if offset else 0, rng)
    gain = gain_rank * centred + chosen_extra * (rank == 1) + shift + rng.normal(0, 1, len(rows))
    budget = {f"gain_{name}": scale * rng.normal(0, 1, len(rows)) for name in ("tokens", "flops")}
    return rows.assign(
        verdict=np.where(weak, "weak", "grow here"), certify_rank=rank.where(~weak), gain_old=scale * gain,
        gain_old_se=scale, **budget, gain_tokens_se=scale, gain_flops_se=scale,
        control_change=scale * (rng.normal(0, 1, len(rows)) - 2), control_change_se=scale,
    )  # fmt: skip


def g1_tables(k: float, offset: bool, rng) -> dict:
    """gain_old rising by k·G1_STEP row SEs per rank of predicted_gain within each model × snapshot."""
    return {"growth": growth_frame(rng, gain_rank=k * G1_STEP, offset=offset)}


def g2_tables(k: float, offset: bool, rng) -> dict:
    """gain_old k·G2_STEP row SEs higher at the certificate's point than elsewhere."""
    return {"growth": growth_frame(rng, chosen_extra=k * G2_STEP, offset=offset)}


def g3_tables(k: float, offset: bool, rng) -> dict:
    """gain_tokens and gain_flops = se_family·(δ + offset + noise), δ = k·SE of the mean over models of
    the per-model mean (two snapshots) in SE units."""
    frame = growth_frame(rng)
    delta = k * mean_se(np.full(len(models()), 1 / len(GROWTH_SNAPSHOTS)))
    scale = frame["family"].map(E8_SE)
    for gain in ("gain_tokens", "gain_flops"):
        shift = offsets(frame, OFFSET / np.sqrt(len(GROWTH_SNAPSHOTS)) if offset else 0, rng)
        frame[gain] = scale * (delta + shift + rng.normal(0, 1, len(frame)))
    return {"growth": frame}


D3_SEEDS, D3_SD = (0, 1, 2), 0.01  # D3 needs seeds: three per cell; the sd of one seed's test loss


def training_tables(k: float, offset: bool, rng, seeds=D3_SEEDS, evaluation_se: bool = False) -> dict:
    """The quick run's training grid with ``seeds`` per cell: test loss 0.8 + δ·(f(depth) + g(width)) +
    noise, δ = k SEs of a cell contrast. Planted (k > 0): at every width the middle depth is best by δ
    (a rebound) and the largest width best by δ; opposite: the reverse. ``evaluation_se``: one seed per
    cell and a ``test_loss_se`` column (the evaluation SE the rule falls back on)."""
    base = models(seeds=(0,) if evaluation_se else seeds)
    n = 1 if evaluation_se else len(seeds)
    se = D3_SD * np.sqrt(2 / n)
    delta = k * se
    depth_rank = base.groupby(["dataset", "family"])["depth"].rank(method="dense") - 1
    width_rank = base.groupby(["dataset", "family", "depth"])["width"].rank(method="dense") - 1
    f = np.where(depth_rank == 1, 0.0, 1.0)  # middle depth best: a rebound at every width
    g = np.where(width_rank == width_rank.max(), 0.0, 1.0)  # the largest width best
    per_seed = offsets(base, OFFSET * D3_SD if offset else 0, rng)  # a model is one seed of a cell
    loss = 0.8 + delta * (f + g) + per_seed + rng.normal(0, D3_SD, len(base))
    training = base.drop(columns=["points", "level"]).assign(
        test_loss=loss,
        train_loss=loss - 0.05,
        loss_first=loss + 2,
        loss_late=loss - 0.05,
        loss_end=loss - 0.05,
        tokens_per_parameter=np.nan,
    )  # trained to a plateau (docs/science.md §7.1)
    if evaluation_se:
        training = training.assign(test_loss_se=D3_SD)
    return {"training": training}


D4_SD = 0.01  # sd of one model's test loss about the law


def d4_amplitude(exponent: float) -> float:
    """The excess loss a = b at the smallest depth and width that puts α̂ and β̂ (the less precise of the
    two) PLANT SEs from 0 on the quick run's ResNet grid (SEs from s²(JᵀJ)⁻¹ at the truth)."""
    resnet = models()[models()["family"] == "resnet"]
    x = np.array([resnet["depth"] / 8, resnet["width"] / 0.5], float)
    J = powerlaw.jacobian(x, 1.0, exponent, 1.0, exponent, 0.5)
    se = D4_SD * np.sqrt(np.diag(np.linalg.inv(J.T @ J)))
    return PLANT * max(se[1], se[3]) / abs(exponent)


def powerlaw_tables(k: float, offset: bool, rng) -> dict:
    """The quick run's training grid, test loss 0.5 + a·(D/D₀)^(−e) + a·(W/W₀)^(−e) + noise: no law at
    k = 0 (a = 0), e = 1 planted, e = −1 (loss rising in depth and width) opposite; then D4's fit."""
    base = models()
    exponent = float(np.sign(k)) if k else 1.0
    a = d4_amplitude(exponent) if k else 0.0
    smallest = base.groupby("family")[["depth", "width"]].transform("min")
    loss = 0.5 + a * (
        (base["depth"] / smallest["depth"]) ** -exponent + (base["width"] / smallest["width"]) ** -exponent
    )
    loss = loss + offsets(base, OFFSET * D4_SD if offset else 0, rng) + rng.normal(0, D4_SD, len(base))
    return {"powerlaw": powerlaw.powerlaw_table(base.drop(columns=["points", "level"]).assign(test_loss=loss))}


CASES = {
    "D1": Case("d1", "rule_d1", d1_tables),
    "D2": Case("d2", "rule_d2", d2_tables),
    "D3": Case("d3", "rule_d3", training_tables),
    "D4": Case("d4", "rule_d4", powerlaw_tables),
    "W1": Case("w1", "rule_w1", w1_tables),
    "W1 along training": Case("w1_training", "rule_w1_training", trajectory_tables),
    "W2": Case("misalignment", "rule_w2", w2_tables),
    "W3": Case("misalignment", "rule_w3", w3_tables),
    "W4": Case("w4", "rule_w4", intervention_tables),
    "E8": Case("e8", "rule_expansion", expansion_tables),
    "G1": Case("g1", "rule_g1", g1_tables),
    "G2": Case("g2", "rule_g2", g2_tables),
    "G3": Case("g3", "rule_g3", g3_tables),
}
SIZE_CASES = {"W1 at the paper's widths": Case("w1_paper", "rule_w1_paper", paper_width_tables)}


def counts(case: Case, k: float, offset: bool, salt: int = 0, draws: range = range(DRAWS), **options) -> dict[str, int]:
    """Verdict counts over the seeded ``draws`` of ``case`` at ``k`` SEs."""
    out = dict.fromkeys([CONFIRMED, REFUTED, NOT_DETECTABLE, NOT_CONFIRMED], 0)
    for seed in draws:
        rng = np.random.default_rng([salt, seed])
        verdict = case.evaluate(case.build(k, offset, rng, **options)).verdict
        out[verdict] = out.get(verdict, 0) + 1
    return out


@cache
def rates(claim: str) -> dict[str, dict[str, int]]:
    case = (CASES | SIZE_CASES)[claim]
    return {name: counts(case, k, offset, salt) for salt, (name, (k, offset)) in enumerate(SCENARIOS.items())}


def decisive(count: dict[str, int]) -> int:
    return count[CONFIRMED] + count[REFUTED]


def rarely_decided(case: Case, found: dict[str, int], offset: bool, salt: int, **options) -> bool:
    """``found`` (DRAWS draws at k = 0) has at most FALSE_MAX decisive verdicts, or at most 10 % over
    (1 + RETRY) × DRAWS draws."""
    if decisive(found) <= FALSE_MAX:
        return True
    more = counts(case, 0.0, offset, salt, range(DRAWS, (1 + RETRY) * DRAWS), **options)
    print(case.module, "drawn again:", more)
    return decisive(found) + decisive(more) <= 0.1 * (1 + RETRY) * DRAWS


@pytest.mark.parametrize("claim", list(CASES))
def test_noise_and_offsets_rarely_decide_and_a_planted_effect_is_found(claim):
    found = rates(claim)
    print(claim, found)
    case = CASES[claim]
    assert rarely_decided(case, found["noise"], False, 0) and rarely_decided(case, found["offsets"], True, 1), found
    assert found["planted"][CONFIRMED] >= HIT_MIN and found["planted"][REFUTED] == 0, found
    assert found["opposite"][REFUTED] >= HIT_MIN and found["opposite"][CONFIRMED] == 0, found


def test_the_papers_size_is_tested_at_its_widths():
    """W1 at the paper's widths: the paper's exponent (planted, PLANT SEs from 0) is confirmed; no growth
    (noise) is never confirmed and, PLANT SEs short of the paper, refuted; with per-model offsets (the SE
    then √(1 + OFFSET²) times larger) never confirmed; the opposite is refuted."""
    found = rates("W1 at the paper's widths")
    print("W1 at the paper's widths", found)
    assert found["planted"][CONFIRMED] >= HIT_MIN and found["planted"][REFUTED] <= FALSE_MAX, found
    assert found["noise"][CONFIRMED] <= FALSE_MAX and found["noise"][REFUTED] >= HIT_MIN, found
    assert found["offsets"][CONFIRMED] <= FALSE_MAX, found
    assert found["opposite"][REFUTED] >= HIT_MIN and found["opposite"][CONFIRMED] == 0, found


def test_training_speed_alone_does_not_decide_w1_along_training():
    """No width effect at equal step, d_align decaying along training, wider models twice as fast: the
    equal-loss comparison then sees wider models earlier in training, the verdict must not fire."""
    found = counts(CASES["W1 along training"], 0.0, False, 7, speed=1.0)
    print("W1 along training, speed only", found)
    assert rarely_decided(CASES["W1 along training"], found, False, 7, speed=1.0), found


def test_d3_with_one_seed_falls_back_on_the_evaluation_se():
    """One seed per cell and an evaluation SE: a planted rebound and joint gain are found, noise is not
    (per-model offsets are beyond what an evaluation SE covers: with one seed they are the cells' values)."""
    case = CASES["D3"]
    noise = counts(case, 0.0, False, 11, evaluation_se=True)
    planted = counts(case, PLANT, False, 12, evaluation_se=True)
    opposite = counts(case, -PLANT, False, 13, evaluation_se=True)
    print("D3 one seed", noise, planted, opposite)
    assert rarely_decided(case, noise, False, 11, evaluation_se=True), noise
    assert planted[CONFIRMED] >= HIT_MIN and opposite[REFUTED] >= HIT_MIN, (planted, opposite)


def test_e8_shows_a_refuting_family_in_the_headline():
    """The llama family 6 SE below 0, the ResNets at 0: the aggregate would not refute, the headline does."""
    tables = expansion_tables(0.0, False, np.random.default_rng(0), families={"resnet": 0.0, "llama": -6.0})
    result = CASES["E8"].evaluate(tables)
    assert result.verdict == REFUTED and result.statistic.startswith("llama refuted"), result
    mixed = expansion_tables(0.0, False, np.random.default_rng(0), families={"resnet": 6.0, "llama": -6.0})
    assert CASES["E8"].evaluate(mixed).verdict == NOT_CONFIRMED


@pytest.mark.parametrize("claim", list(CASES | SIZE_CASES))
def test_reads_are_all_a_rule_needs(claim):
    """The rule on its tables cut to the model keys and ``READS`` gives the same result."""
    case = (CASES | SIZE_CASES)[claim]
    assert case.reads, f"{case.module} declares no READS"
    tables = case.build(PLANT, False, np.random.default_rng(1))
    cut = {
        name: tables[name][[c for c in model_keys() + list(columns) if c in tables[name]]]
        for name, columns in case.reads.items()
        if name in tables
    }
    assert case.evaluate(cut) == case.evaluate(tables)


def test_a_null_bounds_the_tested_slope_at_the_runs_models():
    """Not detectable: the slope's 95 % limit and the t test's MDE at the 12 models in the statistic, the
    row-level UCB of d_align beside the paper's values in the detail."""
    tables = w1_tables(0.0, False, np.random.default_rng(3))
    result = CASES["W1"].evaluate(tables)
    assert result.verdict == NOT_DETECTABLE, result
    lo, hi = (float(v) for v in result.statistic.split("[")[1].split("]")[0].split(", "))
    mde = (stats.t.ppf(0.975, 7) + stats.t.ppf(0.8, 7)) * (hi - lo) / (2 * stats.t.ppf(0.975, 7))
    assert f"slope ≤ {hi:.2g} (95 % limit); MDE {mde:.2g} at 12 models (7 df, 80 % power)" in result.statistic
    assert "d_align < " in result.detail and "3.9 at width 512" in result.detail


def test_d1_does_not_depend_on_the_pooled_dimension():
    """The same correlations (ρ̄² = 0.02 in every row) at p = 8 and p = 128 give the same ρ̄²."""
    found = []
    for dim in (8, 128):
        rows = d1_tables(0.0, False, np.random.default_rng(0))["covariance"]
        r = (dim - 1) * 0.02 / (1 + (dim - 1) * 0.02)
        rows = rows.assign(dim=dim, offdiag_ratio=r, offdiag_ratio_null_sd=D1_ROW_SE * (dim - 1) * (1 - r) ** 2)
        found.append(CASES["D1"].evaluate({"covariance": rows}))
    assert found[0].verdict == found[1].verdict == CONFIRMED
    assert found[0].statistic.split(" (")[0] == found[1].statistic.split(" (")[0]


def test_e8_and_w4_parts_that_fail_are_not_confirmed():
    """A win over a control that damaged f_old, and signs that agree with a magnitude outside the band."""
    tables = expansion_tables(PLANT, False, np.random.default_rng(0))
    frame = tables["growth"]
    damaged = frame.assign(control_change=20 * frame["control_change_se"])
    assert CASES["E8"].evaluate({"growth": damaged}).verdict == NOT_CONFIRMED
    rows = intervention_tables(PLANT, False, np.random.default_rng(0))["intervention"]
    halfway = rows.assign(sign_agree_heldout=True, ratio_heldout=0.7 + 0.01 * rows["point_index"] / 8)
    result = CASES["W4"].evaluate({"intervention": halfway})
    assert result.verdict == NOT_CONFIRMED and "sign confirmed" in result.detail and "ratio refuted" in result.detail
