"""pipeline.gpu_cost: FLOPs counted on the meta device against a count by hand, and the paper config's
GPU-hours as docs/cluster.md shows them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

from scalemech.config import load_config
from scalemech.models import build_model
from scalemech.pipeline.gpu_cost import (
    LAUNCH_FLOOR,
    PEAK_FLOPS,
    UTILIZATION,
    forward_flops,
    gpu_hours,
    pythia_parameters,
)
from scalemech.pipeline.readme import gpu_hours_blocks, page

ROOT = Path(__file__).resolve().parents[1]


def flops_by_hand(model: nn.Module, x: torch.Tensor) -> int:
    """2 · multiply-adds of every convolution and linear layer, read off their shapes during a real forward."""
    total = 0

    def count(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        nonlocal total
        if isinstance(module, nn.Conv2d):
            kernel = module.kernel_size[0] * module.kernel_size[1] * module.in_channels // module.groups
            total += 2 * kernel * output.numel()
        elif isinstance(module, nn.Linear):
            total += 2 * module.in_features * output.numel()

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model.eval()(x)
    for hook in hooks:
        hook.remove()
    return total


def test_resnet_flops_match_the_layers_shapes():
    spec = {"family": "resnet", "depth": 14, "width": 0.5, "norm": "batch", "placement": "branch", "in_channels": 3,
            "num_classes": 10}  # fmt: skip
    assert forward_flops(spec, (3, 32, 32), torch.float32) == flops_by_hand(
        build_model(spec), torch.zeros(1, 3, 32, 32)
    )


def test_llama_flops_are_the_weights_and_attention():
    """2 FLOPs per weight per token, plus the scores and their weighted sum, 2 · 2 · T² · d per layer."""
    spec = {"family": "llama", "depth": 2, "width": 64, "head_dim": 16, "block_size": 32, "vocab_size": 256}
    model, tokens = build_model(spec), 32
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    attention = spec["depth"] * 2 * 2 * tokens * tokens * spec["width"]
    assert forward_flops(spec, (tokens,), torch.long) == 2 * weights * tokens + attention


def test_pythia_parameters_from_names():
    assert pythia_parameters("pythia-2.8b") == pytest.approx(2.8e9)
    assert pythia_parameters("pythia-70m") == pytest.approx(7e7)
    with pytest.raises(ValueError, match="pythia-x"):
        pythia_parameters("pythia-x")


@pytest.mark.timeout(300)
def test_paper_config_hours_and_readme_block():
    config = load_config(ROOT / "config" / "paper.yaml")
    frame = gpu_hours(config)
    seconds = frame[["flops", "steps", "layers"]].apply(
        lambda r: max(r.flops / (UTILIZATION * PEAK_FLOPS), r.steps * r.layers * LAUNCH_FLOOR), axis=1
    )
    assert (frame["hours"] * 3600).to_numpy() == pytest.approx(seconds.to_numpy())
    assert set(frame["step"]) == {"train", "measure", "trajectory", "intervene", "growth"}
    assert frame["hours"].sum() <= 400  # the goal for the whole paper config
    blocks = gpu_hours_blocks(str(ROOT / "config" / "paper.yaml"))
    cluster, readme = ((ROOT / page(name)).read_text() for name in ("gpu-hours", "gpu-hours-total"))
    table = [row for row in blocks["gpu-hours"].splitlines() if row.startswith("|")]
    assert len(table) == 9 and all(row in cluster for row in table)  # make docs wrote it from this config
    total = blocks["gpu-hours-total"].splitlines()[1].split(": ", 1)[1]  # the README's line, its label aside
    assert total in readme


def test_snakemake_n_prints_the_gpu_hours_of_a_gpu_config_once_counted(tmp_path, monkeypatch):
    """``planned_line`` (what ``snakemake -n`` prints): None for a config that asks for no GPU; the paper
    config's line, counted once and then read from its cache until the config changes."""
    import scalemech.pipeline.gpu_cost as gpu_cost
    from scalemech.config import load_config

    assert gpu_cost.planned_line(load_config(ROOT / "config" / "config.yaml"), tmp_path) is None
    paper = load_config(ROOT / "config" / "paper.yaml")
    frame = pd.DataFrame({"grid": ["g"], "step": ["train"], "hours": [5.0]})
    calls = []
    monkeypatch.setattr(gpu_cost, "gpu_hours", lambda config: calls.append(1) or frame)
    first = gpu_cost.planned_line(paper, tmp_path)
    assert first.startswith("paper on GPUs: 5 H200-hours (train 5)")
    assert gpu_cost.planned_line(paper, tmp_path) == first and len(calls) == 1
    gpu_cost.planned_line({**paper, "seed_offset": 1}, tmp_path)
    assert len(calls) == 2  # another config: counted anew
