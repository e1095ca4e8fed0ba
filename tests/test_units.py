"""Across-model weights: Paule–Mandel's τ² (statsmodels' for a mean), Kish's effective models and their
floor, bounds rounded outward."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.meta_analysis import combine_effects

from scalemech.report.common import outward
from scalemech.report.units import KISH_FLOOR, across_models, kish, paule_mandel


def test_paule_mandel_is_statsmodels_for_a_mean():
    rng = np.random.default_rng(0)
    s = 10 ** rng.uniform(-2, 0, 12)  # SEs over two decades
    y = rng.normal(0, 0.3, 12) + rng.normal(0, 1, 12) * s
    ours = paule_mandel(y, s, np.ones((12, 1)))
    assert ours > 0 and ours == pytest.approx(combine_effects(y, s**2, method_re="pm").tau2, rel=1e-4)
    assert paule_mandel(np.zeros(12), s, np.ones((12, 1))) == 0.0  # no scatter beyond the SEs


def moment_tau2(y: np.ndarray, s: np.ndarray) -> float:
    """The estimator the rules used before: ``max(0, σ̂² − mean s²)``."""
    return max(0.0, float(np.var(y, ddof=1)) - float(np.mean(s**2)))


def test_no_one_or_two_models_carry_the_estimate():
    """SEs over two decades and models scattering beyond the small ones: the moment estimator's τ² is 0
    and a few models carry the mean, Paule–Mandel's spreads the weights over most models. Where the
    weights stay below the Kish floor anyway, models weigh equally and the text says so."""
    rng = np.random.default_rng(0)
    s = 10 ** rng.uniform(-2, 0.2, 12)
    y = rng.normal(0, 0.3, 12) + rng.normal(0, 1, 12) * s
    assert kish(1 / (s**2 + moment_tau2(y, s))) < 4
    spread = across_models(pd.DataFrame({"y": y, "s": s}))
    assert spread.effective >= KISH_FLOOR * 12 and "equal weights" not in spread.weights_text()
    two = np.r_[0.001, 0.001, np.full(10, 0.5)]  # two models with tiny SEs
    units = pd.DataFrame({"y": rng.normal(0, 0.3, 12), "s": two})
    mean = across_models(units)
    assert mean.effective < KISH_FLOOR * 12 and mean.value == pytest.approx(units["y"].mean())
    assert mean.weights_text().endswith("of 12 models effective (Kish) (below half: equal weights)")


@pytest.mark.parametrize(
    "value, up, text",
    [(-1.25, False, "-1.3"), (-1.25, True, "-1.2"), (0.0123, True, "0.013"), (0.0129, False, "0.012")],
)
def test_bounds_round_outward(value, up, text):
    assert outward(value, 2, up) == text
    assert outward(1.2, 2, True) == "1.2"  # an exact value stays


def test_models_without_spread_give_their_common_value():
    """A control every model left unchanged (lr 0 chosen: change exactly 0 with SE 0) is a mean of 0 with a
    zero-width interval, not infinite weights (found by the first run of the trained quick grid)."""
    units = pd.DataFrame({"y": np.zeros(6), "s": np.zeros(6)})
    mean = across_models(units)
    assert (mean.value, mean.lo, mean.hi) == (0.0, 0.0, 0.0)
    some = across_models(pd.DataFrame({"y": [0.0, 0.0, 0.1, -0.2, 0.05, 0.3], "s": [0, 0, 0.1, 0.1, 0.05, 0.2]}))
    assert np.isfinite([some.value, some.lo, some.hi]).all() and some.lo < some.value < some.hi
