"""G3 (E11, *extension*): growing at the certificate's point beats training the old model with the same
budget (docs/science.md §5 E11, §6).

At the certificate's point (``certify_rank`` 1) of each model and snapshot: ``gain_tokens =
L(control_tokens) − L(grown)`` (the old model trained the same steps on the same batches) and
``gain_flops`` (trained for as many FLOPs as the grown model), each with its paired SE over the held-out
examples. Models are the units: per model the mean over its snapshots (SE the mean), each family's gains
in units of their RMS paired SE, across models a random-effects mean with a 95 % t interval (``units``).
Confirmed when both intervals lie above 0, refuted when one lies below 0 (not confirmed when the other
lies above: ``combined``), else not detectable with each limit and MDE. As in E8 a win over a control that damaged
``f_old`` means nothing: a confirmation is "not confirmed" when the mean of ``control_change = L(control_tokens)
− L(old)`` at those points lies above 0.
"""

from __future__ import annotations

from ...core.tables import model_keys
from ...figures.placement import UNIT, certified
from ..common import CONFIRMED, NOT_CONFIRMED, NOT_DETECTABLE, Claim, NotMeasured, Result, Tables, combined
from .g1 import growth_rows, over_models, split

CONTROLS = {"tokens": "gain_tokens", "flops": "gain_flops"}  # equal tokens, equal compute
READS = {
    "growth": ["snapshot", "certify_rank"]
    + [column for gain in CONTROLS.values() for column in (gain, f"{gain}_se")]
    + ["control_change", "control_change_se"]
}


def rule_g3(tables: Tables) -> Result:
    """gain_tokens and gain_flops at the certificate's point, means over models in family RMS SE units:
    confirmed when both are above 0 (unless the control damaged f_old), refuted when one is below."""
    rows = growth_rows(tables, READS["growth"][1:])
    chosen = certified(rows)
    if chosen.empty:
        raise NotMeasured("no model × snapshot of growth has a point of certify_rank 1")
    means = {name: over_models(chosen, gain, f"{gain}_se", scaled=True) for name, gain in CONTROLS.items()}
    control = over_models(chosen, "control_change", "control_change_se", scaled=True)
    damaged = control.verdict(sign=1) == CONFIRMED
    verdict = combined(*(estimate.verdict(sign=1) for estimate in means.values()))
    verdict = NOT_CONFIRMED if verdict == CONFIRMED and damaged else verdict
    statistic = "; ".join(f"gain over {name} control {e.text(2)}" for name, e in means.items())
    statistic += f" (RMS SE units, {means['tokens'].counted})" + ("; control damaged f_old" if damaged else "")
    undecided = {name: e for name, e in means.items() if e.verdict(sign=1) == NOT_DETECTABLE}
    if verdict == NOT_DETECTABLE:
        statistic += "; MDE " + ", ".join(f"{e.mde(len(CONTROLS)):.2g} ({name})" for name, e in means.items())
    units = len(rows.groupby(model_keys() + UNIT))
    by_family = {name: split(chosen, "family", gain, f"{gain}_se") for name, gain in CONTROLS.items()}
    by_snapshot = {name: split(chosen, "snapshot", gain, f"{gain}_se", scaled=True) for name, gain in CONTROLS.items()}
    detail = (
        f"{len(rows)} rows, {len(chosen)} of {units} model × snapshot units with a point of certify_rank 1; per model "
        f"the mean over its snapshots, across models t with {means['tokens'].df} df; "
        + "".join(f"{e.null_text(f'gain over {name}', parts=len(CONTROLS))}; " for name, e in undecided.items())
        + f"control_change = L(control_tokens) − L(old) {control.text(2)} (RMS SE units; above 0: damaged); "
        + "; ".join(
            f"{name} in nats: " + ", ".join(f"{family} {e.text(2)}" for family, e in by_family[name].items())
            for name in CONTROLS
        )
        + "; by snapshot: "
        + "; ".join(
            f"{name} " + ", ".join(f"{snapshot} {e.text(2)}" for snapshot, e in by_snapshot[name].items())
            for name in CONTROLS
        )
    )
    return Result(verdict, statistic, detail, tuple(means.items()))


G3 = Claim(
    "G3",
    "Growing one block at the certificate's point lowers held-out loss more than training the old model "
    "with the same tokens or the same FLOPs (E11, extension).",
    "at the certificate's point of each model × snapshot, gain_tokens = L(control_tokens) − L(grown) and "
    "gain_flops = L(control_flops) − L(grown) with their paired SEs; per model the mean over snapshots, each "
    "family's gains in units of their RMS paired SE, across models a random-effects mean with a 95 % t interval: "
    "confirmed if both are above 0 and control_change = L(control_tokens) − L(old) is not above 0 (else not confirmed: "
    "damaged control), refuted if one is below 0 (not confirmed if the other is above), else not detectable "
    "with each limit and MDE",
    rule_g3,
    READS,
    figure="F10_growth",
)
