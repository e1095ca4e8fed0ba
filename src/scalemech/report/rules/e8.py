"""E8: inserting a zero-initialized block lowers test loss beyond what the same extra training gives
the old model (Paper D), per family and over all families.

Per row of E11's final snapshot (``growth``) the paired gain ``g = L_test(control) − L_test(grown)``
with its evaluation SE (per-example differences on the held-out examples); per model the mean over
its points, across the family's models a random-effects mean with a 95 % t interval (``units``): the
aggregate evidence of all rows, no per-row gate. The control's own change ``L_test(control) −
L_test(old)`` is judged the same way: a control that damaged f_old makes a win meaningless. Over all
families, the gain in units of each family's RMS paired SE (so a family of small losses weighs as much as
one of large losses; the SEs' RMS, not the gains', which would carry the effect itself), per model the
mean, the mean over all models with a t interval. The refutation is tested
by each of the F families and, with two or more, by the pool: ``F + [F > 1]`` tests, each interval at the
Bonferroni level ``1 − 0.05/(F + [F > 1])`` (a pool of one family is that family), so that noise refutes
at most 2.5 % of the time. The pool's one interval at that level decides both ways (above 0 confirms,
below refutes) and is the one its bound and MDE are printed from. The headline names every family's
verdict: a family whose gain is below 0 refutes the claim, whatever the pool says.
"""

from __future__ import annotations

import pandas as pd

from ..common import CONFIRMED, LEVEL, NOT_CONFIRMED, NOT_DETECTABLE, REFUTED, Claim, Result, Tables, combined, table
from ..units import Estimate, across_models, per_model

E8_GAIN, E8_SE = "gain_tokens", "gain_tokens_se"  # L(control, equal steps) − L(grown), paired SE
CONTROL, CONTROL_SE = "control_change", "control_change_se"  # L(control) − L(f_old), paired SE
READS = {"growth": ["snapshot", "point_index", E8_GAIN, E8_SE, CONTROL, CONTROL_SE]}


def _finite(rows: pd.DataFrame, value: pd.Series, se: str) -> pd.DataFrame:
    return rows.assign(value=value)[value.notna() & rows[se].notna()]


def _mean(rows: pd.DataFrame, value: pd.Series, se: str, level: float = LEVEL) -> Estimate:
    return across_models(per_model(_finite(rows, value, se), "value", se), level=level)


def rule_expansion(tables: Tables) -> Result:
    """Per family: the gain's mean over models, refuted below 0; confirmed above 0 unless the control
    damaged f_old (its change's interval above 0: not confirmed). Over families: refuted if a family
    refutes (not confirmed if another confirms), else the verdict of the mean over all models (in each
    family's RMS SE units), not confirmed where a family's control is damaged."""
    growth = table(tables, "growth", READS["growth"])
    expansion = growth[growth["snapshot"] == "final"]  # E8: the trained model
    gains, parts = [], []
    families = expansion["family"].nunique()
    level = 1 - (1 - LEVEL) / (families + (families > 1))  # Bonferroni over families and the pool
    for family, rows in expansion.groupby("family"):
        gain_value = rows[E8_GAIN]
        gain = _mean(rows, gain_value, E8_SE, level)
        control = _mean(rows, rows[CONTROL], CONTROL_SE)
        damaged = control.verdict(sign=1) == CONFIRMED
        verdict = gain.verdict(sign=1)
        verdict = NOT_CONFIRMED if verdict == CONFIRMED and damaged else verdict
        parts.append((family, verdict, gain, control, damaged, len(rows)))
        gains.append(_finite(rows, gain_value, E8_SE))
    units = per_model(pd.concat(gains), "value", E8_SE, scale_cells=["family"], scale_by_se=True)
    pooled = across_models(units, level=level)
    verdicts = [verdict for _, verdict, *_ in parts]
    if REFUTED in verdicts:
        verdict = combined(*verdicts)
    else:
        verdict = pooled.verdict(sign=1)
        if verdict == CONFIRMED and any(damaged for *_, damaged, _ in parts):
            verdict = NOT_CONFIRMED
    order = sorted(parts, key=lambda part: part[1] != REFUTED)  # a refuting family first
    statistic = "; ".join(
        f"{family} {part}: gain {gain.text(2)}" + (f" (control damaged: {control.text(2)})" if damaged else "")
        for family, part, gain, control, damaged, _ in order
    )
    statistic += f"; all families {pooled.text(2)} (RMS SE units)"
    if verdict == NOT_DETECTABLE:
        statistic += "; " + pooled.null_text("gain")
    detail = (
        f"intervals at {100 * level:.3g} % (Bonferroni over {len(parts)} families"
        + (" and the pool); " if families > 1 else "); ")
        + "; ".join(
            f"{family}: {n} rows, {gain.counted}, t with {gain.df} df, control − old {control.text(2)}"
            + ("" if part != NOT_DETECTABLE else f", {gain.null_text('gain')}")
            for family, part, gain, control, _, n in parts
        )
    )
    detail += (
        f"; all families: {pooled.counted}, t with {pooled.df} df, each family's gains divided by the RMS of their SEs"
    )
    return Result(
        verdict,
        statistic,
        f"gain = L_test(control) − L_test(grown), E11's final snapshot; {detail}",
        (("gain, all families", pooled),),
    )


E8 = Claim(
    "E8",
    "Inserting a zero-initialized block (jumpboard, training, fallback) lowers test loss beyond what the "
    "same extra training gives the old model (Paper D).",
    "per family, gain = L_test(control) − L_test(grown) of every (model, point) of E11's final snapshot (the "
    "control: f_old trained on every weight for the same steps) with its paired evaluation "
    "SE; per model the mean, across models a random-effects mean with a t interval at 1 − 0.05/m (m the families, "
    "plus the pool where there are two or more): "
    "refuted if below 0, "
    "confirmed if above 0 and the control's change from f_old (same test) is not above 0 (else not confirmed: "
    "damaged control); over families: refuted if any family is (not confirmed if another is confirmed); else the "
    "mean over all models of the gain in units of each family's RMS SE, its t interval at the same level: confirmed if "
    "above 0 (not confirmed if a control is damaged), refuted if below 0, else not detectable with its limit and "
    "MDE from that interval; every family's verdict in the headline",
    rule_expansion,
    READS,
    figure="F7_expansion",
)
