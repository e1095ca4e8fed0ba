"""Datasets: one prepare step per dataset writes tensors and a manifest; loads are checked.

``prepare_dataset(name, cfg, out_dir)`` writes ``out_dir`` (``results/<run>/data/<name>/``):
``{train,test}_x.npy`` (+ ``{train,test}_y.npy`` for images) and ``manifest.json``; see
``store`` for the format and checks, and each source module for its config keys:

- ``cifar10``, ``cifar100`` (``cifar``), ``imagenet`` (``imagenet``), ``mnist5k`` (``mnist``);
- ``tinyshakespeare``, ``corpus``, ``pystdlib``, ``pydoc`` (``text``, byte level).

``load_prepared(out_dir)`` returns a ``Prepared`` with memory-mapped tensors.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from . import cifar, imagenet, mnist, text
from .store import DataError, staging, write_manifest

# The loaders load torch, on first use (PEP 562): the workflow's parse and the config checks,
# which read only the dataset names and keys, never do.
LOADERS = ("Prepared", "load_prepared", "normalize_images", "text_windows")

DATASETS: tuple[str, ...] = (
    "cifar10",
    "cifar100",
    "imagenet",
    "mnist5k",
    "tinyshakespeare",
    "pystdlib",
    "pydoc",
    "corpus",
)
_MODULES = {
    "cifar10": cifar,
    "cifar100": cifar,
    "imagenet": imagenet,
    "mnist5k": mnist,
    "tinyshakespeare": text,
    "pystdlib": text,
    "pydoc": text,
    "corpus": text,
}


def config_keys(name: str) -> tuple[str, ...]:
    """The config keys dataset ``name`` accepts."""
    keys = _MODULES[name].CONFIG_KEYS
    return keys[name] if isinstance(keys, dict) else keys


def prepare_dataset(name: str, cfg: dict, out_dir: str | Path, offline: bool = True) -> dict:
    """Prepare dataset ``name`` from its config block ``cfg`` into ``out_dir`` and return the
    manifest. Output appears only complete (staged in a sibling directory, then renamed);
    ``offline`` forbids downloads."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; allowed: {list(DATASETS)}")
    unknown = sorted(set(cfg) - set(config_keys(name)))
    if unknown:
        raise ValueError(f"{name}: unknown config key(s) {unknown}; allowed: {list(config_keys(name))}")
    with staging(out_dir) as directory:
        fields = _MODULES[name].prepare(name, cfg, directory, offline)
        config = json.loads(json.dumps(cfg, default=str))  # paths as strings: the manifest is JSON
        return write_manifest(directory, {"name": name, **fields, "config": config})


def __getattr__(name: str) -> Any:
    if name not in LOADERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.prepared"), name)


__all__ = [
    "DATASETS",
    "DataError",
    "Prepared",
    "config_keys",
    "load_prepared",
    "normalize_images",
    "prepare_dataset",
    "text_windows",
]
