"""Model families: insertion-point splits, zero-init insertion, validation, sizes (models/*.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

from scalemech.models import build_model, load_model, save_model
from scalemech.models.llama import Rotary
from scalemech.models.resnet import NORMS, PLACEMENTS
from scalemech.models.tvresnet import torchvision_key

RESNET_SPECS = [
    dict(family="resnet", depth=14, width=0.5, norm=norm, placement=placement, num_classes=7)
    for norm in NORMS
    for placement in PLACEMENTS
]
TV_SPECS = [dict(family="tvresnet", depth=depth, width=0.125, num_classes=7) for depth in (18, 50)]
LLAMA_SPEC = dict(family="llama", width=32, depth=3, head_dim=8, block_size=16, vocab_size=50)
ALL_SPECS = [*RESNET_SPECS, *TV_SPECS, LLAMA_SPEC]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These models are tiny: a second intra-op thread only adds synchronization cost."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def spec_id(spec: dict) -> str:
    return "-".join(str(spec[k]) for k in ("family", "depth", "norm", "placement") if k in spec)


def batch(spec: dict, n: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """Random inputs and targets of the right kind for ``spec``."""
    if spec["family"] == "llama":
        ids = torch.randint(0, spec["vocab_size"], (n, 12))
        return ids, torch.roll(ids, -1, dims=1)
    size = 16 if spec["family"] == "resnet" else 32
    return torch.randn(n, 3, size, size), torch.randint(0, spec["num_classes"], (n,))


def trained_like(spec: dict) -> nn.Module:
    """A model in eval mode whose parameters and norm statistics are no longer at their init values."""
    torch.manual_seed(0)
    model = build_model(spec)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
        model.train()
        for _ in range(2):
            model(batch(spec, 4)[0])  # fills BatchNorm running statistics
    return model.eval()


@pytest.mark.parametrize("spec", ALL_SPECS, ids=spec_id)
def test_split_composes_and_insertion_is_identity(spec):
    model = trained_like(spec)
    x, y = batch(spec)
    with torch.no_grad():
        reference = model(x)
    _, streams = model.forward_streams(x, model.insertion_points())
    for point in model.insertion_points():
        f_bot, f_top = model.split(point)
        with torch.no_grad():
            z = f_bot(x)
            torch.testing.assert_close(z, streams[point], atol=1e-6, rtol=0)
            torch.testing.assert_close(f_top(z), reference, atol=1e-6, rtol=0)

        expanded, block = model.insert_block(point)
        assert expanded.insertion_points()[model.index(point) + 1] == f"{point}+new"
        assert not set(map(id, expanded.parameters())) & set(map(id, model.parameters()))
        with torch.no_grad():
            assert torch.equal(block(z), z), f"inserted block at {point} is not the identity"
            torch.testing.assert_close(expanded(x), reference, atol=1e-6, rtol=0)

        loss = expanded.per_example_loss(expanded(x), y).sum()
        block_grads = torch.autograd.grad(loss, list(block.parameters()))  # Condition 1 is measurable
        assert max(g.norm().item() for g in block_grads) > 0, f"no gradient reaches the block inserted at {point}"


@pytest.mark.parametrize("spec", [RESNET_SPECS[0], RESNET_SPECS[1], *TV_SPECS, LLAMA_SPEC], ids=spec_id)
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_new_block_is_identity_on_any_stream(spec, mode):
    """Signed z (not only a post-relu stream): no final relu, no batch-statistics leak."""
    model = trained_like(spec)
    point = model.insertion_points()[0]
    with torch.no_grad():
        z = model.split(point)[0](batch(spec)[0])
        z = torch.randn_like(z)
        block = model.new_block(point).train(mode == "train")
        assert torch.equal(block(z), z)


@pytest.mark.parametrize("spec", [RESNET_SPECS[0], TV_SPECS[0], LLAMA_SPEC], ids=spec_id)
def test_new_block_follows_model_dtype(spec):
    model = trained_like(spec).double()
    x, _ = batch(spec)
    x = x if spec["family"] == "llama" else x.double()
    point = model.insertion_points()[-1]
    expanded, block = model.insert_block(point)
    assert all(p.dtype == torch.float64 for p in block.parameters())
    with torch.no_grad():
        torch.testing.assert_close(expanded(x), model(x), atol=1e-12, rtol=0)


@pytest.mark.parametrize("spec", ALL_SPECS, ids=spec_id)
def test_spec_round_trip(spec, tmp_path):
    model = trained_like(spec)
    save_model(tmp_path / "model.pt", model, model.spec)
    loaded, payload = load_model(tmp_path / "model.pt")
    assert loaded.spec == model.spec == payload["spec"]
    x, _ = batch(spec)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), atol=0, rtol=0)


def test_unknown_point_is_refused():
    model = build_model(LLAMA_SPEC)
    with pytest.raises(KeyError, match="layer.9"):
        model.new_block("layer.9")


@pytest.mark.parametrize(
    "spec, error, names",
    [
        (dict(family="resnet", depth=21), ValueError, "depth.*21"),
        (dict(family="resnet", depth=2), ValueError, "depth.*2"),
        (dict(family="resnet", depth=20.0), ValueError, "depth.*20.0"),
        (dict(family="resnet", width=0), ValueError, "width.*0"),
        (dict(family="resnet", norm="instance"), ValueError, "instance.*batch"),
        (dict(family="resnet", placement="pre"), ValueError, "pre.*branch"),
        (dict(family="resnet", widht=2), TypeError, "widht"),
        (dict(family="tvresnet", depth=20), ValueError, "depth.*18, 34, 50.*20"),
        (dict(family="tvresnet", width=-1.0), ValueError, "width.*-1.0"),
        (dict(family="llama", width=100, head_dim=64), ValueError, "width 100.*head_dim 64"),
        (dict(family="llama", width=96, head_dim=3), ValueError, "head_dim.*even.*3"),
        (dict(family="llama", depth=0), ValueError, "depth.*0"),
        (dict(family="transformer"), ValueError, "transformer.*llama"),
    ],
)
def test_bad_specs_are_refused(spec, error, names):
    with pytest.raises(error, match=names):
        build_model(spec)


# -- resnet ------------------------------------------------------------------------------


def resnet_param_count(depth: int, channels: tuple[int, int, int], norm: str, in_channels: int, classes: int) -> int:
    """Brute-force parameter count of the CIFAR ResNet from its definition."""
    norm_params = (lambda c: c) if norm == "rms" else (lambda c: 2 * c)
    n = (depth - 2) // 6
    total = 9 * in_channels * channels[0] + norm_params(channels[0])
    c_in = channels[0]
    for stage, c in enumerate(channels):
        for b in range(n):
            total += 9 * c_in * c + 9 * c * c + 2 * norm_params(c)
            if stage > 0 and b == 0:  # stride-2 block: 1x1 conv + norm projection shortcut
                total += c_in * c + norm_params(c)
            c_in = c
    return total + channels[2] * classes + classes


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(
    "depth, width, expected_channels",
    [(8, 1, (16, 32, 64)), (20, 0.5, (8, 16, 32)), (14, 0.3, (5, 10, 19)), (8, 0.01, (1, 1, 1)), (8, 2, (32, 64, 128))],
)
def test_resnet_size(norm, depth, width, expected_channels):
    model = build_model(dict(family="resnet", depth=depth, width=width, norm=norm, in_channels=1, num_classes=10))
    assert model.config.channels == expected_channels
    n = (depth - 2) // 6
    assert model.insertion_points() == [f"stage{s}.block{b}" for s in (1, 2, 3) for b in range(1, n + 1)]
    assert sum(p.numel() for p in model.parameters()) == resnet_param_count(depth, expected_channels, norm, 1, 10)
    x = torch.randn(2, 1, 28, 28)
    _, streams = model.eval().forward_streams(x, ["stage1.block1", f"stage2.block{n}", "stage3.block1"])
    assert streams["stage1.block1"].shape == (2, expected_channels[0], 28, 28)
    assert streams[f"stage2.block{n}"].shape == (2, expected_channels[1], 14, 14)
    assert streams["stage3.block1"].shape == (2, expected_channels[2], 7, 7)


def test_resnet_params_grow_as_width_squared():
    counts = {
        k: sum(p.numel() for p in build_model(dict(family="resnet", depth=20, width=k)).parameters()) for k in (1, 2, 4)
    }
    assert 3.8 < counts[2] / counts[1] < 4.0 and 3.9 < counts[4] / counts[2] < 4.0


@pytest.mark.parametrize("norm", NORMS)
def test_resnet_channels_last_matches(norm):
    model = trained_like(dict(family="resnet", depth=8, width=0.5, norm=norm, num_classes=10))
    x = torch.randn(4, 3, 16, 16)
    with torch.no_grad():
        reference = model(x)
        model = model.to(memory_format=torch.channels_last)
        torch.testing.assert_close(model(x.to(memory_format=torch.channels_last)), reference, atol=1e-5, rtol=1e-5)


def test_resnet_rms_norm_matches_definition():
    model = build_model(dict(family="resnet", depth=8, width=0.5, norm="rms"))
    norm = model.blocks[0].norm1
    with torch.no_grad():
        norm.weight.copy_(torch.randn_like(norm.weight))
    x = torch.randn(2, 8, 5, 5)
    expected = torch.stack([xi / (xi.pow(2).mean() + norm.eps).sqrt() for xi in x]) * norm.weight[:, None, None]
    torch.testing.assert_close(norm(x), expected)


# -- tvresnet ----------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [18, 50])
def test_tvresnet_width_one_is_torchvision(depth):
    torch.manual_seed(0)
    reference = getattr(torchvision.models, f"resnet{depth}")(weights=None, num_classes=10).eval()
    model = build_model(dict(family="tvresnet", depth=depth, width=1, num_classes=10)).eval()
    state = reference.state_dict()
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in reference.parameters())
    model.load_state_dict({torchvision_key(k, model): v for k, v in state.items()}, strict=True)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(x))


def test_tvresnet_width_scales_channels():
    narrow = build_model(dict(family="tvresnet", depth=50, width=0.25, num_classes=10))
    wide = build_model(dict(family="tvresnet", depth=50, width=0.5, num_classes=10))
    assert narrow.insertion_points()[:4] == ["layer1.block0", "layer1.block1", "layer1.block2", "layer2.block0"]
    assert len(narrow.insertion_points()) == 16
    _, streams = narrow.eval().forward_streams(torch.randn(1, 3, 64, 64), ["layer4.block2"])
    assert streams["layer4.block2"].shape == (1, 4 * 128, 2, 2)
    ratio = sum(p.numel() for p in wide.parameters()) / sum(p.numel() for p in narrow.parameters())
    assert 3.8 < ratio < 4.0


# -- llama -------------------------------------------------------------------------------


def llama_param_count(d: int, n_layer: int, vocab: int, hidden: int, tied: bool) -> int:
    block = 4 * d * d + 3 * d * hidden + 2 * d
    return vocab * d * (1 if tied else 2) + n_layer * block + d


@pytest.mark.parametrize("tied", [False, True])
def test_llama_size_and_defaults(tied):
    spec = dict(family="llama", width=128, depth=2, head_dim=32, tie_embeddings=tied)
    model = build_model(spec)
    hidden = model.config.mlp_hidden
    assert hidden % 32 == 0 and 8 * 128 / 3 <= hidden < 8 * 128 / 3 + 32
    assert model.config.n_head == 4 and model.config.vocab_size == 256 and model.block_size == 256
    assert model.insertion_points() == ["layer.0", "layer.1"]
    assert sum(p.numel() for p in model.parameters()) == llama_param_count(128, 2, 256, hidden, tied)
    assert (model.head.lm_head.weight is model.stem.weight) == tied
    expanded, _ = model.insert_block("layer.0")
    assert (expanded.head.lm_head.weight is expanded.stem.weight) == tied


def test_llama_init_scales():
    model = build_model(dict(family="llama", width=256, depth=8, head_dim=64))
    block = model.blocks[0]
    for weight, std in [
        (block.attn.qkv.weight, 0.02),
        (block.mlp.up.weight, 0.02),
        (block.attn.proj.weight, 0.02 / math.sqrt(16)),
        (block.mlp.down.weight, 0.02 / math.sqrt(16)),
    ]:
        assert abs(weight.std().item() / std - 1) < 0.05


def test_llama_is_causal():
    model = trained_like(LLAMA_SPEC)
    ids, _ = batch(LLAMA_SPEC)
    changed = ids.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % LLAMA_SPEC["vocab_size"]
    with torch.no_grad():
        out, out_changed = model(ids), model(changed)
    assert out.shape == (*ids.shape, LLAMA_SPEC["vocab_size"])
    torch.testing.assert_close(out_changed[:, :7], out[:, :7], atol=1e-6, rtol=0)
    assert not torch.allclose(out_changed[:, 7:], out[:, 7:])


def test_llama_refuses_too_long_sequences():
    model = build_model(LLAMA_SPEC)
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, LLAMA_SPEC["block_size"] + 1, dtype=torch.long))


def test_rotary_scores_depend_on_relative_position_only():
    rotary = Rotary(head_dim=8, block_size=10, base=10000.0)
    q, k = torch.randn(2, 8, dtype=torch.float32)
    scores = rotary(q.expand(10, 8)) @ rotary(k.expand(10, 8)).T  # (T, T): <R_m q, R_n k>
    torch.testing.assert_close(scores[1:, 1:], scores[:-1, :-1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.diagonal(scores), torch.full((10,), (q @ k).item()), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(scores[0, 1], scores[0, 2])


def test_a_model_takes_its_geometry_from_the_data_and_refuses_other_data_in_one_line(tmp_path):
    """The data's manifest gives the input geometry (``fit_geometry``: the keys the family's config takes);
    a model built for 3 channels and 7 classes meets 1-channel, 3-class images and names both sizes."""
    from scalemech.data import load_prepared, prepare_dataset
    from scalemech.models import fit_geometry

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "own.npz", x=rng.integers(0, 256, (30, 6, 6), dtype=np.uint8), y=np.arange(30) % 3)
    prepare_dataset("own", {"source": "images", "path": str(tmp_path / "own.npz")}, tmp_path / "own")
    data = load_prepared(tmp_path / "own")
    geometry = {"in_channels": 1, "image_size": 6, "num_classes": 3}
    spec = fit_geometry({"family": "resnet", "depth": 8, "width": 0.25}, geometry, "own")
    assert spec == {"family": "resnet", "depth": 8, "width": 0.25, "in_channels": 1, "num_classes": 3}  # no size
    assert build_model(spec).task(data).spec_keys() == geometry
    other = build_model(RESNET_SPECS[0])  # 3 channels, 7 classes
    with pytest.raises(ValueError, match=r"^resnet model on data 'own': in_channels 3 in the model, 1 in the data; "
                       r"num_classes 7 in the model, 3 in the data$"):  # fmt: skip
        other.task(data)
