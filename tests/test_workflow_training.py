"""The ``train`` target as users rerun it: which edits retrain, which retrain nothing, and what
a lost model costs."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from jobstats import planned
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
    """An edit that changes the weights retrains (rc 0, old checkpoints kept aside, new weights); what
    Snakemake would rerun then (dry runs, ``-n``: the job a rerun runs is the retrain above, a finished
    run's checkpoints moved aside, ``scalemech.training.checkpoints``): an edit of how a job runs
    (checkpoint_every) nothing; --forcerun, a new split and a lost model the model."""

    def train(config: dict, *extra: str) -> subprocess.CompletedProcess:
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        result = snakemake(
            "train", *extra, "--cores", "1", "--configfile", str(tmp_path / "config.yaml"), "--directory", str(tmp_path)
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    def reruns(config: dict, *extra: str) -> tuple[dict[str, int], str]:
        """What ``train`` would run (``{rule: count}``) and Snakemake's plan with its reasons."""
        dry = train(config, "-n", *extra)
        return planned(dry.stdout), dry.stdout + dry.stderr

    model_dir = tmp_path / "results" / "one" / "models" / "mnist5k" / "resnet-d8-w0.5-s0"
    checkpoints = tmp_path / "results" / "one" / "checkpoints" / "mnist5k"
    retrain = {"train_model": 1, "training_table": 1, "train": 1}

    def weights() -> dict:
        return torch.load(model_dir / "model.pt", weights_only=False)["state_dict"]

    def aside() -> int:
        return sum(1 for p in checkpoints.iterdir() if p.name.startswith("resnet-d8-w0.5-s0."))

    train(ONE_MODEL)
    first = weights()
    assert aside() == 0 and (checkpoints / "resnet-d8-w0.5-s0" / "complete.json").exists()

    edited = copy.deepcopy(ONE_MODEL)
    edited["grids"]["resnet"]["recipe"]["lr"] = 0.02  # a recipe edit: retrain
    rerun = train(edited).stderr  # a real run logs its plan to stderr
    assert planned(rerun) == retrain and "Params have changed since last execution" in rerun
    assert aside() == 1 and not all(torch.equal(first[k], weights()[k]) for k in first)

    edited["train"]["checkpoint_every"] = 3  # how it runs: nothing to do
    counts, plan = reruns(edited)
    assert counts == {} and "Nothing to be done" in plan

    counts, plan = reruns(edited, "--forcerun", "train_model")  # forced: trains from step 0
    assert counts == retrain and "reason: Forced execution" in plan

    resplit = copy.deepcopy(edited)
    resplit["datasets"]["mnist5k"]["split_seed"] = 1  # new data: a new run
    counts, plan = reruns(resplit)
    assert counts == {"prepare_data": 1, **retrain} and "Input files updated by another job: results/one/data" in plan

    (model_dir / "model.pt").unlink()  # a lost model is rebuilt
    counts, plan = reruns(edited)
    assert counts == retrain and f"reason: Missing output files: {model_dir.relative_to(tmp_path)}/model.pt" in plan
