"""Residual-parameter intervention: observed/predicted -> 1 as η -> 0, and ≈ 1 on a trained model."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from scalemech.core.tables import check_columns
from scalemech.experiments.intervene import intervene_at
from scalemech.gradients.batches import to_device
from scalemech.gradients.capture import capture_pools
from scalemech.gradients.views import VIEWS
from scalemech.models import build_model
from scalemech.models.base import ResidualModel
from scalemech.tasks import Examples

KEYS = {"run": "t", "dataset": "d", "family": "f", "depth": 1, "width": 1.0, "seed": 0, "model": "m"}


class LinearTop(ResidualModel):
    """Tokens (B, T, 3) -> stream (B, T, 4) -> two linear residual blocks -> (B, 2); squared loss."""

    family = "linear"

    def __init__(self):
        blocks = [nn.Sequential(nn.Tanh(), nn.Linear(4, 4)), nn.Linear(4, 4)]
        super().__init__(nn.Linear(3, 4), blocks, ["b0", "b1"], nn.Sequential(nn.Flatten(), nn.Linear(20, 2)))

    def per_example_loss(self, output, target):
        return ((output - target) ** 2).sum(1)


def _capture(model, x, y, point, root, dtype):
    for split, (xs, ys) in (("train", (x[:40], y[:40])), ("test", (x[40:], y[40:]))):
        capture_pools(
            model, Examples(split, xs, ys, torch.arange(len(xs)), 0), [point], root, 16, to_device("cpu"), dtype
        )


def test_ratio_tends_to_one_for_linear_top_and_squared_loss(tmp_path):
    torch.manual_seed(0)
    model = LinearTop().double()
    x, y = torch.randn(70, 5, 3, dtype=torch.float64), torch.randn(70, 2, dtype=torch.float64)
    _capture(model, x, y, "b0", tmp_path, "float32")
    pools = {"train": (x[:40], y[:40]), "test": (x[40:], y[40:]), "heldout": (x[40:], y[40:])}
    tables = intervene_at(
        model, "b0", VIEWS, pools, tmp_path, 16, to_device("cpu"), KEYS, step_fractions=(1e-1, 1e-2, 1e-3)
    )
    check_columns(tables, "intervention")
    assert tables.view.tolist() == [view for view in VIEWS for _ in range(3)]
    for _, table in tables.groupby("view"):
        errors = (table.ratio - 1).abs().tolist()
        # L(δ) is quadratic in δ: ratio − 1 is proportional to η, so each 10x smaller η cuts it ~10x
        assert errors[0] > errors[1] > errors[2]
        assert errors[1] / errors[0] == pytest.approx(0.1, rel=0.05)
        assert errors[2] / errors[1] == pytest.approx(0.1, rel=0.05)
        assert table.sign_agree.all() and (table.predicted < 0).all()


def test_ratio_near_one_on_briefly_trained_model(tmp_path):
    torch.manual_seed(1)
    model = build_model({"family": "resnet", "depth": 8, "width": 0.25, "in_channels": 1, "num_classes": 3})
    x = torch.randn(96, 1, 8, 8)
    y = (x[:, 0, :4].mean((1, 2)) > 0).long() + (x[:, 0, 4:].mean((1, 2)) > 0).long()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model.train()
    for step in range(30):
        batch = slice(step % 3 * 32, step % 3 * 32 + 32)
        loss = F.cross_entropy(model(x[batch]), y[batch])
        optimizer.zero_grad(), loss.backward(), optimizer.step()
    point = model.insertion_points()[1]
    x_pool, y_pool = torch.randn(100, 1, 8, 8), torch.randint(0, 3, (100,))
    x_pool[:, 0, :4] += 0.3  # a shifted test distribution: a clear nonzero first-order change
    _capture(model, x_pool[:70], y_pool[:70], point, tmp_path, "float16")
    pools = {
        "train": (x_pool[:40], y_pool[:40]),
        "test": (x_pool[40:70], y_pool[40:70]),
        "heldout": (x_pool[70:], y_pool[70:]),  # test pool B, disjoint from A
    }
    tables = intervene_at(model, point, VIEWS, pools, tmp_path, 16, to_device("cpu"), KEYS, step_fractions=(1e-2, 1e-3))
    check_columns(tables, "intervention")
    for _, table in tables.groupby("view"):
        assert 0.9 <= table.ratio.iloc[-1] <= 1.1, table  # same pool: first order holds
        assert table.sign_agree.all()
        assert (table.observed_heldout != table.observed).all()  # B is another sample than A
