"""BatchNorm running statistics recomputed before a measurement (scalemech.gradients.norms)."""

from __future__ import annotations

import pytest
import torch
from test_train import LLAMA, RESNET

from scalemech.data import load_prepared, prepare_dataset
from scalemech.gradients.norms import has_batch_norm, recalibrate_batch_norm
from scalemech.models import build_model


@pytest.fixture(scope="module")
def mnist(tmp_path_factory):
    out = tmp_path_factory.mktemp("norms")
    prepare_dataset("mnist5k", {}, out / "data")
    return load_prepared(out / "data")


def buffers(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: b.clone() for name, b in model.named_buffers()}


def test_recalibration_is_deterministic_and_keeps_the_mode(mnist):
    """Same model and identity: the same running statistics, bit for bit; another identity draws other examples."""
    torch.manual_seed(0)
    model = build_model(RESNET).eval()
    fresh = buffers(model)
    assert recalibrate_batch_norm(model, model.task(mnist), "mnist5k/m", "cpu")
    first = buffers(model)
    assert not model.training
    assert not torch.equal(first["stem.1.running_mean"], fresh["stem.1.running_mean"])
    recalibrate_batch_norm(model, model.task(mnist), "mnist5k/m", "cpu")
    assert all(torch.equal(first[k], b) for k, b in buffers(model).items())
    recalibrate_batch_norm(model, model.task(mnist), "mnist5k/other", "cpu")
    assert not torch.equal(first["stem.1.running_mean"], buffers(model)["stem.1.running_mean"])


def test_models_without_batch_norm_are_untouched():
    torch.manual_seed(0)
    model = build_model(LLAMA)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert not has_batch_norm(model)
    assert not recalibrate_batch_norm(model, None, "any", "cpu")  # nothing read: no task needed
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
