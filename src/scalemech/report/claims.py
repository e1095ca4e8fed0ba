"""The claims in report order and ``claims``: a dict of the run's tables in, one verdict row per claim out.

A verdict comes from a rule fixed in code before any data are seen, one module per claim, its
thresholds named constants and its rule printed in the report (docs/science.md §6: nothing is tuned
to make a verdict pass).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .common import Tables
from .d1 import D1
from .d2 import D2
from .d3 import D3
from .d4 import D4
from .e8 import E8
from .g1 import G1
from .g2 import G2
from .g3 import G3
from .misalignment import W2, W3
from .seeds import by_seed, reseeded
from .trained import TRAINED, models_of, rests_on, trained_only, training_check
from .w1 import W1
from .w1_paper import W1_PAPER
from .w1_training import W1_TRAINING
from .w4 import W4
from .w5 import W5

CLAIMS = [D1, D2, D3, D4, W1, W1_TRAINING, W1_PAPER, W2, W3, W4, W5, E8, G1, G2, G3]
COLUMNS = ["claim", "statement", "statistic", "rule", "verdict", "per_seed", "models", "detail"]
CLAIM_FIGURES = {
    "D1": "F1_covariance",
    "D2": "F2_signal_decay",
    "D3": "F3_rebound",
    "D4": "F3_rebound",
    "W1": "F4_dalign_vs_width",
    "W1 along training": "F8_dalign_over_training",
    "W1 at the paper's widths": "F9_dalign_at_paper_widths",
    "W2": "F5_misalignment",
    "W3": "F5_misalignment",
    "W4": "F6_intervention",
    "E8": "F7_expansion",
    "G1": "F10_growth",
    "G2": "F10_growth",
    "G3": "F10_growth",
}
"""The figure that shows each claim's statistic (W5 has none: its numbers are the cost table's)."""


def claims(
    tables: Tables,
    benchmarks: pd.DataFrame | Mapping[str, float] | None = None,
    criterion: str = TRAINED,
) -> pd.DataFrame:
    """One row per claim: claim, statement, statistic (the deciding number, ≤ ~200 characters), rule,
    verdict (on all seeds; ``fragile`` when seeds judged alone disagree), per_seed (each seed's verdict
    alone, ``seeds``), models (how many trained models of the tables it reads it rests on), detail (how
    many rows and units, the rest). Models that fail the training ``criterion`` (``trained``) are left out
    of every claim first. ``benchmarks`` (columns ``w5.BENCHMARK_COLUMNS``, or one dict of them) overrides
    ``tables['benchmarks']``."""
    tables = dict(tables)
    if benchmarks is not None:
        tables["benchmarks"] = benchmarks if isinstance(benchmarks, pd.DataFrame) else pd.DataFrame([dict(benchmarks)])
    kept = trained_only(tables, training_check(tables.get("training"), criterion))
    seeds, rows = by_seed(kept), []
    for claim in CLAIMS:
        result, per_seed = reseeded(claim, claim.judge(kept), seeds)
        models = rests_on(models_of(kept, claim), models_of(tables, claim))
        row = [claim.id, claim.statement, result.statistic, claim.rule, result.verdict, per_seed, models, result.detail]
        rows.append(dict(zip(COLUMNS, row)))
    return pd.DataFrame(rows, columns=COLUMNS)
