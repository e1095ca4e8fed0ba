"""The arms every growth comparison trains, their budgets, their paired gains and the decision: one
engine for E11 (``experiments.growth``), E12 and ``scalemech grow``.

Arms: ``grown`` (the model with new layers, the new ones trained), ``control_tokens`` (the original,
every weight trained for the grown arm's steps, on the same batches) and ``control_flops`` (every
weight, for the steps whose FLOPs equal the grown arm's, ``control_steps``). On the same held-out
windows ``w`` each arm's gain over another is the paired difference ``mean_w (L_other(w) − L_grown(w))``
with ``SE = sd_w / √W`` (``stats.paired_difference``). Paper D's Condition 2 on held-out data
(``decide``): the grown model is recommended only when it beats both controls by more than
``GAIN_SE`` paired standard errors each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .. import stats

GAIN_SE = 2.0
CONTROLS = ("control_tokens", "control_flops")
ARMS = ("grown", *CONTROLS, "inplace", "lora")
"""Every arm of ``scalemech grow --retain`` in its order (E12's rows, F11's colours)."""


def control_steps(grown_steps: int, grown_flops: int, control_step_flops: int) -> dict[str, int]:
    """Each control's steps: ``control_tokens`` the grown arm's, ``control_flops`` ``round(F_grown / F_step)``
    with ``F_step`` one control step's FLOPs, at least 1 when the grown arm trained (``F_grown > 0``)."""
    steps = round(grown_flops / control_step_flops)
    return {"control_tokens": grown_steps, "control_flops": max(steps, 1) if grown_flops > 0 else steps}


def gains_over(losses: Mapping[str, np.ndarray], names: Iterable[str]) -> dict[str, stats.PairedDifference]:
    """Per model of ``names`` present in ``losses`` (per-window held-out losses by model): the grown
    model's paired gain ``L_name − L_grown`` (> 0: grown is better)."""
    return {name: stats.paired_difference(losses[name], losses["grown"]) for name in names if name in losses}


def decide(losses: dict[str, np.ndarray], trained: bool, inserted: bool) -> dict[str, Any]:
    """``{"recommended", "why", "rule", "gains"}`` from per-window held-out losses by model (``old``,
    ``grown`` and the controls that were trained); ``gains``: ``gains_over`` the old model and the
    controls, as ``{"gain_over_<name>": {mean, se, n}}``."""
    differences = gains_over(losses, ("old", *CONTROLS))
    gains = {f"gain_over_{name}": vars(difference) for name, difference in differences.items()}
    rule = f"recommended only when the grown model's held-out loss beats both controls by > {GAIN_SE:g} paired SE"
    if not inserted:
        return {"recommended": False, "why": "no layer was inserted", "rule": rule, "gains": gains}
    if not trained:
        why = "not trained (--train none): no gain to test"
        return {"recommended": False, "why": why, "rule": rule, "gains": gains}
    missed = [name for name in CONTROLS if not differences[name].exceeds(GAIN_SE)]
    why = "beats both controls" if not missed else f"does not beat {' and '.join(missed)} by more than {GAIN_SE:g} SE"
    return {"recommended": not missed, "why": why, "rule": rule, "gains": gains}
