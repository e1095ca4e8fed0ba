"""The claims report: each claim of Papers D and W (docs/science.md §2–3) beside this run's statistic
and verdict, one module per claim in ``rules``, models the independent units (``units``).

``claims(tables)``: a dict of the run's tables in, one row per claim with a ``verdict`` column out
(and ``per_seed``: each seed judged alone, ``seeds``);
``verdict_rows`` is the run's verdict table (``tables/verdicts.csv``, which the figures read too),
``write_report`` writes ``report.md``; ``verdict_summary`` reads its verdicts back.
Names load on first use (PEP 562): the workflow's parse reads ``rules.CLAIM_TABLES`` without statsmodels.
"""

import importlib
from typing import Any

_HOMES = {
    "verdicts": ("CLAIMS", "CLAIM_FIGURES", "claims"),
    "common": ("CONFIRMED", "FRAGILE", "NOT_CONFIRMED", "NOT_DETECTABLE", "NOT_MEASURED", "REFUTED", "NotMeasured"),
    "document": ("read_verdicts", "runtime_section", "verdict_rows", "verdict_summary", "write_report"),
    "rules": ("CLAIM_TABLES",),
    "rules.w5": ("BENCHMARK_COLUMNS",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)


__all__ = sorted(_HOME)
