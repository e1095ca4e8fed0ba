"""The claims report: each claim of Papers D and W (docs/science.md §2–3) beside this run's statistic
and verdict, one module per claim (``d1`` … ``e8``, E11's ``g1`` … ``g3``), models the independent units (``units``).

``claims(tables)``: a dict of the run's tables in, one row per claim with a ``verdict`` column out
(and ``per_seed``: each seed judged alone, ``seeds``);
``write_report`` writes ``report.md``; ``verdict_summary`` reads its verdicts back.
"""

from .claims import CLAIMS, claims
from .common import CONFIRMED, FRAGILE, NOT_CONFIRMED, NOT_DETECTABLE, NOT_MEASURED, REFUTED, NotMeasured
from .document import CLAIM_TABLES, runtime_section, verdict_summary, write_report
from .w5 import BENCHMARK_COLUMNS

__all__ = [
    "BENCHMARK_COLUMNS",
    "CLAIMS",
    "CLAIM_TABLES",
    "CONFIRMED",
    "FRAGILE",
    "NOT_CONFIRMED",
    "NOT_DETECTABLE",
    "NOT_MEASURED",
    "REFUTED",
    "NotMeasured",
    "claims",
    "runtime_section",
    "verdict_summary",
    "write_report",
]
