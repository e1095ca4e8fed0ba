"""docs/rules.md lists every rule's files as the workflow declares them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scalemech.pipeline.rulesdoc import Patterns

ROOT = Path(__file__).resolve().parents[1]


def test_rules_doc_is_rendered_from_the_workflow() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "scalemech.pipeline.rulesdoc", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"docs/rules.md is stale: run python -m scalemech.pipeline.rulesdoc\n{result.stderr}"


def test_patterns_name_the_run_datasets_and_models() -> None:
    grid = {"dataset": "mnist5k", "family": "resnet", "depths": [8], "widths": [0.5], "seeds": [0]}
    pattern = Patterns({"run": "quick", "grids": {"g": {**grid, "model": {}, "recipe": {}, "resources": {}}}})
    assert (
        pattern("benchmarks/quick/train/mnist5k/resnet-d8-w0.5-s0.tsv")
        == "`benchmarks/<run>/train/{dataset}/{model}.tsv`"
    )
    assert pattern("results/quick/data/{dataset,mnist5k|cifar10}") == "`results/<run>/data/{dataset}`"
    assert pattern("logs/quick/data/mnist5k.log") == "`logs/<run>/data/{dataset}.log`"
