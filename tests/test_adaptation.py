"""grow.adaptation (E12): the adaptation rows against brute force, and the windows every run must share."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from scalemech.core.tables import check_columns
from scalemech.grow.adaptation import ARMS, adaptation, rows

MODELS = ("old", *ARMS)


def _run(
    rng: np.random.Generator, shift: float, windows: torch.Tensor, copied: tuple[int, ...] = (1,)
) -> SimpleNamespace:
    """A finished grow run as ``rows`` reads it: per-window losses by model, arms' records, decision, the
    certificate's predictions at the points grown (``copied``, one new layer after each)."""
    new = {name: rng.normal(3.0 - shift * (name != "old"), 0.3, 40) for name in MODELS}
    retain = {name: rng.normal(2.0 + shift * (name != "old"), 0.3, 40) for name in MODELS}
    arms = {name: {"trainable_parameters": 10, "steps": 5, "tokens": 80, "flops": 1000} for name in ARMS}
    predicted = [
        {"round": 1, "point": f"layer.{i}", "block_grad_norm": 0.5 + i, "mu_cross": 0.1 * i, "forget": 0.01 * i}
        for i in copied
    ]
    return SimpleNamespace(
        new_losses=new,
        retain_losses=retain,
        result={
            "arms": arms,
            "decision": {"recommended": False, "winner": "lora"},
            "predicted_first_order_gain": predicted,
        },  # fmt: skip
        inserted=[i + 1 + k for k, i in enumerate(copied)],
        copied=list(copied),
        eval_x=windows,
        retained=SimpleNamespace(x=windows + 1),
    )


def test_rows_are_paired_differences_computed_by_hand() -> None:
    rng, windows = np.random.default_rng(0), torch.arange(40).reshape(8, 5)
    runs = {
        "best": _run(rng, 0.2, windows),
        "bi": _run(rng, 0.1, windows, (2,)),
        "pareto": _run(rng, 0.15, windows, (0,)),
        "every:2": _run(rng, 0.1, windows, (1, 3)),
        "best:2": _run(rng, 0.1, windows, (1, 2)),
    }
    table = pd.DataFrame(rows(runs, {"model": "m"})).set_index(["placement", "arm"])
    check_columns(table.reset_index(), "adaptation", [c for c in table.reset_index().columns])

    def by_hand(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
        d = a - b
        return d.mean(), np.sqrt(((d - d.mean()) ** 2).sum() / (len(d) - 1) / len(d))

    for placement, run in runs.items():
        new, retain = run.new_losses, run.retain_losses
        for arm in ARMS:
            row = table.loc[(placement, arm)]
            pairs = {
                "gain": (new["old"], new[arm]),
                "forgetting": (retain[arm], retain["old"]),
                "vs_grown_new": (new[arm], new["grown"]),
                "vs_grown_forgetting": (retain[arm], retain["grown"]),
                "vs_best_new": (new[arm], runs["best"].new_losses[arm]),
                "vs_best_forgetting": (retain[arm], runs["best"].retain_losses[arm]),
                "vs_pareto_new": (new[arm], runs["pareto"].new_losses[arm]),
                "vs_pareto_forgetting": (retain[arm], runs["pareto"].retain_losses[arm]),
                "vs_equal_new": (new[arm], runs[row["equal_reference"]].new_losses[arm]),
                "vs_equal_forgetting": (retain[arm], runs[row["equal_reference"]].retain_losses[arm]),
            }
            for name, (a, b) in pairs.items():
                mean, se = by_hand(a, b)
                assert row[name] == pytest.approx(mean, abs=1e-12) and row[f"{name}_se"] == pytest.approx(se), name
            assert row["new_loss"] == pytest.approx(new[arm].mean()) and row["n_retain"] == 40
            assert row["equal_reference"] == ("best:2" if len(run.copied) == 2 else "best")
            assert row["predicted_forgetting"] == pytest.approx(sum(0.01 * i for i in run.copied))
            assert row["predicted_gain"] == pytest.approx(sum(0.5 + i for i in run.copied))
    assert table.loc[("bi", "grown"), "forgetting"] == pytest.approx(
        table.loc[("bi", "grown"), "retain_loss"] - table.loc[("bi", "grown"), "retain_loss_old"]
    )


def test_without_the_references_their_columns_are_nan() -> None:
    rng, windows = np.random.default_rng(2), torch.zeros(8, 5)
    table = pd.DataFrame(rows({"best": _run(rng, 0.2, windows), "every:2": _run(rng, 0.1, windows, (1, 3))}, {}))
    assert table["vs_pareto_new"].isna().all() and table[table["placement"] == "every:2"]["vs_equal_new"].isna().all()
    assert table[table["placement"] == "every:2"]["equal_reference"].isna().all()


def test_a_point_a_rule_grew_is_not_grown_again(tmp_path, monkeypatch) -> None:
    """``layer.1`` after ``best`` grew one layer after layer 1: best's run serves it; ``layer.0`` runs."""
    from scalemech.grow import adaptation as module

    rng, windows, started = np.random.default_rng(3), torch.zeros(8, 5), []

    def grown(checkpoint, data, out, settings):
        started.append(settings.at)
        return _run(rng, 0.1, windows, (0,) if settings.at == "layer.0" else (1,))

    monkeypatch.setattr(module, "save_hf", lambda base, path: path)
    monkeypatch.setattr(module, "grown", grown)
    table = adaptation(
        None, "a", "b", tmp_path, {"model": "m"}, placements=["best", "layer.1", "layer.0"], device="cpu"
    )
    assert started == ["best", "layer.0"]
    rows_of = table.set_index(["placement", "arm"])
    assert rows_of.loc[("layer.1", "grown"), "vs_best_new"] == 0 and rows_of.loc[("layer.0", "grown"), "copied"] == "0"


def test_runs_that_scored_other_windows_are_not_paired() -> None:
    rng = np.random.default_rng(1)
    runs = {"best": _run(rng, 0.2, torch.zeros(8, 5)), "top": _run(rng, 0.2, torch.ones(8, 5))}
    with pytest.raises(ValueError, match="grow --at top scored other held-out windows than --at best"):
        rows(runs, {})


def test_placements_without_the_certificate_are_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="pairs every placement against 'best'"):
        adaptation(None, "a", "b", tmp_path, {}, placements=["top", "bi"], device="cpu")


@pytest.mark.timeout(300)
def test_every_fixed_placement_reads_the_same_text(tmp_path) -> None:
    """A fixed placement trains once whatever its number of new layers, so ``every:2`` (two layers) reads
    as much text as ``top`` (one): E12's placements train on the same windows of the new domain."""
    from test_hf import save_tiny

    from scalemech.grow import GrowSettings
    from scalemech.grow.run import Grower

    source = save_tiny("llama", tmp_path / "llama")
    text = tmp_path / "text.txt"
    text.write_text(" ".join(f"word{i % 97} token{i % 13}" for i in range(40000)))
    counts = {}
    for at in ("top", "every:1", "best"):
        settings = GrowSettings(at=at, steps=40, batch_size=4, block_size=8, eval_windows=8, pool=6, M=2, K=2,
                                device="cpu")  # fmt: skip
        grower = Grower(source, str(text), tmp_path / at.replace(":", "-"), settings)
        counts[at] = grower.task.count("train")
    assert counts["every:1"] == counts["top"] == counts["best"], counts
