"""E11's placement strategies on a hand-made model, and the growth rules' edges (their power, with noise,
planted and opposite effects: tests/test_rules_power.py, cases G1–G3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_rules_power import CASES, g1_tables, g3_tables

from scalemech.figures.placement import RANDOM_DRAWS, STRATEGIES, placements, random_draws
from scalemech.report import NOT_CONFIRMED, NOT_MEASURED, claims
from scalemech.report.common import NotMeasured

KEYS = dict(run="test", dataset="synth", family="resnet", depth=14, width=1.0, seed=0)


def one_model(model: str = "resnet-d14-w1-s0", snapshot: str = "final") -> pd.DataFrame:
    """Six points: certify ranks 1 and 2 ("grow here") at points 1 and 2; the largest grad norm at point 3
    (weak, no rank); the smallest at point 4; gain_old = 0.1·(point + 1)."""
    points = np.arange(6)
    return pd.DataFrame(
        KEYS
        | dict(
            model=model,
            snapshot=snapshot,
            point=[f"block{p}" for p in points],
            point_index=points,
            block_grad_norm=[0.5, 0.6, 0.4, 0.9, 0.1, 0.3],
            certify_rank=[np.nan, 1, 2, np.nan, np.nan, np.nan],
            predicted_gain=[0.5, 0.6, 0.4, 0.9, 0.1, 0.3],
            gain_old=0.1 * (points + 1),
            gain_old_se=0.01 * (points + 1),
        )
    )


def test_each_strategy_picks_its_point():
    picks = placements(one_model(), ["gain_old"]).set_index("strategy")
    assert list(picks.index) == STRATEGIES
    expected = {"certificate": 1, "lowest certificate": 4, "grad norm": 3, "top": 5, "middle": 2, "bottom": 0}
    assert picks["point_index"].drop(["uniform", "random"]).to_dict() == expected
    assert picks.loc["uniform", "point_index"] == picks.loc["top", "point_index"]  # one block: after the last
    for strategy, point in expected.items():
        assert picks.loc[strategy, "gain_old"] == pytest.approx(0.1 * (point + 1))
        assert picks.loc[strategy, "gain_old_se"] == pytest.approx(0.01 * (point + 1))


def test_random_placement_is_seeded_by_the_model_and_averages_its_draws():
    frame = one_model()
    drawn = random_draws(frame)
    assert len(drawn) == RANDOM_DRAWS >= 3
    pd.testing.assert_frame_equal(drawn, random_draws(frame.sample(frac=1, random_state=1)))  # row order aside
    others = [random_draws(one_model(model=f"resnet-d14-w1-s{seed}"))["point_index"].tolist() for seed in (1, 2)]
    assert drawn["point_index"].tolist() not in others  # another model, other draws (a 1 in 6¹⁰ coincidence)
    picked = placements(frame, ["gain_old"]).set_index("strategy").loc["random"]
    assert picked["draws"] == RANDOM_DRAWS and np.isnan(picked["point_index"])
    assert picked["point"] == "+".join(drawn["point"])
    assert picked["gain_old"] == pytest.approx(drawn["gain_old"].mean())
    assert picked["gain_old_se"] == pytest.approx(drawn["gain_old_se"].mean())  # conservative: SEs averaged


def test_a_model_without_a_grow_here_point_has_no_certificate_pick():
    frame = pd.concat([one_model(), one_model(snapshot="signal").assign(certify_rank=np.nan)])
    picks = placements(frame, ["gain_old"])
    signal = picks[picks["snapshot"] == "signal"]
    assert "certificate" not in set(signal["strategy"]) and len(signal) == len(STRATEGIES) - 1
    assert signal.set_index("strategy").loc["lowest certificate", "point_index"] == 4


def test_without_a_growth_table_or_usable_points_the_rules_are_not_measured():
    verdicts = claims({}).set_index("claim")
    assert (verdicts.loc[["G1", "G2", "G3"], "verdict"] == NOT_MEASURED).all()
    assert (verdicts.loc[["G1", "G2", "G3"], "statistic"] == "no growth table").all()
    growth = g1_tables(1.0, False, np.random.default_rng(0))["growth"]
    two = growth.groupby(["model", "snapshot"]).head(2)
    with pytest.raises(NotMeasured, match="≥ 3 points"):
        CASES["G1"].rule.evaluate({"growth": two})  # two points per model: no ρ
    units = growth.groupby(["model", "snapshot"]).ngroups
    shallow = two.groupby(["model", "snapshot"]).ngroups  # a model cut to two points: not usable
    mixed = pd.concat([growth[growth["seed"] == 0], two[two["seed"] != 0]])
    detail = CASES["G1"].rule.evaluate({"growth": mixed}).detail
    assert f"{units - shallow // 2} of {units} model × snapshot units with ≥ 3 points" in detail


def test_g3_does_not_confirm_a_win_over_a_control_that_damaged_f_old():
    frame = g3_tables(2.0, False, np.random.default_rng(0))["growth"]
    assert CASES["G3"].rule.evaluate({"growth": frame}).verdict == "confirmed"
    damaged = frame.assign(control_change=20 * frame["control_change_se"])
    result = CASES["G3"].rule.evaluate({"growth": damaged})
    assert result.verdict == NOT_CONFIRMED and "control damaged f_old" in result.statistic
