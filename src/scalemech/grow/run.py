"""``grow``: certify, insert, check, train the grown model, two controls and (``--retain``) the
``inplace`` and ``lora`` arms, decide, write."""

from __future__ import annotations

import contextlib
import copy
import io
import math
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import transformers
from transformers import PreTrainedModel

from ..certify import Sampling, certify_model, format_certificate, grow_ranking, point_ranks
from ..certify.forgetting import pareto_ranking, pareto_reason
from ..certify.inputs import checkpoint_name, checkpoint_spec, read_data
from ..certify.measurement import ran_on, size_problems
from ..certify.text import loss_line, standing
from ..core.device import placed, resolve_device
from ..core.machine import machine
from ..core.recipe import Recipe
from ..core.seeding import derive_seed
from ..data.tokenized import TEXT_SLACK
from ..experiments.decision import control_steps, decide
from ..models import build_model
from ..models.base import PRESERVED_ATOL
from ..models.hf import DTYPES, HFCausalLM, check_block_size, decoder_layers_path, token_id_task
from ..models.hf_growth import check_grown, grow_layers, index_dependence, new_positions
from ..models.hub import decoder_config, hub_id
from ..stats import sizes
from ..tasks import draw_disjoint
from ..training.checkpoints import checkpoint_lock
from ..training.continued import Arm, WindowBatches, sequence_losses, step_flops, train_arm, window_loss
from ..training.engine import check_engine, world
from .alternatives import LORA_ALPHA_PER_RANK, layers_count, lora_model, lora_rank, lora_units, merged, trainable_count
from .card import placement_source, write_card
from .checks import cap_problems, check_ids, check_memory, check_windows
from .output import (
    STATE_DIR,
    check_out,
    data_digest,
    source_digest,
    source_directory,
    tidy,
    write_checkpoint,
    write_growth,
    write_output,
)
from .placement import Placement, parse_at, resolve
from .resume import RunRecord
from .retained import Retained
from .tradeoff import MAX_FORGETTING, decide_tradeoff, summary

TRAIN_MODES = ("new", "all", "none")
WARMUP_FRACTION = 0.1
GRAD_CLIP = 1.0
CHECK_WINDOWS = 8
"""Held-out windows on which the insertion is checked to preserve the function."""
HOST = torch.device("cpu")
"""Where the models wait while another computes on the device (``Grower.load``)."""
IDENTITY_OPTIONS = (
    "at",
    "blocks",
    "train",
    "steps",
    "lr",
    "batch_size",
    "eval_windows",
    "pool",
    "M",
    "K",
    "view",
    "seed",
    "seed_name",
)
"""The options that change an arm's result: with the block size and the checkpoint's and data's sha256,
a run's identity (``resume``); ``device``, ``checkpoint_every``, ``fallback``, ``shard``, ``points_per_pass`` and
``activation_checkpointing`` are not in it."""
FLOPS_RULE = (
    "control_flops trains the original for the steps whose FLOPs (torch.utils.flop_counter) equal the grown "
    "arm's; with --train new a step's backward stops at the lowest new layer, so a deeper insertion costs "
    "fewer FLOPs per step and its control_flops gets fewer steps"
)
"""What ``growth.json`` says of the equal-FLOPs control (its dependence on where the layer goes)."""


@dataclass
class GrowSettings:
    """``scalemech grow``'s options (``--help``); the certificate's sizes are ``certify``'s."""

    at: str = "auto"
    blocks: int | None = None
    train: str = "new"
    steps: int = 200
    lr: float = 2e-4
    batch_size: int = 8
    block_size: int | None = None
    eval_windows: int = 128
    pool: int = sizes.POOL
    M: int = sizes.M
    K: int = sizes.K
    view: str = "full"
    points_per_pass: int | None = None
    """The certificate's points per capture pass (``certify.Sampling``; None: all): bounds its device memory."""
    seed: int = 0
    device: str = "auto"
    tokenizer: str | None = None
    fallback: bool = False
    checkpoint_every: int = 50
    shard: bool = False
    """Under torchrun, shard each arm per decoder layer over the processes (FSDP2) instead of replicating it."""
    activation_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward instead of keeping them (the same steps)."""
    retain: str | None = None
    max_forgetting: float = MAX_FORGETTING
    command: str | None = None
    """The command line, for the model card (the Python API: ``grow(...)``)."""
    seed_name: str | None = None
    """What names the checkpoint in every seed of the run (default: its resolved path, or its hub name): a
    pipeline sets its model's name, so its numbers do not depend on where the results directory lies."""

    def check(self) -> Placement:
        """Every option checked before anything loads (``ValueError`` naming each bad value); the placement."""
        problems = size_problems(
            self.pool, self.M, self.K, self.batch_size, self.block_size, self.view, self.points_per_pass
        )
        problems += cap_problems(self)
        if self.train not in TRAIN_MODES:
            problems.append(f"train = {self.train!r} must be one of {', '.join(TRAIN_MODES)}")
        for name in ("steps", "eval_windows", "checkpoint_every"):
            if getattr(self, name) < 1:
                problems.append(f"{name} = {getattr(self, name)} must be at least 1")
        if not (math.isfinite(self.lr) and self.lr > 0):
            problems.append(f"lr = {self.lr} must be a finite number > 0")
        if not (math.isfinite(self.max_forgetting) and self.max_forgetting >= 0):
            problems.append(f"max_forgetting = {self.max_forgetting} must be a finite number >= 0")
        if problems:
            raise ValueError("grow: " + "; ".join(problems))
        return parse_at(self.at, self.blocks, self.retain is not None)

    def recipe(self, steps: int) -> Recipe:
        """AdamW (``transformers.Trainer``'s betas, no weight decay), 10 % warmup then cosine to 0, clipping at 1."""
        return Recipe(
            optimizer="adamw",
            lr=self.lr,
            momentum=0.9,
            beta2=0.999,
            weight_decay=0.0,
            batch_size=self.batch_size,
            steps=steps,
            warmup_fraction=WARMUP_FRACTION,
            grad_clip=GRAD_CLIP,
        )


def _frozen(model: PreTrainedModel) -> PreTrainedModel:
    return model.requires_grad_(False).eval()


def _trainable(model: PreTrainedModel, new_layers: list[int], mode: str) -> PreTrainedModel:
    """``mode`` ``new``: only the decoder layers ``new_layers`` require grad; ``all``: every parameter."""
    _frozen(model)
    if mode == "all":
        return model.requires_grad_(True)
    layers = model.get_submodule(decoder_layers_path(model))
    for index in new_layers:
        layers[index].requires_grad_(True)
    return model


def _shifted(inserted: list[int], new: list[int]) -> list[int]:
    """Indices ``inserted`` renumbered after new layers at ``new`` (each pushes the layers from it up by
    one), plus ``new``."""
    shifted = list(inserted)
    for index in sorted(new):
        shifted = [k + (k >= index) for k in shifted]
    return sorted(shifted + list(new))


def _totals(stages: list[Arm]) -> dict[str, int]:
    """The grown arm's steps, tokens and FLOPs over its stages."""
    return {key: sum(getattr(a, key) for a in stages) for key in ("steps", "tokens", "flops")}


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


class Grower:
    """One ``grow`` run (``grow`` below): the inputs, the model as grown so far, the arms' results."""

    def __init__(self, checkpoint: str, data: str, out: Path, settings: GrowSettings):
        """Every refusal before any weight loads: options, checkpoint config, ``--out``, data, memory,
        and the identity of a run to resume (``resume``)."""
        self.settings, self.checkpoint = settings, checkpoint
        self.placement = settings.check()
        for option, path in (("--data", data), ("--retain", settings.retain)):
            if path is not None and not Path(path).exists():
                raise FileNotFoundError(f"{option} {path!r} does not exist")
        config = self.read_checkpoint(data)
        new_layers = (
            self.placement.blocks if self.placement.auto else len(resolve(self.placement, config.num_hidden_layers))
        )
        self.device = resolve_device(settings.device)
        self.rank, self.world_size = world(self.device.type)  # several under torchrun: the main one (0) writes
        self.sharded = self.world_size > 1 and (settings.shard or check_engine(self.device.type))  # FSDP2 per layer
        check_out(out, self.source_dir, self.source["sha256"])
        self.out, self.created = out.resolve(), not out.exists()
        if self.placement.together and new_layers > config.num_hidden_layers:
            raise ValueError(
                f"--at {settings.at}: the model has {config.num_hidden_layers} points to take {new_layers} of"
            )
        greedy = self.placement.auto and not self.placement.together
        self.read_data(data, config, self.placement.blocks if greedy else 1)
        check_memory(
            config,
            settings.batch_size,
            self.task.block_size,
            new_layers,
            self.device,
            self.world_size,
            self.sharded,
            settings.activation_checkpointing,
            settings.train == "all",
        )
        self.retained = None
        if settings.retain is not None:
            self.retained = Retained(
                settings.retain,
                self.spec,
                config.vocab_size,
                settings.eval_windows,
                settings.batch_size,
                settings.seed,
                settings.pool,
            )
        options = {name: getattr(settings, name) for name in IDENTITY_OPTIONS}
        self.record = RunRecord(
            self.out,
            {
                "checkpoint_sha256": self.source["sha256"],
                "data_sha256": self.data["sha256"],
                "retain_sha256": self.retained.record["sha256"] if self.retained else None,
                "tokenizer": checkpoint_name(self.spec["tokenizer"]),
                "block_size": self.task.block_size,
                **options,
            },
        )
        self.record.check()
        self.pool_loss: dict[str, float] | None = None

    def read_checkpoint(self, data: str) -> Any:
        """The checkpoint's spec, source directory, weights' digest and dtype, from its config alone
        (refused: a ``model.pt``, a config whose layers depend on their index); its text config. The
        block size defaults to ``data``'s documents' (``certify.inputs.checkpoint_spec``)."""
        from transformers import AutoConfig

        checkpoint, settings = self.checkpoint, self.settings
        spec = checkpoint_spec(checkpoint, None, settings.block_size, settings.tokenizer, data)
        if spec is None:
            raise ValueError(
                f"grow takes a Hugging Face decoder-only causal LM (hub name or directory); {checkpoint!r} is a "
                "scalemech model.pt (certify serves it; its growth is the pipeline's experiment)"
            )
        local = bool(spec.get("local_files_only"))
        source = decoder_config(checkpoint, spec.get("revision"), local)
        if (why := index_dependence(source)) is not None:
            raise ValueError(why)
        config = AutoConfig.from_pretrained(checkpoint, local_files_only=local, trust_remote_code=False)
        config = config.get_text_config()
        self.source_dir = source_directory(checkpoint, spec.get("revision"), local)
        self.source = source_digest(self.source_dir)
        self.spec = {**spec, "dtype": "float32"}  # trained and checked in float32, written in the source's dtype
        dtype = DTYPES.get(str(source.get("dtype") or source.get("torch_dtype") or "float32"), torch.float32)
        self.source_dtype = dtype if isinstance(dtype, torch.dtype) else torch.float32
        self.name = self.settings.seed_name or checkpoint_name(checkpoint)  # seeds: ./fx/llama and fx/llama alike
        return config

    def read_data(self, data: str, config: Any, rounds: int) -> None:
        """The data as token ids (memory-mapped, or text tokenized as far as the run needs: the windows of
        ``rounds`` trainings of ``steps`` batches, ``auto`` and ``best`` training once per new layer, a
        fixed placement once for all, so every fixed placement of one run reads the same text) and their
        task, checked: the certificate's pools and the held-out windows fit, every id is in the
        vocabulary; their sha256."""
        s = self.settings
        training_windows = s.steps * rounds * s.batch_size
        windows = max(2 * s.pool + s.eval_windows, math.ceil(training_windows / TEXT_SLACK))  # per split (read_data)
        with tempfile.TemporaryDirectory() as unused:  # token ids are memory-mapped, text tokenized in memory
            self.prepared = read_data(data, Path(unused), self.spec, windows)
        if getattr(self.prepared, "kind", None) != "tokens":
            raise ValueError(f"--data {data!r} holds {self.prepared.kind} data; grow trains on text or token ids")
        check_block_size(self.spec["block_size"], config, self.checkpoint)
        self.task = token_id_task(self.prepared, self.spec["block_size"], config.vocab_size)
        check_windows(self.task, s.pool, s.eval_windows)
        check_ids(self.task)
        self.data = {"path": data, "sha256": data_digest(data)}

    # -- inputs -------------------------------------------------------------------------------------
    def load(self) -> None:
        """The source model, on the host (``HOST``): every model waits there and moves to the device, one
        at a time, to be certified, scored or trained (``core.device.placed``, ``train_arm``)."""
        self.model = build_model(self.spec).to(HOST)  # HFCausalLM, frozen, eval
        self.old = self.model.hf_model
        print(f"grow: {ran_on(self.model, self.checkpoint, self.device)}")

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

    def losses(self, model: PreTrainedModel) -> np.ndarray:
        """``model``'s loss per held-out window, on the device."""
        with placed(model, self.device):
            return sequence_losses(model, self.eval_x, self.eval_y, self.settings.batch_size).numpy()

    def retain_losses_of(self, model: PreTrainedModel) -> np.ndarray:
        """``model``'s loss per held-out window of the retain data (``--retain``), on the device."""
        with placed(model, self.device):
            return self.retained.losses(model)

    # -- training -----------------------------------------------------------------------------------
    def batches_seed(self) -> int:
        return derive_seed(self.settings.seed, self.name, "grow", "batches")

    def save_record(self) -> None:
        """The run record (``resume``), by the main process only."""
        if self.rank == 0:
            self.record.save()

    def identity(self, arm: str, **more: Any) -> dict[str, Any]:
        """An arm's: the run's identity (``resume``), its recipe and what else decides it."""
        s = self.settings
        return {"arm": arm, **self.record.identity, "recipe": asdict(s.recipe(s.steps)), **more}

    def flops_of(self, model: PreTrainedModel) -> int:
        """One training step's FLOPs (``step_flops``): one window's on the device, times the batch size (every
        operation's FLOPs are linear in the batch), so counting needs no more memory than scoring."""
        x, y = WindowBatches(self.task, 1, self.batches_seed(), self.device).next()
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
        )
        _frozen(model)
        self.save_record()
        return arm

    # -- the run ------------------------------------------------------------------------------------
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
            return pareto_ranking(frame, self.settings.max_forgetting)
        if self.placement.rule == "best":
            return frame.loc[point_ranks(frame).sort_values().index]
        return grow_ranking(frame)

    def say_chosen(self, frame: pd.DataFrame, after: list[int]) -> None:
        """One line per chosen point: which ``--at`` rule chose it (for ``pareto``, why) and what the
        certificate says of it against its first-ranked point (``certify.text.standing``)."""
        at = self.settings.at
        for point in dict.fromkeys(f"layer.{i}" for i in after):
            why = f": {pareto_reason(frame, point, self.settings.max_forgetting)}" if at == "pareto" else ""
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
                _trainable(grown, inserted, s.train)
                stages.append(self.train(f"grown-{round_}", grown, s.steps, generator, inserted=inserted))
                generator = stages[-1].generator_state
            current = HFCausalLM(_frozen(grown), self.spec)
        self.copied = sorted({origin[i] for i in inserted})
        return current.hf_model, inserted, decisions, stages

    def controls(self, stages: list[Arm], losses: dict[str, np.ndarray]) -> tuple[dict[str, Any], str]:
        """Train the two controls (equal tokens, equal FLOPs: ``FLOPS_RULE``) and score them into
        ``losses``; their records and the better one's name."""
        steps, flops = sum(a.steps for a in stages), sum(a.flops for a in stages)
        per_step = self.flops_of(_trainable(self.old, [], "all"))
        _frozen(self.old)
        arms, best = {}, None
        for name, arm_steps in control_steps(steps, flops, per_step).items():
            control = _trainable(copy.deepcopy(self.old), [], "all")
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
        inplace = _trainable(copy.deepcopy(self.old), self.copied, "new")
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
        weighed = decide_tradeoff(losses, retain, self.settings.max_forgetting) if trained else None
        if weighed is not None:
            decision.update({key: weighed[key] for key in ("recommended", "why", "winner", "rule")})
        return {
            **self.retained.record,
            "windows": len(self.retained.y),
            "max_forgetting": self.settings.max_forgetting,
            "pareto_front": weighed["pareto_front"] if weighed else None,
        }

    def run(self) -> dict[str, Any]:
        """Load, grow, train the controls (and under ``--retain`` the alternatives), decide, write
        ``--out`` whole (``output.write_output``)."""
        s = self.settings
        self.load()
        self.arm_models: dict[str, PreTrainedModel] = {}  # the trained arms but grown, on the CPU (``keep``)
        self.retain_losses: dict[str, np.ndarray] = {}  # per held-out retain window, by model (``weigh_retain``)
        grown, inserted, decisions, stages = self.grow_model()
        losses = {"old": self.losses(self.old), "grown": self.losses(grown)}
        self.new_losses, self.inserted = losses, inserted  # per held-out window, by model: filled in as arms train
        trainable = layers_count(grown, inserted) if s.train == "new" else grown.num_parameters()
        arms: dict[str, dict[str, Any]] = {"grown": {"stages": [a.record() for a in stages]}}
        arms["grown"].update(trainable_parameters=trainable if stages else 0, **_totals(stages))
        best_control, written = None, "grown" if inserted else "old"
        if stages:
            controls, best_control = self.controls(stages, losses)
            arms.update(controls)
            if self.retained is not None:
                arms.update(self.alternatives(stages, grown, inserted, losses))
        decision = decide(losses, trained=bool(stages), inserted=bool(inserted))
        retain = self.weigh_retain(grown, losses, decision, bool(stages)) if self.retained is not None else None
        model = grown
        if not decision["recommended"] and s.fallback:
            if decision.get("winner") in self.arm_models:
                written, model = decision["winner"], self.arm_models[decision["winner"]]
            elif best_control is not None and retain is None:
                written, model = best_control, self.arm_models[best_control]
        decision["written"] = written
        record = {
            "source": {
                "checkpoint": self.checkpoint,
                "hub_id": hub_id(self.checkpoint),  # None: a local directory outside the hub's cache
                "model_type": self.old.config.model_type,
                "layers": self.model.depth,
                **self.source,
            },
            "command": s.command or f"grow({self.checkpoint!r}, {self.data['path']!r}, {str(self.out)!r}, {s!r})",
            "data": self.data,
            "retain": retain,
            "inserted_layers": inserted if written == "grown" else [],
            "layers": (grown if written == "grown" else self.old).config.get_text_config().num_hidden_layers,
            "placement": {"at": s.at, "blocks": self.placement.blocks},
            "decisions": decisions,
            "predicted_first_order_gain": _predicted(decisions),
            "held_out": {
                "windows": len(self.eval_y),
                "tokens_per_window": self.task.block_size,
                "mean_loss": {k: float(v.mean()) for k, v in losses.items()},
                **decision.pop("gains"),
                "arms": summary(losses, self.retain_losses if retain is not None else None),
            },
            "decision": decision,
            "loss_on_certificate_pool": self.pool_loss,
            "arms": arms,
            "training": {
                "train": s.train,
                "lr": s.lr,
                "batch_size": s.batch_size,
                "block_size": self.task.block_size,
                "warmup_fraction": WARMUP_FRACTION,
                "grad_clip": GRAD_CLIP,
                "optimizer": "adamw",
                "seed": s.seed,
                "activation_checkpointing": s.activation_checkpointing,
            },
            "machine": {
                **machine(),
                "device": str(self.device),
                "torch_threads": torch.get_num_threads(),
                "world_size": self.world_size,  # processes training each arm data-parallel (training.engine)
                "sharded": self.sharded,  # FSDP2 per decoder layer, not replicas
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            },
            "wall_seconds": self.record.wall_seconds(),  # over every run this one resumes
        }
        tokenizer = (self.spec["tokenizer"], bool(self.spec.get("local_files_only")))

        def write(directory: Path) -> None:
            record["tokenizer_copied"] = write_checkpoint(model, directory, self.source_dtype, tokenizer)
            write_card(directory, record)
            write_growth(directory, record)  # last: a directory with growth.json is whole

        if self.rank == 0:
            write_output(self.out, write)
        return record


PREDICTED = ("block_grad_norm", "mu_cross", "mu_cross_lo", "mu_cross_hi", "forget", "forget_lo", "forget_hi")
"""The certificate's predictions ``growth.json`` keeps per chosen point."""


def _predicted(decisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per chosen point: the first-order gain ``‖∇_θ L‖`` at ``θ = 0`` of the new layer there (the loss
    decrease per unit step along the steepest descent, certify's ``block_grad_norm``); the gain ``mu_cross``
    and (``--retain``) forgetting ``forget`` a step along the mean gradient predicts (``certify.forgetting``)."""
    out = []
    for decision in decisions:
        for point in (decision["chosen"] or "").split(","):
            rows = [r for r in decision["certificate"] if r["point"] == point]
            if rows:
                predicted = {key: rows[0].get(key) for key in PREDICTED}
                out.append({"round": decision["round"], "point": point, **predicted})
    return out


def grow(checkpoint: str, data: str, out: str | Path, settings: GrowSettings | None = None) -> dict[str, Any]:
    """Grow ``checkpoint`` on ``data`` into ``out`` (the package doc); returns ``growth.json``'s record.
    ``out`` is locked for the run (``training.checkpoints.checkpoint_lock`` on its resume states): a
    second ``grow`` into it is refused in one line. An interrupted run keeps its resume states and
    their wall time; one that leaves nothing to resume leaves no lock file, nor an ``out`` it created.
    Launched on several processes (``torchrun``), every one runs the whole command, each arm trains
    data-parallel (``training.engine``), and only the main one locks and writes."""
    return grown(checkpoint, data, out, settings).result


def grown(checkpoint: str, data: str, out: str | Path, settings: GrowSettings | None = None) -> Grower:
    """``grow``, returning the finished ``Grower``: its ``result`` (``growth.json``'s record) and, per held-out
    window and model, ``new_losses`` and (``--retain``) ``retain_losses``, which E12 pairs across runs."""
    grower = Grower(checkpoint, data, Path(out), settings or GrowSettings())
    main = grower.rank == 0
    quiet = contextlib.nullcontext() if main else contextlib.redirect_stdout(io.StringIO())  # one report, rank 0's
    with quiet, checkpoint_lock(grower.out / STATE_DIR) if main else contextlib.nullcontext():
        grower.scratch = Path(tempfile.mkdtemp(prefix="scalemech-grow-"))
        done = False
        try:
            grower.save_record()  # a rerun with other options is refused (``resume``)
            grower.result = grower.run()
            done = True
            return grower
        finally:
            shutil.rmtree(grower.scratch, ignore_errors=True)
            if not done and (grower.out / STATE_DIR).is_dir():
                grower.save_record()  # the wall time so far, for the rerun that resumes
            if main:
                tidy(grower.out, grower.created)
