"""The certificate for the terminal: the compact or the wide table, the recommendation and the legend;
and the line comparing a language model's loss on its windows with a uniform guess (``loss_line``)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .forgetting import has_forgetting
from .measurement import INTERVAL_LEVEL
from .verdict import B_GROW, GROW, NO_SIGNAL, WEAK, grow_ranking, point_ranks

WIDE_COLUMNS = 120
"""Line width of ``--wide``."""


def _number(value: float, digits: int = 3) -> str:
    return "nan" if math.isnan(value) else ("inf" if math.isinf(value) else f"{value:.{digits}g}")


def _clipped(value: float) -> str:
    """A number of a quantity >= 0 whose unbiased estimate can dip below: ``< 0`` when it does."""
    return "< 0" if value < 0 else _number(value)


def _interval(value: float, lo: float, hi: float) -> str:
    """``value [lo, hi]``, always with its interval: an estimate or bound below 0 reads ``< 0`` (never a
    made-up 0), an interval the data do not give reads ``[nan, nan]``."""
    return f"{_clipped(value)} [{_clipped(lo)}, {_clipped(hi)}]"


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [header, *rows]]


def _cell(value: object) -> str:
    return _number(value, 4) if isinstance(value, float) else str(value)


def wide_table(frame: pd.DataFrame, width: int = WIDE_COLUMNS) -> list[str]:
    """Every column, one block per point: the point's name, then ``column=value`` pairs filled into
    lines of at most ``width`` characters (a pair is never split)."""
    lines = []
    for row in frame.to_dict("records"):
        lines.append(f"{row['point']}:")
        line = ""
        for pair in (f"{column}={_cell(value)}" for column, value in row.items() if column != "point"):
            if line and len(line) + 2 + len(pair) > width:
                lines.append(line)
                line = ""
            line = f"{line}  {pair}" if line else f"    {pair}"
        lines.append(line)
    return lines


def _signed(value: float, lo: float, hi: float) -> str:
    """``value [lo, hi]`` of a quantity of either sign."""
    return f"{_number(value)} [{_number(lo)}, {_number(hi)}]"


def compact_table(frame: pd.DataFrame) -> list[str]:
    """The default table: point, ``‖μ‖²`` and ``d_align`` with intervals, ``B_exact``, ``B_align``,
    the block gradient norm and the verdict; with a retain pool, the predicted gain on the data and
    forgetting of the retain data, with intervals (``forgetting``)."""
    header = ["point", "mu_sq [lo, hi]", "d_align [lo, hi]", "b_exact", "b_align", "block_grad_norm", "verdict"]
    forgets = has_forgetting(frame)
    if forgets:
        header[-1:-1] = ["gain_B [lo, hi]", "forget_A [lo, hi]"]
    rows = []
    for r in frame.to_dict("records"):
        row = [
            str(r["point"]),
            _interval(r["mu_sq"], r["mu_sq_lo"], r["mu_sq_hi"]),
            _interval(r["d_align"], r["d_align_lo"], r["d_align_hi"]),
            _number(r["b_exact"], 2),
            _number(r["b_align"], 2),
            _number(r["block_grad_norm"]),
        ]
        if forgets:
            row += [_signed(r["mu_cross"], r["mu_cross_lo"], r["mu_cross_hi"])]
            row += [_signed(r["forget"], r["forget_lo"], r["forget_hi"])]
        rows.append([*row, r["verdict"]])
    return _aligned(header, rows)


def _larger_sizes(frame: pd.DataFrame, M: int, K: int) -> str:
    """What to ask for next: a larger ``--pool``, and larger ``--M/--K`` only up to the pools measured."""
    room = int(min(frame["n"].min(), frame["n_test"].min()))
    if max(M, K) < room:
        return f"measure a larger --pool, or ask for larger --M/--K (at most {room}, the pools measured)"
    return f"measure a larger --pool (--M/--K are already at the {room} examples the pools hold)"


def recommendation(frame: pd.DataFrame) -> str:
    """One line: the "grow here" points ranked by ``block_grad_norm``, else why there are none."""
    if frame.empty:
        return "recommendation: no insertion point was measured"
    M, K = int(frame["M"].iloc[0]), int(frame["K"].iloc[0])
    grow = grow_ranking(frame)
    if len(grow):
        best = grow.iloc[0]
        then = f" (then {', '.join(grow['point'].iloc[1:])})" if len(grow) > 1 else ""
        return (
            f"recommendation: grow at {best['point']}{then}: mean gradient detected, B_exact = "
            f"{_number(best['b_exact'], 2)} < {B_GROW} at M = {M}, K = {K}, largest block_grad_norm "
            f"({_number(best['block_grad_norm'])})"
        )
    weak = frame[frame["verdict"] == WEAK]
    if len(weak):
        return (
            f"recommendation: no point is certified at M = {M}, K = {K}; the signal is weak at "
            f"{', '.join(weak['point'])}: {_larger_sizes(frame, M, K)} before growing"
        )
    return (
        f"recommendation: no point has a detectable signal (every mu_sq interval reaches 0 and no B_exact is "
        f"below {B_GROW} at M = {M}, K = {K}): these data give no reason to grow this model here"
    )


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def standing(frame: pd.DataFrame, point: str) -> str:
    """What the certificate says of ``point`` against its first-ranked point (``point_ranks``): its rank,
    verdict and ``block_grad_norm``, and the first point's."""
    ranks = point_ranks(frame)
    rows = frame.set_index("point")
    first = frame.loc[ranks.idxmin(), "point"]
    rank = int(ranks[frame.index[frame["point"] == point][0]])
    said = f"{rows.loc[point, 'verdict']}, block_grad_norm {_number(rows.loc[point, 'block_grad_norm'])}"
    if point == first:
        return f"the certificate ranks {point} first of {len(frame)} ({said})"
    best = f"{rows.loc[first, 'verdict']}, block_grad_norm {_number(rows.loc[first, 'block_grad_norm'])}"
    return f"the certificate ranks {point} {_ordinal(rank)} of {len(frame)} ({said}); its first is {first} ({best})"


def legend(frame: pd.DataFrame, wide: bool = False) -> list[str]:
    """What the verdicts, the columns, ``inf`` and ``nan`` mean (short lines)."""
    first = frame.iloc[0] if len(frame) else {"n": 0, "n_test": 0, "view": "full", "M": 0, "K": 0}
    clipped = "raw" if wide else "< 0: an estimate or bound below 0 (signal below noise); raw in --wide/--out"
    lines = [
        (
            f"verdict: {GROW} = mu_sq interval above 0 and b_exact < {B_GROW} (and block_grad_norm > 0); "
            f"{WEAK} = only one of the two; {NO_SIGNAL} = neither"
        ),
        (
            f"legend:  {first['view']} view, train pool of {int(first['n'])}, test pool of {int(first['n_test'])}; "
            f"mu_sq = ||mu||^2; [lo, hi] = {INTERVAL_LEVEL:.0%} jackknife interval ({clipped})"
        ),
        (
            f"b_exact = two-sample bound on P(misalign) for M = {int(first['M'])} train, K = {int(first['K'])} "
            "test examples; b_align = one-sample bound from d_align"
        ),
        "block_grad_norm = first-order gain of a zero-initialized block inserted after the point",
        *(
            [
                "gain_B = mu_B'mu_B,test: first-order fall of --data's test loss for a step along its mean gradient",
                "forget_A = -mu_B'mu_A: first-order rise of --retain's loss for the same step (> 0: it forgets)",
            ]
            if has_forgetting(frame)
            else []
        ),
        "inf = a spread estimated <= 0 (d_par = inf: mu'Sigma mu estimated <= 0; d_2 = inf: tr Sigma^2 estimated <= 0)",
        "nan = the data do not bound it (no mean detected above noise, or a leave-one-out estimate is inf/nan)",
        "b_exact = nan: no certificate (mu_tr'mu_te, its square or the variance estimated <= 0)",
    ]
    return lines[:2] + [" " * len("legend:  ") + line for line in lines[2:]]


def loss_line(attrs: dict[str, Any]) -> tuple[str, str | None]:
    """The line saying a language model's mean loss on the train pool (``attrs["loss"]``, from
    ``measurement.loss_attrs``) beside ``ln(vocab_size)``, the loss of a uniform guess, and a warning
    when the loss is above it (else None): the model predicts these windows worse than a uniform
    guess. ``("", None)`` when there is no loss (an image model)."""
    if "loss" not in attrs:
        return "", None
    loss, ln_vocab, size = attrs["loss"]["loss"], attrs["loss"]["ln_vocab"], attrs["loss"]["vocab_size"]
    uniform = f"ln {size} = {ln_vocab:.2f}"
    line = f"loss on the train pool: {loss:.2f} nats per token (uniform guess: {uniform})"
    if not loss > ln_vocab:
        return line, None
    causes = ["a tokenizer that is not the model's", "data unlike the model's training data"]
    if attrs["loss"].get("documents"):  # each window already starts a document: the start token may be missing
        causes.insert(0, "documents that do not open with the start token (BOS) the model was trained with")
    else:
        causes.insert(
            0,
            "windows that start mid-document (give documents as a 2-D .npy of shape (n, T), one document a row "
            "from its start)",
        )
    return line, (
        f"warning: the model's loss on these windows ({loss:.2f} nats per token) is above a uniform guess's "
        f"({uniform}): it predicts them worse than chance. Likely causes: {', '.join(causes[:-1])}, or {causes[-1]}"
    )


def format_certificate(frame: pd.DataFrame, wide: bool = False) -> str:
    """The certificate for the terminal: the compact table (``wide``: every column of
    ``CERTIFICATE_COLUMNS``, ``wide_table``), then the recommendation and the legend."""
    table = wide_table(frame) if wide else compact_table(frame)
    return "\n".join([*table, "", recommendation(frame), *legend(frame, wide)])
