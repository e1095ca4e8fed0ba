"""The Snakemake workflow as users run it: a tiny end-to-end run that makes every figure and the
report, the same per-model results from a second run elsewhere, and an edit of plotting that reruns only plotting.

The tests that read the tiny run share one module fixture, so they run in this file's order on
one pytest-xdist worker (``make test``: ``--dist loadfile``); the last one edits the package copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from jobstats import planned
from snakemake_run import ROOT, snakemake

import scalemech.figures
from scalemech import cli
from scalemech.config import load_config, model_jobs
from scalemech.core.steps import PER_MODEL_TABLES, STEPS, arguments
from scalemech.core.tables import timing_columns
from scalemech.pipeline import jobs

pytestmark = pytest.mark.workflow


TINY = {
    "run": "tiny",
    "device": "cpu",
    "offline": True,
    "threads": 1,
    "datasets": {"mnist5k": {"test_fraction": 0.2}, "pystdlib": {"max_files": 40}, "pydoc": {"test_fraction": 0.2}},
    "grids": {
        "resnet": {
            "dataset": "mnist5k",
            "family": "resnet",
            "depths": [8],
            "widths": [0.5, 1],
            "recipe": {"optimizer": "sgd", "lr": 0.05, "batch_size": 32, "steps": 6, "eval_examples": 64},
        },
        "llama": {
            "dataset": "pystdlib",
            "family": "llama",
            "depths": [1],
            "widths": [64],
            "model": {"block_size": 16},
            "recipe": {"optimizer": "adamw", "lr": 1e-3, "batch_size": 8, "steps": 6, "eval_windows": 16},
        },
    },
    "train": {"checkpoint_every": 3, "snapshots": 3},
    "trajectory": {"pool": 12},
    "early": {"pool": 24},
    "measure": {"points": 2, "train_pool": 24, "test_pool": 24, "batch_size": 12, "covmat_points": 2, "null_draws": 3},
    "misalign": {"sizes": [1, 2, 4], "draws": 200},
    "intervene": {"step_fractions": [0.01, 0.001]},
    "grow": {
        "steps": 3,
        "pool": 32,
        "heldout": 64,
        "batch_size": 16,
        "lr_factors": [0.0, 1.0],
        "certificate": {"pool": 24, "M": 4, "K": 4},
    },
    "adapt": {
        "grids": ["llama"],
        "placements": ["best", "every:1", "adept", "bi", "top"],
        "steps": 3,
        "batch_size": 4,
        "eval_windows": 16,
        "pool": 16,
        "M": 4,
        "K": 4,
    },
}


def assert_same_frames(path: Path, other: Path) -> None:
    """The table at ``path`` equals the one at ``other`` exactly, but for the columns that time the
    machine (``scalemech.tables.timing_columns``)."""
    read = pd.read_parquet if path.suffix == ".parquet" else pd.read_csv
    frames = [read(p) for p in (path, other)]
    untimed = [f.drop(columns=[c for c in timing_columns() if c in f.columns]) for f in frames]
    pd.testing.assert_frame_equal(*untimed, check_exact=True, obj=str(path))


@dataclass(frozen=True)
class TinyRun:
    """The tiny config run once by Snakemake in ``folder``, on a copy of the package (``env``)."""

    folder: Path
    config: Path
    env: dict[str, str]
    package: Path


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> TinyRun:
    """One Snakemake run of ``TINY`` that the tests below read. The workflow runs on a copy of the
    package, so that editing its plotting code leaves the repository untouched (PYTHONPATH comes
    before the editable install)."""
    folder = tmp_path_factory.mktemp("tiny")
    package = folder / "pkg"
    shutil.copytree(
        Path(scalemech.figures.__file__).parents[1], package / "scalemech", ignore=shutil.ignore_patterns("__pycache__")
    )
    run = TinyRun(folder, folder / "tiny.yaml", {"PYTHONPATH": str(package)}, package)
    run.config.write_text(yaml.safe_dump(TINY))
    done = snakemake(
        "--cores", "2", "--configfile", str(run.config), "--directory", str(folder), timeout=900, env=run.env
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return run


@pytest.mark.timeout(900)
def test_tiny_run_makes_every_figure_the_report_logs_and_benchmarks(tiny_run: TinyRun) -> None:
    for stem in scalemech.figures.FIGURES:
        for suffix in (".pdf", ".png"):
            assert (tiny_run.folder / "figures" / "tiny" / f"{stem}{suffix}").stat().st_size > 0
    report = (tiny_run.folder / "results" / "tiny" / "report.md").read_text()
    for claim in ("D1", "D2", "D3", "W1", "W2", "W3", "W4", "W5"):
        assert f"| [{claim}](#" in report
    # six steps leave the digit classifiers far below 97 %: the first page names them, no claim rests on them
    summary = next(line for line in report.splitlines() if line.startswith("**Training criterion**"))
    named = summary.split("left out of every claim: ")[1]
    assert "mnist5k/resnet-d8-w0.5-s0" in named and "mnist5k/resnet-d8-w1-s0" in named
    assert "| [D1](#d1) | trained | not measured in this configuration |" in report
    assert "| [D1 early](#d1-early) | early training: step 0 | " in report  # measured at initialization
    training = pd.read_csv(tiny_run.folder / "results" / "tiny" / "tables" / "training.csv")
    assert sorted(training["model"]) == ["llama-d1-w64-s0", "resnet-d8-w0.5-s0", "resnet-d8-w1-s0"]
    assert (tiny_run.folder / "logs" / "tiny" / "train" / "mnist5k" / "resnet-d8-w1-s0.log").is_file()
    assert (tiny_run.folder / "benchmarks" / "tiny" / "train" / "mnist5k" / "resnet-d8-w1-s0.tsv").is_file()
    runtime = pd.read_csv(tiny_run.folder / "results" / "tiny" / "tables" / "runtime.csv")
    assert set(runtime["cpu_from"]) == {"job"} and (runtime["cpu_seconds"] > 0).all()  # each job's own count


@pytest.mark.timeout(900)
def test_tiny_run_grows_the_llama_into_a_new_domain(tiny_run: TinyRun) -> None:
    """E12: every placement × arm of the base, the base's own rows paired with themselves at zero."""
    table = pd.read_csv(tiny_run.folder / "results" / "tiny" / "tables" / "adaptation.csv")
    placements, arms = TINY["adapt"]["placements"], ["grown", "control_tokens", "control_flops", "inplace", "lora"]
    assert sorted(zip(table["placement"], table["arm"])) == sorted((p, a) for p in placements for a in arms)
    assert set(table["model"]) == {"llama-d1-w64-s0"} and (table["n_new"] == table["n_retain"]).all()
    assert table[["new_loss", "retain_loss", "gain", "forgetting"]].notna().all().all()
    assert (table[["gain_se", "forgetting_se"]] > 0).all().all()
    assert (table.loc[table["placement"] == "best", ["vs_best_new", "vs_best_forgetting"]] == 0).all().all()
    assert (table.loc[table["arm"] == "grown", ["vs_grown_new", "vs_grown_forgetting"]] == 0).all().all()
    grown = table[table["arm"] == "grown"]
    assert (grown["trainable_parameters"] > 0).all() and (grown["steps"] == TINY["adapt"]["steps"]).all()
    log = tiny_run.folder / "logs" / "tiny" / "adapt" / "pystdlib" / "llama-d1-w64-s0.log"
    assert "grow: round 1" in log.read_text()  # grow's own report, in the job's log


@pytest.mark.timeout(900)
def test_tiny_run_html_report(tiny_run: TinyRun) -> None:
    report = tiny_run.folder / "report.zip"
    html = snakemake(
        "--report",
        str(report),
        "--configfile",
        str(tiny_run.config),
        "--directory",
        str(tiny_run.folder),
        env=tiny_run.env,
    )
    assert html.returncode == 0, html.stderr[-3000:]
    assert report.stat().st_size > 0


RERUN_MODELS = ("pystdlib/llama-d1-w64-s0", "mnist5k/resnet-d8-w0.5-s0")  # one of each family: every per-model step


def run_jobs_here(config_path: Path, models: tuple[str, ...]) -> None:
    """Every job behind ``models``' per-model results, in this process and this directory, as the workflow
    calls them (``jobs.call`` with ``steps.arguments``: the rules' own paths and params, the CLI's path)."""
    config = load_config(config_path)
    found = {job.key: job for job in model_jobs(config)}
    adapted = [model for model in models if found[model].grid in config["adapt"]["grids"]]
    domains = {config["adapt"]["domain"]} if adapted else set()  # E12's domain B
    for dataset in sorted({model.split("/")[0] for model in models} | domains):
        assert cli.main(["prepare", "--config", str(config_path), "--dataset", dataset]) == 0
    for model in models:
        for rule, step in STEPS.items():  # in the workflow's order; these models are trained
            if step.runs_on != "pretrained" and (step.runs_on != "adapted" or model in adapted):
                jobs.call(rule, arguments(rule, config, found[model]), jobs.execution(config))


@pytest.mark.timeout(600)
def test_same_config_elsewhere_gives_the_same_model_results_and_one_job_twice_the_same_rows(tiny_run: TinyRun) -> None:
    """The same config in another directory, every per-model job of one model of each family run again in
    one process after a different global random draw: the same weights, and every per-model table identical
    but for the timing columns. Then the growth job twice more, after other global draws: the same rows."""
    again = tiny_run.folder / "again"
    again.mkdir()
    results = [
        path.relative_to(tiny_run.folder)
        for model in RERUN_MODELS
        for path in sorted((tiny_run.folder / "results" / "tiny").glob(f"*/{model}.*"))
        if path.suffix in (".csv", ".parquet")
    ]
    e12 = len(STEPS["adapt_model"].tables)  # only the llama is an E12 base
    assert len(results) == len(RERUN_MODELS) * len(PER_MODEL_TABLES) - e12, results
    weights = [Path("results", "tiny", "models", model, "model.pt") for model in RERUN_MODELS]
    job = Path("results", "tiny", "growth", RERUN_MODELS[0] + ".csv")
    os.chdir(again)
    try:
        torch.manual_seed(3)
        torch.rand(3)
        run_jobs_here(tiny_run.config, RERUN_MODELS)
        for path in weights:
            first, second = (torch.load(d / path, weights_only=True)["state_dict"] for d in (tiny_run.folder, again))
            assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first), path
        for path in results:
            assert_same_frames(tiny_run.folder / path, again / path)
        for global_seed in (1, 2):
            (again / job).unlink()
            torch.manual_seed(global_seed)
            torch.rand(global_seed)
            growth = ["placement", "--config", str(tiny_run.config), "--model", RERUN_MODELS[0], "--device", "cpu"]
            assert cli.main(growth) == 0
            pd.testing.assert_frame_equal(
                pd.read_csv(again / job), pd.read_csv(tiny_run.folder / job), check_exact=True
            )
    finally:
        os.chdir(ROOT)


@pytest.mark.timeout(300)
def test_an_edit_of_the_plotting_code_reruns_only_plotting(tiny_run: TinyRun) -> None:
    plots_py = tiny_run.package / "scalemech" / "figures" / "common.py"
    plots_py.write_text(plots_py.read_text() + "\n# an edit of the plotting code\n")
    dry = snakemake(
        "-n",
        "--cores",
        "2",
        "--configfile",
        str(tiny_run.config),
        "--directory",
        str(tiny_run.folder),
        env=tiny_run.env,
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
        "placement_model",
        "collect_table",
        "training_table",
    ):
        assert heavy not in counts, counts


EXPERIMENT_RECIPE = '''"""E99 (docs/architecture.md's recipe): the norm of each model's weights."""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from ..core.tables import columns


def weightnorm(model: torch.nn.Module, data: Any, pools: None, keys: dict[str, Any], *, device: Any) -> pd.DataFrame:
    norm = torch.sqrt(sum((p.detach().double() ** 2).sum() for p in model.parameters()))
    return pd.DataFrame([{**keys, "weight_norm": float(norm)}]).reindex(columns=columns("weightnorm"))
'''
EXPERIMENT_STEP = """        Step(
            rule="weightnorm_model",
            command="weightnorm",
            planned_by="weightnorm",
            runs_on="all",
            inputs=("data", "model"),
            outputs=("weightnorm",),
            computes="weightnorm:weightnorm",
            help="the norm of one model's weights",
        ),
"""
FIGURE_RECIPE = '''"""F11 (docs/architecture.md's recipe): the weights' norm of each model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import common
from .common import DPI, _figure, _required

STEM = "F11_norms"
TABLES = ["weightnorm"]


def fig_norms(weightnorm: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    _required(weightnorm, "weightnorm", ["weight_norm"])
    fig, axes = _figure(1, 1)
    axes[0, 0].bar(weightnorm["model"], weightnorm["weight_norm"])
    common._save(fig, out, "Norm of each model's weights", [], dpi)


draw = fig_norms
'''
CLAIM_RECIPE = '''"""X1 (docs/architecture.md's recipe): every model's weights have a positive norm."""

from __future__ import annotations

from ..common import CONFIRMED, REFUTED, Claim, Result, Tables, table

READS = {"weightnorm": ["weight_norm"]}


def rule_x1(tables: Tables) -> Result:
    norm = table(tables, "weightnorm", READS["weightnorm"])["weight_norm"]
    return Result(CONFIRMED if (norm > 0).all() else REFUTED, f"smallest norm {norm.min():.3g}")


X1 = Claim("X1", "Every weight norm is positive.", "confirmed if the smallest is above 0", rule_x1, READS, figure=STEM)
'''.replace("figure=STEM", 'figure="F11_norms"')


@pytest.mark.timeout(600)
def test_the_architecture_recipes_add_an_experiment_a_figure_and_a_claim(tiny_run: TinyRun, tmp_path: Path) -> None:
    """docs/architecture.md's recipes for an experiment (its module, its ``Step``, its table's columns),
    a figure of its table and a claim on it, followed in a copy of the repository: the import contracts
    hold, the dry run plans the new rule for every model and nothing else that computes, and the tiny
    run's report shows the new claim beside the new figure."""
    repo = tmp_path / "repo"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    repo.mkdir()
    for name in ("Snakefile", "pyproject.toml", "environment.yml"):
        shutil.copy(ROOT / name, repo / name)
    for name in ("workflow", "config", "src"):
        shutil.copytree(ROOT / name, repo / name, ignore=skip)
    package = repo / "src" / "scalemech"
    (package / "experiments" / "weightnorm.py").write_text(EXPERIMENT_RECIPE)
    steps_py = package / "core" / "steps.py"
    end_of_steps = "        ),\n    )\n}\n"
    assert steps_py.read_text().count(end_of_steps) == 1
    steps_py.write_text(steps_py.read_text().replace(end_of_steps, "        ),\n" + EXPERIMENT_STEP + "    )\n}\n"))
    schema = package / "schemas" / "tables.schema.yaml"
    entry = "\ntables:\n  weightnorm:\n    columns: [weight_norm]\n"
    schema.write_text(schema.read_text().replace("\ntables:\n", entry, 1))
    (package / "figures" / "f11_norms.py").write_text(FIGURE_RECIPE)
    (repo / "workflow" / "report" / "F11_norms.rst").write_text("The norm of each model's weights.\n")
    (package / "report" / "rules" / "x1.py").write_text(CLAIM_RECIPE)
    env = {"PYTHONPATH": str(repo / "src")}

    lint = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports")], cwd=repo, capture_output=True, text=True,
        env={**os.environ, **env}, timeout=120,
    )  # fmt: skip
    assert lint.returncode == 0, lint.stdout[-3000:]
    where = ("--configfile", str(tiny_run.config), "--directory", str(tiny_run.folder))
    dry = snakemake("-n", "--cores", "2", *where, env=env, snakefile=repo / "Snakefile")
    assert dry.returncode == 0, dry.stderr[-3000:]
    counts = planned(dry.stdout)
    models = len(list((tiny_run.folder / "results" / "tiny" / "models").glob("*/*/model.pt")))
    assert counts.get("weightnorm_model") == models > 0 and counts.get("claims_report") == 1, counts
    assert not {"train_model", "measure_model", "misalign_model", "placement_model"} & set(counts), counts
    done = snakemake("--cores", "2", *where, env=env, snakefile=repo / "Snakefile", timeout=500)
    assert done.returncode == 0, done.stderr[-3000:]
    norms = pd.read_csv(tiny_run.folder / "results" / "tiny" / "tables" / "weightnorm.csv")
    assert len(norms) == models and (norms["weight_norm"] > 0).all()
    assert (tiny_run.folder / "figures" / "tiny" / "F11_norms.png").stat().st_size > 0
    report = (tiny_run.folder / "results" / "tiny" / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| [X1](#x1) |"))
    assert "(#f11_norms)" in row and "### F11_norms" in report  # the tiny models meet no training criterion
    judged = subprocess.run(
        [sys.executable, "-c", "import sys, pandas; from scalemech.report.rules.x1 import X1; "
         "print(X1.evaluate({'weightnorm': pandas.read_csv(sys.argv[1])}).verdict)", str(tiny_run.folder / "results" /
         "tiny" / "tables" / "weightnorm.csv")],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=120,
    )  # fmt: skip
    assert judged.stdout.strip() == "confirmed", judged.stderr[-3000:]
