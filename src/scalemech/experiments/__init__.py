"""Experiments above the insertion-point interface (docs/science.md §5).

- ``measure``:   E2 covariance structure, E3 first-order signal, E5 ``d_align``; stores gradient pools.
- ``misalign``:  E6 empirical misalignment probability beside the Cantelli certificates.
- ``intervene``: E7 zero-initialized residual parameter stepped along ``−μ_M`` (Paper W).
- ``trajectory``: E10 the certificate's statistics at each weight snapshot along training.
- ``early``:     E2, E3, E5–E7 again at an early weight snapshot (the early-training regime).
- ``growth``:    E11 growth at every point against the certificate and equal-compute controls, with
                 E8's zero-initialized block, jumpboard and fallback (Paper D) as its arms (``arms``).

Each returns tidy tables with the columns of ``schemas/tables.schema.yaml``; none asks which
model family it has.
"""

import importlib
from typing import Any

from .arms import ArmConfig
from .growth import growth
from .intervene import intervene, intervene_at
from .measure import draw_pools, measure, select_points
from .trajectory import trajectory

_MISALIGN = ("misalignment", "wilson_interval")
"""E6's names, imported on first use (PEP 562): only E6 needs statsmodels (about 0.5 s of every other
job's start). The other names are bound here: each shares its module's name, which a lazy binding
would leave to whichever import came first."""


def __getattr__(name: str) -> Any:
    if name not in _MISALIGN:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.misalign"), name)


__all__ = [
    "ArmConfig",
    "draw_pools",
    "growth",
    "intervene",
    "intervene_at",
    "measure",
    "misalignment",
    "select_points",
    "trajectory",
    "wilson_interval",
]
