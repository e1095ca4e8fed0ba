"""The Snakemake workflow as users run it: dry runs of the shipped configs, and a tiny
end-to-end run that makes every figure and the report, then reruns only plotting."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from jobstats import planned

import scalemech.figures
from scalemech import cli
from scalemech.core.tables import timing_columns

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]


def snakemake(
    *args: str, cwd: Path = ROOT, timeout: int = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SNAKEMAKE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
    )


@pytest.mark.parametrize(
    "config, expected",
    [
        (
            "config/config.yaml",
            {"prepare_data": 2, "train_model": 12, "measure_model": 12, "trajectory_model": 12, "figure": 9},
        ),
        (  # training and E10 only: no measure, misalign, intervene, expand or cost job, no figure of theirs
            "config/paper-widths.yaml",
            {"prepare_data": 1, "train_model": 12, "trajectory_model": 12, "powerlaw_table": 1, "figure": 3}
            | dict.fromkeys(["measure_model", "misalign_model", "intervene_model", "expand_model", "cost_table"]),
        ),
        ("config/quick-cifar10.yaml", {"prepare_data": 2, "train_model": 12}),
        ("config/paper.yaml", {"prepare_data": 5, "train_model": 85, "pin_pretrained": 5, "measure_model": 90}),
    ],
)
def test_dry_run_plans_every_job(config: str, expected: dict[str, int], tmp_path: Path) -> None:
    result = snakemake("-n", "--cores", "2", "--configfile", str(ROOT / config), "--directory", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    counts = planned(result.stdout)
    for rule, count in expected.items():
        assert counts.get(rule) == count, (rule, counts)
    # the estimate from recorded job times: the quick run's are shipped (docs/quick/runtime.csv, written
    # by make docs), so every job of the default config has one; the paper's models have none
    if config == "config/config.yaml":
        assert "estimated run time:" in result.stderr and "74 of 74 computing jobs recorded" in result.stderr
    if config == "config/paper.yaml":
        assert "estimated run time: cannot estimate, none of the 526 computing jobs has a record" in result.stderr
        for data in ("cifar10", "cifar100", "imagenet", "tinyshakespeare", "corpus"):
            assert f"results/paper/data/{data}" in result.stdout
        assert "hf-pythia-6.9b" in result.stdout and "llama-d12-w3072-s0" in result.stdout


def test_bad_config_fails_before_planning(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["grids"]["resnet_mnist"]["widths"] = [-1]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "--cores", "1", "--configfile", str(tmp_path / "bad.yaml"), "--directory", str(tmp_path))
    assert result.returncode != 0
    assert "grids.resnet_mnist.widths[0]" in result.stdout + result.stderr


TINY = {
    "run": "tiny",
    "device": "cpu",
    "offline": True,
    "threads": 1,
    "datasets": {"mnist5k": {"test_fraction": 0.2}, "pystdlib": {"max_files": 40}},
    "grids": {
        "resnet": {
            "dataset": "mnist5k",
            "family": "resnet",
            "depths": [8],
            "widths": [0.5, 1],
            "recipe": {"optimizer": "sgd", "lr": 0.05, "batch_size": 32, "steps": 6},
        },
        "llama": {
            "dataset": "pystdlib",
            "family": "llama",
            "depths": [1],
            "widths": [64],
            "model": {"block_size": 16},
            "recipe": {"optimizer": "adamw", "lr": 1e-3, "batch_size": 8, "steps": 6},
        },
    },
    "train": {"checkpoint_every": 3},
    "measure": {"points": 2, "train_pool": 24, "test_pool": 24, "batch_size": 12, "covmat_points": 2, "null_draws": 3},
    "misalign": {"sizes": [1, 2, 4], "draws": 200},
    "intervene": {"step_fractions": [0.01, 0.001]},
    "expand": {"steps": 3, "pool": 32, "batch_size": 16},
}


def assert_same_tables(tables: Path, other: Path) -> None:
    """Every table under ``tables`` equals its namesake under ``other`` exactly, but for the
    columns that time the machine (``scalemech.core.tables.timing_columns``)."""
    names = sorted(p.name for p in tables.iterdir() if p.suffix in (".csv", ".parquet"))
    assert names == sorted(p.name for p in other.iterdir() if p.suffix in (".csv", ".parquet")) and names
    for name in names:
        read = pd.read_parquet if name.endswith(".parquet") else pd.read_csv
        frames = [read(d / name) for d in (tables, other)]
        untimed = [f.drop(columns=[c for c in timing_columns() if c in f.columns]) for f in frames]
        pd.testing.assert_frame_equal(*untimed, check_exact=True, obj=name)


@pytest.mark.timeout(1200)
def test_tiny_run_makes_every_figure_and_reruns_only_plotting(tmp_path: Path) -> None:
    # The workflow runs on a copy of the package, so that editing its plotting code below
    # leaves the repository untouched (PYTHONPATH comes before the editable install).
    package = tmp_path / "pkg"
    shutil.copytree(
        Path(scalemech.figures.__file__).parents[1], package / "scalemech", ignore=shutil.ignore_patterns("__pycache__")
    )
    env = {"PYTHONPATH": str(package)}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    run = snakemake(
        "--cores", "2", "--configfile", str(tmp_path / "tiny.yaml"), "--directory", str(tmp_path), timeout=900, env=env
    )
    assert run.returncode == 0, run.stderr[-4000:]
    for stem in scalemech.figures.FIGURES:
        for suffix in (".pdf", ".png"):
            assert (tmp_path / "figures" / "tiny" / f"{stem}{suffix}").stat().st_size > 0
    report = (tmp_path / "results" / "tiny" / "report.md").read_text()
    for claim in ("D1", "D2", "D3", "W1", "W2", "W3", "W4", "W5"):
        assert f"| [{claim}](#" in report
    training = pd.read_csv(tmp_path / "results" / "tiny" / "tables" / "training.csv")
    assert sorted(training["model"]) == ["llama-d1-w64-s0", "resnet-d8-w0.5-s0", "resnet-d8-w1-s0"]
    assert (tmp_path / "logs" / "tiny" / "train" / "mnist5k" / "resnet-d8-w1-s0.log").is_file()
    assert (tmp_path / "benchmarks" / "tiny" / "train" / "mnist5k" / "resnet-d8-w1-s0.tsv").is_file()

    html = snakemake(
        "--report",
        str(tmp_path / "report.zip"),
        "--configfile",
        str(tmp_path / "tiny.yaml"),
        "--directory",
        str(tmp_path),
        env=env,
    )
    assert html.returncode == 0, html.stderr[-3000:]
    assert (tmp_path / "report.zip").stat().st_size > 0

    # The same config in another directory: every table identical but for the timing columns.
    again = tmp_path / "again"
    rerun = snakemake(
        "--cores",
        "2",
        "--configfile",
        str(tmp_path / "tiny.yaml"),
        "--directory",
        str(again),
        "tables",
        timeout=900,
        env=env,
    )
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert_same_tables(tmp_path / "results" / "tiny" / "tables", again / "results" / "tiny" / "tables")
    # One job twice in one process, after different global random draws: the workflow's rows.
    job = Path("results", "tiny", "expansion", "mnist5k", "resnet-d8-w1-s0.csv")
    os.chdir(again)
    try:
        for global_seed in (1, 2):
            torch.manual_seed(global_seed)
            torch.rand(global_seed)
            assert (
                cli.main(
                    [
                        "expand",
                        "--config",
                        str(tmp_path / "tiny.yaml"),
                        "--model",
                        "mnist5k/resnet-d8-w1-s0",
                        "--device",
                        "cpu",
                    ]
                )
                == 0
            )
            pd.testing.assert_frame_equal(pd.read_csv(again / job), pd.read_csv(tmp_path / job), check_exact=True)
            (again / job).unlink()
    finally:
        os.chdir(ROOT)

    plots_py = package / "scalemech" / "figures" / "common.py"
    plots_py.write_text(plots_py.read_text() + "\n# an edit of the plotting code\n")
    dry = snakemake(
        "-n", "--cores", "2", "--configfile", str(tmp_path / "tiny.yaml"), "--directory", str(tmp_path), env=env
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    counts = planned(dry.stdout)
    assert counts.get("figure") == len(scalemech.figures.FIGURES) and counts.get("claims_report") == 1
    for heavy in (
        "prepare_data",
        "train_model",
        "measure_model",
        "misalign_model",
        "intervene_model",
        "expand_model",
        "collect_table",
        "training_table",
    ):
        assert heavy not in counts, counts


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
