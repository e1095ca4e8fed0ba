"""The workflow configuration: validation against the JSON schema, and the job grids.

``validate_config`` is the first thing the Snakefile and the CLI call: a typo'd key, a
negative width or an unknown dataset fails before any job is planned, with the key's
path (``grids.resnet_mnist.widths[0]``) and what is allowed. ``model_jobs`` expands the
grids and pretrained groups into one ``ModelJob`` per (dataset, family, depth, width,
seed) — the unit of training, measurement and every experiment after it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import yaml

from .data import config_keys


class ConfigError(ValueError):
    """A configuration that does not match ``config.schema.yaml``."""


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


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Check ``config`` against the schema, fill in defaults (in place) and return it.

    Raises ``ConfigError`` listing every violation, each with the key's path.
    """
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(_explain(e) for e in errors))
    for name, settings in config["datasets"].items():
        unknown = sorted(set(settings) - set(config_keys(name)))
        if unknown:
            raise ConfigError(f"datasets.{name}: unknown key(s) {unknown}; allowed keys: {list(config_keys(name))}")
    for name, grid in config["grids"].items():
        if grid["dataset"] not in config["datasets"]:
            raise ConfigError(f"grids.{name}.dataset: {grid['dataset']!r} is not prepared; "
                              f"add it under datasets (have {sorted(config['datasets'])})")
    for name, group in config.get("pretrained", {}).items():
        if group["dataset"] not in config["datasets"]:
            raise ConfigError(f"pretrained.{name}.dataset: {group['dataset']!r} is not prepared; "
                              f"add it under datasets (have {sorted(config['datasets'])})")
    return config


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file and validate it."""
    with open(path) as handle:
        return validate_config(yaml.safe_load(handle))


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
        return {"run": run, "dataset": self.dataset, "family": self.family, "depth": self.depth,
                "width": self.width, "seed": self.seed, "model": self.name}


def model_jobs(config: dict[str, Any]) -> list[ModelJob]:
    """Every model the config asks for, in config order."""
    jobs = []
    for grid_name, grid in config["grids"].items():
        for depth in grid["depths"]:
            for width in grid["widths"]:
                for seed in grid["seeds"]:
                    spec = {"family": grid["family"], "depth": depth, "width": width, **grid["model"]}
                    jobs.append(ModelJob(grid_name, grid["dataset"], grid["family"], depth, width, seed,
                                         spec, grid["recipe"], grid["resources"]))
    for group_name, group in config.get("pretrained", {}).items():
        for name, entry in group["checkpoints"].items():
            spec = {"family": "hf", "name": name, "checkpoint": entry["checkpoint"],
                    "revision": entry["revision"], "local_files_only": config["offline"],
                    "dtype": group["dtype"], "block_size": group["block_size"]}
            jobs.append(ModelJob(group_name, group["dataset"], "hf", 0, 0, 0, spec, None, group["resources"]))
    names = [job.key for job in jobs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"two grids make the same model(s) {duplicates}; give them different datasets or sizes")
    return jobs
