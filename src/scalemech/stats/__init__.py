"""Alignment statistics of activation gradients from their Gram matrix.

Modules: ``grams``, ``moments``, ``intervals``, ``misalignment`` (certificates), ``covariance`` (D1),
``powerlaw`` (D4's fit), ``cost`` (W5's timing) and
``paired`` (two models scored on the same examples) and ``sizes`` (the pool, ``M`` and ``K`` a
certificate takes). The estimators of docs/science.md §3-§4 (Paper W,
Zhang et al. 2026, "the effective alignment dimension"): given ``n`` i.i.d. rows ``q_i``
(per-example activation gradients, flattened to ``R^D``) with mean ``mu`` and covariance ``Sigma``,

- ``gram``: ``G = Q Qᵀ`` (n×n, float64 accumulation), never a D×D matrix;
- ``u_statistics``: the four U-statistics U1..U4 of ``G`` in O(n²);
- ``stats_from_gram`` / ``alignment_stats``: ``‖μ‖²``, ``‖μ‖⁴``, ``μᵀΣμ``, ``tr Σ²`` and
  ``d_par = ‖μ‖⁴/μᵀΣμ``, ``d_2 = ‖μ‖⁴/tr Σ²``, ``d_align = min(d_par, d_2)``;
- ``alignment_intervals``: delete-one jackknife (default) or subsampling-without-replacement
  intervals, computed from ``G`` alone (a with-replacement bootstrap would pair an example
  with itself and bias the U-statistics);
- ``certificates``: Theorem 1's Cantelli bounds ``B_exact <= B_align`` for ``(M, K)`` draws;
- ``TwoSampleStats`` / ``two_sample_variance`` / ``two_sample_certificate``: Theorem 1 for train
  and test rows from different distributions (docs/science.md §7), unbiased from ``C = Q_tr Q_teᵀ``;
- ``offdiag_ratio`` / ``offdiag_null`` / ``correlation``: the covariance-structure check of
  Paper D (claim D1) on a small pooled view; ``offdiag_energy`` / ``offdiag_ratio_unbiased`` /
  ``offdiag_null_unbiased``: the same with unbiased U-statistics in place of the plug-in ``Σ̂``
  (whose ratio is biased up, about 0.5 for a diagonal population at ``p = n``).

U-statistics: Hoeffding (1948), "A class of statistics with asymptotically normal
distribution". Jackknife: Efron & Stein (1981); subsampling: Politis & Romano (1994).

Degenerate estimates are reported, never clipped: a ratio ``num/den`` is ``num/den`` when the
denominator estimate is positive (so a negative ``‖μ‖⁴`` estimate -- the mean is not detected
above noise -- gives a negative ``d``), ``+inf`` when the denominator estimate is ``<= 0`` and the
numerator is positive (no detectable spread), and ``nan`` when both are ``<= 0``.
"""

import importlib
from typing import Any

# Each estimator by the module that holds it. They load on first use (PEP 562), so the table, figure
# and report jobs, which read only ``powerlaw`` and ``levels``, never load torch.
HOMES = {
    "covariance": (
        "correlation",
        "offdiag_energy",
        "offdiag_null",
        "offdiag_null_unbiased",
        "offdiag_ratio",
        "offdiag_ratio_unbiased",
    ),
    "grams": ("cross_gram", "cross_grams", "gram"),
    "intervals": ("alignment_intervals", "jackknife_se", "table_row", "upper_bounds"),
    "levels": ("UCB_LEVEL",),
    "misalignment": (
        "TWO_SAMPLE_FIELDS",
        "Certificates",
        "TwoSampleBounds",
        "TwoSampleStats",
        "certificates",
        "two_sample_certificate",
        "two_sample_variance",
    ),
    "paired": ("PairedDifference", "paired_difference"),
    "sizes": ("MIN_BLOCK_SIZE", "MIN_POOL", "certificate_size_problems"),
    "moments": ("FIELDS", "AlignmentStats", "alignment_stats", "leave_one_out_u", "stats_from_gram", "u_statistics"),
}
HOME_OF = {name: module for module, names in HOMES.items() for name in names}
__all__ = sorted(HOME_OF)


def __getattr__(name: str) -> Any:
    if name not in HOME_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{HOME_OF[name]}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
