"""E13, the early-training regime: E2, E3, E5–E7 at an early weight snapshot, and the claims decided on them."""

from __future__ import annotations

import pytest

from scalemech.core.steps import EARLY_OUTPUTS
from scalemech.core.tables import EARLY, check_columns, columns, early_tables
from scalemech.experiments.early import early, snapshot_at
from scalemech.report.regimes import EARLY_REGIME, early_claim, early_view, measured_early
from scalemech.report.verdicts import CLAIMS
from scalemech.training.checkpoints import snapshot_schedule

KEYS = {"run": "t", "dataset": "mnist5k", "family": "resnet", "depth": 8, "width": 0.5, "seed": 0, "model": "m"}
MEASURE = dict(points=2, batch_size=32, covmat_points=1, pool_dtype="float16", interval_level=0.9, null_draws=4, seed=0)
SETTINGS = dict(
    pool=32,
    measure=MEASURE | {"train_pool": 1000, "test_pool": 1000},  # early.pool replaces measure's pools
    misalign={"sizes": [1, 4], "draws": 50, "seed": 0},
    intervene={"step_fractions": [1e-4], "views": ["full", "pooled"], "batch_size": 32},
    device="cpu",
)


def test_the_early_tables_are_the_step_outputs_and_their_twins_columns():
    assert list(EARLY_OUTPUTS) == early_tables()
    for name in early_tables():
        assert columns(name) == columns(name.removeprefix(EARLY)) + ["step"]


def test_the_tables_of_a_snapshot_and_the_latest_before_a_step(trained_with_snapshots):
    model, data, snapshot_dir = trained_with_snapshots
    steps = snapshot_schedule(40, 6)  # 0, 1, 3, 6, 16, 40
    between = steps[3] + 1
    assert between not in steps and snapshot_at(snapshot_dir, between) == (
        steps[3],
        snapshot_at(snapshot_dir, steps[3])[1],
    )
    initial = early(model, data, snapshot_dir, KEYS, step=0, **SETTINGS)
    assert sorted(initial) == sorted(early_tables())
    for name, frame in initial.items():
        check_columns(frame, name)
        assert set(frame["step"]) == {0} and len(frame), name
    assert (initial["early_signal"]["n"] == 32).all()  # early.pool, not measure's
    assert initial["early_misalignment"]["M"].max() == 4
    trained = early(model, data, snapshot_dir, KEYS, step=40, **SETTINGS)["early_dalign"]
    start, end = (
        f[(f.view == "full") & (f.split == "train")].d_align.median() for f in (initial["early_dalign"], trained)
    )
    assert start > end  # the mean gradient is optimized away between the two
    with pytest.raises(FileNotFoundError, match="train.snapshots"):
        snapshot_at(snapshot_dir.parent, 0)


def test_every_claim_measured_early_has_an_early_row_decided_by_the_same_rule():
    ids = [claim.id for claim in CLAIMS]
    twins = [claim for claim in CLAIMS if claim.regime == EARLY_REGIME]
    expected = ["D1", "D2", "W1", "W1 level", "W2", "W2 level", "W3", "W4", "W4 held out"]
    assert [claim.id.removesuffix(" early") for claim in twins] == expected
    for claim in twins:
        assert ids.index(claim.id) == ids.index(claim.id.removesuffix(" early")) + 1
    d2 = next(claim for claim in CLAIMS if claim.id == "D2")
    assert measured_early(d2) and early_claim(d2).reads == {"early_signal": d2.reads["signal"]}
    assert early_claim(d2).judge({}).statistic.startswith("no early_signal table")
    view = early_view({"signal": 1, "early_signal": 2, "training": 3, "dalign": 4})
    assert view["signal"] == 2 and view["training"] == 3 and "dalign" not in view  # no early_dalign: none
