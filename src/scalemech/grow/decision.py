"""Whether the grown model is recommended (Paper D's Condition 2 on the user's data).

The grown model is recommended only when its held-out loss beats both controls, the original
continued on the same tokens (``control_tokens``) and for the grown model's FLOPs
(``control_flops``), by more than ``GAIN_SE`` paired standard errors each (the same held-out
windows scored by every model, ``stats.paired_difference``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import stats

GAIN_SE = 2.0
CONTROLS = ("control_tokens", "control_flops")


def decide(losses: dict[str, np.ndarray], trained: bool, inserted: bool) -> dict[str, Any]:
    """``{"recommended", "why", "rule", "gains"}`` from per-window held-out losses by model (``old``,
    ``grown`` and the controls that were trained); a gain is ``loss(other) − loss(grown)`` (> 0: the
    grown model is better), with its paired SE."""
    differences = {
        name: stats.paired_difference(losses[name], losses["grown"]) for name in ("old", *CONTROLS) if name in losses
    }
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
