"""Training and scoring every arm of ``grow`` (``Arms``, a part of ``run.Grower``): one training of an
arm (``train``: resumable, its FLOPs counted), the two controls (equal tokens, equal FLOPs:
``FLOPS_RULE``), under ``--retain`` the ``inplace`` and ``lora`` arms (``alternatives``), each arm's
held-out losses on both domains, and the decision weighed on them (``tradeoff``)."""

from __future__ import annotations

import copy
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel

from ..core.device import placed
from ..core.seeding import derive_seed
from ..experiments.decision import control_steps
from ..models.hf import decoder_layers_path
from ..training.continued import Arm, TaskBatches, sequence_losses, step_flops, train_arm, window_loss
from .alternatives import LORA_ALPHA_PER_RANK, layers_count, lora_model, lora_rank, lora_units, merged, trainable_count
from .output import STATE_DIR
from .tradeoff import decide_tradeoff

FLOPS_RULE = (
    "control_flops trains the original for the steps whose FLOPs (torch.utils.flop_counter) equal the grown "
    "arm's; with --train new a step's backward stops at the lowest new layer, so a deeper insertion costs "
    "fewer FLOPs per step and its control_flops gets fewer steps"
)
"""What ``growth.json`` says of the equal-FLOPs control (its dependence on where the layer goes)."""


def frozen(model: PreTrainedModel) -> PreTrainedModel:
    """``model`` frozen and in eval mode."""
    return model.requires_grad_(False).eval()


def trainable(model: PreTrainedModel, new_layers: list[int], mode: str) -> PreTrainedModel:
    """``mode`` ``new``: only the decoder layers ``new_layers`` require grad; ``all``: every parameter."""
    frozen(model)
    if mode == "all":
        return model.requires_grad_(True)
    layers = model.get_submodule(decoder_layers_path(model))
    for index in new_layers:
        layers[index].requires_grad_(True)
    return model


def totals(stages: list[Arm]) -> dict[str, int]:
    """The grown arm's steps, tokens and FLOPs over its stages."""
    return {key: sum(getattr(a, key) for a in stages) for key in ("steps", "tokens", "flops")}


class Arms:
    """The arms' half of ``run.Grower``: it reads the settings, task, held-out windows, retain data and
    output directory ``Grower`` holds."""

    def losses(self, model: PreTrainedModel) -> np.ndarray:
        """``model``'s loss per held-out window, on the device."""
        with placed(model, self.device):
            return sequence_losses(model, self.eval_x, self.eval_y, self.settings.batch_size).numpy()

    def retain_losses_of(self, model: PreTrainedModel) -> np.ndarray:
        """``model``'s loss per held-out window of the retain data (``--retain``), on the device."""
        with placed(model, self.device):
            return self.retained.losses(model)

    def batches_seed(self) -> int:
        return derive_seed(self.settings.seed, self.name, "grow", "batches")

    def identity(self, arm: str, **more: Any) -> dict[str, Any]:
        """An arm's: the run's identity (``resume``), its recipe and what else decides it."""
        s = self.settings
        return {"arm": arm, **self.record.identity, "recipe": asdict(s.recipe(s.steps)), **more}

    def flops_of(self, model: PreTrainedModel) -> int:
        """One training step's FLOPs (``step_flops``): one window's on the device, times the batch size (every
        operation's FLOPs are linear in the batch), so counting needs no more memory than scoring."""
        x, y = TaskBatches(self.task, 1, self.batches_seed(), self.device).next()
        with placed(model, self.device):
            return self.settings.batch_size * step_flops(model, lambda: window_loss(model, x, y))

    def train(
        self, name: str, model: PreTrainedModel, steps: int, generator: torch.Tensor | None, **identity: Any
    ) -> Arm:
        arm = train_arm(
            name,
            model,
            self.task,
            self.settings.recipe(steps),
            self.batches_seed(),
            self.out / STATE_DIR / name,
            self.identity(name, steps=steps, **identity),
            self.flops_of(model),
            self.settings.checkpoint_every,
            generator_state=generator,
            shard=self.settings.shard,
            device=self.device,
            recompute=self.settings.activation_checkpointing,
            precision=self.settings.precision,
        )
        frozen(model)
        self.save_record()
        return arm

    def controls(self, stages: list[Arm], losses: dict[str, np.ndarray]) -> tuple[dict[str, Any], str]:
        """Train the two controls (equal tokens, equal FLOPs: ``FLOPS_RULE``) and score them into
        ``losses``; their records and the better one's name."""
        steps, flops = sum(a.steps for a in stages), sum(a.flops for a in stages)
        per_step = self.flops_of(trainable(self.old, [], "all"))
        frozen(self.old)
        arms, best = {}, None
        for name, arm_steps in control_steps(steps, flops, per_step).items():
            control = trainable(copy.deepcopy(self.old), [], "all")
            count = trainable_count(control)  # before training, which freezes it
            arms[name] = {**self.train(name, control, arm_steps, None).record(), "trainable_parameters": count}
            self.keep(name, control, losses)
            if best is None or losses[name].mean() < losses[best].mean():
                best = name
        arms["control_flops"].update(grown_flops=flops, flops_per_step=per_step, rule=FLOPS_RULE)
        return arms, best

    def alternatives(
        self, stages: list[Arm], grown: PreTrainedModel, inserted: list[int], losses: dict[str, np.ndarray]
    ) -> dict[str, Any]:
        """Train ``inplace`` (the original layers the new ones copy) and ``lora`` (rank matched to the new
        layers' parameters) on the grown arm's steps and batches (``alternatives``), score them into
        ``losses``; their records."""
        steps, target = sum(a.steps for a in stages), layers_count(grown, inserted)
        inplace = trainable(copy.deepcopy(self.old), self.copied, "new")
        count = trainable_count(inplace)  # before training, which freezes it
        arms = {"inplace": self.train("inplace", inplace, steps, None, layers=self.copied).record()}
        arms["inplace"].update(trainable_parameters=count, layers=self.copied)
        units = lora_units(self.old)
        rank = lora_rank(target, units)
        adapted = lora_model(self.old, rank, derive_seed(self.settings.seed, self.name, "grow", "lora"))
        count = trainable_count(adapted)
        arms["lora"] = self.train("lora", adapted, steps, None, rank=rank).record()
        arms["lora"].update(trainable_parameters=count, rank=rank, parameters_per_rank=units)
        arms["lora"].update(alpha=LORA_ALPHA_PER_RANK * rank, target_modules="all-linear", new_layer_parameters=target)
        self.keep("inplace", inplace, losses)
        self.keep("lora", merged(adapted), losses)
        return arms

    def keep(self, name: str, model: PreTrainedModel, losses: dict[str, np.ndarray]) -> None:
        """Score a trained arm into ``losses`` (and its retain losses under ``--retain``), then keep it on
        the host until the decision (``--fallback`` may write it); only the main process, which writes, keeps it."""
        losses[name] = self.losses(model)
        if self.retained is not None:
            self.retain_losses[name] = self.retain_losses_of(model)
        self.arm_models[name] = model if self.rank == 0 else None

    def weigh_retain(
        self, grown: PreTrainedModel, losses: dict[str, np.ndarray], decision: dict[str, Any], trained: bool
    ) -> dict[str, Any]:
        """Every model's losses on the held-out retain windows (``self.retain_losses``); when the arms were
        trained, ``decision`` becomes ``tradeoff.decide_tradeoff``'s. ``growth.json``'s ``retain``."""
        retain = {"old": self.retain_losses_of(self.old), "grown": self.retain_losses_of(grown), **self.retain_losses}
        self.retain_losses = retain  # every model's, for a caller that pairs runs (E12)
        weighed = decide_tradeoff(losses, retain, self.settings.forgetting_limit) if trained else None
        if weighed is not None:
            decision.update({key: weighed[key] for key in ("recommended", "why", "winner", "rule")})
        return {
            **self.retained.record,
            "windows": len(self.retained.y),
            "max_forgetting": self.settings.forgetting_limit,
            "pareto_front": weighed["pareto_front"] if weighed else None,
        }
