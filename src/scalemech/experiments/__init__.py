"""Experiments above the insertion-point interface (docs/science.md §5).

- ``measure``:   E2 covariance structure, E3 first-order signal, E5 ``d_align``; stores gradient pools.
- ``misalign``:  E6 empirical misalignment probability beside the Cantelli certificates.
- ``intervene``: E7 zero-initialized residual parameter stepped along ``−μ_M`` (Paper W).
- ``expand``:    E8 zero-initialized block insertion with jumpboard and fallback (Paper D).
- ``growth``:    E11 growth at every point against the certificate and equal-compute controls.

Each returns tidy tables with the columns of ``schemas/tables.schema.yaml``; none asks which
model family it has.
"""

from .expand import ExpandConfig, expand, expand_at
from .growth import growth
from .intervene import intervene, intervene_at
from .measure import draw_pools, measure, select_points
from .misalign import misalignment, wilson_interval
from .trajectory import trajectory

__all__ = [
    "ExpandConfig",
    "draw_pools",
    "expand",
    "expand_at",
    "growth",
    "intervene",
    "intervene_at",
    "measure",
    "misalignment",
    "select_points",
    "trajectory",
    "wilson_interval",
]
