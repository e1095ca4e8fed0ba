"""config/paper.yaml at toy size (scalemech.pipeline.smoke): the derived config keeps everything but sizes, and
(slow) every rule of it runs end to end on fixtures in the real on-disk formats."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

import scalemech.figures
from scalemech.config import model_jobs, read_yaml, validate_config
from scalemech.core.steps import PER_MODEL_TABLES
from scalemech.pipeline.smoke import paper_smoke

ROOT = Path(__file__).resolve().parents[1]
PAPER = read_yaml(ROOT / "config" / "paper.yaml")


def test_smoke_config_keeps_every_grid_group_and_setting_but_sizes(tmp_path: Path) -> None:
    smoke = validate_config(paper_smoke(copy.deepcopy(PAPER), tmp_path))
    paper = validate_config(copy.deepcopy(PAPER))
    assert smoke["run"] == "paper-smoke" and smoke["device"] == "cpu" and smoke["threads"] == 1 and smoke["offline"]
    assert list(smoke["datasets"]) == list(paper["datasets"])
    assert smoke["datasets"]["imagenet"]["resolution"] < paper["datasets"]["imagenet"]["resolution"]
    for name, grid in paper["grids"].items():
        toy = smoke["grids"][name]
        assert (toy["dataset"], toy["family"], toy["model"].keys()) == (
            grid["dataset"],
            grid["family"],
            grid["model"].keys(),
        )
        assert toy["depths"] == sorted(grid["depths"])[:2] and len(toy["widths"]) == min(2, len(grid["widths"]))
        assert toy["resources"]["gpu"] == 0 and set(toy["recipe"]) - set(grid["recipe"]) <= {"eval_windows"}
        assert toy["recipe"].keys() >= grid["recipe"].keys()
    for name, group in paper["pretrained"].items():
        toy = smoke["pretrained"][name]
        assert toy["dtype"] == group["dtype"] and toy["checkpoints"].keys() == group["checkpoints"].keys()
        for entry, original in zip(toy["checkpoints"].values(), group["checkpoints"].values()):
            assert entry["revision"] == original["revision"] and Path(entry["checkpoint"]).parent == tmp_path / "hf"
    for section in ("measure", "intervene", "grow"):  # every grid of values but the pools, steps and batches
        kept = {
            k: v
            for k, v in paper[section].items()
            if k not in ("train_pool", "test_pool", "batch_size", "pool", "steps", "heldout", "certificate")
        }
        assert {k: smoke[section][k] for k in kept} == kept
    assert {job.grid for job in model_jobs(smoke)} == {job.grid for job in model_jobs(paper)}
    assert not smoke["train"]["compile"] and paper_smoke(PAPER, tmp_path, compile=True)["train"]["compile"]


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_paper_smoke_runs_every_rule_end_to_end(tmp_path: Path) -> None:
    """``make paper-smoke``: the fixtures and config, then snakemake writes every table, figure and the report."""
    made = subprocess.run(
        [sys.executable, "-m", "scalemech.pipeline.smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    config = tmp_path / "paper-smoke.yaml"
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--cores", "2"]
        + ["--configfile", str(config), "--directory", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-6000:]
    results, smoke = tmp_path / "results" / "paper-smoke", yaml.safe_load(config.read_text())
    for stem in scalemech.figures.FIGURES:
        for suffix in (".pdf", ".png"):
            assert (tmp_path / "figures" / "paper-smoke" / f"{stem}{suffix}").stat().st_size > 0
    assert "| W5 " in (results / "report.md").read_text()
    training = pd.read_csv(results / "tables" / "training.csv")
    assert sorted(training["model"]) == sorted(job.name for job in model_jobs(validate_config(smoke)) if job.recipe)
    for table in PER_MODEL_TABLES:
        assert any((results / "tables").glob(f"{table}.*")), table
    dalign = pd.read_csv(results / "tables" / "dalign.csv")
    assert set(dalign["dataset"]) == set(smoke["datasets"]) and dalign["model"].str.startswith("hf-").any()
