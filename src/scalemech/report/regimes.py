"""The training states a claim is decided in (docs/science.md §6): trained, and early in training.

The papers reason about a trained reference model, and say so; at trained models the mean activation
gradient is small and its statistics can vanish within their noise, while early in training they are
large. So every claim whose tables are all measured again at an early weight snapshot (``experiments.early``:
the tables schema's ``early`` list) is decided twice: on the final checkpoints (its own row, regime
``trained``) and on the ``early_<table>`` tables (the row ``<claim> early``, regime ``early training: step
s``), by the very same rule. Claims about anything else name their own regime (``Claim.regime``).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from ..core.tables import EARLY, early_tables
from .common import Claim, NotMeasured, Result, Tables

EARLY_CLAIM = " early"  # the id of a claim's early-training row: "<claim> early"
EARLY_REGIME = "early training"


def measured_early(claim: Claim) -> bool:
    """Whether every table ``claim`` reads is measured again at an early snapshot."""
    return bool(claim.reads) and all(EARLY + name in early_tables() for name in claim.reads)


def early_view(tables: Tables) -> dict[str, pd.DataFrame]:
    """The tables with each table of the early list replaced by its ``early_<table>`` (removed where absent)."""
    base = {name.removeprefix(EARLY) for name in early_tables()}
    view = {name: frame for name, frame in tables.items() if name not in base}
    view.update({name.removeprefix(EARLY): tables[name] for name in early_tables() if name in tables})
    return view


def early_claim(claim: Claim) -> Claim:
    """``claim`` decided by the same rule on the early snapshot's tables (not measured without them)."""

    def evaluate(tables: Tables) -> Result:
        missing = [EARLY + name for name in claim.reads if EARLY + name not in tables]
        if missing:
            raise NotMeasured(f"no {', '.join(missing)} table (experiments: early, with train.snapshots)")
        return claim.evaluate(early_view(tables))

    return dataclasses.replace(
        claim,
        id=claim.id + EARLY_CLAIM,
        evaluate=evaluate,
        reads={EARLY + name: columns for name, columns in claim.reads.items()},
        figure=None,
        regime=EARLY_REGIME,
    )


def with_early(claims: list[Claim]) -> list[Claim]:
    """``claims``, each measured early followed by its early-training twin (``early_claim``)."""
    return [twin for claim in claims for twin in (claim, *([early_claim(claim)] * measured_early(claim)))]


def regime_of(claim: Claim, tables: Tables) -> str:
    """The regime cell of ``claim``'s row: its ``regime``, with the snapshot steps of the early tables it reads."""
    if claim.regime != EARLY_REGIME:
        return claim.regime
    steps = sorted({int(s) for name in claim.reads if name in tables for s in tables[name]["step"].dropna()})
    return f"{EARLY_REGIME}: step {', '.join(map(str, steps))}" if steps else EARLY_REGIME
