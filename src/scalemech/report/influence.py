"""One model decides? How many single-model removals change a claim's verdict (docs/science.md §6).

A verdict that one model carries is not a finding about the architectures: each claim is judged again on
the tables without each one of the models it rests on, as the report judges it (the training criterion
applied, the seeds checked: ``seeds.reseeded``), and its row states how many of those removals change its
verdict (``k of n``). The check reruns the report once per model, so the report's job pays ``n`` times the
cost of its claims.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .common import CONFIRMED, REFUTED, Claim, Tables
from .seeds import by_seed, reseeded
from .subset import restricted
from .trained import models_of


def model_names(tables: Tables) -> list[tuple[str, str]]:
    """Every ``(dataset, model)`` in the tables, sorted."""
    names = set()
    for frame in tables.values():
        if {"dataset", "model"} <= set(frame.columns):
            names |= set(zip(frame["dataset"].astype(str), frame["model"].astype(str)))
    return sorted(names)


def without(tables: Tables, name: tuple[str, str]) -> dict[str, pd.DataFrame]:
    """The tables without the rows of the model ``name`` (``subset.restricted``: a fitted table fitted again)."""

    def keep(frame: pd.DataFrame) -> pd.Series | None:
        if not {"dataset", "model"} <= set(frame.columns):
            return None
        return ~((frame["dataset"].astype(str) == name[0]) & (frame["model"].astype(str) == name[1]))

    return restricted(tables, keep)


def reads_model(claim: Claim, tables: Tables, name: tuple[str, str]) -> bool:
    """Whether a table ``claim`` reads holds a row of the model ``name``."""
    return any(
        bool(((frame["dataset"].astype(str) == name[0]) & (frame["model"].astype(str) == name[1])).any())
        for table in claim.reads
        if (frame := tables.get(table)) is not None and {"dataset", "model"} <= set(frame.columns)
    )


def removals(claims: Sequence[Claim], tables: Tables, verdicts: Sequence[str]) -> list[str]:
    """Per claim ``k of n``: of the ``n`` models in the tables it reads, how many, removed alone, change its
    ``verdict`` (judged on all seeds, then against each seed alone); empty where it reads no model."""
    changed = dict.fromkeys(range(len(claims)), 0)
    for name in model_names(tables):
        readers = [i for i, claim in enumerate(claims) if reads_model(claim, tables, name)]
        if not readers:
            continue
        cut, seeds = without(tables, name), None
        for i in readers:
            result = claims[i].judge(cut)
            if result.verdict in (CONFIRMED, REFUTED):  # the seeds' check can only turn these fragile
                seeds = seeds if seeds is not None else by_seed(cut)
                result, _ = reseeded(claims[i], result, seeds)
            changed[i] += result.verdict != verdicts[i]
    return [f"{changed[i]} of {n}" if (n := models_of(tables, claim)) else "" for i, claim in enumerate(claims)]
