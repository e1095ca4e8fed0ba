"""The ``train`` target as users rerun it: which edits retrain, which retrain nothing, and what
a lost model costs."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from snakemake_run import snakemake

pytestmark = pytest.mark.workflow

ONE_MODEL = {
    "run": "one",
    "device": "cpu",
    "offline": True,
    "threads": 1,
    "datasets": {"mnist5k": {"test_fraction": 0.2, "split_seed": 0}},
    "grids": {
        "resnet": {
            "dataset": "mnist5k",
            "family": "resnet",
            "depths": [8],
            "widths": [0.5],
            "recipe": {"optimizer": "sgd", "lr": 0.05, "batch_size": 32, "steps": 4, "eval_examples": 64},
        }
    },
    "train": {"checkpoint_every": 2},
}


@pytest.mark.timeout(900)
def test_training_knows_which_run_it_is(tmp_path: Path) -> None:
    """Edits that change the weights retrain (rc 0, old checkpoints kept aside); --forcerun retrains;
    an edit of how a job runs (checkpoint_every) retrains nothing; a lost model is rebuilt."""

    def train(config: dict, *extra: str) -> subprocess.CompletedProcess:
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        result = snakemake(
            "train", *extra, "--cores", "1", "--configfile", str(tmp_path / "config.yaml"), "--directory", str(tmp_path)
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    model_dir = tmp_path / "results" / "one" / "models" / "mnist5k" / "resnet-d8-w0.5-s0"
    checkpoints = tmp_path / "results" / "one" / "checkpoints" / "mnist5k"

    def weights() -> dict:
        return torch.load(model_dir / "model.pt", weights_only=False)["state_dict"]

    def aside() -> int:
        return sum(1 for p in checkpoints.iterdir() if p.name.startswith("resnet-d8-w0.5-s0."))

    train(ONE_MODEL)
    first = weights()
    assert aside() == 0 and (checkpoints / "resnet-d8-w0.5-s0" / "complete.json").exists()

    edited = copy.deepcopy(ONE_MODEL)
    edited["grids"]["resnet"]["recipe"]["lr"] = 0.02  # a recipe edit: retrain
    train(edited)
    assert aside() == 1 and not all(torch.equal(first[k], weights()[k]) for k in first)

    edited["train"]["checkpoint_every"] = 3  # how it runs: nothing to do
    dry = train(edited, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr

    train(edited, "--forcerun", "train_model")  # forced: trains from step 0
    assert aside() == 2

    resplit = copy.deepcopy(edited)
    resplit["datasets"]["mnist5k"]["split_seed"] = 1  # new data: a new run
    before = weights()
    train(resplit)
    assert not all(torch.equal(before[k], weights()[k]) for k in before)

    (model_dir / "model.pt").unlink()  # a lost model is rebuilt
    train(resplit)
    assert (model_dir / "model.pt").is_file()
