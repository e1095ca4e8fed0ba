"""Config validation: every malformed config fails early, naming the key and what is allowed."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from scalemech.config import ConfigError, format_width, load_config, model_jobs, validate_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "config").glob("*.yaml"))


def quick() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_are_valid(path: Path) -> None:
    config = load_config(path)
    assert model_jobs(config), "a shipped config plans no model"


def test_defaults_are_filled_in() -> None:
    config = validate_config(quick())
    assert config["train"]["checkpoint_every"] == 200
    assert config["grids"]["resnet_mnist"]["resources"]["gpu"] == 0
    assert config["misalign"]["seed"] == 0


def test_quick_grid_is_the_issue_grid() -> None:
    jobs = model_jobs(validate_config(quick()))
    resnets = {(j.depth, j.width) for j in jobs if j.family == "resnet"}
    assert resnets == {(d, w) for d in (8, 14, 20) for w in (0.5, 1, 2)}
    assert sorted(j.width for j in jobs if j.family == "llama") == [64, 128, 256]
    assert "mnist5k/resnet-d8-w0.5-s0" in {j.key for j in jobs}


def _set(path: str, value):
    def edit(config: dict) -> None:
        *parents, last = path.split(".")
        node = config
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is KeyError:
            del node[last]
        elif last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return edit


MALFORMED = {
    # edit -> text the message must contain (the offending key and what is allowed)
    "typo top-level key": (_set("devise", "cpu"), ["devise", "allowed keys"]),
    "typo grid key": (_set("grids.resnet_mnist.depht", [8]), ["grids.resnet_mnist", "depht", "depths"]),
    "negative width": (_set("grids.resnet_mnist.widths.0", -1), ["grids.resnet_mnist.widths[0]", "minimum"]),
    "unknown dataset": (_set("datasets.mnist6k", {}), ["datasets", "mnist6k", "mnist5k"]),
    "unknown family": (_set("grids.resnet_mnist.family", "vgg"), ["grids.resnet_mnist.family", "resnet"]),
    "unknown device": (_set("device", "tpu"), ["device", "cuda"]),
    "width as text": (_set("grids.llama_stdlib.widths.0", "wide"), ["grids.llama_stdlib.widths[0]", "number"]),
    "two budgets": (_set("grids.resnet_mnist.recipe.steps", 10), ["grids.resnet_mnist.recipe", "epochs"]),
    "no budget": (_set("grids.llama_stdlib.recipe.tokens", KeyError), ["grids.llama_stdlib.recipe", "tokens"]),
    "unknown optimizer": (_set("grids.resnet_mnist.recipe.optimizer", "lion"), ["recipe.optimizer", "adamw"]),
    "zero learning rate": (_set("grids.resnet_mnist.recipe.lr", 0), ["recipe.lr", "minimum"]),
    "typo recipe key": (_set("grids.resnet_mnist.recipe.epoch", 3), ["recipe", "epoch", "epochs"]),
    "bad norm": (_set("grids.resnet_mnist.model.norm", "instance"), ["model.norm", "batch"]),
    "bad points": (_set("measure.points", "some"), ["measure.points", "all"]),
    "pool too small": (_set("measure.train_pool", 2), ["measure.train_pool", "minimum"]),
    "misalign size zero": (_set("misalign.sizes.0", 0), ["misalign.sizes[0]", "minimum"]),
    "bad run name": (_set("run", "my run/1"), ["run", "does not match"]),
    "grid on unprepared data": (_set("grids.resnet_mnist.dataset", "cifar10"), ["grids.resnet_mnist.dataset", "cifar10"]),
    "missing datasets": (_set("datasets", KeyError), ["datasets", "required"]),
    "threads zero": (_set("threads", 0), ["threads", "minimum"]),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_config_is_rejected_with_the_key(name: str) -> None:
    edit, expected = MALFORMED[name]
    config = copy.deepcopy(quick())
    edit(config)
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    for text in expected:
        assert text in str(info.value), f"{text!r} not in: {info.value}"


def test_duplicate_models_are_rejected() -> None:
    config = quick()
    config["grids"]["again"] = copy.deepcopy(config["grids"]["resnet_mnist"])
    with pytest.raises(ConfigError, match="resnet-d8-w0.5-s0"):
        model_jobs(validate_config(config))


def test_width_format() -> None:
    assert [format_width(w) for w in (0.5, 1.0, 2, 256, 1536)] == ["0.5", "1", "2", "256", "1536"]


def test_dataset_keys_are_checked_per_dataset() -> None:
    config = quick()
    config["datasets"]["mnist5k"]["archive"] = "mnist.tar.gz"  # a CIFAR key, not an MNIST one
    with pytest.raises(ConfigError, match=r"datasets.mnist5k: unknown key\(s\) \['archive'\]"):
        validate_config(config)
