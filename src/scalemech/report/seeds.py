"""Verdicts that survive a reseed (docs/science.md §6): the seeds' estimates compared, each claim judged
again on each seed's models alone.

Seeds are independent draws of the training randomness, so one seed's models are the whole run again
at fewer units. Each seed alone gives the claim's deciding estimates (``Result.estimates``, e.g. the
slope, or each part of a claim of two parts). The seeds disagree when Welch's heterogeneity test of
those estimates (``statsmodels.stats.oneway.anova_generic``: the seeds' estimates with their SEs and
residual df; for two seeds the Welch t test of their difference) rejects at ``RESEED_LEVEL``,
Bonferroni over the parts, or when two seeds alone reach opposite decided verdicts (confirmed and
refuted). The claim is then ``fragile``: a verdict that a reseed undoes is not a finding. A seed
without the power to decide alone does not make a claim fragile: under a real effect the test rejects
only at its level, so the verdict keeps ``1 − RESEED_LEVEL`` of its power (the printed MDE includes
that cost: ``units.mde_factor``). Where a seed alone has too few models for an interval, the claim is
not checked against a reseed, and its row says so.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from statsmodels.stats.oneway import anova_generic

from .common import CONFIRMED, FRAGILE, NOT_MEASURED, REFUTED, RESEED_LEVEL, Claim, Result, Tables
from .subset import restricted

SEED = "seed"
UNCHECKED = "not checked against a reseed"
TOO_FEW = "too few models alone"


def of_seed(tables: Tables, seed: int) -> dict[str, pd.DataFrame]:
    """The tables restricted to ``seed``'s rows (``subset.restricted``); one without a ``seed`` column passes
    unchanged, one of ``subset.REFIT`` is fitted again on the seed's rows of its source."""
    return restricted(tables, lambda frame: frame[SEED] == seed if SEED in frame else None)


def by_seed(tables: Tables) -> dict[int, Tables]:
    """seed → the tables of that seed alone, for every seed of the tables' rows (sorted); with one
    seed the tables themselves."""
    seeds = sorted({int(s) for frame in tables.values() if SEED in frame for s in frame[SEED].dropna().unique()})
    return {seeds[0]: tables} if len(seeds) == 1 else {seed: of_seed(tables, seed) for seed in seeds}


def disagreement(alone: Mapping[int, Result]) -> float:
    """p-value that the seeds' deciding estimates differ: per part Welch's heterogeneity test of the seeds'
    estimates (weights 1/SE², each seed's residual df), the smallest p times the number of parts
    (Bonferroni, at most 1); NaN where a seed has no estimates or one without an interval (``Estimate.measured``)."""
    parts = [dict(result.estimates) for result in alone.values()]
    names = list(parts[0]) if parts else []
    if not names or any(set(p) != set(names) or not all(e.measured and e.df >= 1 for e in p.values()) for p in parts):
        return np.nan
    pvalues = []
    for name in names:
        estimates = [p[name] for p in parts]
        nobs = np.array([e.df + 1 for e in estimates], float)  # Welch's df per group: nobs − 1
        variances = np.array([e.standard_error**2 for e in estimates]) * nobs  # so that variance/nobs = SE²
        means = np.array([e.value for e in estimates])
        pvalues.append(float(anova_generic(means, variances, nobs, use_var="unequal").pvalue))
    return min(1.0, min(pvalues) * len(names))


def _label(result: Result) -> str:
    """A seed's verdict alone, or ``TOO_FEW`` where one of its deciding estimates has no interval."""
    if result.verdict == NOT_MEASURED:
        return "not measured"
    return TOO_FEW if any(not e.measured for _, e in result.estimates) else result.verdict


def decided(pooled: str, alone: Mapping[int, Result]) -> tuple[str, str]:
    """The claim's verdict and its ``per_seed`` cell from the verdict on all seeds (``pooled``) and each
    seed's result alone: FRAGILE when ≥ 2 seeds are judged alone and their estimates disagree
    (``disagreement`` < ``RESEED_LEVEL``) or their verdicts are confirmed and refuted; else ``pooled``.
    Unchecked (``pooled``, said in the cell) with fewer than two seeds, or where a seed alone is not
    measured or has too few models for an interval (a claim not measured on all seeds: its cell empty)."""
    if pooled == NOT_MEASURED:
        return NOT_MEASURED, ""
    if len(alone) < 2:
        return pooled, f"{f'one seed ({next(iter(alone))})' if alone else 'no seed column'}: {UNCHECKED}"
    labels = {seed: _label(result) for seed, result in alone.items()}
    cell = "; ".join(f"seed {seed}: {label}" for seed, label in labels.items())
    if any(label in ("not measured", TOO_FEW) for label in labels.values()):
        return pooled, f"{cell} ({UNCHECKED})"
    opposite = {CONFIRMED, REFUTED} <= set(labels.values())
    p = disagreement(alone)
    if np.isfinite(p):
        cell += f"; seeds {'differ' if p < RESEED_LEVEL else 'agree'} (Welch p = {p:.2g}, level {RESEED_LEVEL:g})"
    else:
        cell += "; no estimates to compare (opposite verdicts only)"
    return (FRAGILE if opposite or p < RESEED_LEVEL else pooled), cell


def reseeded(claim: Claim, pooled: Result, seeds: Mapping[int, Tables]) -> tuple[Result, str]:
    """``claim``'s result on all seeds (``pooled``) checked against each seed alone (``by_seed``): the
    claim's result (the Kish effective models of its estimates appended to the detail; FRAGILE keeps the
    pooled statistic and detail, what the seeds said appended) and its ``per_seed`` cell."""
    if len(seeds) < 2 or pooled.verdict == NOT_MEASURED:
        alone = dict.fromkeys(seeds, pooled)
    else:
        alone = {seed: claim.judge(tables) for seed, tables in seeds.items()}
    verdict, cell = decided(pooled.verdict, alone)
    weights = "; ".join(f"{name}: {e.weights_text()}" for name, e in pooled.estimates if e.weights_text())
    detail = "; ".join(part for part in (pooled.detail, weights) if part)
    if verdict != FRAGILE:
        return Result(pooled.verdict, pooled.statistic, detail, pooled.estimates), cell
    said = f"fragile: the seeds disagree ({cell}); all seeds together: {pooled.verdict}"
    return Result(FRAGILE, pooled.statistic, f"{detail}; {said}" if detail else said, pooled.estimates), cell
