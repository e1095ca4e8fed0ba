"""G1 (E11, *extension*): the certificate ranks a model's insertion points by the gain growing there
realizes (docs/science.md §5 E11, §6).

Within each model and snapshot, Spearman's ρ between ``predicted_gain`` (``block_grad_norm``, the
first-order gain certify ranks by) and the realized held-out ``gain_old = L(old) − L(grown)`` over its
insertion points with both finite (fewer than ``MIN_POINTS``, or a constant column: not usable,
counted). Fisher's ``z = atanh ρ``, where ``|ρ| = 1`` is taken as ``1 − 6/(n(n² − 1))``, halfway to the
nearest attainable ρ of ``n`` points (so z stays finite: with 3 points ρ = ±1 by chance one time in
three). Models are the units: per model the mean z over its snapshots, across models the mean with a
95 % t interval (``units``, equal weights: z has no per-row SE). Confirmed when the interval lies
above 0, refuted when below, else not detectable with its limit and MDE; the final and the signal
snapshot, and each family, are stated beside it (back-transformed ρ), not decided on.

The helpers the three growth rules share live here (``growth_rows``, ``over_models``, ``split``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ...core.tables import model_keys
from ..common import NOT_DETECTABLE, Claim, NotMeasured, Result, Tables, table
from ..units import Estimate, across_models, per_model

MIN_POINTS = 3  # insertion points a rank correlation needs
READS = {"growth": ["snapshot", "point_index", "predicted_gain", "gain_old"]}


def growth_rows(tables: Tables, columns: Sequence[str]) -> pd.DataFrame:
    """The growth table (model keys, ``snapshot`` and ``columns`` required); NotMeasured without it."""
    return table(tables, "growth", ["snapshot", *columns])


def _units(
    frame: pd.DataFrame, value: str, se: str | None, by: Sequence[str] = (), scaled: bool = False
) -> pd.DataFrame:
    """``per_model`` (× ``by``) of the rows with a finite ``value`` (and ``se``); ``scaled``: within each family
    (× ``by``) divided by the RMS of their SEs first (of the values without ``se``)."""
    finite = np.isfinite(frame[value].astype(float))
    if se is not None:
        finite &= np.isfinite(frame[se].astype(float))
    cells = list(dict.fromkeys(["family", *by])) if scaled else ()
    return per_model(frame[finite], value, se, by, scale_cells=cells, scale_by_se=se is not None)


def over_models(frame: pd.DataFrame, value: str, se: str | None = None, scaled: bool = False) -> Estimate:
    """Per model the mean of ``value`` over its rows (snapshots; SE the mean of ``se``), across models
    the random-effects mean with a t interval (``units``); ``scaled``: each family's values and SEs
    first divided by the RMS of its SEs (families of different loss scales weigh alike, in units of their
    evaluation noise, the same for a seed alone as for all seeds)."""
    return across_models(_units(frame, value, se, scaled=scaled))


def split(
    frame: pd.DataFrame, column: str, value: str, se: str | None = None, scaled: bool = False
) -> dict[str, Estimate]:
    """``over_models`` of the rows of each value of ``column`` (a family, a snapshot, a strategy), in sorted
    order; the per-model means of all values in one grouping."""
    units = _units(frame, value, se, [column], scaled)
    parts = dict(tuple(units.groupby(column, sort=False)))  # a value without a finite row: none
    return {
        str(v): across_models(parts.get(v, units.head(0)))
        for v in frame[column].dropna().drop_duplicates().sort_values()
    }


def fisher_z(rho: float, n: int) -> float:
    """``atanh ρ`` with ``|ρ| ≤ 1 − 6/(n(n² − 1))`` (halfway between 1 and the next attainable Spearman ρ)."""
    cap = 1 - 6 / (n * (n**2 - 1))
    return float(np.arctanh(np.clip(rho, -cap, cap)))


def rank_correlations(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per model × snapshot: model keys, ``snapshot``, ``n`` (points with both values finite),
    ``rho`` (``scipy.stats.spearmanr``; NaN below ``MIN_POINTS`` or for a constant column) and ``z``."""
    finite = np.isfinite(rows[["predicted_gain", "gain_old"]].astype(float)).all(axis=1)
    out = []
    for keys, part in rows.groupby(model_keys() + ["snapshot"], sort=True):
        used = part[finite[part.index]]
        x, y = used["predicted_gain"].astype(float), used["gain_old"].astype(float)
        usable = len(used) >= MIN_POINTS and x.nunique() > 1 and y.nunique() > 1
        rho = float(stats.spearmanr(x, y).statistic) if usable else np.nan
        z = fisher_z(rho, len(used)) if usable else np.nan
        out.append(dict(zip(model_keys() + ["snapshot"], keys)) | dict(n=len(used), rho=rho, z=z))
    return pd.DataFrame(out)


def rho_text(estimate: Estimate) -> str:
    """The mean z back-transformed: ``tanh z̄ [tanh lo, tanh hi]``."""
    back = Estimate(*np.tanh([estimate.value, estimate.lo, estimate.hi]), estimate.units, estimate.df)
    return back.text(2)


def rule_g1(tables: Tables) -> Result:
    """Mean over models of the per-model mean Fisher z of Spearman(predicted_gain, gain_old):
    confirmed above 0, refuted below 0."""
    rows = growth_rows(tables, READS["growth"][1:])
    units = rank_correlations(rows)
    usable = units[units["z"].notna()]
    if usable.empty:
        raise NotMeasured(f"no model × snapshot of growth has ≥ {MIN_POINTS} points with finite gains")
    pooled = over_models(usable, "z")
    verdict = pooled.verdict(sign=1)
    snapshots = split(usable, "snapshot", "z")
    statistic = f"ρ {rho_text(pooled)} ({pooled.counted}); " + "; ".join(
        f"{name} {rho_text(estimate)}" for name, estimate in snapshots.items()
    )
    if verdict == NOT_DETECTABLE:
        statistic += "; " + pooled.null_text("mean z")
    families = split(usable, "family", "z")
    detail = (
        f"{len(rows)} rows; {len(usable)} of {len(units)} model × snapshot units with ≥ {MIN_POINTS} points "
        f"(median {usable['n'].median():g}) entered, {len(units) - len(usable)} not usable; per model the mean "
        f"z over its snapshots, across {pooled.counted} t with {pooled.df} df (mean z {pooled.text(2)}); "
        + "; ".join(f"{family}: ρ {rho_text(e)} at {e.counted}" for family, e in families.items())
        + "; "
        + "; ".join(f"{name} snapshot: {e.counted}, t with {e.df} df" for name, e in snapshots.items())
    )
    return Result(verdict, statistic, detail, (("mean z", pooled),))


G1 = Claim(
    "G1",
    "The certificate ranks a model's insertion points by the held-out gain that growing one block there "
    "realizes (E11, extension).",
    f"per model × snapshot, Spearman ρ between predicted_gain and gain_old = L(old) − L(grown) over the "
    f"insertion points (≥ {MIN_POINTS} with both finite, else not usable); Fisher z = atanh ρ (|ρ| = 1 taken "
    "as 1 − 6/(n(n² − 1))); per model the mean z over its snapshots, across models the mean with a 95 % t "
    "interval: confirmed if above 0, refuted if below 0, else not detectable with its limit and MDE; ρ per "
    "snapshot (final, signal) and per family beside it, not decided on",
    rule_g1,
    READS,
    figure="F10_growth",
)
