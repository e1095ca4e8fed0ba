"""Where ``grow`` inserts layers: ``--at auto | layer.3,layer.7 | every:K``.

A point ``layer.i`` is the stream after decoder layer ``i``; a new layer there follows layer ``i``.
``every:K`` is LLaMA-Pro's stride: a new layer after every ``K``-th layer (after layers ``K − 1``,
``2K − 1``, …). ``auto`` is greedy on the certificate: the point ``certify`` ranks first among
"grow here" (largest ``block_grad_norm``, ``certify.grow_ranking``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EVERY = re.compile(r"every:([1-9][0-9]*)")
POINT = re.compile(r"layer\.(0|[1-9][0-9]*)")
AT_FORMS = "'auto', comma-separated points such as 'layer.3,layer.7', or 'every:K' (a new layer after every K-th)"


@dataclass(frozen=True)
class Placement:
    """A parsed ``--at``: ``auto`` (greedy, up to ``blocks`` rounds), the layers ``after`` which to insert
    (old numbering), or a ``stride`` (``every:K``) resolved against the model's depth."""

    auto: bool = False
    blocks: int | None = None
    after: tuple[int, ...] = ()
    stride: int | None = None


def parse_at(at: str, blocks: int | None) -> Placement:
    """``--at`` and ``--blocks`` checked without the model (``ValueError`` naming the bad value and the
    forms allowed); ``--blocks`` (default 1) counts only for ``auto``, and must match a fixed list."""
    if blocks is not None and blocks < 1:
        raise ValueError(f"--blocks {blocks} must be at least 1")
    if at == "auto":
        return Placement(auto=True, blocks=blocks or 1)
    if match := EVERY.fullmatch(at):
        return Placement(blocks=blocks, stride=int(match.group(1)))
    names = at.split(",")
    bad = [name for name in names if not POINT.fullmatch(name)]
    if bad:
        raise ValueError(f"--at {at!r}: {', '.join(map(repr, bad))} is not a point; allowed: {AT_FORMS}")
    after = tuple(sorted(int(name.removeprefix("layer.")) for name in names))
    if blocks is not None and blocks != len(after):
        raise ValueError(f"--blocks {blocks} differs from the {len(after)} points of --at {at!r}; leave --blocks out")
    return Placement(blocks=len(after), after=after)


def resolve(placement: Placement, depth: int) -> tuple[int, ...]:
    """The layers a fixed ``placement`` inserts after, for a model of ``depth`` layers (``ValueError``
    for a point or stride the model does not have)."""
    if placement.stride is not None:
        stride = placement.stride
        if stride > depth:
            raise ValueError(f"--at every:{stride}: the model has only {depth} layers; allowed: every:1..every:{depth}")
        after = tuple(range(stride - 1, depth, stride))
        if placement.blocks and placement.blocks != len(after):
            raise ValueError(f"--blocks {placement.blocks} differs from the {len(after)} layers every:{stride} adds")
        return after
    missing = [i for i in placement.after if i >= depth]
    if missing:
        raise ValueError(
            f"--at: the model has points layer.0..layer.{depth - 1}; no {', '.join(f'layer.{i}' for i in missing)}"
        )
    return placement.after
