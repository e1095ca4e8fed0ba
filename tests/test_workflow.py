"""The Snakemake workflow as users run it: a tiny end-to-end run that makes every figure and the
report, the same per-model results from a second run elsewhere, and an edit of plotting that reruns only plotting.

The tests that read the tiny run share one module fixture, so they run in this file's order on
one pytest-xdist worker (``make test``: ``--dist loadfile``); the last one edits the package copy."""

from __future__ import annotations

import json
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
from layout import assert_laid_out, drawn
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
        "placements": ["best", "pareto", "every:1", "adept", "bi", "top", "layer.0"],  # layer.0: best's run again
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


@pytest.mark.timeout(600)
def test_every_figure_has_data_in_every_panel_legends_off_its_points_and_its_verdicts(
    tiny_run: TinyRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every figure drawn from the tiny run's tables: no panel (an axes shown, not a colour bar) without
    data, no legend box over a point its panel plots, and the figure states each of its claims' verdict and
    deciding number as the run's verdict table gives them (``layout.assert_laid_out``)."""
    figures = drawn(monkeypatch)
    tables = tiny_run.folder / "results" / "tiny" / "tables"
    verdicts = pd.read_csv(tables / "verdicts.csv", dtype=str, keep_default_na=False)
    for stem in scalemech.figures.FIGURES:
        scalemech.figures.make_figure(stem, tables, tmp_path)
    assert set(figures) == set(scalemech.figures.FIGURES)
    for stem, fig in figures.items():
        assert_laid_out(stem, fig, verdicts)


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


SKIPPED = shutil.ignore_patterns("__pycache__", "*.egg-info")


def repository_copy(tmp_path: Path) -> Path:
    """What a workflow run reads of the repository (Snakefile, workflow, config, src, ...) copied to
    ``tmp_path/repo``, for a recipe to be followed there."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("Snakefile", "pyproject.toml", "environment.yml"):
        shutil.copy(ROOT / name, repo / name)
    for name in ("workflow", "config", "src"):
        shutil.copytree(ROOT / name, repo / name, ignore=SKIPPED)
    return repo


def assert_import_contracts(repo: Path) -> None:
    """The import contracts of ``pyproject.toml`` hold in ``repo``."""
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports")], cwd=repo, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(repo / "src")}, timeout=120,
    )  # fmt: skip
    assert lint.returncode == 0, lint.stdout[-3000:]


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
FIGURE_RECIPE = '''"""F12 (docs/architecture.md's recipe): the weights' norm of each model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import common
from .common import DPI, _figure, _required

STEM = "F12_norms"
TABLES = ["weightnorm", "verdicts"]


def fig_norms(weightnorm: pd.DataFrame, verdicts: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    _required(weightnorm, "weightnorm", ["weight_norm"])
    fig, axes = _figure(1, 1)
    axes[0, 0].bar(weightnorm["model"], weightnorm["weight_norm"])
    common._save(fig, out, "Norm of each model's weights", [], dpi, verdicts)


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
'''.replace("figure=STEM", 'figure="F12_norms"')


@pytest.mark.timeout(600)
def test_the_architecture_recipes_add_an_experiment_a_figure_and_a_claim(tiny_run: TinyRun, tmp_path: Path) -> None:
    """docs/architecture.md's recipes for an experiment (its module, its ``Step``, its table's columns),
    a figure of its table and a claim on it, followed in a copy of the repository: the import contracts
    hold, the dry run plans the new rule for every model and nothing else that computes, and the tiny
    run's report shows the new claim beside the new figure."""
    repo = repository_copy(tmp_path)
    package = repo / "src" / "scalemech"
    (package / "experiments" / "weightnorm.py").write_text(EXPERIMENT_RECIPE)
    steps_py = package / "core" / "steps.py"
    end_of_steps = "        ),\n    )\n}\n"
    assert steps_py.read_text().count(end_of_steps) == 1
    steps_py.write_text(steps_py.read_text().replace(end_of_steps, "        ),\n" + EXPERIMENT_STEP + "    )\n}\n"))
    schema = package / "schemas" / "tables.schema.yaml"
    entry = "\ntables:\n  weightnorm:\n    columns: [weight_norm]\n"
    schema.write_text(schema.read_text().replace("\ntables:\n", entry, 1))
    (package / "figures" / "f12_norms.py").write_text(FIGURE_RECIPE)
    (repo / "workflow" / "report" / "F12_norms.rst").write_text("The norm of each model's weights.\n")
    (package / "report" / "rules" / "x1.py").write_text(CLAIM_RECIPE)
    env = {"PYTHONPATH": str(repo / "src")}

    assert_import_contracts(repo)
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
    assert (tiny_run.folder / "figures" / "tiny" / "F12_norms.png").stat().st_size > 0
    report = (tiny_run.folder / "results" / "tiny" / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| [X1](#x1) |"))
    assert "(#f12_norms)" in row and "### F12_norms" in report  # the tiny models meet no training criterion
    judged = subprocess.run(
        [sys.executable, "-c", "import sys, pandas; from scalemech.report.rules.x1 import X1; "
         "print(X1.evaluate({'weightnorm': pandas.read_csv(sys.argv[1])}).verdict)", str(tiny_run.folder / "results" /
         "tiny" / "tables" / "weightnorm.csv")],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=120,
    )  # fmt: skip
    assert judged.stdout.strip() == "confirmed", judged.stderr[-3000:]


DATASET_RECIPE = '''"""stripes (docs/architecture.md's recipe): synthetic 8 x 8 images of a horizontal or a vertical bar
(two classes) on dark noise, drawn from ``split_seed``. Config keys: ``split_seed`` (default 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .images import array_source, write_image_dataset

KIND = "image"
CONFIG_KEYS = ("split_seed",)


def prepare(source: str, cfg: dict, directory: Path, offline: bool) -> dict:
    seed = int(cfg.get("split_seed", 0))
    rng = np.random.default_rng(seed)
    x, y = {}, {}
    for split, n in (("train", 256), ("test", 128)):
        y[split], at = rng.integers(0, 2, n), rng.integers(0, 8, n)
        x[split] = rng.integers(0, 64, (n, 8, 8), dtype=np.uint8)
        rows, columns = np.flatnonzero(y[split] == 0), np.flatnonzero(y[split] == 1)
        x[split][rows, at[rows], :] = 255
        x[split][columns, :, at[columns]] = 255
        x[split] = x[split][:, None]  # (N, 1, 8, 8)
    images = array_source(x, y, ["horizontal", "vertical"], {"type": source})
    return write_image_dataset(directory, images, None, seed)
'''
FAMILY_CONFIG_RECIPE = '''"""The residual MLP's config (docs/architecture.md's recipe): depth blocks, width features."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class MLPConfig:
    depth: int = 2
    width: int = 32
    in_channels: int = 1  # the input geometry: from the data's manifest (models.fit_geometry)
    image_size: int = 28
    num_classes: int = 10

    def __post_init__(self) -> None:
        for key in ("depth", "width", "in_channels", "image_size", "num_classes"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ValueError(f"mlp {key} must be an integer >= 1, got {getattr(self, key)!r}")


def point_names(depth: int) -> tuple[str, ...]:
    MLPConfig(depth=depth)
    return tuple(f"block{i}" for i in range(depth))
'''
FAMILY_RECIPE = '''"""A residual MLP on flattened images (docs/architecture.md's recipe): ``z + W₂ relu(W₁ LN(z))``."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from .base import ResidualModel
from .configs.mlp import MLPConfig


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

    def forward(self, z: Tensor) -> Tensor:
        return z + self.down(F.relu(self.up(self.norm(z))))


class MLP(ResidualModel):
    family = "mlp"
    last_point_low_rank = True  # the head is a linear classifier on the stream

    def __init__(self, config: MLPConfig):
        stem = nn.Sequential(nn.Flatten(), nn.Linear(config.in_channels * config.image_size**2, config.width))
        names = [f"block{i}" for i in range(config.depth)]
        super().__init__(stem, [Block(config.width) for _ in names], names, nn.Linear(config.width, config.num_classes))
        self.spec = {"family": self.family, **asdict(config)}

    def new_block(self, point: str) -> nn.Module:
        block = Block(self.spec["width"])
        nn.init.zeros_(block.down.weight)
        nn.init.zeros_(block.down.bias)
        return block.to(next(self.parameters()))

    def first_order_parameters(self, block: nn.Module) -> list[nn.Parameter]:
        return [block.down.weight, block.down.bias]  # while W₂ = 0 no other weight moves the stream


def build(spec: dict[str, Any]) -> MLP:
    return MLP(MLPConfig(**{k: v for k, v in spec.items() if k != "family"}))
'''
RECIPE_NAMES = {"<source>": "stripes", "<family>": "mlp"}


def recipe_files(recipe: str) -> set[str]:
    """The files docs/architecture.md says ``recipe`` (``A data set``, ``A model family``) touches: the paths
    of the ``Files:`` line of its entry under "Where new pieces plug in", with this test's names."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    entry = text[text.index(f"- **{recipe}**") :]
    line = entry[entry.index("Files: ") : entry.index(".\n", entry.index("Files: "))]
    paths = {part.strip(" `") for part in line.removeprefix("Files: ").split(",")}
    for placeholder, name in RECIPE_NAMES.items():
        paths = {path.replace(placeholder, name) for path in paths}
    return paths


def changed_files(repo: Path) -> set[str]:
    """The files of ``repo``'s ``src`` that differ from, or are not in, the repository's."""
    changed = set()
    for path in (repo / "src").rglob("*.py"):
        original = ROOT / path.relative_to(repo)
        if not original.is_file() or original.read_bytes() != path.read_bytes():
            changed.add(path.relative_to(repo).as_posix())
    return changed


def registered(path: Path, anchor: str, line: str) -> None:
    """Add ``line`` to the file at ``path`` right after the one ``anchor`` line (a registry's entry)."""
    text = path.read_text()
    assert text.count(anchor) == 1, anchor
    path.write_text(text.replace(anchor, anchor + line))


@pytest.mark.timeout(600)
def test_the_architecture_recipes_add_a_data_set_and_a_family(tiny_run: TinyRun, tmp_path: Path) -> None:
    """docs/architecture.md's recipes for a data set (its module and its line in ``SOURCES``) and a model
    family (its config module, its model module and its ``Family``), followed in a copy of the repository:
    they touch exactly the files the document names, the import contracts hold, the dry run trains the new
    model only, and the tiny run, with a grid of the new family on the new data set under a name of its own
    (training and E2-E5, whose signal reads the family's first-order parameters), reaches a report that
    names both."""
    repo = repository_copy(tmp_path)
    package = repo / "src" / "scalemech"
    (package / "data" / "stripes.py").write_text(DATASET_RECIPE)
    registered(package / "data" / "__init__.py", "from . import ", "stripes, ")
    registered(package / "data" / "__init__.py", "SOURCES: dict[str, ModuleType] = {\n", '    "stripes": stripes,\n')
    (package / "models" / "configs" / "mlp.py").write_text(FAMILY_CONFIG_RECIPE)
    (package / "models" / "mlp.py").write_text(FAMILY_RECIPE)
    family = '        Family("mlp", "image", "MLPConfig"),\n'
    registered(package / "models" / "__init__.py", "    for family in (\n", family)
    assert changed_files(repo) == recipe_files("A data set") | recipe_files("A model family")
    assert_import_contracts(repo)

    config = {**TINY, "datasets": {**TINY["datasets"], "bars": {"source": "stripes"}}, "experiments": ["measure"]}
    recipe = {"optimizer": "sgd", "lr": 0.1, "batch_size": 32, "steps": 6, "eval_examples": 64}
    grid = {"dataset": "bars", "family": "mlp", "depths": [2], "widths": [16], "recipe": recipe}
    config["grids"] = {**TINY["grids"], "mlp": grid}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    env, where = {"PYTHONPATH": str(repo / "src")}, ("--configfile", str(path), "--directory", str(tiny_run.folder))
    dry = snakemake("-n", "--cores", "2", *where, env=env, snakefile=repo / "Snakefile")
    assert dry.returncode == 0, dry.stderr[-3000:]
    counts = planned(dry.stdout)
    assert counts.get("prepare_data") == counts.get("train_model") == 1, counts  # the new model only
    done = snakemake("--cores", "2", *where, env=env, snakefile=repo / "Snakefile", timeout=500)
    assert done.returncode == 0, done.stderr[-3000:]
    report = (tiny_run.folder / "results" / "tiny" / "report.md").read_text()
    assert "| bars/mlp-d2-w16-s0 |" in report  # the trained models' table: the new data set and family
    manifest = json.loads((tiny_run.folder / "results" / "tiny" / "data" / "bars" / "manifest.json").read_text())
    model = tiny_run.folder / "results" / "tiny" / "models" / "bars" / "mlp-d2-w16-s0" / "model.pt"
    spec = torch.load(model, weights_only=True)["spec"]
    assert spec["image_size"] == manifest["image_size"] == 8 and spec["in_channels"] == 1  # from the data
