"""Where ``grow`` inserts layers: ``--at auto | best[:K] | pareto[:K] | layer.3,layer.7 | every:K | adept | bi | top``.

A point ``layer.i`` is the stream after decoder layer ``i``; a new layer there follows layer ``i``.

- ``auto`` (this project, Paper D): greedy on the certificate, the point ``certify`` ranks first
  among "grow here" (largest ``block_grad_norm``, ``certify.grow_ranking``); none: nothing is grown.
- ``best``: greedy on the certificate's whole ranking (``certify.point_ranks``: "grow here" points,
  then "weak", then "no detectable signal", each by ``block_grad_norm``), so a layer is grown where the
  certificate is only weak too: the certificate's placement in comparisons that need a grown model
  (E11's certificate point, E12).
- ``pareto`` (this project, with ``--retain``): greedy as ``best``, over the certificate's order under its
  predicted forgetting (``certify.forgetting.pareto_ranking``): the largest ``block_grad_norm`` among the
  points predicted to forget at most ``--max-forgetting`` per nat gained, else the least forgetting per
  nat gained.
- ``best:K``, ``pareto:K``: one certificate's first ``K`` points in ``best``'s or ``pareto``'s order, all
  inserted in one round and trained together, as ``every:K`` inserts its layers: the certificate's
  placement at the new parameters of a ``K``-layer rule.
- ``every:K`` (LLaMA-Pro, arXiv 2401.02415): a new layer after every ``K``-th layer (after layers
  ``K − 1``, ``2K − 1``, …).
- ``adept`` (ADEPT, arXiv 2510.10071): after each of the ``--blocks`` layers least important on the
  retain data, ``Σ|g·W|`` (``scores.adept_importance``).
- ``bi`` (ShortGPT's block influence, arXiv 2403.03853): after each of the ``--blocks`` layers of
  least ``1 − cos(h_in, h_out)`` on the retain data (``scores.block_influence``).
- ``top``: ``--blocks`` new layers after the last layer (the uniform point of the pipeline's E11).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EVERY = re.compile(r"every:([1-9][0-9]*)")
TOGETHER = re.compile(r"(best|pareto):([1-9][0-9]*)")
POINT = re.compile(r"layer\.(0|[1-9][0-9]*)")
AT_FORMS = (
    "'auto', 'best', comma-separated points such as 'layer.3,layer.7', 'every:K' (a new layer after every K-th), "
    "'best:K' (the certificate's first K points at once), 'pareto', 'pareto:K', 'adept', 'bi' (these four with "
    "--retain) or 'top'"
)
RULES = ("adept", "bi", "top")
"""Placements resolved from the model (and, for ``adept`` and ``bi``, per-layer scores on ``--retain``)."""
NEEDS_RETAIN = ("adept", "bi", "pareto")


@dataclass(frozen=True)
class Placement:
    """A parsed ``--at``: ``auto`` (greedy, up to ``blocks`` rounds), the layers ``after`` which to insert
    (old numbering), or a ``stride`` (``every:K``) resolved against the model's depth."""

    auto: bool = False
    blocks: int | None = None
    after: tuple[int, ...] = ()
    stride: int | None = None
    rule: str | None = None
    together: bool = False
    """``best:K``, ``pareto:K``: the certificate's first ``blocks`` points in one round, trained together."""


def parse_at(at: str, blocks: int | None, retain: bool = False) -> Placement:
    """``--at`` and ``--blocks`` checked without the model (``ValueError`` naming the bad value and the
    forms allowed); ``--blocks`` (default 1) counts for ``auto`` and the rules, and must match a fixed
    list; ``adept`` and ``bi`` need ``retain`` data."""
    if blocks is not None and blocks < 1:
        raise ValueError(f"--blocks {blocks} must be at least 1")
    given = at
    if match := TOGETHER.fullmatch(at):
        at, count = match.group(1), int(match.group(2))
        if blocks is not None and blocks != count:
            raise ValueError(f"--blocks {blocks} differs from the {count} points of --at {given!r}")
        blocks = count
    if at in ("auto", "best", "pareto"):
        if at in NEEDS_RETAIN and not retain:
            raise ValueError(f"--at {given!r} weighs the forgetting of the old domain: give it with --retain DATA")
        return Placement(auto=True, blocks=blocks or 1, rule=None if at == "auto" else at, together=bool(match))
    if at in RULES:
        if at in NEEDS_RETAIN and not retain:
            raise ValueError(f"--at {at!r} scores layers on the old domain: give it with --retain DATA")
        return Placement(blocks=blocks or 1, rule=at)
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


def least(scores: list[float], count: int) -> tuple[int, ...]:
    """The ``count`` layers of lowest score (ties: the lower index first), in increasing order."""
    return tuple(sorted(sorted(range(len(scores)), key=lambda i: (scores[i], i))[:count]))


def resolve(placement: Placement, depth: int, scores: list[float] | None = None) -> tuple[int, ...]:
    """The layers a fixed ``placement`` inserts after, for a model of ``depth`` layers (``ValueError``
    for a point or stride the model does not have); ``adept`` and ``bi`` take the per-layer ``scores``
    (without them, the count alone: the first layers, as a placeholder for checks before loading)."""
    if placement.rule == "top":
        return (depth - 1,) * (placement.blocks or 1)
    if placement.rule is not None:
        count = placement.blocks or 1
        if count > depth:
            raise ValueError(f"--blocks {count}: --at {placement.rule} picks distinct layers; the model has {depth}")
        return least(scores, count) if scores is not None else tuple(range(count))
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
