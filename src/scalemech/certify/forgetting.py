"""The forgetting the certificate predicts at each insertion point, given the old domain A (``--retain``).

At a point, a step ``δ = −η μ_B`` of a zero-initialized residual parameter along the new domain's mean
train gradient (Paper W's W4 step) changes, to first order in ``η``,

- B's held-out loss by ``−η μ_Bᵀ μ_B,te``: the gain, the certificate's ``mu_cross`` (``E``);
- A's loss by ``−η μ_Bᵀ μ_A``: the predicted forgetting ``forget = −μ_Bᵀ μ_A`` (> 0: A's loss rises),

where ``μ_A`` is A's mean activation gradient at the point. It is Paper W's misalignment statistic with
the ``M`` side drawn from B and the ``K`` side from A. With B's train pool ``Q_B`` (``n`` rows) and a pool
of A's train windows ``Q_A`` (``m`` rows), independent, ``mean_ij (Q_B Q_Aᵀ)_ij`` estimates ``μ_Bᵀ μ_A``
without bias, with the two-sample delete-one jackknife interval of ``mu_cross``
(``stats.TwoSampleBounds``). Their ratio ``forget_per_gain = forget / mu_cross`` (when ``mu_cross > 0``)
needs no step size: the nats of A lost per nat of B gained, at first order.

``--at pareto`` (``pareto_ranking``) grows where the gain is largest among the points predicted to forget
at most ``max_forgetting`` per nat gained, judged on the intervals.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from torch import Tensor

from .. import stats
from ..core.seeding import derive_seed
from ..data import Prepared
from ..data.tokenized import TokenIds
from ..models.base import ResidualModel
from ..tasks import Examples, draw_examples

RETAIN = "retain"
"""The split name of the retain pool (its pools' directory)."""
FORGETTING_COLUMNS = ["n_retain", "forget", "forget_lo", "forget_hi", "forget_per_gain"]
"""``forget = −μ_Bᵀμ_A`` with its interval, ``forget_per_gain = forget / mu_cross``; NaN without a retain pool."""


def retain_pool(model: ResidualModel, data: Prepared | TokenIds, n: int, seed: int, identity: str) -> Examples:
    """``n`` windows of the retain data's train split, drawn with ``derive_seed(seed, identity, "pool",
    "retain")``, as the split ``RETAIN`` (never the retain windows that score forgetting, which are test
    windows)."""
    examples = draw_examples(model.task(data), "train", n, derive_seed(seed, identity, "pool", RETAIN))
    return Examples(RETAIN, examples.x, examples.y, examples.index, examples.seed)


def forgetting_row(mu_cross: float, C: Tensor | None, level: float) -> dict[str, Any]:
    """``FORGETTING_COLUMNS`` of one point from the cross-Gram ``C = Q_B Q_Aᵀ`` (train × retain) and the
    point's ``mu_cross``, the interval two-sided at ``level``; NaN without ``C``."""
    if C is None:
        return {**dict.fromkeys(FORGETTING_COLUMNS, math.nan), "n_retain": 0}
    bounds = stats.TwoSampleBounds.from_cross(C)
    _, lo, hi = bounds.mu_cross_interval(level)
    forget = -bounds.stats.mu_cross
    return {
        "n_retain": C.shape[1],
        "forget": forget,
        "forget_lo": -hi,
        "forget_hi": -lo,
        "forget_per_gain": forget / mu_cross if mu_cross > 0 else math.nan,
    }


def admissible(frame: pd.DataFrame, max_forgetting: float) -> pd.Series:
    """Points whose gain is detected (``mu_cross_lo > 0``) and whose forgetting is within ``max_forgetting``
    per nat gained at the ends of both intervals: ``forget_hi <= max_forgetting · mu_cross_lo``."""
    return (frame["mu_cross_lo"] > 0) & (frame["forget_hi"] <= max_forgetting * frame["mu_cross_lo"])


def pareto_ranking(frame: pd.DataFrame, max_forgetting: float) -> pd.DataFrame:
    """Every point in ``--at pareto``'s order: the ``admissible`` ones by ``block_grad_norm`` (the certificate's
    gain) from the largest, then the others by ``forget_per_gain`` from the least (a point without a
    detected gain, ``forget_per_gain`` NaN, last), ties by ``block_grad_norm``."""
    ok = admissible(frame, max_forgetting)
    order = frame.assign(
        _rest=~ok,
        _ratio=frame["forget_per_gain"].where(~ok, -math.inf).fillna(math.inf),
        _norm=-frame["block_grad_norm"].fillna(-math.inf),
    )
    return frame.loc[order.sort_values(["_rest", "_ratio", "_norm"], kind="stable").index]


def pareto_reason(frame: pd.DataFrame, point: str, max_forgetting: float) -> str:
    """Why ``--at pareto`` took ``point`` (first in ``pareto_ranking``)."""
    row = frame.set_index("point").loc[point]
    if admissible(frame, max_forgetting)[frame["point"] == point].all():
        return f"largest block_grad_norm of the points predicted to forget <= {max_forgetting:g} per nat gained"
    none = f"no point is predicted to forget <= {max_forgetting:g} per nat gained"
    if math.isnan(row["forget_per_gain"]):
        return f"{none}, nor predicted to gain (gain_B <= 0 everywhere); largest block_grad_norm"
    return f"{none}; least forget_A / gain_B ({row['forget_per_gain']:.3g})"


def has_forgetting(frame: pd.DataFrame) -> bool:
    """Whether a certificate table carries the predicted forgetting (it was measured with a retain pool)."""
    return "forget" in frame and bool(frame["forget"].notna().any())
