"""Config validation: every malformed config fails early, naming the key and what is allowed."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from scalemech.config import ConfigError, format_width, load_config, model_jobs, validate_config
from scalemech.config.schema import schema
from scalemech.models import FAMILIES

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "config").glob("*.yaml"))


def quick() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_are_valid(path: Path) -> None:
    config = load_config(path)
    assert model_jobs(config), "a shipped config plans no model"


def test_planning_imports_no_torch() -> None:
    """The workflow's parse (the Snakefile's and common.smk's imports, ``validate_config`` and
    ``model_jobs``) loads no torch: each ``snakemake`` call pays it otherwise (about 1.3 CPU s). On
    the tiny run's config and every shipped one (all families: resnet, tvresnet, llama, hf)."""
    import json
    import subprocess
    import sys

    from test_workflow import TINY

    code = (
        "import json, sys\n"
        "from scalemech.config import load_config, model_jobs, validate_config\n"
        "from scalemech.core import layout, steps\n"
        "model_jobs(validate_config(json.loads(sys.argv[1])))\n"
        "for path in sys.argv[2:]:\n    model_jobs(load_config(path))\n"
        "print(sorted(m for m in ('torch', 'torchvision', 'transformers') if m in sys.modules))"
    )
    argv = [sys.executable, "-c", code, json.dumps(TINY), *map(str, CONFIGS)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_defaults_are_filled_in() -> None:
    config = validate_config(quick())
    assert config["train"]["checkpoint_every"] == 200
    assert config["grids"]["resnet_mnist"]["resources"]["gpu"] == 0
    assert config["misalign"]["seed"] == 0


def test_quick_grid_is_a_square_of_depths_and_widths_at_two_seeds() -> None:
    jobs = model_jobs(validate_config(quick()))
    resnets = {(j.depth, j.width) for j in jobs if j.family == "resnet"}
    assert resnets == {(d, w) for d in (8, 14, 20) for w in (0.25, 0.5, 0.75)}  # D3: 3 depths a width; D4: 9 cells
    assert sorted({j.width for j in jobs if j.family == "llama"}) == [8, 16, 32]
    assert {j.seed for j in jobs} == {0, 1} and len(jobs) == 2 * (len(resnets) + 3)
    assert "mnist5k/resnet-d8-w0.5-s1" in {j.key for j in jobs}


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
    "no budget": (
        _set("grids.llama_stdlib.recipe.tokens", KeyError),
        ["grids.llama_stdlib.recipe", "tokens_per_parameter"],
    ),
    "unknown optimizer": (_set("grids.resnet_mnist.recipe.optimizer", "lion"), ["recipe.optimizer", "adamw"]),
    "zero learning rate": (_set("grids.resnet_mnist.recipe.lr", 0), ["recipe.lr", "minimum"]),
    "typo recipe key": (_set("grids.resnet_mnist.recipe.epoch", 3), ["recipe", "epoch", "epochs"]),
    "bad norm": (_set("grids.resnet_mnist.model.norm", "instance"), ["model.norm", "batch"]),
    "bad points": (_set("measure.points", "some"), ["measure.points", "all"]),
    "pool too small": (_set("measure.train_pool", 2), ["measure.train_pool", "minimum"]),
    "misalign size zero": (_set("misalign.sizes.0", 0), ["misalign.sizes[0]", "minimum"]),
    "bad run name": (_set("run", "my run/1"), ["run", "does not match"]),
    "grid on unprepared data": (
        _set("grids.resnet_mnist.dataset", "cifar10"),
        ["grids.resnet_mnist.dataset", "cifar10"],
    ),
    "missing datasets": (_set("datasets", KeyError), ["datasets", "required"]),
    "threads zero": (_set("threads", 0), ["threads", "minimum"]),
}


def assert_rejected(config: dict, expected: list[str]) -> None:
    """``validate_config`` raises ``ConfigError`` and its message holds every text of ``expected``."""
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    for text in expected:
        assert text in str(info.value), f"{text!r} not in: {info.value}"


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_config_is_rejected_with_the_key(name: str) -> None:
    edit, expected = MALFORMED[name]
    config = copy.deepcopy(quick())
    edit(config)
    assert_rejected(config, expected)


def test_duplicate_models_are_rejected() -> None:
    config = quick()
    config["grids"]["again"] = copy.deepcopy(config["grids"]["resnet_mnist"])
    with pytest.raises(ConfigError, match="resnet-d8-w0.5-s0"):
        model_jobs(validate_config(config))


def test_schema_families_are_the_trained_families() -> None:
    """The schema's ``grid.family`` enum lists the families of ``models.FAMILIES`` that grids train."""
    enum = schema()["$defs"]["grid"]["properties"]["family"]["enum"]
    assert enum == [name for name, family in FAMILIES.items() if family.trained]


def test_width_format() -> None:
    assert [format_width(w) for w in (0.5, 1.0, 2, 256, 1536)] == ["0.5", "1", "2", "256", "1536"]


def test_dataset_keys_are_checked_per_dataset() -> None:
    config = quick()
    config["datasets"]["mnist5k"]["archive"] = "mnist.tar.gz"  # a CIFAR key, not an MNIST one
    with pytest.raises(ConfigError, match=r"datasets.mnist5k: unknown key\(s\) \['archive'\]"):
        validate_config(config)


# -- planning-time cross-checks: every case below used to pass validation and fail (or be
#    silently changed) only when a job ran ----------------------------------------------


def _grid(name: str, grid: dict):
    def edit(config: dict) -> None:
        config["grids"][name] = grid

    return edit


def _only(*names: str):
    """Keep only the grids ``names`` (and their datasets); ``grow.grids`` keeps those it names, or goes
    (its default: every trained grid) when it names none of them."""

    def edit(config: dict) -> None:
        config["grids"] = {n: g for n, g in config["grids"].items() if n in names}
        grown = [n for n in config.get("grow", {}).get("grids", []) if n in names]
        if grown:
            config["grow"]["grids"] = grown
        else:
            config.get("grow", {}).pop("grids", None)
        config["datasets"] = {
            d: s for d, s in config["datasets"].items() if d in {g["dataset"] for g in config["grids"].values()}
        }

    return edit


def _both(*edits):
    def edit(config: dict) -> None:
        for one in edits:
            one(config)

    return edit


TV_GRID = {
    "dataset": "mnist5k",
    "family": "tvresnet",
    "depths": [18, 20],
    "widths": [0.5],
    "recipe": {"optimizer": "sgd", "lr": 0.1, "batch_size": 64, "epochs": 1},
}

CROSS_CHECKED = {
    # edit -> text the one-line message must contain (the offending key and what is allowed)
    "resnet depth not 6n+2": (
        _set("grids.resnet_mnist.depths.1", 10),
        ["grids.resnet_mnist.depths[1]", "6n+2", "8, 14, 20"],
    ),
    "tvresnet depth": (_grid("tv", TV_GRID), ["grids.tv.depths[1]", "[18, 34, 50, 101, 152]"]),
    "llama width not a multiple of head_dim": (
        _set("grids.llama_stdlib.widths.1", 20),
        ["grids.llama_stdlib.widths[1]", "multiples of 8"],
    ),
    "llama odd head_dim": (
        _both(_set("grids.llama_stdlib.model.head_dim", 33), _set("grids.llama_stdlib.widths", [66])),
        ["grids.llama_stdlib.model", "head_dim", "even"],
    ),
    "llama on images": (
        _set("grids.llama_stdlib.dataset", "mnist5k"),
        ["grids.llama_stdlib.dataset", "mnist5k", "image", "pystdlib"],
    ),
    "resnet on text": (
        _set("grids.resnet_mnist.dataset", "pystdlib"),
        ["grids.resnet_mnist.dataset", "pystdlib", "text", "mnist5k"],
    ),
    "llama key on a resnet": (
        _set("grids.resnet_mnist.model.head_dim", 64),
        ["grids.resnet_mnist.model", "head_dim", "['norm', 'placement']"],
    ),
    "resnet key on a llama": (
        _set("grids.llama_stdlib.model.norm", "rms"),
        ["grids.llama_stdlib.model", "norm", "block_size", "head_dim"],
    ),
    "norm on a tvresnet": (
        _grid("tv", {**TV_GRID, "depths": [18], "model": {"norm": "layer"}}),
        ["grids.tv.model", "norm", "tvresnet", "none"],
    ),
    "resnet width under 2 channels": (
        _set("grids.resnet_mnist.widths.0", 0.05),
        ["grids.resnet_mnist.widths[0]", "1 channel", "at least 2"],
    ),
    "no grids": (_both(_set("grids", {}), _set("grow.grids", KeyError)), ["grids", "pretrained"]),
    "unknown grow grid": (
        _set("grow.grids", ["resnet_mnist", "resnet_cifar"]),
        ["grow.grids[1]", "resnet_cifar", "['llama_stdlib', 'resnet_mnist']"],
    ),
    "unknown point name": (
        _both(_only("resnet_mnist"), _set("measure.points", ["stage1.block1", "stage3.block3"])),
        ["measure.points[1]", "stage3.block3", "resnet-d8", "stage3.block1"],
    ),
    "llama point on a resnet": (
        _both(_only("resnet_mnist"), _set("measure.points", ["layer.0"])),
        ["measure.points[0]", "layer.0", "stage1.block1"],
    ),
    "unknown growth point": (
        _both(_only("llama_stdlib"), _both(_set("measure.points", 2), _set("grow.points", ["layer.1", "layer.2"]))),
        ["grow.points[1]", "layer.2", "['layer.0', 'layer.1']"],
    ),
    "test pool over the split": (
        _set("measure.test_pool", 2500),
        ["measure.test_pool", "2500", "2000", "mnist5k test split"],
    ),
    "no room for the held-out pool": (
        _set("measure.test_pool", 1100),
        ["measure.test_pool (x2", "held-out", "2200", "mnist5k test split"],
    ),
    "train pool over the split": (
        _set("measure.train_pool", 4500),
        ["measure.train_pool", "4500", "3000", "mnist5k train split"],
    ),
    "growth pool over the split": (_set("grow.pool", 4500), ["grow.pool", "4500", "3000", "mnist5k train split"]),
    "no held-out examples beside the certificate": (
        _set("grow.certificate", {"pool": 1999}),
        ["grow.certificate.pool (+ 2 held-out", "2001", "2000", "mnist5k test split"],
    ),
    "grow without trajectory": (
        _set("experiments", ["measure", "grow"]),
        ["experiments: grow reads trajectory's trajectory table", "add trajectory, or leave grow out"],
    ),
    "misalign size over the pool": (
        _set("measure.train_pool", 16),
        ["misalign.sizes[5]", "32", "measure.train_pool", "16"],
    ),
    "empty test split": (
        _set("datasets.mnist5k.test_fraction", 0.0001),
        ["datasets.mnist5k.test_fraction", "empty", "0.0002"],
    ),
    "empty train split": (
        _set("datasets.mnist5k.test_fraction", 0.99995),
        ["datasets.mnist5k.test_fraction", "empty", "0.9998"],
    ),
    "an experiment reading pools without measure": (
        _set("experiments", ["misalign", "trajectory"]),
        ["experiments: misalign reads measure's gradient pools", "add measure, or leave misalign out"],
    ),
    "early without snapshots": (
        _set("train.snapshots", 0),
        ["experiments: early measures a weight snapshot", "train.snapshots is 0", "or leave early out"],
    ),
    "early pool over the test split": (
        _set("early", {"pool": 1200}),
        ["early.pool (x2", "held-out", "2400", "mnist5k test split"],
    ),
    "batch over the train split": (
        _set("grids.resnet_mnist.recipe.batch_size", 8192),
        ["grids.resnet_mnist.recipe.batch_size", "8192", "3000"],
    ),
}


@pytest.mark.parametrize("name", sorted(CROSS_CHECKED))
def test_cross_checks_reject_with_the_key_in_one_line(name: str) -> None:
    edit, expected = CROSS_CHECKED[name]
    config = copy.deepcopy(quick())
    edit(config)
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    message = str(info.value)
    assert "\n" not in message, message
    for text in expected:
        assert text in message, f"{text!r} not in: {message}"


def cifar_subset() -> dict:
    return yaml.safe_load((ROOT / "config" / "quick-cifar10.yaml").read_text())


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("measure.test_pool", 4000, ["measure.test_pool", "2000", "cifar10 test split"]),
        ("grow.pool", 12000, ["grow.pool", "10000", "cifar10 train split"]),
    ],
)
def test_pools_are_checked_against_a_subset(key: str, value: int, expected: list[str]) -> None:
    config = cifar_subset()
    _set(key, value)(config)
    assert_rejected(config, expected)


def test_what_the_cross_checks_allow() -> None:
    config = quick()
    del config["grids"]["llama_stdlib"], config["datasets"]["pystdlib"]
    config["grids"]["resnet_mnist"]["widths"] = [0.125, 0.25]  # 2 and 4 channels in the first stage
    config["measure"].update(points=["stage1.block1", "stage3.block1"], train_pool=3000, test_pool=1000)
    config["grow"].update(points=["stage2.block1"], pool=1000)
    config["grids"]["resnet_mnist"]["recipe"]["batch_size"] = 3000
    validate_config(config)
    text = cifar_subset()
    text["datasets"] = {"tinyshakespeare": text["datasets"]["tinyshakespeare"]}
    text["grids"] = {"llama_shakespeare": text["grids"]["llama_shakespeare"]}
    text["measure"].update(train_pool=10**6, test_pool=10**6, points=2)  # text sizes: known once prepared
    text["misalign"] = {"sizes": [64]}
    validate_config(text)


def test_several_problems_are_all_listed() -> None:
    config = quick()
    config["grids"]["resnet_mnist"]["depths"] = [9, 10]
    config["grow"]["grids"] = ["nope"]
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    for text in ("depths[0]", "depths[1]", "grow.grids[0]"):
        assert text in str(info.value)


# -- strict YAML ---------------------------------------------------------------------------

DUPLICATED = """\
run: quick
datasets:
  mnist5k: {test_fraction: 0.2}
grids:
  resnet_mnist:
    dataset: mnist5k
    family: resnet
    depths: [8, 14]
    widths: [1]
    depths: [20]
    recipe: {optimizer: sgd, lr: 0.1, batch_size: 64, epochs: 1}
"""


def test_duplicate_yaml_key_is_rejected_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATED)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message
    for text in (f"{path}:10", "'depths'", "grids.resnet_mnist", "line 8"):
        assert text in message, f"{text!r} not in: {message}"


def test_yaml_merge_keys_may_be_overridden(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text(
        DUPLICATED.replace("    depths: [20]\n", "").replace("  resnet_mnist:", "  resnet_mnist: &base")
        + "  again:\n    <<: *base\n    depths: [20]\n"
    )
    config = load_config(path)
    assert config["grids"]["again"]["depths"] == [20] and config["grids"]["resnet_mnist"]["depths"] == [8, 14]


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("run: quick\ngrids:\n  a: [1, 2\n  b: 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and f"{path}:4" in message and "YAML" in message, message


def test_workflow_rejects_a_duplicated_key(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATED)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--cores",
            "1",
            "--configfile",
            str(path),
            "--directory",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert f"{path}:10" in output and "'depths'" in output, output[-3000:]


# -- cluster: partitions and the nodes' limits -----------------------------------------------------

NODE = {"max_cpus": 2, "max_mem_mb": 8000, "max_gpus": 0, "max_runtime": 120}


def with_cluster(cluster: dict, edit=None) -> dict:
    config = copy.deepcopy(quick())
    config["cluster"] = cluster
    if edit is not None:
        edit(config)
    return config


def test_cluster_section_is_optional_and_filled_in() -> None:
    assert validate_config(quick())["cluster"] == {}
    config = validate_config(with_cluster({"gpu_partition": "a100", "cpu_partition": "cpu", "account": "proj", **NODE}))
    assert config["cluster"]["gpu_partition"] == "a100" and config["cluster"]["max_cpus"] == 2


@pytest.mark.parametrize(
    "cluster, expected",
    [
        ({"max_cpu": 4}, ["cluster", "max_cpu", "max_cpus"]),
        ({"max_gpus": -1}, ["cluster.max_gpus"]),
        ({"max_mem_mb": "16G"}, ["cluster.max_mem_mb"]),
        ({"gpu_partition": "gpu a100"}, ["cluster.gpu_partition"]),
    ],
)
def test_malformed_cluster_section_is_rejected(cluster: dict, expected: list[str]) -> None:
    assert_rejected(with_cluster(cluster), expected)


@pytest.mark.parametrize(
    "cluster, edit, expected",
    [
        # threads: every model job asks for them as CPUs
        (
            {"max_cpus": 1},
            _set("threads", 2),
            ["threads: 2", "cluster.max_cpus 1", "train_model", "cost_table", "at most 1"],
        ),
        # a grid's memory, named with its rules and models
        (
            {"max_mem_mb": 3000},
            _set("cost", {"max_covariance_mb": 256}),
            [
                "grids.resnet_mnist.resources.mem_mb: 4000",
                "cluster.max_mem_mb 3000",
                "train_model",
                "intervene_model",
                "mnist5k/resnet-d8-w0.5-s0",
                "at most 3000 MB",
            ],
        ),
        # a GPU grid on a cluster without GPUs: the GPU rules only, with the way out
        (
            {"max_gpus": 0},
            _set("grids.llama_stdlib.resources", {"gpu": 1}),
            ["grids.llama_stdlib.resources.gpu: 1", "cluster.max_gpus 0", "pystdlib/llama-d2-w16-s0", "gpu: 0"],
        ),
        (
            {"max_runtime": 30},
            None,
            ["grids.resnet_mnist.resources.runtime: 60", "cluster.max_runtime 30", "at most 30 minutes"],
        ),
        # what the config chose for prepare_data and cost_table
        ({"max_mem_mb": 4000}, None, ["cost.max_covariance_mb: 1024", "cost_table", "4072 MB", "at most 1000"]),
    ],
)
def test_job_that_cannot_fit_the_nodes_is_refused_at_planning(cluster: dict, edit, expected: list[str]) -> None:
    assert_rejected(with_cluster(cluster, edit), expected)


def test_gpu_count_only_concerns_the_gpu_rules() -> None:
    config = with_cluster({"max_gpus": 0}, _set("grids.llama_stdlib.resources", {"gpu": 1}))
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    line = next(line for line in str(info.value).splitlines() if "resources.gpu" in line)
    assert "misalign_model" not in line and "intervene_model" in line


def test_jobs_that_fit_the_nodes_pass_and_fixed_requests_are_capped() -> None:
    from scalemech.config import cluster_requests

    config = validate_config(with_cluster({**NODE, "max_mem_mb": 4096, "max_runtime": 60}))
    requests = cluster_requests(config)
    assert requests["prepare_data:mnist5k"] == {"cpus": 1, "mem_mb": 4096, "runtime": 60}
    assert requests["cost_table"] == {"cpus": 1, "mem_mb": 4072, "runtime": 60}  # the config's threads: 1
    requests = cluster_requests(validate_config(quick()))
    assert requests["prepare_data:mnist5k"] == {"cpus": 1, "mem_mb": 8000, "runtime": 120}


def test_paper_config_fits_the_example_limits_it_documents() -> None:
    import re

    text = (ROOT / "config" / "paper.yaml").read_text()
    config = yaml.safe_load(re.sub(r"\n  # (cpu_partition|account|max_\w+):", r"\n  \1:", text))
    assert set(config["cluster"]) >= {"max_cpus", "max_mem_mb", "max_gpus", "max_runtime"}
    validate_config(config)
    assert all(group["resources"]["gpu"] == 1 for group in [*config["grids"].values(), *config["pretrained"].values()])


def test_gpu_share_is_the_grids_memory_or_the_whole_gpu_and_shards_round_up() -> None:
    from scalemech.config import gpu_share

    cluster = {"gpu_memory_mb": 141000, "gpu_shards": 8}
    assert gpu_share({"cluster": cluster}, {"gpu": 1, "gpu_mem_mb": 16000}) == {"gpu_mem_mb": 16000, "shards": 1}
    assert gpu_share({"cluster": cluster}, {"gpu": 1, "gpu_mem_mb": 20000}) == {"gpu_mem_mb": 20000, "shards": 2}
    assert gpu_share({"cluster": cluster}, {"gpu": 1}) == {"gpu_mem_mb": 141000, "shards": None}  # a whole GPU
    assert gpu_share({"cluster": {"gpu_memory_mb": 141000}}, {"gpu": 1, "gpu_mem_mb": 16000})["shards"] is None
    assert gpu_share({"cluster": cluster}, {"gpu": 0, "gpu_mem_mb": 16000}) == {"gpu_mem_mb": None, "shards": None}


@pytest.mark.parametrize(
    "cluster, resources, expected",
    [
        ({"gpu_shards": 8}, {"gpu": 1}, ["cluster.gpu_shards needs cluster.gpu_memory_mb"]),
        ({"gpu_memory_mb": 80000}, {"gpu": 1, "gpu_mem_mb": 90000}, ["gpu_mem_mb 90000", "gpu_memory_mb 80000"]),
        ({}, {"gpu": 0, "gpu_mem_mb": 4000}, ["gpu_mem_mb 4000 needs resources.gpu: 1"]),
    ],
)
def test_a_gpu_share_that_cannot_hold_is_refused(cluster: dict, resources: dict, expected: list[str]) -> None:
    config = with_cluster(cluster)
    for grid in config["grids"].values():
        grid["resources"] = resources
    assert_rejected(config, expected)


@pytest.mark.parametrize(
    "placement, allowed",
    [("layer.4", "layer.0..layer.3"), ("best:5", "best:1..best:4"), ("every:5", "every:1..every:4")],
)
def test_adapt_placements_beyond_the_bases_depth_are_refused(placement: str, allowed: str) -> None:
    """E12's depth-4 bases: a point, a count of the certificate's points or a stride they lack, in one line."""
    config = yaml.safe_load((ROOT / "config" / "growth.yaml").read_text())
    config["adapt"]["placements"] = ["best", placement]
    assert_rejected(config, [f"adapt.placements: {placement!r} is beyond the bases' 4 layers", f"allowed: {allowed}"])
