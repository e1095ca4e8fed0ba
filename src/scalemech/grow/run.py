"""``grow``: the run (``Grower``): every refusal before any weight loads, then grow (``placing``), train
the controls and (``--retain``) the ``inplace`` and ``lora`` arms and score them (``arms``), decide,
write."""

from __future__ import annotations

import contextlib
import io
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from transformers import PreTrainedModel

from ..certify.inputs import checkpoint_name, checkpoint_spec, read_data
from ..certify.measurement import ran_on, size_problems
from ..core.device import resolve_device
from ..core.machine import machine
from ..core.recipe import Recipe
from ..data.tokenized import TEXT_SLACK
from ..experiments.decision import decide
from ..models import build_model
from ..models.hf import DTYPES, check_block_size, token_id_task
from ..models.hf_growth import index_dependence
from ..models.hub import decoder_config, hub_id
from ..stats import sizes
from ..training.checkpoints import checkpoint_lock
from ..training.engine import PRECISIONS, check_engine, launch_processes, lost_peer, stopped_by_launcher, world
from .alternatives import layers_count
from .arms import Arms, totals
from .card import write_card
from .checks import (
    cap_problems,
    check_ids,
    check_insertable,
    check_memory,
    check_processes,
    check_retain,
    check_windows,
)
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
from .placing import Placing, predicted
from .resume import RunRecord
from .retained import Retained
from .tradeoff import MAX_FORGETTING, summary

TRAIN_MODES = ("new", "all", "none")
WARMUP_FRACTION = 0.1
GRAD_CLIP = 1.0
HOST = torch.device("cpu")
"""Where the models wait while another computes on the device (``Grower.load``)."""
IDENTITY_OPTIONS = (
    "at",
    "blocks",
    "train",
    "steps",
    "lr",
    "precision",
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


@dataclass
class GrowSettings:
    """``scalemech grow``'s options (``--help``); the certificate's sizes are ``certify``'s."""

    at: str = "auto"
    blocks: int | None = None
    train: str = "new"
    steps: int = 200
    lr: float = 2e-4
    precision: str = "fp32"
    """The arms' forward and loss in float32, or under bf16 autocast (``engine.PRECISIONS``; float32 weights)."""
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
    max_forgetting: float | None = None
    """Under ``--retain``, the most forgetting a recommended grown model may have (None: ``MAX_FORGETTING``)."""
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
        if self.precision not in PRECISIONS:
            problems.append(f"precision = {self.precision!r} must be one of {', '.join(PRECISIONS)}")
        if self.train not in TRAIN_MODES:
            problems.append(f"train = {self.train!r} must be one of {', '.join(TRAIN_MODES)}")
        for name in ("steps", "eval_windows", "checkpoint_every"):
            if getattr(self, name) < 1:
                problems.append(f"{name} = {getattr(self, name)} must be at least 1")
        if not (math.isfinite(self.lr) and self.lr > 0):
            problems.append(f"lr = {self.lr} must be a finite number > 0")
        if self.max_forgetting is not None and not (math.isfinite(self.max_forgetting) and self.max_forgetting >= 0):
            problems.append(f"max_forgetting = {self.max_forgetting} must be a finite number >= 0")
        if self.max_forgetting is not None and self.retain is None:
            problems.append(f"--max-forgetting {self.max_forgetting} bounds forgetting on --retain data: give --retain")
        if problems:
            raise ValueError("grow: " + "; ".join(problems))
        return parse_at(self.at, self.blocks, self.retain is not None)

    @property
    def forgetting_limit(self) -> float:
        """``max_forgetting``, or its default ``MAX_FORGETTING``."""
        return MAX_FORGETTING if self.max_forgetting is None else self.max_forgetting

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


class Grower(Placing, Arms):
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
        configured = check_engine(self.device.type)  # the launcher's settings: refused, or FSDP2 followed
        self.rank, self.world_size = world(self.device.type)  # several under torchrun: the main one (0) writes
        check_processes(settings.batch_size, settings.shard, self.world_size)
        self.sharded = self.world_size > 1 and (settings.shard or configured)  # FSDP2 per layer
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
            check_retain(self.retained.record, self.data)
        options = {name: getattr(settings, name) for name in IDENTITY_OPTIONS}
        if settings.precision == "fp32":  # the one precision before --precision: those runs keep their identity
            del options["precision"]
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
        check_insertable(config)
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

    def save_record(self) -> None:
        """The run record (``resume``), by the main process only."""
        if self.rank == 0:
            self.record.save()

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
        arms["grown"].update(trainable_parameters=trainable if stages else 0, **totals(stages))
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
            "predicted_first_order_gain": predicted(decisions),
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
                "precision": s.precision,  # of the arms' forward and loss (float32 weights either way)
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
            write_output(self.out, write, model.num_parameters() * self.source_dtype.itemsize)
        return record


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
    return complete(Grower(checkpoint, data, Path(out), settings or GrowSettings()))


def complete(grower: Grower) -> Grower:
    """Run a ``Grower`` whose refusals have passed (``grown``): lock ``--out``, run, tidy up; a process of
    the launch that ends mid-run stops the others with ``engine.PeerLost`` naming it."""
    main, processes = grower.rank == 0, launch_processes(grower.device.type)  # (host, pid) by rank
    quiet = contextlib.nullcontext() if main else contextlib.redirect_stdout(io.StringIO())  # one report, rank 0's
    stopped = stopped_by_launcher(processes, grower.rank)
    with quiet, stopped, checkpoint_lock(grower.out / STATE_DIR) if main else contextlib.nullcontext():
        grower.scratch = Path(tempfile.mkdtemp(prefix="scalemech-grow-"))
        done = False
        try:
            grower.save_record()  # a rerun with other options is refused (``resume``)
            grower.result = grower.run()
            done = True
            return grower
        except RuntimeError as error:  # a collective failed: another process ended (``engine.lost_peer``)?
            lost = lost_peer(error, processes, grower.rank)
            if lost is None:
                raise
            raise lost from None
        finally:
            shutil.rmtree(grower.scratch, ignore_errors=True)
            if not done and (grower.out / STATE_DIR).is_dir():
                grower.save_record()  # the wall time so far, for the rerun that resumes
            if main:
                tidy(grower.out, grower.created)
