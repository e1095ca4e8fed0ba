"""One-pass activation-gradient capture against batch-size-1 autograd; pools; block gradients."""

import json

import numpy as np
import pytest
import torch
from torch import nn

from scalemech.data import DataError
from scalemech.gradients.batches import to_device
from scalemech.gradients.capture import activation_grads, block_grad_norms, capture_pools
from scalemech.gradients.pools import GradientPool, PoolError, to_half
from scalemech.gradients.signal import block_grad
from scalemech.gradients.views import broadcast_shift
from scalemech.models import build_model
from scalemech.models.base import ResidualModel
from scalemech.stats import cross_grams
from scalemech.tasks import Examples


def labelled(x: torch.Tensor, y: torch.Tensor, split: str = "train") -> Examples:
    """``(x, y)`` as the ``Examples`` of ``split`` that ``capture_pools`` records (index 0..n-1)."""
    return Examples(split, x, y, torch.arange(len(x)), 0)


class MLPBlock(nn.Module):
    """``z + W2 relu(W1 LayerNorm(z))``; ``W2 = 0`` when ``zero``."""

    def __init__(self, d: int, zero: bool = False):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        if zero:
            nn.init.zeros_(self.down.weight), nn.init.zeros_(self.down.bias)

    def forward(self, z):
        return z + self.down(torch.relu(self.up(self.norm(z))))


class ToyNet(ResidualModel):
    """Vectors (B, 5) -> stream (B, 6) -> 3 residual MLP blocks -> 4 class logits."""

    family = "toy"

    def __init__(self):
        super().__init__(nn.Linear(5, 6), [MLPBlock(6) for _ in range(3)], ["b0", "b1", "b2"], nn.Linear(6, 4))

    def new_block(self, point):
        return MLPBlock(6, zero=True)


def _models():
    torch.manual_seed(0)
    resnet = build_model({"family": "resnet", "depth": 8, "width": 0.25, "in_channels": 1, "num_classes": 10})
    resnet.train()
    with torch.no_grad():  # non-trivial BatchNorm running statistics
        for _ in range(3):
            resnet(torch.randn(8, 1, 8, 8) * 2 + 0.5)
    llama = build_model({"family": "llama", "width": 16, "depth": 2, "head_dim": 8, "block_size": 6, "vocab_size": 11})
    return {
        "toy": (ToyNet(), torch.randn(7, 5), torch.randint(0, 4, (7,))),
        "resnet": (resnet, torch.randn(7, 1, 8, 8), torch.randint(0, 10, (7,))),
        "llama": (llama, torch.randint(0, 11, (7, 6)), torch.randint(0, 11, (7, 6))),
    }


MODELS = _models()


def _single_example_grads(model, x, y, point):
    """q of each example from its own forward/backward (batch size 1): the brute-force reference."""
    rows = []
    for i in range(len(x)):
        _, streams = model.forward_streams(x[i : i + 1], [point])
        z = streams[point]
        loss = model.per_example_loss(model.split(point)[1](z), y[i : i + 1]).sum()
        rows.append(torch.autograd.grad(loss, z)[0].reshape(1, -1))
    return torch.cat(rows)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_one_pass_matches_batch_size_one_autograd(name):
    model, x, y = MODELS[name]
    model.eval()
    points = model.insertion_points()
    grads = activation_grads(model, x, y, points)
    for point in points:
        reference = _single_example_grads(model, x, y, point)
        assert reference.abs().max() > 0
        torch.testing.assert_close(grads[point]["full"], reference, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_frozen_parameters_and_batch_size_independence(name, tmp_path):
    model, x, y = MODELS[name]
    points = model.insertion_points()
    in_batches = capture_pools(model, labelled(x, y), points, tmp_path / "a", 3, to_device("cpu"), "float32")
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        whole = capture_pools(model, labelled(x, y), points, tmp_path / "b", len(x), to_device("cpu"), "float32")
    finally:
        for p in model.parameters():
            p.requires_grad_(True)
    for key, pool in in_batches.items():
        torch.testing.assert_close(pool.rows(), whole[key].rows(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_pooled_view_is_sum_of_full_view(name, tmp_path):
    model, x, y = MODELS[name]
    pools = capture_pools(
        model, labelled(x, y, "test"), model.insertion_points(), tmp_path, 4, to_device("cpu"), "float32"
    )
    for point in model.insertion_points():
        full, pooled = pools[point, "full"], pools[point, "pooled"]
        shape = full.meta["stream_shape"]
        spatial = tuple(range(2, len(shape) + 1)) if len(shape) >= 3 else tuple(range(1, len(shape)))
        summed = full.rows().reshape(len(x), *shape).sum(spatial) if spatial else full.rows()  # (n, C)
        torch.testing.assert_close(pooled.rows(), summed, rtol=1e-5, atol=1e-7)
        assert pooled.dim == shape[0 if len(shape) >= 3 else -1]


def test_broadcast_shift_gradient_is_pooled_view():
    stream = torch.randn(2, 3, 4, 5)
    weights = torch.randn(2, 3, 4, 5)
    delta = torch.zeros(3, requires_grad=True)
    loss = ((stream + broadcast_shift(delta, "pooled", stream.shape[1:])) * weights).sum()
    torch.testing.assert_close(torch.autograd.grad(loss, delta)[0], weights.sum((0, 2, 3)))
    token_delta = torch.zeros(5, requires_grad=True)
    tokens = torch.randn(2, 4, 5)
    loss = ((tokens + broadcast_shift(token_delta, "pooled", tokens.shape[1:])) * tokens).sum()
    torch.testing.assert_close(torch.autograd.grad(loss, token_delta)[0], tokens.sum((0, 1)))


@pytest.mark.parametrize("dtype,rtol", [("float16", 2e-3), ("float32", 1e-6)])
def test_pool_roundtrip_mean_and_gram(tmp_path, dtype, rtol):
    torch.manual_seed(1)
    a = torch.randn(9, 13, dtype=torch.float64) * torch.logspace(-9, 2, 9, dtype=torch.float64)[:, None]
    b = torch.randn(5, 13, dtype=torch.float64) * 1e-7
    pools = []
    for name, rows in (("a", a), ("b", b)):
        writer = GradientPool.create(tmp_path / name, len(rows), 13, dtype, point_index=0)
        writer.write(rows[:4]), writer.write(rows[4:])
        pools.append(writer.finish())
    pa, pb = pools
    torch.testing.assert_close(pa.rows(), a, rtol=rtol, atol=0)
    stored_a, stored_b = pa.rows(), pb.rows()
    torch.testing.assert_close(pa.gram(chunk_cols=4), stored_a @ stored_a.T, rtol=1e-10, atol=0)
    torch.testing.assert_close(pa.gram(pb, chunk_cols=5), stored_a @ stored_b.T, rtol=1e-10, atol=0)
    torch.testing.assert_close(pa.mean(chunk_rows=2), stored_a.mean(0), rtol=1e-12, atol=0)
    assert np.load(tmp_path / "a.npy").dtype == np.dtype(dtype)
    with pytest.raises(ValueError, match="float16"):
        GradientPool.create(tmp_path / "c", 2, 2, "bfloat16")


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_pools_kept_on_the_device_give_the_same_files_and_statistics_without_reading_them(
    name, dtype, tmp_path, monkeypatch
):
    """``keep_bytes`` large enough: every pool stays where its rows were computed, its file holds the bytes
    the per-batch path writes, and its rows, mean and Grams (with itself and across pools) equal the file's
    bit for bit while no file is read for them; one byte short of the pools' size, nothing is kept."""
    from scalemech.gradients import pools as pools_module

    model, x, y = MODELS[name]
    points = model.insertion_points()

    def capture(where, keep_bytes):
        return capture_pools(model, labelled(x, y), points, tmp_path / where, 3, to_device("cpu"), dtype,
                             keep_bytes=keep_bytes)  # fmt: skip

    on_disk = capture("disk", 0)
    size = sum(pool.n * pool.dim * np.dtype(dtype).itemsize for pool in on_disk.values())
    assert all(pool.kept is None for pool in capture("short", size - 1).values())
    kept = capture("kept", size)
    for key, pool in kept.items():
        assert pool.kept is not None and pool.meta["files"] == on_disk[key].meta["files"]  # sizes and sha256
    read = []
    monkeypatch.setattr(pools_module, "cross_grams", lambda a, others, *rest: read.append(
        any(isinstance(t, np.ndarray) for t in (a, *others))) or cross_grams(a, others, *rest))  # fmt: skip
    first, other = (points[0], "full"), (points[-1], "full")
    for key in (first, other, (points[0], "pooled")):
        torch.testing.assert_close(kept[key].rows(), on_disk[key].rows(), rtol=0, atol=0)
        torch.testing.assert_close(kept[key].mean(chunk_rows=2), on_disk[key].mean(chunk_rows=2), rtol=0, atol=0)
        torch.testing.assert_close(kept[key].gram(chunk_cols=4), on_disk[key].gram(chunk_cols=4), rtol=0, atol=0)
    if kept[first].dim == kept[other].dim:
        torch.testing.assert_close(kept[first].gram(kept[other]), on_disk[first].gram(on_disk[other]), rtol=0, atol=0)
    assert read and not any(read[0::2]) and all(read[1::2])  # the kept pools' Grams read no file, the others do


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_single_precision_rows_are_stored_as_float64_division_would_store_them(tmp_path, dtype):
    """Rows of a float32 (or bf16, fp16) model: the stored quotients and scales are bit for bit those
    of dividing in float64 and rounding once to the pool's dtype (these rows hold float32 quotients
    that a float16 pool would round the other way)."""
    torch.manual_seed(0)
    rows = (torch.randn(64, 4096, dtype=torch.float64) * torch.logspace(-12, 0, 4096, dtype=torch.float64)).float()
    rows[:, :4] *= 1e-20
    rows[5] = 0.0
    writer = GradientPool.create(tmp_path / "p", 64, 4096, dtype, point_index=0)
    writer.write(rows[:40]), writer.write(rows[40:])
    pool = writer.finish()
    wide = rows.double()
    scale = wide.abs().amax(dim=1)
    scale = torch.where(scale > 0, scale, 1.0)
    expected = (wide / scale[:, None]).numpy().astype(dtype)
    np.testing.assert_array_equal(
        np.asarray(pool.scaled).view(np.uint16 if dtype == "float16" else np.uint32),
        expected.view(np.uint16 if dtype == "float16" else np.uint32),
    )
    np.testing.assert_array_equal(pool.scale, scale.numpy())


def test_scratch_pool_has_no_checksum_and_refuses_verification(tmp_path):
    writer = GradientPool.create(tmp_path / "p", 4, 3, "float32", checksum=False, point_index=0)
    writer.write(torch.ones(4, 3))
    writer.finish()
    assert GradientPool(tmp_path / "p", verify=False).meta["files"]["p.npy"]["sha256"] is None
    with pytest.raises(PoolError, match="written without a checksum"):
        GradientPool(tmp_path / "p")


def _stored_pool(path, rows):
    writer = GradientPool.create(path, len(rows), rows.shape[1], "float16", point_index=0)
    writer.write(rows)
    return writer.finish()


def test_pool_files_are_checked_on_open(tmp_path):
    torch.manual_seed(2)
    rows = torch.randn(64, 128, dtype=torch.float64)
    written = _stored_pool(tmp_path / "p", rows).rows()
    records = GradientPool(tmp_path / "p").meta["files"]
    assert set(records) == {"p.npy", "p.scale.npy"}
    assert records["p.npy"]["shape"] == [64, 128] and records["p.npy"]["dtype"] == "float16"
    torch.testing.assert_close(GradientPool(tmp_path / "p").rows(), written, rtol=0, atol=0)

    npy, scale = tmp_path / "p.npy", tmp_path / "p.scale.npy"
    intact = npy.read_bytes()
    middle = len(intact) // 2
    npy.write_bytes(intact[:middle] + bytes(b ^ 0xFF for b in intact[middle : middle + 4096]) + intact[middle + 4096 :])
    with pytest.raises(PoolError, match=r"p\.npy: sha256 differs.*re-run the measurement"):
        GradientPool(tmp_path / "p")
    GradientPool(tmp_path / "p", verify=False)  # the size and header still match
    npy.write_bytes(intact[:-100])
    with pytest.raises(PoolError, match=r"p\.npy: \d+ bytes, p\.json says \d+"):
        GradientPool(tmp_path / "p", verify=False)
    npy.write_bytes(intact)

    np.save(scale, np.zeros(64))
    with pytest.raises(PoolError, match=r"p\.scale\.npy: sha256 differs"):
        GradientPool(tmp_path / "p")
    np.save(scale, np.ones(32))
    with pytest.raises(PoolError, match=r"p\.scale\.npy: .*bytes"):
        GradientPool(tmp_path / "p")
    assert issubclass(PoolError, DataError)


def test_pool_without_checksums_is_refused(tmp_path):
    _stored_pool(tmp_path / "p", torch.ones(4, 3, dtype=torch.float64))
    meta_file = tmp_path / "p.json"
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({k: v for k, v in meta.items() if k != "files"}))
    with pytest.raises(PoolError, match="no checksum"):
        GradientPool(tmp_path / "p")


def test_block_grad_matches_full_batch_autograd():
    model, x, y = MODELS["toy"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        expanded, block = model.insert_block("b1")
    grads = block_grad(expanded, block, x, y, 2, to_device("cpu"))
    loss = expanded.per_example_loss(expanded(x), y).mean()
    reference = torch.autograd.grad(loss, list(block.parameters()))
    for g, r in zip(grads, reference):
        torch.testing.assert_close(g.float(), r, rtol=1e-4, atol=1e-7)
    [norm] = block_grad_norms(model, ["b1"], x, y, 3, to_device("cpu"), seeds=[3])  # the same new block
    assert norm > 0
    assert norm == pytest.approx(torch.cat([r.flatten() for r in reference]).norm().item(), rel=1e-4)


@pytest.mark.parametrize(
    "spec, shape",
    [
        ({"family": "resnet", "depth": 8, "width": 0.5, "in_channels": 1, "num_classes": 3}, (12, 1, 8, 8)),
        ({"family": "llama", "depth": 3, "width": 32, "head_dim": 16, "vocab_size": 11, "block_size": 6}, (12, 6)),
    ],
)
def test_block_grad_norms_from_one_pass_equal_each_block_inserted_alone(spec, shape):
    torch.manual_seed(0)
    model = build_model(spec).double().eval()
    x = torch.randn(shape, dtype=torch.float64) if len(shape) == 4 else torch.randint(0, 11, shape)
    y = torch.randint(0, 3, (12,)) if len(shape) == 4 else torch.randint(0, 11, shape)
    points = model.insertion_points()
    seeds = [7 + k for k in range(len(points))]
    at_once = block_grad_norms(model, points, x, y, 5, to_device("cpu"), seeds)
    for point, seed, norm in zip(points, seeds, at_once):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            expanded, block = model.insert_block(point)
        expanded.eval()  # BatchNorm on running statistics, as measured
        loss = expanded.per_example_loss(expanded(x), y).mean()  # brute force: one block, full batch
        alone = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(block.parameters()))]).norm()
        assert norm > 0 and norm == pytest.approx(alone.item(), rel=1e-9)


def test_to_half_rounds_once_like_numpy():
    """float64 → float16 on the rows' device equals numpy's single rounding, at float16 midpoints (where a
    rounding through float32 errs) and beside them; torch's own conversion misses some of those."""
    rng = np.random.default_rng(0)
    halves = rng.standard_normal(20_000).astype(np.float16)
    midpoints = (halves.astype(np.float64) + np.nextafter(halves, np.float16(np.inf)).astype(np.float64)) / 2
    x = np.concatenate([rng.standard_normal(50_000), midpoints, midpoints * (1 + 1e-12), midpoints * (1 - 1e-12),
                        rng.standard_normal(1000) * 1e-6, [0.0, -0.0, 1.0, -1.0]])  # fmt: skip
    expected = x.astype(np.float16).view(np.int16)
    assert np.array_equal(to_half(torch.from_numpy(x)).numpy().view(np.int16), expected)
    assert not np.array_equal(torch.from_numpy(x).half().numpy().view(np.int16), expected)
