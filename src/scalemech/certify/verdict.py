"""The verdict of one insertion point from the numbers in its row (the rule in the package doc), and
the "grow here" points ranked as the recommendation names them (``grow_ranking``)."""

from __future__ import annotations

import math

import pandas as pd

B_GROW = 0.5
""""grow here" needs ``b_exact < B_GROW``: misalignment at ``(M, K)`` certified less likely than not."""
GROW, WEAK, NO_SIGNAL = "grow here", "weak", "no detectable signal"
VERDICTS = (GROW, WEAK, NO_SIGNAL)


def verdict(mu_sq_lo: float, b_exact: float, block_grad_norm: float) -> str:
    """The verdict of one point (module doc): ``GROW``, ``WEAK`` or ``NO_SIGNAL``; NaN counts as not met."""
    detected = mu_sq_lo > 0
    certified = b_exact < B_GROW
    if detected and certified and block_grad_norm > 0:
        return GROW
    return WEAK if detected or certified else NO_SIGNAL


def grow_ranking(frame: pd.DataFrame) -> pd.DataFrame:
    """The "grow here" rows of a certificate, the largest ``block_grad_norm`` (first-order gain) first."""
    return frame[frame["verdict"] == GROW].sort_values("block_grad_norm", ascending=False, kind="stable")


def point_ranks(frame: pd.DataFrame) -> pd.Series:
    """Every point's rank in the certificate's order (1: ``grow_ranking``'s first): "grow here" points,
    then "weak", then "no detectable signal", each by ``block_grad_norm`` from the largest; by index."""
    order = frame.assign(
        _verdict=frame["verdict"].map(VERDICTS.index), _norm=-frame["block_grad_norm"].fillna(-math.inf)
    )
    ranked = order.sort_values(["_verdict", "_norm"], kind="stable").index
    return pd.Series(range(1, len(frame) + 1), index=ranked).reindex(frame.index)
