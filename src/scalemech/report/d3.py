"""D3: test loss improves when depth and width grow together; depth alone at too small a width rebounds.

Per (dataset, family), on the mean test loss over seeds of each grid cell: a rebound at the smallest
width (interior minimum in depth, fall and rise each beyond D3_TOL relative) and the best cell at the
largest width.
"""

from __future__ import annotations

import numpy as np

from .common import CONFIRMED, MIN_LEVELS, NOT_CONFIRMED, REFUTED, Claim, NotMeasured, Result, Tables, table

D3_TOL = 0.01  # relative change of test loss that counts as a fall or a rise


def _rebound(losses: np.ndarray) -> bool:
    """Interior minimum with a fall before it and a rise after it, each > D3_TOL relative."""
    best = int(np.argmin(losses))
    margin = losses[best] + D3_TOL * abs(losses[best])
    return 0 < best < len(losses) - 1 and losses[0] > margin and losses[-1] > margin


def rule_d3(tables: Tables) -> Result:
    """Confirmed if every (dataset, family) rebounds and is best at its largest width; refuted if every
    one is best at its smallest width; else not confirmed."""
    training = table(tables, "training", ["test_loss"])
    finite = training.dropna(subset=["test_loss"])
    if finite.empty:
        raise NotMeasured("training table has only NaN test losses")
    grid = finite.groupby(["dataset", "family", "depth", "width"], as_index=False)["test_loss"].mean()
    parts = []
    for (dataset, family), g in grid.groupby(["dataset", "family"]):
        narrow = g[g["width"] == g["width"].min()].sort_values("depth")
        if narrow["depth"].nunique() < MIN_LEVELS or g["width"].nunique() < 2:
            continue
        best = g.loc[g["test_loss"].idxmin(), "width"]
        parts.append((f"{dataset}/{family}", _rebound(narrow["test_loss"].to_numpy()), best, g["width"]))
    if not parts:
        raise NotMeasured(f"no (dataset, family) has ≥ {MIN_LEVELS} depths at its smallest width and ≥ 2 widths")
    rebounds = sum(rebound for _, rebound, _, _ in parts)
    joint = sum(best == widths.max() for _, _, best, widths in parts)
    statistic = (
        f"rebound at the smallest width in {rebounds}/{len(parts)}, "
        f"best cell at the largest width in {joint}/{len(parts)}"
    )
    detail = (
        "; ".join(
            f"{name}: rebound {'yes' if rebound else 'no'}, best test loss at width {best:g}"
            for name, rebound, best, _ in parts
        )
        + f"; {len(training) - len(finite)} of {len(training)} models with a NaN test loss"
    )
    if rebounds == joint == len(parts):
        return Result(CONFIRMED, statistic, detail)
    smallest = all(best == widths.min() for _, _, best, widths in parts)
    return Result(REFUTED if smallest else NOT_CONFIRMED, statistic, detail)


D3 = Claim(
    "D3",
    "Test loss improves when depth and width grow together; depth alone at too small a width rebounds.",
    f"per (dataset, family), test loss mean over seeds: confirmed if at the smallest width test loss falls then "
    f"rises with depth (interior minimum, both changes > {D3_TOL:.0%}) and the best grid cell is at the largest "
    f"width, in all; refuted if the best cell is at the smallest width in all; else not confirmed",
    rule_d3,
)
