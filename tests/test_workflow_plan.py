"""The Snakemake workflow planned as users plan it: dry runs of the shipped configs, and a bad
config refused before planning."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from jobstats import planned
from snakemake_run import ROOT, snakemake

from scalemech.figures import FIGURE_TABLES

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize(
    "config, expected",
    [
        (
            "config/config.yaml",
            {
                "prepare_data": 2,
                "train_model": 24,
                "measure_model": 24,
                "trajectory_model": 24,
                "early_model": 24,
                "placement_model": 18,
                "figure": len(FIGURE_TABLES) - 1,  # every figure but E12's F11 (adapt.grids is empty there)
            },
        ),
        (  # training and E10 only: no measure, misalign, intervene, growth or cost job, no figure of theirs
            "config/paper-widths.yaml",
            {"prepare_data": 1, "train_model": 12, "trajectory_model": 12, "powerlaw_table": 1, "figure": 3}
            | dict.fromkeys(
                ["measure_model", "misalign_model", "intervene_model", "early_model", "placement_model", "cost_table"]
            ),
        ),
        ("config/quick-cifar10.yaml", {"prepare_data": 2, "train_model": 12}),
        (  # E12 only: four bases, one adapt job each; F11, and F3 of the training table every run has
            "config/growth.yaml",
            {"prepare_data": 2, "train_model": 4, "adapt_model": 4, "figure": 2}
            | dict.fromkeys(["measure_model", "placement_model", "trajectory_model", "cost_table"]),
        ),
        (
            "config/paper.yaml",
            {"prepare_data": 5, "train_model": 85, "pin_pretrained": 5, "measure_model": 90, "placement_model": 79},
        ),
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
        assert "estimated run time:" in result.stderr and "164 of 164 computing jobs recorded" in result.stderr
    if config == "config/paper.yaml":
        assert "estimated run time: cannot estimate, none of the 614 computing jobs has a record" in result.stderr
        assert "paper on GPUs: " in result.stderr and " H200-hours (train " in result.stderr  # pipeline.gpu_cost
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
