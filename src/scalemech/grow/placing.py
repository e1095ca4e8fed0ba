"""Where ``grow`` inserts and what it grows (``Placing``, a part of ``run.Grower``): the certificate at
every point (with the predicted forgetting under ``--retain``), the held-out windows disjoint from its
pools, the points ``--at`` chooses, said with the certificate's word on them, and the grown model, round by
round, its function checked before any training."""

from __future__ import annotations

import math
import sys
from typing import Any

import pandas as pd
import torch
from transformers import PreTrainedModel

from ..certify import Sampling, certify_model, format_certificate, grow_ranking, point_ranks
from ..certify.forgetting import pareto_ranking, pareto_reason
from ..certify.text import loss_line, standing
from ..core.device import placed
from ..core.seeding import derive_seed
from ..models.base import PRESERVED_ATOL
from ..models.hf import HFCausalLM
from ..models.hf_growth import check_grown, grow_layers, new_positions
from ..tasks import draw_disjoint
from ..training.continued import Arm
from .arms import frozen, trainable
from .card import placement_source
from .placement import resolve

CHECK_WINDOWS = 8
"""Held-out windows on which the insertion is checked to preserve the function."""
PREDICTED = ("block_grad_norm", "mu_cross", "mu_cross_lo", "mu_cross_hi", "forget", "forget_lo", "forget_hi")
"""The certificate's predictions ``growth.json`` keeps per chosen point."""


def predicted(decisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per chosen point: the first-order gain ``‖∇_θ L‖`` at ``θ = 0`` of the new layer there (the loss
    decrease per unit step along the steepest descent, certify's ``block_grad_norm``); the gain ``mu_cross``
    and (``--retain``) forgetting ``forget`` a step along the mean gradient predicts (``certify.forgetting``)."""
    out = []
    for decision in decisions:
        for point in (decision["chosen"] or "").split(","):
            rows = [r for r in decision["certificate"] if r["point"] == point]
            if rows:
                kept = {key: rows[0].get(key) for key in PREDICTED}
                out.append({"round": decision["round"], "point": point, **kept})
    return out


def _shifted(inserted: list[int], new: list[int]) -> list[int]:
    """Indices ``inserted`` renumbered after new layers at ``new`` (each pushes the layers from it up by
    one), plus ``new``."""
    shifted = list(inserted)
    for index in sorted(new):
        shifted = [k + (k >= index) for k in shifted]
    return sorted(shifted + list(new))


def _origins(origin: list[int], after: list[int]) -> list[int]:
    """``origin`` (per layer, the original layer it derives from) after new layers copy the layers
    ``after``: each new layer derives from what the layer it copies derives from."""
    old_to_new, new_layers = new_positions(len(origin), after)
    grown = [0] * (len(origin) + len(new_layers))
    for i, index in enumerate(old_to_new):
        grown[index] = origin[i]
    for index, source in new_layers:
        grown[index] = origin[source]
    return grown


def _plain(value: Any) -> Any:
    """A table cell as JSON holds it: numpy scalars as Python numbers, nan as null."""
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and math.isnan(value) else value


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{key: _plain(value) for key, value in row.items()} for row in frame.to_dict("records")]


class Placing:
    """The placement half of ``run.Grower``: it reads the settings, placement, model, data and retain data
    ``Grower`` holds, and trains through ``arms.Arms``."""

    def certificate(self, model: HFCausalLM, rule: str | list[str]) -> pd.DataFrame:
        s = self.settings
        sampling = Sampling(s.pool, s.M, s.K, s.batch_size, s.view, s.seed, s.points_per_pass)
        pools = self.scratch / "pools"
        retain = self.retained.prepared if self.retained is not None else None  # the forgetting predicted too
        with placed(model, self.device):
            frame = certify_model(model, self.prepared, self.name, rule, pools, sampling, device=self.device,
                                  retain=retain)  # fmt: skip
        print(format_certificate(frame))
        line, warning = loss_line(frame.attrs)
        print(line, flush=True)
        if warning:
            print(warning, file=sys.stderr, flush=True)
        if self.pool_loss is None:  # the first certificate's: the source model's
            self.pool_loss = frame.attrs.get("loss")
        return frame

    def held_out(self, pools: dict[str, list[int]]) -> None:
        """``eval_windows`` test windows disjoint from the certificate's test pool (and, as test windows,
        from every training token), seeded."""
        examples = draw_disjoint(
            self.task,
            "test",
            self.settings.eval_windows,
            derive_seed(self.settings.seed, self.name, "grow", "held-out"),
            torch.tensor(pools["test"], dtype=torch.int64),
        )
        self.eval_x, self.eval_y = examples.x, examples.y

    def fixed_points(self, current: HFCausalLM) -> tuple[tuple[int, ...], dict[str, Any]]:
        """A fixed placement's layers (``resolve``) and, for ``adept`` and ``bi``, the per-layer scores on
        the retain data behind them (``retained.Retained.scores``)."""
        rule = self.placement.rule
        if rule not in ("adept", "bi"):
            return resolve(self.placement, current.depth), {}
        with placed(current.hf_model, self.device):
            scores = self.retained.scores(current.hf_model, rule)
        shown = ", ".join(f"layer.{i} {value:.4g}" for i, value in enumerate(scores))
        print(f"grow: {rule} scores per layer on --retain: {shown}")
        return resolve(self.placement, current.depth, scores), {"scores": {"rule": rule, "per_layer": scores}}

    def ranking(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The certificate's points in the order ``--at`` grows them: ``auto``, the "grow here" ones
        (``grow_ranking``); ``best``, all (``point_ranks``); ``pareto``, all under the predicted forgetting
        (``certify.forgetting.pareto_ranking``)."""
        if self.placement.rule == "pareto":
            return pareto_ranking(frame, self.settings.forgetting_limit)
        if self.placement.rule == "best":
            return frame.loc[point_ranks(frame).sort_values().index]
        return grow_ranking(frame)

    def say_chosen(self, frame: pd.DataFrame, after: list[int]) -> None:
        """One line per chosen point: which ``--at`` rule chose it (for ``pareto``, why) and what the
        certificate says of it against its first-ranked point (``certify.text.standing``)."""
        at = self.settings.at
        for point in dict.fromkeys(f"layer.{i}" for i in after):
            why = f": {pareto_reason(frame, point, self.settings.forgetting_limit)}" if at == "pareto" else ""
            print(f"grow: --at {at} ({placement_source(at)}) chose {point}{why}; {standing(frame, point)}")

    def grow_model(self) -> tuple[PreTrainedModel, list[int], list[dict[str, Any]], list[Arm]]:
        """The grown model, its new layers (final numbering), the decisions and the grown arm's stages;
        ``self.copied`` holds the original layer each new layer copies (directly or through a copy)."""
        s, current, inserted = self.settings, self.model, []
        decisions, stages, generator = [], [], None
        origin = list(range(self.model.depth))  # per layer of the current model: the original layer it derives from
        at_once = s.train == "none" or self.placement.together  # one certificate's first points, one round
        rounds = self.placement.blocks if self.placement.auto and not at_once else 1
        for round_ in range(1, rounds + 1):
            if self.placement.auto:  # untrained insertions leave the certificate as it was: --train none takes one
                frame = self.certificate(current, "all")
                order = self.ranking(frame)
                ranked = order["point"].iloc[: self.placement.blocks if at_once else 1]
                after = sorted(int(point.removeprefix("layer.")) for point in ranked)
                scores: dict[str, Any] = {}
            else:
                fixed, scores = self.fixed_points(current)
                after = list(fixed)
                frame = self.certificate(current, "all")  # every point: what it says of the chosen ones
            chosen = ",".join(f"layer.{i}" for i in after) or None
            self.say_chosen(frame, after)
            if round_ == 1:
                self.held_out(frame.attrs["pools"])
            decisions.append({"round": round_, "chosen": chosen, "certificate": _rows(frame), **scores})
            if not after:
                count = f"{len(inserted)} new layer{'' if len(inserted) == 1 else 's'}"
                print(f"grow: round {round_}: no point is 'grow here'; stopping after {count}")
                break
            grown, new = grow_layers(current.hf_model, after)
            gap = check_grown(current.hf_model, grown, self.eval_x[:CHECK_WINDOWS], self.device)
            inserted, origin = _shifted(inserted, new), _origins(origin, after)
            allowed = f"{PRESERVED_ATOL:g} x max(1, max |logits|)"  # models.base.check_preserved
            decisions[-1].update(new_layers=new, max_abs_logit_change=gap, allowed_change=allowed)
            print(f"grow: round {round_}: new layers {new} after {chosen}; logits unchanged (max |Δ| = {gap:.2g})")
            if s.train != "none":
                trainable(grown, inserted, s.train)
                stages.append(self.train(f"grown-{round_}", grown, s.steps, generator, inserted=inserted))
                generator = stages[-1].generator_state
            current = HFCausalLM(frozen(grown), self.spec)
        self.copied = sorted({origin[i] for i in inserted})
        return current.hf_model, inserted, decisions, stages
