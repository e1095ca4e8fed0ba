"""Experiments above the insertion-point interface (docs/science.md §5).

- ``measure``:   E2 covariance structure, E3 first-order signal, E5 ``d_align``; stores gradient pools.
- ``misalign``:  E6 empirical misalignment probability beside the Cantelli certificates.
- ``intervene``: E7 zero-initialized residual parameter stepped along ``−μ_M`` (Paper W).
- ``growth``:    E11 growth at every point against the certificate and equal-compute controls, with
                 E8's zero-initialized block, jumpboard and fallback (Paper D) as its arms (``arms``).

Each returns tidy tables with the columns of ``schemas/tables.schema.yaml``; none asks which
model family it has.
"""

import importlib
from typing import Any

_HOMES = {
    "ArmConfig": "arms",
    "growth": "growth",
    "intervene": "intervene",
    "intervene_at": "intervene",
    "draw_pools": "measure",
    "measure": "measure",
    "select_points": "measure",
    "misalignment": "misalign",
    "wilson_interval": "misalign",
    "trajectory": "trajectory",
}
"""Each name's module, imported on first use (PEP 562): a job loads only its own experiment's stack
(E6 needs statsmodels and no training code; growth needs the optimizers)."""


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


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
