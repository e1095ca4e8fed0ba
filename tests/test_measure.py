"""measure(): schema tables whose numbers match an independent computation from the gradients."""

import importlib
import math

import pandas as pd
import pytest
import torch

from scalemech import stats
from scalemech.config.schema import schema
from scalemech.core.seeding import derive_seed, model_identity
from scalemech.core.tables import check_columns
from scalemech.data import Prepared, normalize_images
from scalemech.experiments.measure import draw_pools, measure, select_points
from scalemech.gradients.batches import to_device
from scalemech.gradients.capture import activation_grads, block_grad_norms
from scalemech.gradients.pools import GradientPool, pool_path
from scalemech.models import build_model

KEYS = {"run": "t", "dataset": "synthetic", "family": "resnet", "depth": 8, "width": 0.25, "seed": 0, "model": "m"}
SETTINGS = {key: spec["default"] for key, spec in schema()["properties"]["measure"]["properties"].items()}


def _data():
    generator = torch.Generator().manual_seed(0)
    images = {
        split: torch.randint(0, 256, (n, 1, 8, 8), dtype=torch.uint8, generator=generator)
        for split, n in (("train", 30), ("test", 20))
    }
    labels = {split: (x.float().mean((1, 2, 3)) > 127.5).long() for split, x in images.items()}
    manifest = {"stats": {"mean": [0.5], "std": [0.29]}}
    return Prepared(
        "synthetic",
        "image",
        images["train"],
        labels["train"],
        images["test"],
        labels["test"],
        manifest,
        num_classes=2,
        in_channels=1,
        image_size=8,
    )


def _model():
    torch.manual_seed(0)
    return build_model({"family": "resnet", "depth": 8, "width": 0.25, "in_channels": 1, "num_classes": 2}).eval()


def test_select_points():
    names = _model().insertion_points()
    assert select_points(_model(), "all") == names
    assert select_points(_model(), 1) == [names[-1]]
    assert select_points(_model(), len(names)) == names
    deep = build_model({"family": "resnet", "depth": 56, "width": 0.25, "in_channels": 1, "num_classes": 2})
    all_names = deep.insertion_points()  # 27 points
    for n in (2, 4, 5, 26):
        picked = [all_names.index(p) for p in select_points(deep, n)]
        gaps = [b - a for a, b in zip([-1] + picked, picked)]
        assert len(picked) == n and picked[-1] == 26 and max(gaps) - min(gaps) <= 1  # even spacing
    assert select_points(_model(), [names[2], names[0]]) == [names[0], names[2]]
    with pytest.raises(KeyError, match="nope"):
        select_points(_model(), [names[0], "nope"])
    assert select_points(_model(), len(names) + 5) == names  # more than the model has: all of them
    with pytest.raises(ValueError, match="point count"):
        select_points(_model(), 0)


def test_measure_tables_match_brute_force(tmp_path):
    data, model = _data(), _model()
    points = select_points(model, 2)
    settings = {
        **SETTINGS,
        "points": 2,
        "train_pool": 24,
        "test_pool": 16,
        "batch_size": 10,
        "covmat_points": 1,
        "pool_dtype": "float32",
        "seed": 5,
    }
    tables = measure(model, data, KEYS, tmp_path, device="cpu", **settings)
    for name, frame in tables.items():
        check_columns(frame, name)
        assert (frame.model == "m").all()
    assert len(tables["dalign"]) == 2 * 2 * 2 and len(tables["signal"]) == 2 * 2 and len(tables["covariance"]) == 2
    channels = model.blocks[model.index(points[-1])].conv2.out_channels
    assert len(tables["covmats"]) == channels**2
    assert set(tables["covmats"].point) == {points[-1]}  # one covmat point: the last
    corr = stats.correlation(GradientPool(pool_path(tmp_path, "train", points[-1], "pooled")).rows())
    cell = tables["covmats"].query("row == 1 and col == 0").iloc[0]
    assert cell["corr"] == pytest.approx(corr[1, 0].item())

    pools = draw_pools(model, data, {"train": 24, "test": 16}, 5, model_identity(KEYS))
    prepare = to_device("cpu")
    x, y = pools["test"].x, pools["test"].y
    stored = GradientPool(pool_path(tmp_path, "test", points[0], "full")).meta
    assert stored["examples"] == pools["test"].index.tolist() and stored["model"] == "synthetic/m"
    raw_x, _ = data.pool("test", 16, derive_seed(5, "synthetic/m", "pool", "test"))
    assert torch.equal(x, normalize_images(raw_x, data.manifest))
    reference = activation_grads(model, *prepare(x, y), points)  # one batch: independent of the batching
    for point in points:
        stored = GradientPool(pool_path(tmp_path, "test", point, "full")).rows()
        torch.testing.assert_close(stored, reference[point]["full"].double(), rtol=1e-5, atol=1e-8)
        Q = reference[point]["full"].double()  # (n, D)
        n = len(Q)
        mu_sq = ((Q.sum(0) ** 2).sum() - (Q**2).sum()) / (n * (n - 1))  # avg_{i≠j} q_iᵀq_j
        row = tables["signal"].query("point == @point and split == 'test'").iloc[0]
        assert row.mu_sq == pytest.approx(mu_sq.item(), rel=1e-4)
        assert row.mu_norm == pytest.approx(math.sqrt(max(mu_sq.item(), 0)), rel=1e-4)
        assert row.block_grad_norm > 0
        alone = block_grad_norms(model, [point], x, y, 16, prepare, [derive_seed(5, "synthetic/m", point, "new_block")])
        assert row.block_grad_norm == pytest.approx(alone[0], rel=1e-6)
        expected = stats.stats_from_gram(Q @ Q.T, Q.shape[1])
        d_row = tables["dalign"].query("point == @point and split == 'test' and view == 'full'").iloc[0]
        assert d_row.mu_four == pytest.approx(expected.mu_four, rel=1e-4)
        assert d_row.d_align == pytest.approx(expected.d_align, rel=1e-4, nan_ok=True)  # the model as recalibrated
        assert d_row.dim == Q.shape[1] and d_row.n == n

    pooled = GradientPool(pool_path(tmp_path, "train", points[-1], "pooled")).rows()
    cov_row = tables["covariance"].query("point == @points[-1]").iloc[0]
    assert cov_row.offdiag_ratio == pytest.approx(stats.offdiag_ratio_unbiased(pooled))
    assert cov_row.offdiag_ratio_plugin == pytest.approx(stats.offdiag_ratio(pooled))
    assert tables["covariance"].low_rank.tolist() == [False, True]  # the last block before the head
    signal = tables["signal"]
    assert (signal.mu_sq_lo <= signal.mu_sq).all() and (signal.mu_sq <= signal.mu_sq_hi).all()
    assert cov_row.dim == pooled.shape[1]


def test_pools_kept_on_the_device_give_the_tables_of_pools_read_back(tmp_path, monkeypatch):
    """On a GPU the pools stay on the device for their statistics (``core.device.memory_for_pools``); with
    that budget granted on the CPU, every table equals the one computed from the files read back."""
    from scalemech.gradients import pools as pools_module

    measure_module = importlib.import_module("scalemech.experiments.measure")  # the package's is the function

    data, model = _data(), _model()
    settings = {**SETTINGS, "points": 2, "train_pool": 24, "test_pool": 16, "batch_size": 10, "covmat_points": 1,
                "pool_dtype": "float16", "seed": 5}  # fmt: skip
    read_back = measure(model, data, KEYS, tmp_path / "read", device="cpu", **settings)
    monkeypatch.setattr(measure_module, "memory_for_pools", lambda device: 2**40)
    sources, cross_grams = [], pools_module.cross_grams
    monkeypatch.setattr(pools_module, "cross_grams", lambda a, *rest: sources.append(type(a)) or cross_grams(a, *rest))
    kept = measure(model, data, KEYS, tmp_path / "kept", device="cpu", **settings)
    assert sources and set(sources) == {torch.Tensor}  # every Gram from the kept rows, none from a file
    for name, frame in read_back.items():
        pd.testing.assert_frame_equal(kept[name], frame, check_exact=True)


def test_the_certificate_from_measures_pools_is_certifys_own(tmp_path):
    """E11's final-snapshot certificate reads measure's pools instead of capturing them again: the
    same examples and seeds, so the same rows as ``certify_model`` capturing its own (float32 pools)."""
    from dataclasses import replace

    from scalemech.certify import Sampling, certify_model, stored_certificate

    data, model = _data(), _model()
    settings = {**SETTINGS, "points": 2, "train_pool": 16, "test_pool": 16, "batch_size": 8, "pool_dtype": "float32"}
    measure(model, data, KEYS, tmp_path / "measured", device="cpu", **settings)
    points = select_points(model, 2)
    sampling, cpu = Sampling(pool=16, M=4, K=4, batch_size=8, view="full", seed=settings["seed"]), torch.device("cpu")
    stored = stored_certificate(model, tmp_path / "measured", points, sampling, cpu)
    assert stored_certificate(model, tmp_path / "measured", points, replace(sampling, pool=8), cpu) is None
    captured = certify_model(model, data, model_identity(KEYS), points, tmp_path / "scratch", sampling, device=cpu)
    assert stored.attrs["pools"] == captured.attrs["pools"]  # the same examples
    numbers = [c for c in captured.columns if captured[c].dtype.kind == "f"]
    assert stored[numbers].to_numpy() == pytest.approx(captured[numbers].to_numpy(), rel=1e-6, abs=1e-12, nan_ok=True)
    assert stored["verdict"].tolist() == captured["verdict"].tolist() and stored["point"].tolist() == points
