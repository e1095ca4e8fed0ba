"""Tidy tables: the only interface between measurement and figures.

Column lists live in ``scalemech/schemas/tables.schema.yaml`` (linked from
``workflow/schemas/``); every table starts with the model keys
``run, dataset, family, depth, width, seed, model``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .integrity import verify, write_checked


@cache
def _schema() -> dict:
    return yaml.safe_load(resources.files("scalemech").joinpath("schemas", "tables.schema.yaml").read_text())


def model_keys() -> list[str]:
    """The key columns that identify a model in every table."""
    return list(_schema()["model_keys"])


def group_codes(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """Each row's group among the distinct values of ``keys``, numbered 0, 1, … in order of first
    appearance, −1 where a key is missing: ``frame.groupby(keys, sort=False).ngroup()`` at a fraction
    of its cost (one ``pandas.factorize`` per key)."""
    codes, missing = np.zeros(len(frame), np.int64), np.zeros(len(frame), bool)
    for key in keys:
        column, uniques = pd.factorize(frame[key])
        missing |= column < 0
        codes = pd.factorize(codes * len(uniques) + column)[0]  # compact: no overflow
    out = np.full(len(frame), -1, np.int64)
    out[~missing] = pd.factorize(codes[~missing])[0]
    return out


def first_rows(codes: np.ndarray) -> np.ndarray:
    """The position of each group's first row, in the order of the groups (``codes`` from ``group_codes``)."""
    kept = np.flatnonzero(codes >= 0)
    return kept[np.unique(codes[kept], return_index=True)[1]]


def timing_columns() -> list[str]:
    """Columns that time the machine (seconds, throughput): the only ones two runs may differ in."""
    return list(_schema()["timing"])


EARLY = "early_"  # the prefix of a table measured again at an early weight snapshot


def early_tables() -> list[str]:
    """The tables measured again at an early snapshot: ``early_<table>`` for each the schema's ``early`` lists."""
    return [EARLY + name for name in _schema()["early"]]


def columns(table: str) -> list[str]:
    """All columns of ``table``: model keys (unless the table is about no model), then its own; an
    ``early_<table>`` (``early_tables``) has ``<table>``'s and the snapshot's ``step``."""
    if table in early_tables():
        return columns(table.removeprefix(EARLY)) + ["step"]
    tables = _schema()["tables"]
    if table not in tables:
        raise KeyError(f"unknown table {table!r}; known tables: {sorted([*tables, *early_tables()])}")
    keys = [] if table in _schema()["unkeyed"] else model_keys()
    return keys + list(tables[table]["columns"])


def check_columns(frame: pd.DataFrame, table: str, required: list[str] | None = None) -> pd.DataFrame:
    """Raise ``ValueError`` naming every column of ``table`` (or of ``required``) missing from ``frame``."""
    wanted = columns(table) if required is None else required
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise ValueError(f"table {table!r} lacks column(s) {missing}; it has {list(frame.columns)}")
    return frame


def write_table(frame: pd.DataFrame, path: str | Path, table: str) -> None:
    """Check ``frame`` against the schema of ``table``, then write it as CSV or parquet by suffix,
    atomically and with a sha256 sidecar (``scalemech.core.integrity``)."""
    check_columns(frame, table)
    path = Path(path)
    ordered = frame[columns(table) + [c for c in frame.columns if c not in columns(table)]]
    if path.suffix == ".parquet":
        write_checked(path, lambda tmp: ordered.to_parquet(tmp, index=False))
    else:
        write_checked(path, lambda tmp: ordered.to_csv(tmp, index=False))


def read_table(path: str | Path, table: str) -> pd.DataFrame:
    """Read a CSV/parquet table and check it has the columns of ``table``; a table written by
    ``write_table`` must still match its sha256 (a truncated or edited file is refused by name)."""
    path = Path(path)
    verify(path, required=False)
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    return check_columns(frame, table)
