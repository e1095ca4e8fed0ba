"""Placement strategies of E11 (docs/science.md §5, E11): where each rule would grow the one new block,
read from the ``growth`` rows of a model and snapshot, and the realized gains of that point.

- ``certificate``: the row with ``certify_rank == 1`` (``certify.point_ranks``: the "grow here" point with
  the largest ``block_grad_norm``, or where none is "grow here" the first weak one, then the first without
  a detectable signal);
- ``lowest certificate``: the point the certificate puts last: the highest ``certify_rank`` (a point
  without a rank, should a table hold one, after every ranked one, by ascending ``block_grad_norm``);
- ``grad norm``: the largest raw ``block_grad_norm`` (the plain gradient-norm heuristic, SensLI-style);
- ``top``, ``middle``, ``bottom``: the largest, the lower median, the smallest ``point_index``;
- ``uniform``: LLaMA-Pro's rule, a new block after every K blocks, with as many new blocks as the
  certificate grows (one): K = L, the block after the last one, so it coincides with ``top`` (the
  largest measured ``point_index``);
- ``random``: ``RANDOM_DRAWS`` uniformly random points (with replacement), each drawn with the seed
  ``derive_seed(seed, <dataset>/<model>, snapshot, "random placement", draw)``; its gain is the mean
  of the drawn rows' gains, its SE the mean of their SEs (exact when the rows' errors, paired on the same
  held-out examples, are perfectly correlated, conservative otherwise: ``report.units``' convention).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np
import pandas as pd

from ..core.seeding import derive_seed, model_identity
from ..core.tables import model_keys

GAINS = ["gain_old", "gain_tokens", "gain_flops"]  # realized held-out gains; each has its paired ``<gain>_se``
RANDOM_DRAWS = 10
STRATEGIES = ["certificate", "lowest certificate", "grad norm", "top", "middle", "bottom", "uniform", "random"]
UNIT = ["snapshot"]  # within a model: the rows one placement chooses among


def certified(growth: pd.DataFrame) -> pd.DataFrame:
    """The certificate's choice of each model and snapshot: its row with ``certify_rank == 1`` (none where
    no point is ranked)."""
    return growth[growth["certify_rank"] == 1].drop_duplicates(model_keys() + UNIT)


def _last(growth: pd.DataFrame, order: list[str], ascending: list[bool]) -> pd.DataFrame:
    """Each model's and snapshot's last row in the ``order`` (stable)."""
    ordered = growth.sort_values(order, ascending=ascending, kind="stable")
    return ordered.groupby(model_keys() + UNIT, sort=False).tail(1)


def _middle(growth: pd.DataFrame) -> pd.DataFrame:
    """Each model's and snapshot's lower-median ``point_index`` row."""
    ordered = growth.sort_values("point_index", kind="stable")
    groups = ordered.groupby(model_keys() + UNIT, sort=False)
    return ordered[groups.cumcount() == (groups["point_index"].transform("size") - 1) // 2]


def chosen(growth: pd.DataFrame, strategy: str) -> pd.DataFrame:
    """The row ``strategy`` picks in each model and snapshot (random: every draw, ``random_draws``)."""
    ranked = growth.assign(unranked=growth["certify_rank"].isna())
    picks = {
        "certificate": lambda: certified(growth),
        "lowest certificate": lambda: _last(
            ranked, ["unranked", "certify_rank", "block_grad_norm"], [True, True, False]
        ).drop(columns="unranked"),
        "grad norm": lambda: _last(growth[growth["block_grad_norm"].notna()], ["block_grad_norm"], [True]),
        "top": lambda: _last(growth, ["point_index"], [True]),
        "uniform": lambda: _last(growth, ["point_index"], [True]),
        "middle": lambda: _middle(growth),
        "bottom": lambda: _last(growth, ["point_index"], [False]),
        "random": lambda: random_draws(growth),
    }
    if strategy not in picks:
        raise KeyError(f"unknown placement strategy {strategy!r}; known: {STRATEGIES}")
    return picks[strategy]()


@cache
def _draw_positions(seed: int, identity: str, snapshot: str, rows: int) -> list[int]:
    """The ``RANDOM_DRAWS`` positions (among ``rows`` points in ``point_index`` order) drawn for one model
    and snapshot: a function of the model and snapshot alone, so computed once per process."""
    seeds = [derive_seed(seed, identity, snapshot, "random placement", draw) for draw in range(RANDOM_DRAWS)]
    return [int(np.random.default_rng(s).integers(rows)) for s in seeds]


def random_draws(growth: pd.DataFrame) -> pd.DataFrame:
    """``RANDOM_DRAWS`` rows drawn uniformly (with replacement) from each model's and snapshot's rows."""
    groups = growth.groupby(model_keys() + UNIT, sort=False)
    group = groups.ngroup().fillna(-1).astype(int)  # first appearance order, as iterating the groups; NaN keys: -1
    if not groups.ngroups:
        return growth.head(0)
    ordered = growth.assign(_group=group.to_numpy()).sort_values(["_group", "point_index"], kind="stable")
    ordered = ordered[ordered["_group"] >= 0]
    sizes = np.bincount(ordered["_group"].to_numpy(), minlength=groups.ngroups)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    firsts = growth[~group.duplicated() & (group >= 0)]
    taken = [
        start + position
        for start, size, first in zip(starts, sizes, firsts.to_dict("records"))
        for position in _draw_positions(int(first["seed"]), model_identity(first), str(first["snapshot"]), int(size))
    ]
    return ordered.iloc[taken].drop(columns="_group")


def _mean_of_draws(drawn: pd.DataFrame, values: list[str]) -> pd.DataFrame:
    """One row per model and snapshot of the random draws: ``values`` averaged (NaN if a draw's is),
    the drawn points joined by "+", ``draws`` their number, ``point_index`` NaN."""
    keys = model_keys() + UNIT
    groups = drawn.groupby(keys, sort=False)
    missing = drawn[values].isna().groupby([drawn[key] for key in keys], sort=False).any()
    return (
        groups[values]
        .mean()
        .mask(missing)
        .assign(point_index=np.nan, point=groups["point"].agg("+".join), draws=groups.size())
        .reset_index()
    )


def placements(growth: pd.DataFrame, gains: Sequence[str] = GAINS) -> pd.DataFrame:
    """One row per model × snapshot × strategy (``STRATEGIES`` order; none where a strategy picks
    nothing): the model keys, ``snapshot``, ``strategy``, the chosen ``point_index`` and ``point``
    (random: NaN and the drawn points joined by "+"), ``draws`` (rows behind it), ``predicted_gain`` and
    each of ``gains`` with its ``_se`` (random: the means over the draws)."""
    keys = model_keys() + UNIT
    values = ["predicted_gain", *gains, *(f"{gain}_se" for gain in gains)]
    frame = growth[[*keys, "point", "point_index", "certify_rank", "block_grad_norm", *values]]
    frame = frame.astype({"point": str, **dict.fromkeys(values, float)})
    out = []
    for strategy in STRATEGIES:
        rows = chosen(frame, strategy)
        rows = _mean_of_draws(rows, values) if strategy == "random" else rows.assign(draws=1)
        out.append(rows.assign(strategy=strategy))
    columns = [*keys, "strategy", "point_index", "point", "draws", *values]
    return pd.concat(out, ignore_index=True)[columns].sort_values(keys, kind="stable", ignore_index=True)
