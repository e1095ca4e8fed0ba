"""``validate_config``: the schema, then the cross-checks (``checks``, ``cluster``), every problem on one
line with its key's path; ``read_config`` reads a file, ``load_config`` reads and validates it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema

from .checks import (
    check_adapt,
    check_architecture,
    check_augment,
    check_batch_sizes,
    check_block_size,
    check_budget,
    check_early,
    check_experiments,
    check_family_data,
    check_gpu_device,
    check_grow_certificate,
    check_grow_grids,
    check_misalign_sizes,
    check_model_keys,
    check_paths,
    check_point_names,
    check_pools,
    check_pretrained_data,
    check_some_model,
    check_sources,
    check_split_fractions,
    check_urls,
    non_finite,
)
from .cluster import check_cluster_limits, check_gpu_share
from .errors import ConfigError
from .schema import _explain, _with_defaults, schema
from .strict_yaml import read_yaml


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
    problems = list(check_sources(config))
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


def read_config(path: str | Path) -> dict[str, Any]:
    """The mapping in config file ``path``, read strictly (``read_yaml``); a file that holds no
    mapping (a list, a scalar, nothing) is refused naming the file."""
    config = read_yaml(path)
    if not isinstance(config, dict):
        held = "nothing" if config is None else f"a {_KINDS.get(type(config), type(config).__name__)}"
        raise ConfigError(
            f"{path}: the file holds {held}; allowed: a YAML mapping of config keys (run, datasets, grids, ...)"
        )
    return config


def load_config(path: str | Path) -> dict[str, Any]:
    """Read config file ``path`` (``read_config``) and validate it."""
    return validate_config(read_config(path))


_KINDS = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}


def cross_checks(config: dict[str, Any]) -> Iterator[str]:
    """One line per problem of a schema-valid config (defaults filled in), each naming the
    key's path and what is allowed there."""
    yield from check_some_model(config)
    yield from check_gpu_device(config)
    for name, grid in config["grids"].items():
        yield from check_family_data(config, name, grid)
        yield from check_budget(name, grid)
        yield from check_model_keys(name, grid)
        yield from check_architecture(name, grid)
        yield from check_block_size(name, grid)
        yield from check_augment(name, grid)
    yield from check_experiments(config)
    yield from check_early(config)
    yield from check_grow_grids(config)
    yield from check_grow_certificate(config)
    yield from check_adapt(config)
    yield from check_point_names(config)
    yield from check_split_fractions(config)
    yield from check_paths(config)
    yield from check_pretrained_data(config)
    yield from check_urls(config)
    yield from check_pools(config)
    yield from check_misalign_sizes(config)
    yield from check_batch_sizes(config)
    yield from check_cluster_limits(config)
    yield from check_gpu_share(config)
