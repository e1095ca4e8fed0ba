"""The claims in report order and ``claims``: a dict of the run's tables in, one verdict row per claim out.

A verdict comes from a rule fixed in code before any data are seen, one module per claim, its
thresholds named constants and its rule printed in the report (docs/science.md §6: nothing is tuned
to make a verdict pass).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from . import influence
from .common import Claim, Tables
from .regimes import regime_of, with_early
from .rules import claim_modules
from .seeds import by_seed, reseeded
from .trained import TRAINED, models_of, rests_on, trained_only, training_check

PAPERS = "DWEG"  # report order: Paper D, Paper W, the expansion (E8), growth (G); then by number


def _report_order(claim: Claim) -> tuple[int, int, str]:
    digits = "".join(c for c in claim.id[1:].split(" ")[0] if c.isdigit())
    paper = PAPERS.index(claim.id[0]) if claim.id[0] in PAPERS else len(PAPERS)
    return paper, int(digits or 0), claim.id


_FOUND = {value.id: value for module in claim_modules() for value in vars(module).values() if isinstance(value, Claim)}
CLAIMS = with_early(sorted(_FOUND.values(), key=_report_order))
"""Every claim in report order, each measured early followed by its early-training twin (``regimes``)."""
REMOVALS = "removals"  # the column of single-model removals that change the verdict (``claims(removals=True)``)
COLUMNS = ["claim", "regime", "statement", "statistic", "rule", "verdict", "per_seed", "models", "detail"]
CLAIM_FIGURES = {claim.id: claim.figure for claim in CLAIMS if claim.figure}
"""The figure that shows each claim's statistic (W5 has none: its numbers are the cost table's)."""


def claims(
    tables: Tables,
    benchmarks: pd.DataFrame | Mapping[str, float] | None = None,
    criterion: str = TRAINED,
    removals: bool = False,
) -> pd.DataFrame:
    """One row per claim: claim, regime (the training state it is decided in, ``regimes``), statement,
    statistic (the deciding number, ≤ ~200 characters), rule,
    verdict (on all seeds; ``fragile`` when seeds judged alone disagree), per_seed (each seed's verdict
    alone, ``seeds``), models (how many trained models of the tables it reads it rests on), detail (how
    many rows and units, the rest). Models that fail the training ``criterion`` (``trained``) are left out
    of every claim first. ``benchmarks`` (columns ``w5.BENCHMARK_COLUMNS``, or one dict of them) overrides
    ``tables['benchmarks']``. ``removals``: a column ``removals``, how many single-model removals change each
    verdict (``influence.removals``; the claims judged again once per model)."""
    tables = dict(tables)
    if benchmarks is not None:
        tables["benchmarks"] = benchmarks if isinstance(benchmarks, pd.DataFrame) else pd.DataFrame([dict(benchmarks)])
    kept = trained_only(tables, training_check(tables.get("training"), criterion))
    seeds, rows = by_seed(kept), []
    for claim in CLAIMS:
        result, per_seed = reseeded(claim, claim.judge(kept), seeds)
        models = rests_on(models_of(kept, claim), models_of(tables, claim))
        regime = regime_of(claim, kept)
        row = [claim.id, regime, claim.statement, result.statistic, claim.rule, result.verdict, per_seed, models]
        row.append(result.detail)
        rows.append(dict(zip(COLUMNS, row)))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    if removals:
        frame[REMOVALS] = influence.removals(CLAIMS, kept, frame["verdict"].tolist())
    return frame
