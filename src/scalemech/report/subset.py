"""Tables cut to some of their models: the rows a predicate keeps, and the tables fitted over models fitted again.

The claims are judged on such cuts twice: on the models that meet the training criterion (``trained``) and on
each seed's models alone (``seeds``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import pandas as pd

from ..stats.powerlaw import powerlaw_table
from .common import Tables

# tables fitted over models rather than keyed by one: fitted again on the kept rows of their source
REFIT: dict[str, tuple[str, Callable[[pd.DataFrame], pd.DataFrame]]] = {"powerlaw": ("training", powerlaw_table)}


def restricted(
    tables: Tables, keep: Callable[[pd.DataFrame], pd.Series | None], unchanged: Collection[str] = ()
) -> dict[str, pd.DataFrame]:
    """The tables with the rows ``keep(frame)`` marks (a table for which it returns None, or named in
    ``unchanged``, passes unchanged);
    one of ``REFIT`` is fitted again on the kept rows of its source (dropped when the source is missing)."""
    kept = {}
    for name, frame in tables.items():
        mask = None if name in unchanged else keep(frame)
        kept[name] = frame if mask is None else frame[mask]
    for name, (source, fit) in REFIT.items():
        if name in kept:
            if source in kept:
                kept[name] = fit(kept[source])
            else:
                del kept[name]
    return kept
