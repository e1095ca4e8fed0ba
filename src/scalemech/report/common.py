"""What every claim rule shares: the verdict names, the result of a rule, and table access.

Verdicts (docs/science.md §6–8): ``confirmed`` / ``refuted`` when the deciding interval excludes the
null in the paper's direction / the opposite one; ``not confirmed`` when a part of the claim fails
although it is measured; ``not detectable`` when the interval contains the null (the row then states
the bound of the tested quantity and the minimum detectable effect of its test); ``not measured in
this configuration`` when a table, a column or enough units are missing; ``fragile`` when two or more
seeds disagree (``seeds``: a heterogeneity test of their estimates, or opposite decided verdicts alone;
never confirmed or refuted then).

Each rule's module names the columns it reads (``READS``: table → columns, after the model keys).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import pandas as pd

from ..core.tables import model_keys
from ..stats.levels import UCB_LEVEL

CONFIRMED, NOT_CONFIRMED, REFUTED = "confirmed", "not confirmed", "refuted"
NOT_DETECTABLE = "not detectable"
NOT_MEASURED = "not measured in this configuration"
FRAGILE = "fragile"  # the seeds disagree (seeds.decided)
LEVEL = 0.95  # two-sided level of every deciding interval (2.5 % per direction)
Z_UCB = NormalDist().inv_cdf(UCB_LEVEL)  # one-sided upper confidence bounds (the tables' *_ucb)
POWER = 0.80  # the power at which a null states its minimum detectable effect
Z_POWER = NormalDist().inv_cdf(POWER)
RESEED_LEVEL = 0.10  # level of the seeds' heterogeneity test (seeds.disagreement): the usual one for Cochran's Q
MIN_LEVELS = 3  # distinct depths, widths or sample sizes a trend needs (two points are only a sign)

Tables = Mapping[str, pd.DataFrame]


class NotMeasured(Exception):
    """The tables cannot test a claim; the message says why."""


@dataclass(frozen=True)
class Result:
    """A rule's outcome: ``statistic`` is the one deciding number with its interval or bound (≤ ~200
    characters, the front page's cell); ``detail`` says how it was reached and with how many rows/units;
    ``estimates`` names the estimates the verdict was decided on (what ``seeds`` compares across seeds)."""

    verdict: str
    statistic: str
    detail: str = ""
    estimates: tuple[tuple[str, Any], ...] = field(default=(), compare=False)  # (part, units.Estimate): deciding


@dataclass(frozen=True)
class Claim:
    """A claim of the papers and the rule that judges it."""

    id: str
    statement: str  # what the paper says
    rule: str  # how the verdict is reached
    evaluate: Callable[[Tables], Result]
    reads: Mapping[str, list[str]]  # table -> the columns the rule reads (its module's READS)
    figure: str | None = None  # the stem of the figure that shows its statistic (``figures.FIGURES``)
    regime: str = "trained"  # the training state of the models it is decided on (``regimes``)

    def judge(self, tables: Tables) -> Result:
        """``evaluate``, a NotMeasured as its verdict with the reason as the statistic."""
        try:
            return self.evaluate(tables)
        except NotMeasured as why:
            return Result(NOT_MEASURED, str(why))


def table(tables: Tables, name: str, required: list[str]) -> pd.DataFrame:
    """``tables[name]`` (all rows, NaN included); NotMeasured if it is missing or empty, or lacks a
    ``required`` column (a table written before the column existed: rerun measure)."""
    frame = tables.get(name)
    if frame is None or frame.empty:
        raise NotMeasured(f"no {name} table")
    missing = [c for c in model_keys() + required if c not in frame.columns]
    if missing:
        raise NotMeasured(f"{name} needs column(s) {', '.join(missing)} (rerun measure)")
    return frame


def only(frame: pd.DataFrame, column: str, value: object, name: str) -> pd.DataFrame:
    """The rows with ``column == value``; NotMeasured if there are none."""
    rows = frame[frame[column] == value]
    if rows.empty:
        raise NotMeasured(f"{name} has no rows with {column}={value!r} (has {sorted(frame[column].unique())})")
    return rows


def levels_present(frame: pd.DataFrame, strata: list[str], x: str, name: str) -> None:
    """NotMeasured unless some stratum of ``frame`` has ≥ MIN_LEVELS distinct ``x``."""
    if frame.empty or frame.groupby(strata)[x].nunique().max() < MIN_LEVELS:
        raise NotMeasured(f"no ({', '.join(strata)}) group of {name} has ≥ {MIN_LEVELS} values of {x}")


def agreed(*verdicts: str) -> str:
    """One verdict from parts that must agree: their common verdict; NOT_CONFIRMED when one part
    confirms and another refutes; else NOT_DETECTABLE."""
    if len(set(verdicts)) == 1:
        return verdicts[0]
    return NOT_CONFIRMED if {CONFIRMED, REFUTED} <= set(verdicts) else NOT_DETECTABLE


def combined(*verdicts: str) -> str:
    """One verdict from parts (families, or the parts of one claim) that never hides a refutation:
    NOT_CONFIRMED when one part confirms and another refutes; REFUTED when any part refutes; CONFIRMED
    when all confirm; NOT_CONFIRMED when a part is not confirmed; else NOT_DETECTABLE."""
    found = set(verdicts)
    if {CONFIRMED, REFUTED} <= found:
        return NOT_CONFIRMED
    if REFUTED in found:
        return REFUTED
    if found == {CONFIRMED}:
        return CONFIRMED
    return NOT_CONFIRMED if NOT_CONFIRMED in found else NOT_DETECTABLE


def outward(value: float, digits: int, up: bool) -> str:
    """``value`` at ``digits`` significant digits, rounded away from an interval's inside: up (an upper
    limit) or down (a lower one), so a printed bound never claims more than the interval does."""
    if not math.isfinite(value) or value == 0:
        return f"{value:.{digits}g}"
    scale = 10.0 ** (math.floor(math.log10(abs(value))) - digits + 1)
    steps = value / scale
    steps = math.ceil(steps - 1e-9) if up else math.floor(steps + 1e-9)
    return f"{steps * scale:.{digits}g}"


def mde(se: pd.Series) -> float:
    """Minimum detectable effect of one row at 80 % power, one-sided 5 %: (z₀.₉₅ + z₀.₈₀)·median SE
    (the row-level bound of a null's detail; the verdict's own MDE is ``units.Estimate.mde``)."""
    return float((Z_UCB + Z_POWER) * se.median())


def below(limit: float, paper: float) -> str:
    """How far an interval's upper ``limit`` lies below the ``paper``'s value: ``x orders of magnitude below``
    (log₁₀ of their ratio, rounded down), or that the interval reaches no positive value."""
    if not limit > 0:
        return f"at or below 0, under any positive value (the paper's {paper:.3g})"
    orders = math.floor(math.log10(paper / limit) + 1e-9)
    return f"{orders:d} order{'s' * (orders != 1)} of magnitude below the paper's {paper:.3g}"
