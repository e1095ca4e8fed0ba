"""Datasets: one prepare step per dataset writes tensors and a manifest; loads are checked.

A config names each dataset (``datasets: {<name>: {source: <source>, ...}}``; ``source`` defaults to the
name); its source is a module registered in ``SOURCES``, which reads its own config keys (``CONFIG_KEYS``)
and says what it holds (``KIND``: ``image`` or ``text``). ``prepare_dataset(name, cfg, out_dir)`` writes
``out_dir`` (``results/<run>/data/<name>/``): ``{train,test}_x.npy`` (+ ``{train,test}_y.npy`` for images)
and ``manifest.json``; see ``store`` for the format and checks, and each source module for its keys:

- ``cifar10``, ``cifar100`` (``cifar``), ``imagenet`` (``imagenet``), ``mnist5k`` (``mnist``);
- ``tinyshakespeare``, ``corpus``, ``pystdlib``, ``pydoc`` (``text``, byte level);
- a user's own files, under a name of their own: ``images`` (``arrays``: an ``.npz`` of image arrays),
  ``corpus`` (a UTF-8 text file) and ``token_ids`` (``token_ids``: a ``.npy`` or ``.bin`` of token ids).

``load_prepared(out_dir)`` returns a ``Prepared`` with memory-mapped tensors.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from . import arrays, cifar, imagenet, mnist, text, token_ids
from .store import DataError, staging, write_manifest

# The loaders load torch, on first use (PEP 562): the workflow's parse and the config checks,
# which read only the dataset names and keys, never do.
LOADERS = ("Prepared", "load_prepared", "normalize_images", "text_windows")

SOURCES: dict[str, ModuleType] = {
    "cifar10": cifar,
    "cifar100": cifar,
    "imagenet": imagenet,
    "mnist5k": mnist,
    "images": arrays,
    "tinyshakespeare": text,
    "pystdlib": text,
    "pydoc": text,
    "corpus": text,
    "token_ids": token_ids,
}
"""The registry of sources: a source module reads its ``CONFIG_KEYS`` (a tuple, or one per source it
serves), holds its ``KIND`` and ``prepare(source, cfg, directory, offline)`` writes it; ``REQUIRED``
(optional) names the keys it cannot do without."""


def _per_source(value: tuple | dict, source: str) -> tuple[str, ...]:
    return tuple(value.get(source, ()) if isinstance(value, dict) else value)


def source_of(name: str, settings: dict) -> str:
    """The source of dataset ``name`` of a config: its ``source`` key, else its name."""
    return settings.get("source", name)


def config_keys(source: str) -> tuple[str, ...]:
    """The config keys ``source`` accepts (``source`` itself is always allowed)."""
    return _per_source(SOURCES[source].CONFIG_KEYS, source)


def required_keys(source: str) -> tuple[str, ...]:
    """The config keys ``source`` cannot do without (a local file's ``path``)."""
    return _per_source(getattr(SOURCES[source], "REQUIRED", ()), source)


def kind_of(source: str) -> str:
    """What ``source`` holds: ``image`` (classified images) or ``text`` (a token stream)."""
    return SOURCES[source].KIND


def holds_bytes(source: str) -> bool:
    """Whether ``source`` is text as bytes (which a pretrained checkpoint tokenizes), not token ids."""
    return kind_of(source) == "text" and SOURCES[source].BYTES


def prepare_dataset(name: str, cfg: dict, out_dir: str | Path, offline: bool = True) -> dict:
    """Prepare dataset ``name`` from its config block ``cfg`` (its ``source``, default the name, and
    that source's keys) into ``out_dir`` and return the manifest. Output appears only complete (staged
    in a sibling directory, then renamed); ``offline`` forbids downloads."""
    source = source_of(name, cfg)
    if source not in SOURCES:
        raise ValueError(f"dataset {name!r}: unknown source {source!r}; allowed: {list(SOURCES)}")
    settings = {key: value for key, value in cfg.items() if key != "source"}
    unknown = sorted(set(settings) - set(config_keys(source)))
    if unknown:
        raise ValueError(f"{name}: unknown config key(s) {unknown}; allowed: {list(config_keys(source))}")
    with staging(out_dir) as directory:
        fields = SOURCES[source].prepare(source, settings, directory, offline)
        config = json.loads(json.dumps(cfg, default=str))  # paths as strings: the manifest is JSON
        return write_manifest(directory, {"name": name, **fields, "config": config})


def __getattr__(name: str) -> Any:
    if name not in LOADERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.prepared"), name)


__all__ = [
    "SOURCES",
    "DataError",
    "Prepared",
    "config_keys",
    "holds_bytes",
    "kind_of",
    "load_prepared",
    "normalize_images",
    "prepare_dataset",
    "required_keys",
    "source_of",
    "text_windows",
]
