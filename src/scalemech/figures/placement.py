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
- ``random``: ``RANDOM_DRAWS`` uniformly random points (with replacement) among those other than the
  certificate's (``certify_rank`` 1: a draw of its own point would dilute G2's contrast), each drawn with the seed
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
from ..core.tables import first_rows, group_codes, model_keys

GAINS = ["gain_old", "gain_tokens", "gain_flops"]  # realized held-out gains; each has its paired ``<gain>_se``
RANDOM_DRAWS = 10
STRATEGIES = ["certificate", "lowest certificate", "grad norm", "top", "middle", "bottom", "uniform", "random"]
UNIT = ["snapshot"]  # within a model: the rows one placement chooses among


def units_of(growth: pd.DataFrame) -> np.ndarray:
    """Each row's model × snapshot, numbered by first appearance (−1 where a key is missing): ``group_codes``."""
    return group_codes(growth, model_keys() + UNIT)


def certified(growth: pd.DataFrame) -> pd.DataFrame:
    """The certificate's choice of each model and snapshot: its row with ``certify_rank == 1`` (none where
    no point is ranked)."""
    return growth[growth["certify_rank"] == 1].drop_duplicates(model_keys() + UNIT)


def _sorted(growth: pd.DataFrame, order: list[str], ascending: list[bool] | bool = True) -> np.ndarray:
    """The positions of ``growth``'s rows sorted by ``order`` (stable)."""
    by = growth[order].reset_index(drop=True)
    return by.sort_values(order, ascending=ascending, kind="stable").index.to_numpy()


def _last(growth: pd.DataFrame, units: np.ndarray, order: list[str], ascending: list[bool]) -> pd.DataFrame:
    """Each model's and snapshot's last row in the ``order`` (stable); ``units``: the rows' ``units_of``."""
    ordered = _sorted(growth, order, ascending)
    last = ~pd.Series(units[ordered]).duplicated(keep="last").to_numpy() & (units[ordered] >= 0)
    return growth.iloc[ordered[last]]


def _middle(growth: pd.DataFrame, units: np.ndarray) -> pd.DataFrame:
    """Each model's and snapshot's lower-median ``point_index`` row."""
    ordered = _sorted(growth, ["point_index"])
    groups = pd.Series(units[ordered]).groupby(units[ordered])
    middle = (groups.cumcount() == (groups.transform("size") - 1) // 2).to_numpy() & (units[ordered] >= 0)
    return growth.iloc[ordered[middle]]


def chosen(growth: pd.DataFrame, strategy: str, units: np.ndarray | None = None) -> pd.DataFrame:
    """The row ``strategy`` picks in each model and snapshot (random: every draw, ``random_draws``);
    ``units``: the rows' ``units_of`` (computed if not given)."""
    units = units_of(growth) if units is None else units
    graded = growth["block_grad_norm"].notna().to_numpy()
    picks = {
        "certificate": lambda: certified(growth),
        "lowest certificate": lambda: _last(
            growth.assign(unranked=growth["certify_rank"].isna()),
            units,
            ["unranked", "certify_rank", "block_grad_norm"],
            [True, True, False],
        ).drop(columns="unranked"),
        "grad norm": lambda: _last(growth[graded], units[graded], ["block_grad_norm"], [True]),
        "top": lambda: _last(growth, units, ["point_index"], [True]),
        "uniform": lambda: _last(growth, units, ["point_index"], [True]),
        "middle": lambda: _middle(growth, units),
        "bottom": lambda: _last(growth, units, ["point_index"], [False]),
        "random": lambda: random_draws(growth, units),
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


def _without_certificate(growth: pd.DataFrame, units: np.ndarray) -> np.ndarray:
    """``units`` with the certificate's rows (``certify_rank`` 1) at −1, renumbered by first appearance."""
    own = (growth["certify_rank"] == 1).to_numpy() if "certify_rank" in growth else np.zeros(len(growth), bool)
    kept = (units >= 0) & ~own
    out = np.full(len(units), -1, np.int64)
    out[kept] = pd.factorize(units[kept])[0]
    return out


def random_draws(growth: pd.DataFrame, units: np.ndarray | None = None) -> pd.DataFrame:
    """``RANDOM_DRAWS`` rows drawn uniformly (with replacement) from each model's and snapshot's rows other
    than the certificate's point (none where it is the only one); ``units``: the rows' ``units_of``
    (computed if not given)."""
    units = _without_certificate(growth, units_of(growth) if units is None else units)
    ordered = _sorted(pd.DataFrame({"unit": units, "point_index": growth["point_index"]}), ["unit", "point_index"])
    ordered = ordered[units[ordered] >= 0]
    sizes = np.bincount(units[ordered])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    firsts = growth[["dataset", "model", "seed", "snapshot"]].iloc[first_rows(units)].to_dict("records")
    taken = [
        start + position
        for start, size, first in zip(starts, sizes, firsts)
        for position in _draw_positions(int(first["seed"]), model_identity(first), str(first["snapshot"]), int(size))
    ]
    return growth.iloc[ordered[taken]]


def _mean_of_draws(drawn: pd.DataFrame, values: list[str]) -> pd.DataFrame:
    """One row per model and snapshot of the random draws: ``values`` averaged (NaN if a draw's is),
    the drawn points joined by "+", ``draws`` their number, ``point_index`` NaN."""
    units = units_of(drawn)
    groups = drawn[values].groupby(units)
    means = groups.mean().mask(drawn[values].isna().groupby(units).any())
    firsts = first_rows(units)
    return pd.DataFrame(
        {key: drawn[key].array[firsts] for key in model_keys() + UNIT}
        | {value: means[value].to_numpy() for value in values}
        | dict(
            point_index=np.nan, point=drawn["point"].groupby(units).agg("+".join).array, draws=groups.size().to_numpy()
        )
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
    units, out = units_of(frame), []
    for strategy in STRATEGIES:
        rows = chosen(frame, strategy, units)
        rows = _mean_of_draws(rows, values) if strategy == "random" else rows.assign(draws=1)
        out.append(rows.assign(strategy=strategy))
    columns = [*keys, "strategy", "point_index", "point", "draws", *values]
    return pd.concat(out, ignore_index=True)[columns].sort_values(keys, kind="stable", ignore_index=True)
