"""G2 (E11, *extension*): the point the certificate chooses beats random and uniform placement
(docs/science.md §5 E11, §6).

Per model and snapshot the placement strategies' points (``figures.placement``) and the paired contrast
``c = gain_old(certificate) − gain_old(strategy)`` (= L(grown at the strategy's point) − L(grown at the
certificate's), on the same held-out examples) with ``SE_c = √(SE_cert² + SE_strategy²)``: exact for
independent errors and conservative for the positively correlated ones of gains paired on the same
examples (the same point twice gives c = 0 with that SE). Models are the units: per model the mean c over
its snapshots (SE the mean), each family's contrasts in units of their RMS SE, across models a random-effects
mean with a 95 % t interval (``units``). Against ``random`` and ``uniform`` (which, with one new block,
is ``top``): confirmed when both intervals lie above 0, refuted when one lies below 0 (not confirmed
when the other lies above: ``combined``), else not detectable with each limit and MDE. The contrasts
with the other strategies, and per family in nats, are stated in the detail, not decided on.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...core.tables import model_keys
from ...figures.placement import STRATEGIES, UNIT, placements
from ..common import NOT_DETECTABLE, Claim, NotMeasured, Result, Tables, combined
from .g1 import growth_rows, split

DECIDING = ["random", "uniform"]  # the baselines G2 decides on
READS = {
    "growth": ["snapshot", "point", "point_index", "certify_rank", "block_grad_norm", "predicted_gain"]
    + ["gain_old", "gain_old_se"]
}


def contrasts(picks: pd.DataFrame, gain: str = "gain_old") -> pd.DataFrame:
    """Per model × snapshot × other strategy, where both picked: ``c = gain(certificate) − gain(strategy)``
    and ``c_se``."""
    wide = picks.pivot(index=model_keys() + UNIT, columns="strategy", values=[gain, f"{gain}_se"])
    value, se = wide[gain], wide[f"{gain}_se"]
    c = -value.sub(value.pop("certificate"), axis=0)
    c_se = np.sqrt(se.pow(2).add(se.pop("certificate").pow(2), axis=0))
    both = pd.concat({"c": c.stack(future_stack=True), "c_se": c_se.stack(future_stack=True)}, axis=1)
    return both[both["c"].notna()].reset_index()


def rule_g2(tables: Tables) -> Result:
    """Certificate − random and certificate − uniform, means over models in family RMS SE units: confirmed
    when both are above 0, refuted when one is below."""
    rows = growth_rows(tables, READS["growth"][1:])
    picks = placements(rows, ["gain_old"])
    chosen = picks[picks["strategy"] == "certificate"]
    if chosen.empty:
        raise NotMeasured("no model × snapshot of growth has a point of certify_rank 1")
    frame = contrasts(picks)
    means = split(frame, "strategy", "c", "c_se", scaled=True)
    if not set(DECIDING) <= set(means):
        raise NotMeasured("no model × snapshot of growth has a finite gain_old at the certificate's point")
    others = [strategy for strategy in STRATEGIES if strategy in means]  # all but the certificate
    parts = {strategy: means[strategy].verdict(sign=1) for strategy in DECIDING}
    verdict = combined(*parts.values())
    statistic = "; ".join(f"certificate − {strategy} {means[strategy].text(2)}" for strategy in DECIDING)
    statistic += f" (RMS SE units, {means['random'].counted})"
    nulls = [
        means[strategy].null_text(strategy, parts=len(DECIDING))
        for strategy in DECIDING
        if parts[strategy] == NOT_DETECTABLE
    ]
    if verdict == NOT_DETECTABLE:
        statistic += "; MDE " + ", ".join(f"{means[s].mde(len(DECIDING)):.2g} ({s})" for s in DECIDING)
    units = len(rows.groupby(model_keys() + UNIT))
    by_family = {strategy: split(frame[frame["strategy"] == strategy], "family", "c", "c_se") for strategy in DECIDING}
    detail = (
        f"c = gain_old(certificate) − gain_old(strategy), SE √(SE² + SE²); {len(rows)} rows, "
        f"{len(chosen)} of {units} model × snapshot units with a point of certify_rank 1; per model the mean over "
        "its snapshots, across models t with "
        + ", ".join(f"{means[s].df} df ({s})" for s in DECIDING)
        + "; "
        + "".join(f"{null}; " for null in nulls)
        + "; ".join(
            f"{strategy} in nats: " + ", ".join(f"{family} {e.text(2)}" for family, e in by_family[strategy].items())
            for strategy in DECIDING
        )
        + "; not decided on: "
        + ", ".join(f"− {s} {means[s].text(2)}" for s in others if s not in DECIDING)
    )
    return Result(verdict, statistic, detail, tuple((strategy, means[strategy]) for strategy in DECIDING))


G2 = Claim(
    "G2",
    "Growing one block at the point the certificate chooses lowers held-out loss more than growing it at a "
    "random point or where LLaMA-Pro's uniform rule puts it (E11, extension).",
    "per model × snapshot, c = gain_old(certificate's point) − gain_old(strategy's point) with SE "
    "√(SE_cert² + SE_strategy²), for random (the mean over seeded draws) and uniform (one block after the "
    "last: the top point); per model the mean over snapshots, each family's c in units of its RMS SE, across "
    "models a random-effects mean with a 95 % t interval: confirmed if both are above 0, refuted if one is "
    "below 0 (not confirmed if the other is above), else not detectable with each limit and MDE",
    rule_g2,
    READS,
    figure="F10_growth",
)
