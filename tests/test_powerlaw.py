"""D4: Paper D's power law fitted over a depth × width grid recovers planted exponents within its
intervals, finds no exponent in noise, and is not measured on a grid too small to fit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from scalemech.report import CONFIRMED, NOT_DETECTABLE, NOT_MEASURED, claims
from scalemech.report.rules.d4 import rule_d4
from scalemech.stats.powerlaw import fit_power_law, powerlaw_table

DEPTHS, WIDTHS, SEEDS = [8, 14, 20, 32, 44], [0.5, 1, 1.5, 2, 4], [0, 1]
PLANTED = {"alpha": 0.5, "beta": 0.8}
DRAWS = 20


def training(loss, depths=DEPTHS, widths=WIDTHS) -> pd.DataFrame:
    """Training rows of one (dataset, family) grid with ``loss(depth, width, seed)`` as test loss."""
    rows = [
        dict(run="t", dataset="synth", family="resnet", depth=d, width=w, seed=s, model=f"d{d}-w{w}-s{s}")
        for d in depths
        for w in widths
        for s in SEEDS
    ]
    frame = pd.DataFrame(rows).assign(
        loss_first=2.3, loss_late=0.01, loss_end=0.01, tokens_per_parameter=np.nan
    )  # at a plateau
    return frame.assign(test_loss=[loss(r.depth, r.width, r.seed) for r in frame.itertuples()])


def planted(rng: np.random.Generator):
    return lambda d, w, s: 2 * (d / 8) ** -PLANTED["alpha"] + (w / 0.5) ** -PLANTED["beta"] + 0.5 + rng.normal(0, 0.02)


def noise(rng: np.random.Generator):
    return lambda d, w, s: 1.0 + rng.normal(0, 0.02)


def intervals(frame: pd.DataFrame) -> pd.DataFrame:
    return powerlaw_table(frame).set_index("parameter")


def test_planted_exponents_lie_within_their_intervals():
    covered, confirmed = dict.fromkeys(PLANTED, 0), 0
    for seed in range(DRAWS):
        fits = intervals(training(planted(np.random.default_rng(seed))))
        for name, value in PLANTED.items():
            covered[name] += fits.at[name, "lo"] <= value <= fits.at[name, "hi"]
        confirmed += rule_d4({"powerlaw": fits.reset_index()}).verdict == CONFIRMED
    assert min(covered.values()) >= 0.8 * DRAWS, covered  # 95 % intervals
    assert confirmed == DRAWS


def test_noise_gives_exponent_intervals_containing_zero():
    contain = 0
    for seed in range(DRAWS):
        fits = intervals(training(noise(np.random.default_rng(seed))))
        contain += all(fits.at[name, "lo"] <= 0 <= fits.at[name, "hi"] for name in PLANTED)
    assert contain >= 0.8 * DRAWS, contain


def test_a_flat_loss_leaves_the_exponents_unidentified():
    flat = powerlaw_table(training(lambda d, w, s: 1.0))
    row = rule_d4({"powerlaw": flat})
    assert row.verdict == NOT_DETECTABLE and "not identified: JᵀJ singular" in row.statistic


def test_the_fit_recovers_exact_exponents_without_noise():
    depth, width = np.meshgrid(DEPTHS, WIDTHS, indexing="ij")
    loss = 3 * (depth / 8) ** -0.7 + 0.5 * (width / 0.5) ** -0.3 + 1.2
    fit = fit_power_law(depth.ravel(), width.ravel(), loss.ravel())
    assert np.allclose(fit.values, [3, 0.7, 0.5, 0.3, 1.2], atol=1e-4)


def test_a_two_by_two_grid_is_not_measured():
    small = training(planted(np.random.default_rng(0)), depths=[8, 14], widths=[1, 2])
    assert powerlaw_table(small).empty
    row = claims({"training": small, "powerlaw": powerlaw_table(small)}).set_index("claim").loc["D4"]
    assert row["verdict"] == NOT_MEASURED and "≥ 3 depths" in row["statistic"]


def test_a_cross_at_one_seed_has_no_fit_but_at_two_seeds_has_one():
    """The quick run's cross (depths 8/14/20 at width 0.5, widths 0.5/1/1.5 at depth 8) is 5 models a
    seed: as many as the law's parameters, so one seed alone has no residual df, two seeds have 5."""
    cross = [(8, 0.5), (14, 0.5), (20, 0.5), (8, 1), (8, 1.5)]
    both = training(planted(np.random.default_rng(0)), depths=[8, 14, 20], widths=[0.5, 1, 1.5])
    both = both[[(d, w) in cross for d, w in zip(both.depth, both.width)]]
    assert powerlaw_table(both[both.seed == 0]).empty
    assert set(powerlaw_table(both)["df"]) == {len(both) - 5} and len(both) == 10
