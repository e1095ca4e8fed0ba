"""E8: inserting a zero-initialized block lowers test loss beyond what the same extra training gives
the old model (Paper D), per family (families of opposite sign are never pooled).

Per row the paired gain ``g = L_test(control) − L_test(selected)`` with its evaluation SE (per-example
differences on the test examples); per model the mean over its points, across the family's models a
random-effects mean with a 95 % t interval (``units``): the aggregate evidence of all rows, no per-row
gate. The control's own change ``L_test(control) − L_test(old)`` is judged the same way: a control that
damaged f_old makes a win meaningless.
"""

from __future__ import annotations

import pandas as pd

from .common import CONFIRMED, NOT_CONFIRMED, Claim, Result, Tables, agreed, table
from .units import Estimate, across_models, per_model

E8_SE = "se_test_selected_minus_control"
CONTROL_SE = "se_test_control_minus_old"
LOSSES = ["test_loss_selected", "test_loss_control", "test_loss_old"]


def _mean(rows: pd.DataFrame, value: pd.Series, se: str) -> Estimate:
    finite = rows.assign(value=value)[value.notna() & rows[se].notna()]
    return across_models(per_model(finite, "value", se))


def rule_expansion(tables: Tables) -> Result:
    """Per family: gain's mean over models, confirmed above 0 unless the control damaged f_old (its
    change's interval above 0: not confirmed), refuted below 0; the families' verdicts must agree."""
    expansion = table(tables, "expansion", LOSSES + [E8_SE, CONTROL_SE])
    verdicts, parts = [], []
    for family, rows in expansion.groupby("family"):
        gain = _mean(rows, rows["test_loss_control"] - rows["test_loss_selected"], E8_SE)
        control = _mean(rows, rows["test_loss_control"] - rows["test_loss_old"], CONTROL_SE)
        damaged = control.verdict(sign=1) == CONFIRMED
        verdict = gain.verdict(sign=1)
        verdicts.append(NOT_CONFIRMED if verdict == CONFIRMED and damaged else verdict)
        parts.append((family, gain, control, damaged, len(rows)))
    statistic = "; ".join(
        f"{family}: gain {gain.text(2)}, control − old {control.text(2)}{' (damaged)' if damaged else ''}"
        for family, gain, control, damaged, _ in parts
    )
    detail = "; ".join(
        f"{family}: {n} rows, {gain.units} models, t with {gain.df} df" for family, gain, _, _, n in parts
    )
    return Result(agreed(*verdicts), statistic, f"gain = L_test(control) − L_test(selected); {detail}")


E8 = Claim(
    "E8",
    "Inserting a zero-initialized block (jumpboard, training, fallback) lowers test loss beyond what the "
    "same extra training gives the old model (Paper D).",
    "per family, gain = L_test(control) − L_test(selected) of every (model, point) with its paired evaluation "
    "SE; per model the mean, across models a random-effects mean with a 95 % t interval: confirmed if above 0 "
    "and the control's change from f_old (same test) is not above 0 (else not confirmed: damaged control), "
    "refuted if below 0; the families must agree (confirmed and refuted: not confirmed)",
    rule_expansion,
)
