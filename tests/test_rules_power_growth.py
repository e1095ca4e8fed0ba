"""E12's rules (G4, G5, G6) have the power they print, at E12's real design.

The design is read from ``config/growth.yaml`` through the project's config loading: its bases (the
models of ``adapt.grids``, each with its SE multiple spread over ``SE_SPREAD``), its placements and so
its rivals. The scenarios, draws and pass criteria are those of every rule (``tests/test_rules_power.py``):
noise (the deciding quantities at the rule's nulls), offsets (plus a persistent per-base offset),
planted (the quantities at the rule's printed minimum detectable effect), opposite, and one seed (a seed
alone has too few bases for an interval: its rows must say "not checked against a reseed"). G4, G5 and G6 keep
the bases as units (two architectures in growth.yaml: nested, no interval would remain), so the scenario
of an offset shared by an architecture's seeds is not theirs (``SCENARIOS``).

Each base's row holds the paired difference over the held-out windows with its SE, ``ROW_SE`` times the
base's SE multiple (the growth run's paired SEs of a difference over 256 windows are 0.003-0.02 nats).
G4: on the certificate's ``control_flops`` row, the forgetting saved at ``k·MDE``, the new-domain
difference (the safeguard) at 0. G5: on every rival's grown row, the certificate's new-domain advantage
at ``k·MDE`` against the certificate at equal new parameters, the forgetting difference (the safeguard) at
0. G6: per base the realized forgetting rising with the rank of the predicted one (``G6_STEP``, set by
simulation) and the forgetting pareto saves over every rival at ``k·MDE``, the new domain at 0. MDEs at the
rule's parts and levels (Bonferroni over the intervals).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_rules_power import (
    CHECKS,
    OFFSET,
    ROOT,
    SLOW,
    Case,
    check_power,
    cross,
    design_models,
    mean_se,
    offsets,
)

from scalemech.config import load_config, model_jobs
from scalemech.report.common import LEVEL
from scalemech.report.rules.g4 import CERTIFICATE, PART_LEVEL
from scalemech.report.rules.g4 import PARTS as G4_PARTS
from scalemech.report.rules.g5 import rivals
from scalemech.report.units import mde_factor

GROWTH = load_config(ROOT / "config" / "growth.yaml")
ARMS = ("grown", "control_tokens", "control_flops", "inplace", "lora")
ROW_SE = 0.01  # nats: a base's paired SE of a difference over the held-out windows


def bases() -> pd.DataFrame:
    """One row per base of the design (model keys and ``se_factor``)."""
    models, grids = design_models(GROWTH), {job.name: job.grid for job in model_jobs(GROWTH)}
    return models[models["model"].map(grids).isin(GROWTH["adapt"]["grids"])].reset_index(drop=True)


DIFFERENCES = ("grown", "best", "equal", "pareto")  # the vs_<name>_new and vs_<name>_forgetting columns
LAYERS = {"best:2": 2, "every:2": 2}  # new layers of the design's multi-layer placements (the others grow one)


def frame(rng: np.random.Generator, offset: str | bool) -> pd.DataFrame:
    """The design's adaptation rows (bases × placements × arms) with every difference at 0 plus noise of
    its SE (and a per-base offset of ``OFFSET`` SEs); each row's certificate at equal new parameters."""
    rows = cross(bases(), placement=GROWTH["adapt"]["placements"], arm=ARMS)
    se = ROW_SE * rows["se_factor"].astype(float)
    noisy = {}
    for name in (f"vs_{which}_{axis}" for which in DIFFERENCES for axis in ("new", "forgetting")):
        shift = offsets(rows, OFFSET, rng, offset) * se
        noisy[name] = shift + se * rng.normal(0, 1, len(rows))
        noisy[f"{name}_se"] = se
    layers = rows["placement"].map(LAYERS).fillna(1).astype(int)
    return rows.assign(
        **noisy, equal_reference=np.where(layers == 1, CERTIFICATE, CERTIFICATE + ":" + layers.astype(str))
    )


def units_se(level: float, parts: int) -> tuple[float, float]:
    """``(SE of the rule's mean over bases, its MDE factor at parts and level)`` at the design."""
    base = bases()
    variance = (ROW_SE * base["se_factor"].astype(float)) ** 2
    return mean_se(base, variance.to_numpy(), nest=False), mde_factor(len(base) - 1, parts, level)


def g4_tables(k: float, offset: bool, rng) -> dict:
    """The forgetting saved at k·MDE on the certificate's control_flops rows; the new domain at 0 (the
    safeguard's null)."""
    rows = frame(rng, offset)
    se, factor = units_se(PART_LEVEL, G4_PARTS)
    at = (rows["placement"] == CERTIFICATE) & (rows["arm"] == "control_flops")
    rows.loc[at, "vs_grown_forgetting"] += k * factor * se
    return {"adaptation": rows}


def g5_tables(k: float, offset: bool, rng) -> dict:
    """The certificate's advantage over every rival at k·MDE (G5's parts and Bonferroni level); forgetting
    at 0 (the safeguard's null)."""
    rows = frame(rng, offset)
    chosen = rivals(list(dict.fromkeys(rows["placement"])))
    se, factor = units_se(1 - (1 - LEVEL) / (2 * len(chosen)), len(chosen))
    at = rows["placement"].isin(chosen) & (rows["arm"] == "grown")
    rows.loc[at, "vs_equal_new"] += k * factor * se
    return {"adaptation": rows}


# G6's ranking effect is set by simulation at E12's design (4 points, 4 bases, df 3, 1 + 2R Bonferroni
# intervals): with realized forgetting rising by G6_STEP point SDs per rank of the predicted one, the ranking
# alone is confirmed with the per-part power of ``mde_factor`` (π = (0.8/0.9)^(1/4) ≈ 0.97 at 4 parts; 0.96
# at 2.0, 0.98 at 2.2 in 4000 draws). Its mean z is bounded (ρ ≤ 1), so its t is no normal statistic and the
# median t, G1's calibration, would give it half that power.
G6_STEP = 2.1


def g6_tables(k: float, offset: bool, rng) -> dict:
    """Per base a predicted forgetting per point and a realized one rising by k·G6_STEP point SDs per rank of
    it (plus a per-base offset); every single-layer placement grows one point (the rules a random one, top
    the last, layer.i its own); the forgetting pareto saves over each rival at k·MDE, the new domain at 0."""
    rows = frame(rng, offset)
    depth = rows["depth"].astype(int)
    base = rows.groupby("model").ngroup().to_numpy()
    picks = {p: rng.integers(0, depth.max(), base.max() + 1) for p in ("best", "pareto", "adept", "bi")}
    point = np.full(len(rows), -1)
    for placement, chosen in picks.items():
        point = np.where(rows["placement"] == placement, chosen[base], point)
    point = np.where(rows["placement"] == "top", depth - 1, point)
    for i in range(depth.max()):
        point = np.where(rows["placement"] == f"layer.{i}", i, point)
    single = point >= 0
    predicted = rng.normal(0, 1, (base.max() + 1, depth.max()))
    ranks = predicted.argsort(axis=1).argsort(axis=1) - (depth.max() - 1) / 2
    sd = ROW_SE * rows["se_factor"].astype(float).to_numpy()
    realized = k * G6_STEP * ranks + rng.normal(0, 1, predicted.shape)
    shift = offsets(rows, OFFSET, rng, offset).to_numpy()
    rows = rows.assign(
        inserted=np.where(single, "1", "1,3"),
        copied=np.where(single, point.astype(str), "0,1"),
        predicted_forgetting=np.where(single, predicted[base, point.clip(0)], np.nan),
        forgetting=np.where(single, 0.05 + sd * (realized[base, point.clip(0)] + shift), np.nan),
    )
    chosen = [r for r in ("best", "adept", "bi") if r in set(rows["placement"])]
    level = 1 - (1 - LEVEL) / (1 + 2 * len(chosen))
    se, factor = units_se(level, 1 + len(chosen))
    at = rows["placement"].isin(chosen) & (rows["arm"] == "grown")
    rows.loc[at, "vs_pareto_forgetting"] += k * factor * se
    return {"adaptation": rows}


CASES = {"G4": Case("g4", "G4", g4_tables), "G5": Case("g5", "G5", g5_tables), "G6": Case("g6", "G6", g6_tables)}
SCENARIOS = [scenario for scenario in CHECKS if scenario != "architecture offsets"]  # bases are the units


def test_the_design_is_e12s() -> None:
    """Four bases at least (two widths × two seeds), the certificate's placement, a literature rival and
    the certificate at its new parameters (best:2 for every:2), pareto, and every point grown one layer."""
    base, placements = bases(), GROWTH["adapt"]["placements"]
    assert len(base) >= 4 and base["width"].nunique() >= 2 and base["seed"].nunique() >= 2
    assert CERTIFICATE in placements and rivals(placements) and "pareto" in placements
    assert all(f"best:{k}" in placements for p, k in LAYERS.items() if p.startswith("every:") and p in placements)
    depth = int(base["depth"].min())
    assert {f"layer.{i}" for i in range(depth - 1)} <= set(placements) and "top" in placements


@pytest.mark.parametrize(
    "claim, scenario",
    [
        pytest.param(claim, scenario, marks=[pytest.mark.slow] * (scenario in SLOW))
        for claim in CASES
        for scenario in SCENARIOS
    ],
)
def test_each_e12_rule_has_the_power_it_prints(claim: str, scenario: str) -> None:
    check_power(CASES[claim], scenario)
