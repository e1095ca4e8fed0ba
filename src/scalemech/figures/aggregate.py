"""Aggregation shared by the figures (``scalemech.figures``) and the claims report (``scalemech.report``):
seeds and insertion points collapsed, the misalignment table's default (M, K), flags read from CSV."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

GRID_KEYS = ["dataset", "family", "depth", "width"]  # a grid cell: what seeds are averaged over


def over_seeds(frame: pd.DataFrame, values: Sequence[str], by: Sequence[str] = ()) -> pd.DataFrame:
    """Mean of ``values`` over seeds: one row per (dataset, family, depth, width) (× ``by``)."""
    keys = GRID_KEYS + list(by)
    return frame.groupby(keys, as_index=False, dropna=False)[list(values)].mean()


def default_mk(misalignment: pd.DataFrame) -> tuple[int, int]:
    """The largest ``M = K`` at which some ``p_misalign > 0``; else the largest ``M = K``; else the largest (M, K)."""
    square = misalignment[misalignment["M"] == misalignment["K"]]
    positive = square[square["p_misalign"] > 0]
    pool = positive if len(positive) else square if len(square) else misalignment
    if pool.empty:
        raise ValueError("misalignment table has no rows to pick (M, K) from")
    M, K = pool.sort_values(["M", "K"]).iloc[-1][["M", "K"]]
    return int(M), int(K)


def choose(frame: pd.DataFrame, column: str, wanted: object | None) -> object:
    """``wanted`` if ``frame[column]`` holds it, the first sorted value when ``wanted`` is None."""
    present = sorted(frame[column].dropna().unique())
    if not present:
        raise ValueError(f"column {column!r} holds no values to choose from")
    if wanted is None:
        return present[0]
    if wanted not in present:
        raise ValueError(f"{column}={wanted!r} is not in the table; allowed: {present}")
    return wanted


def one_view(frame: pd.DataFrame, view: object | None, split: object | None) -> tuple[pd.DataFrame, object, object]:
    """The rows of ``frame`` at one gradient view and split, each ``choose``n; with the view and split chosen."""
    view, split = choose(frame, "view", view), choose(frame, "split", split)
    return frame[(frame["view"] == view) & (frame["split"] == split)], view, split


def as_flag(values: pd.Series) -> pd.Series:
    """A boolean column as floats 1/0, NaN where missing (CSV gives bools, strings or NaN)."""
    text = values.astype(str).str.strip().str.lower()
    return pd.Series(
        np.where(text.isin(["true", "1", "1.0"]), 1.0, np.where(text.isin(["false", "0", "0.0"]), 0.0, np.nan)),
        index=values.index,
    )
