"""Verdicts that survive a reseed (docs/science.md §6): each claim judged again on each seed's models alone.

Seeds are independent draws of the training randomness, so one seed's models are the whole run
again at fewer units. When at least two seeds are measured alone and their verdicts differ, the claim
is ``fragile``: a verdict that a reseed undoes is not a finding, whatever all seeds together say.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .common import FRAGILE, NOT_MEASURED, Claim, Result, Tables
from .subset import restricted

SEED = "seed"
UNCHECKED = "not checked against a reseed"


def of_seed(tables: Tables, seed: int) -> dict[str, pd.DataFrame]:
    """The tables restricted to ``seed``'s rows (``subset.restricted``); one without a ``seed`` column passes
    unchanged, one of ``subset.REFIT`` is fitted again on the seed's rows of its source."""
    return restricted(tables, lambda frame: frame[SEED] == seed if SEED in frame else None)


def by_seed(tables: Tables) -> dict[int, Tables]:
    """seed → the tables of that seed alone, for every seed of the tables' rows (sorted); with one
    seed the tables themselves."""
    seeds = sorted({int(s) for frame in tables.values() if SEED in frame for s in frame[SEED].dropna().unique()})
    return {seeds[0]: tables} if len(seeds) == 1 else {seed: of_seed(tables, seed) for seed in seeds}


def decided(pooled: str, alone: Mapping[int, str]) -> tuple[str, str]:
    """The claim's verdict and its ``per_seed`` cell from the verdict on all seeds (``pooled``) and on
    each seed alone: FRAGILE when ≥ 2 seeds are measured alone and their verdicts are not all equal;
    else ``pooled`` (a claim not measured on all seeds stays not measured, its cell empty)."""
    if pooled == NOT_MEASURED:
        return NOT_MEASURED, ""
    if len(alone) < 2:
        return pooled, f"{f'one seed ({next(iter(alone))})' if alone else 'no seed column'}: {UNCHECKED}"
    cell = "; ".join(f"seed {seed}: {'not measured' if v == NOT_MEASURED else v}" for seed, v in alone.items())
    judged = [v for v in alone.values() if v != NOT_MEASURED]
    if len(judged) < 2:
        return pooled, f"{cell} (fewer than two seeds measured alone: {UNCHECKED})"
    return (FRAGILE if len(set(judged)) > 1 else pooled), cell


def reseeded(claim: Claim, pooled: Result, seeds: Mapping[int, Tables]) -> tuple[Result, str]:
    """``claim``'s result on all seeds (``pooled``) checked against each seed alone (``by_seed``): the
    claim's result (FRAGILE keeps the pooled statistic and detail, what the seeds said appended) and
    its ``per_seed`` cell."""
    if len(seeds) < 2 or pooled.verdict == NOT_MEASURED:
        alone = dict.fromkeys(seeds, pooled.verdict)
    else:
        alone = {seed: claim.judge(tables).verdict for seed, tables in seeds.items()}
    verdict, cell = decided(pooled.verdict, alone)
    if verdict != FRAGILE:
        return pooled, cell
    said = f"fragile: the seeds alone disagree ({cell}); all seeds together: {pooled.verdict}"
    return Result(FRAGILE, pooled.statistic, f"{pooled.detail}; {said}" if pooled.detail else said), cell
