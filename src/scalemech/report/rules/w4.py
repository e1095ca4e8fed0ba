"""W4: a zero-init residual step along −μ_M changes test loss with the predicted sign and keeps 96–99 % of
the predicted magnitude at small η; decided as the paper measures it, and held out.

At each series' smallest η, a row's sign agreement is 0 or 1 and its ratio observed/predicted a number,
each in two forms (E7's columns): **W4**, as the paper measures it, the loss change on the very test
examples (pool A) whose mean gradient ``g_A`` made the prediction ``−η μ_Mᵀ g_A`` (``ratio``, ``sign_agree``:
a first-order check, which tends to the prediction as η → 0 whatever the alignment, so it tests that the
step is small enough for the first-order picture the paper's figure rests on); **W4 held out**, the loss
change on a disjoint test pool B (``ratio_heldout``, ``sign_agree_heldout``), a stricter test the paper does
not make. Points and views of one model share pools, so models are the units: per model the share of
agreeing rows and the median ratio, across models each one's mean with a 95 % t interval (``units``, equal
weights). The paper's band (ratio 96–99 %) is 0.03 wide, narrower than most runs' intervals, so each part is
a non-inferiority test against its band's lower edge less a margin fixed here, ``W4_MARGIN`` (5 points):
confirmed when its interval lies above ``edge − W4_MARGIN`` (the part is within the margin of the paper's
value, or above it), refuted when it lies below (it falls short of the paper by more than the margin), else
not detectable with its limit and MDE from that null. (A margin set by each run's own MDE, as before, moved
with the estimated SE: with architectures as units, 11 degrees of freedom in the quick run, it refuted
14 of 120 draws at its null.) The misalignment certificate at the largest M = K the grid has is stated as
description (the grid stops below the pool sizes the intervention uses).
"""

from __future__ import annotations

import numpy as np

from ...core.tables import model_keys
from ...figures.aggregate import as_flag
from ..common import Claim, NotMeasured, Result, Tables, combined, table
from ..units import Estimate, across_models, per_model

W4_SIGN_BAND = (0.95, 1.0)  # held-out sign agreement: "with the predicted sign" (≥ 95 %, our choice)
W4_RATIO_BAND = (0.96, 0.99)  # held-out observed/predicted at the smallest η (Paper W: 96–99 %)
PARTS = 2  # sign and ratio: both must be confirmed
W4_MARGIN = 0.05  # non-inferiority margin below each band's lower edge (our choice, fixed before results)
PAPER_BAND = f"{100 * W4_RATIO_BAND[0]:.0f}–{100 * W4_RATIO_BAND[1]:.0f} %"
FORMS = {"W4": "", "W4 held out": "_heldout"}  # claim → the suffix of the columns it reads
READS = {"intervention": ["point_index", "view", "eta", "ratio", "sign_agree", "ratio_heldout", "sign_agree_heldout"]}


def part_text(name: str, estimate: Estimate, edge: float) -> str:
    """A part's mean over models with its interval, against ``edge − W4_MARGIN``, and its MDE from there."""
    null = edge - W4_MARGIN
    return f"{name} {estimate.text()} vs {edge:g} − {W4_MARGIN:g} = {null:.3g} (MDE {estimate.mde(PARTS):.2g})"


def _certificate(tables: Tables) -> str:
    """The median B_exact UCB at the largest M = K of the misalignment grid (description)."""
    misalignment = tables.get("misalignment")
    if misalignment is None or not {"M", "K", "b_exact_ucb"} <= set(misalignment.columns):
        return "no misalignment table"
    square = misalignment[misalignment["M"] == misalignment["K"]]
    if square.empty:
        return "no misalignment rows with M = K"
    largest = square[square["M"] == square["M"].max()]
    return (
        f"median B_exact UCB {largest['b_exact_ucb'].median():.2g} at the grid's largest M = K = {largest['M'].max():g}"
    )


def rule_w4(tables: Tables, suffix: str) -> Result:
    """Sign agreement's and the ratio's t intervals against their band's lower edge less their MDE
    (``margin``): confirmed when both lie above, refuted when either lies below; ``suffix`` the form's columns
    (``FORMS``)."""
    ratio_column, agree_column = f"ratio{suffix}", f"sign_agree{suffix}"
    frame = table(tables, "intervention", ["point_index", "view", "eta", ratio_column, agree_column])
    frame = frame[np.isfinite(frame["eta"].astype(float))]
    series = model_keys() + ["point_index", "view"]
    smallest = frame[frame["eta"] == frame.groupby(series)["eta"].transform("min")]
    rows = smallest.assign(agree=as_flag(smallest[agree_column]))
    rows = rows[rows["agree"].notna() & np.isfinite(rows[ratio_column].astype(float))]
    where = "held-out" if suffix else "same-pool"
    if rows.empty:
        raise NotMeasured(f"intervention has no {where} measurement at the smallest η ({len(smallest)} rows)")
    agree = across_models(per_model(rows, "agree", None))
    ratios = rows.groupby(model_keys(), sort=False)[ratio_column].median().reset_index(name="y")
    ratio = across_models(ratios.assign(s=np.nan))
    parts = {
        "sign agreement": (agree, W4_SIGN_BAND[0]),
        "observed/predicted": (ratio, W4_RATIO_BAND[0]),
    }
    verdicts = {name: e.verdict(sign=1, null=edge - W4_MARGIN) for name, (e, edge) in parts.items()}
    statistic = "; ".join(part_text(name, e, edge) for name, (e, edge) in parts.items())
    statistic += f" ({agree.counted}; paper: ratio {PAPER_BAND})"
    detail = (
        f"{where}: {len(rows)} of {len(smallest)} rows at the smallest η over {agree.counted}; per model the "
        f"share of rows whose signs agree and the median ratio, across models each one's mean with a t interval "
        f"({agree.df} df), tested against its band's lower edge less {W4_MARGIN:g} (non-inferiority: the paper's "
        f"band, {W4_RATIO_BAND[1] - W4_RATIO_BAND[0]:.2g} wide, is narrower than most intervals); "
        + "; ".join(f"{name} {verdicts[name]}" for name in parts)
        + f"; {_certificate(tables)} (description)"
    )
    deciding = tuple((name, e) for name, (e, _) in parts.items())
    return Result(combined(*verdicts.values()), statistic, detail, deciding)


STATEMENT = (
    "A zero-init residual step along −μ_M changes test loss with the predicted sign and keeps 96–99 % of the "
    "predicted magnitude at small η."
)
TEST = (
    f"at each series' smallest η; per model the share of rows whose signs agree and the median ratio "
    f"observed/predicted, across models each one's mean with a 95 % t interval; each part a non-inferiority test "
    f"against its band's lower edge (agreement {W4_SIGN_BAND[0]:g}, ratio {W4_RATIO_BAND[0]:g}, the paper's) less "
    f"{W4_MARGIN:g}: confirmed if its interval lies above, refuted if below, else not detectable with its MDE; "
    f"confirmed if both are, refuted if either is (not confirmed if one is confirmed and the other refuted)"
)
W4 = Claim(
    "W4",
    STATEMENT,
    "as the paper measures it: the prediction −η μ_Mᵀ g_A from test pool A, the loss change on pool A itself (a "
    "first-order check: it tends to the prediction as η → 0), " + TEST,
    lambda tables: rule_w4(tables, FORMS["W4"]),
    READS,
    figure="F6_intervention",
)
W4_HELD_OUT = Claim(
    "W4 held out",
    STATEMENT + " Held out: on test examples other than those behind the prediction (a stricter test the paper "
    "does not make).",
    "held out: the prediction from test pool A, the loss change on a disjoint pool B, " + TEST,
    lambda tables: rule_w4(tables, FORMS["W4 held out"]),
    READS,
    figure="F6_intervention",
)
