"""Data-parallel training through Hugging Face ``accelerate``: the processes ``torchrun`` (or
``accelerate launch``) starts, each holding a replica, each step's global batch split between them.

One process (plain ``scalemech grow``) is the default: ``accelerate.Accelerator`` then has
``num_processes == 1`` and ``prepare`` returns the model and optimizer as they were, so the loop is
the plain loop (``benchmarks/bench_grow.py`` measures it). Launched by ``torchrun --nproc_per_node N``
(``gloo`` on CPUs, ``nccl`` on GPUs), every process draws the same global batch of ``B`` windows from
the same seeded generator and trains on its share ``x[rank::N]``; ``accelerator.backward`` all-reduces
the mean gradients, so with ``B`` divisible by ``N`` a step equals the one-process step on the whole
batch up to the order of floating-point sums. Only the main process writes (checkpoints, tables, the
grown model); the others wait for it (``wait_for_everyone``).

An arm larger than one device shards instead (``grow --shard``, several processes): FSDP2
(``torch.distributed.fsdp.fully_shard``) splits each unit's weights, gradients and optimizer states over
the processes. ``fsdp_units`` names the units: each decoder layer on its own, then the root (embeddings,
final norm, head), so a frozen old layer and a trainable new one never share a unit (FSDP1 refuses a
``FlatParameter`` of mixed ``requires_grad``, pytorch#104690; FSDP2 shards parameter by parameter and
takes them either way); ``shard_layers`` applies ``fully_shard`` to each, the root last. An FSDP
configuration of accelerate's (``accelerate launch --config_file config/accelerate/fsdp2.yaml``) selects
the same sharding, when it asks for nothing else (``check_engine``): accelerate's ``prepare`` is not
used for it, since it would wrap by the config's policy and checkpoint in its own layout, while an
arm's resume states are full tensors that any world size reads (``continued.train_arm``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import torch
from torch import Tensor, nn

PRECISIONS = ("fp32", "bf16")  # an arm's forward and loss: float32, or under bf16 autocast (float32 weights)


@cache
def accelerator(device_type: str):  # -> accelerate.Accelerator
    """The process's ``Accelerator`` (one per process: accelerate's state is global), on the CPU when
    ``device_type`` is "cpu"; device placement stays with the caller (``--device``)."""
    from accelerate import Accelerator

    return Accelerator(cpu=device_type == "cpu", device_placement=False)


def launch_problems(device_type: str, environ: Mapping[str, str]) -> list[str]:
    """What the launcher's environment ``environ`` asks that grow would not do, read before accelerate
    starts, each naming the setting and what is allowed: ``accelerate launch``'s ``mixed_precision`` (grow
    sets its own: ``--precision``), ``dynamo_backend`` (grow runs eagerly), ``use_cpu`` beside a GPU ``device_type``,
    DeepSpeed or Megatron-LM; and ``num_processes`` above 1 met by one process (accelerate launch sets
    ``MASTER_ADDR`` for several, yet its MULTI_CPU launcher starts one without ``mpirun``: no ``WORLD_SIZE``)."""
    problems = []
    precision = environ.get("ACCELERATE_MIXED_PRECISION", "no")
    if precision != "no":
        problems.append(
            f"mixed_precision {precision} (allowed: no: grow sets its own, --precision fp32 or bf16, and writes the "
            "checkpoint's own dtype; accelerate launch --mixed_precision no)"
        )
    backend = environ.get("ACCELERATE_DYNAMO_BACKEND", "NO")
    if backend.upper() != "NO":
        problems.append(f"dynamo_backend {backend.lower()} (allowed: no: grow runs eagerly)")
    if _true(environ.get("ACCELERATE_USE_CPU")) and device_type != "cpu":
        problems.append(f"use_cpu true, yet grow computes on {device_type} (allowed: grow --device cpu, or no --cpu)")
    for engine in ("DEEPSPEED", "MEGATRON_LM"):
        if _true(environ.get(f"ACCELERATE_USE_{engine}")):
            problems.append(f"distributed_type {engine} (allowed: MULTI_CPU, MULTI_GPU or FSDP version 2)")
    if "ACCELERATE_MIXED_PRECISION" in environ and "MASTER_ADDR" in environ and "WORLD_SIZE" not in environ:
        problems.append(
            "num_processes above 1, yet one process started (accelerate launch starts several CPU processes only "
            "with --mpirun_hostfile) (allowed: torchrun --nproc_per_node N -m scalemech.cli grow ..., accelerate "
            "launch --multi_gpu on GPUs, or num_processes 1)"
        )
    return problems


def _true(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


def check_engine(device_type: str) -> bool:
    """Whether accelerate's configuration shards the arms: an FSDP one (``accelerate launch --config_file``
    with ``distributed_type: FSDP``, ``config/accelerate/fsdp2.yaml``) asks for what ``grow --shard`` does,
    and is followed after ``fsdp_problems`` finds nothing else in it; ``ValueError`` naming what grow does
    not do: ``launch_problems`` (before accelerate starts), another distributed type, an FSDP setting."""
    import os

    from accelerate.utils import FullyShardedDataParallelPlugin, parse_flag_from_env

    problems = launch_problems(device_type, os.environ)
    if problems:
        raise ValueError("grow: the launcher asks for what grow does not do: " + "; ".join(problems))
    kind = accelerator(device_type).distributed_type.name
    if kind not in ("NO", "MULTI_CPU", "MULTI_GPU", "FSDP"):
        raise ValueError(
            f"grow: accelerate's {kind} configuration is not followed; allowed: one process, or processes "
            "launched by torchrun or accelerate launch, data-parallel, or sharded per decoder layer by FSDP2 "
            "(grow --shard, or accelerate's FSDP configuration config/accelerate/fsdp2.yaml)"
        )
    if not parse_flag_from_env("ACCELERATE_USE_FSDP"):  # accelerate reads it on GPUs only: the CPU too
        return False
    try:
        plugin = FullyShardedDataParallelPlugin()  # accelerate's own reading of the configuration
    except (ValueError, RuntimeError) as error:
        raise ValueError(
            f"grow: accelerate refuses its FSDP configuration ({' '.join(str(error).split())}); grow shards as "
            "config/accelerate/fsdp2.yaml says"
        ) from None
    problems = fsdp_problems(plugin)
    if problems:
        raise ValueError(
            "grow: accelerate's FSDP configuration asks for what grow does not do: " + "; ".join(problems)
            + "; grow shards as config/accelerate/fsdp2.yaml says"
        )  # fmt: skip
    return True


def fsdp_problems(plugin: Any) -> list[str]:
    """What an accelerate ``FullyShardedDataParallelPlugin`` asks beyond what ``shard_layers`` does (FSDP2,
    every decoder layer a unit, resharded after the forward; no offloading (FSDP1's ``CPUOffload`` or
    FSDP2's policy), no activation checkpointing; resume states as full state dicts), each naming the
    setting and what is allowed (mixed precision: ``launch_problems``)."""
    from torch.distributed.fsdp import CPUOffloadPolicy

    wrap = getattr(plugin.auto_wrap_policy, "__name__", plugin.auto_wrap_policy)
    offloaded = isinstance(plugin.cpu_offload, CPUOffloadPolicy) or getattr(plugin.cpu_offload, "offload_params", False)
    checks = {
        f"fsdp_version {plugin.fsdp_version} (allowed: 2)": plugin.fsdp_version == 2,
        f"fsdp_auto_wrap_policy {wrap} (allowed: TRANSFORMER_BASED_WRAP: each decoder layer)": wrap
        in (None, "transformer_auto_wrap_policy"),
        f"fsdp_state_dict_type {plugin.state_dict_type.name} (allowed: FULL_STATE_DICT)": plugin.state_dict_type.name
        == "FULL_STATE_DICT",
        "fsdp_offload_params true (allowed: false)": not offloaded,
        "fsdp_activation_checkpointing true (allowed: false; grow --activation-checkpointing recomputes)": not (
            plugin.activation_checkpointing
        ),
        "fsdp_reshard_after_forward false (allowed: true)": plugin.reshard_after_forward is not False,
    }
    return [problem for problem, allowed in checks.items() if not allowed]


def world(device_type: str = "cpu") -> tuple[int, int]:
    """``(rank, world size)`` of this process: ``(0, 1)`` unless launched by torchrun or accelerate."""
    engine = accelerator(device_type)
    return engine.process_index, engine.num_processes


class PeerLost(RuntimeError):
    """Another process of the launch ended mid-run (``lost_peer``); ``report``: whether this process is the
    one that says so (the lowest rank left), so that the loss is said once."""

    def __init__(self, message: str, report: bool):
        super().__init__(message)
        self.report = report


COLLECTIVE_FAILURES = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "gloo", "NCCL")
"""Words of the ``RuntimeError`` a collective raises (gloo on CPUs, NCCL on GPUs) when a peer is gone."""


def launch_processes(device_type: str) -> list[tuple[str, int]]:
    """``(host, pid)`` of each process of the launch, by rank (one ``all_gather_object``), from which
    ``lost_peer`` tells which one ended; ``[]`` on one process."""
    import os
    import socket

    engine = accelerator(device_type)
    if engine.num_processes == 1:
        return []
    gathered: list[Any] = [None] * engine.num_processes
    torch.distributed.all_gather_object(gathered, (socket.gethostname(), os.getpid()))
    return [tuple(item) for item in gathered]


def _ended(pid: int) -> bool:
    """Whether process ``pid`` of this host has ended (gone, or a zombie its launcher has not reaped)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


def ended_ranks(processes: list[tuple[str, int]], wait: float = 1.0) -> list[int]:
    """The ranks of ``processes`` (``launch_processes``) on this host whose process has ended, looked for
    up to ``wait`` seconds (the kernel closes a killed process's sockets before it is a zombie)."""
    import os
    import socket
    import time

    me, deadline = (socket.gethostname(), os.getpid()), time.monotonic() + wait
    while True:
        ended = [rank for rank, (host, pid) in enumerate(processes) if host == me[0] and pid != me[1] and _ended(pid)]
        if ended or time.monotonic() > deadline:
            return ended
        time.sleep(0.05)


def peer_lost(processes: list[tuple[str, int]], rank: int, ended: list[int], cause: str) -> PeerLost:
    """The ``PeerLost`` of rank ``rank`` after the ranks ``ended`` (``ended_ranks``; none found: a rank on
    another host) ended, with the ``cause`` this rank saw; the lowest rank left reports it."""
    who = f"rank {', '.join(map(str, ended))}" if ended else "a rank on another host"
    return PeerLost(
        f"{who} of the {len(processes)} processes of this launch ended mid-run, and rank {rank} stopped with it "
        f"({_first_sentence(cause)})",
        report=rank == min(set(range(len(processes))) - set(ended)),
    )


def _first_sentence(words: str) -> str:
    """``words`` on one line without a leading ``[file:line]`` and after its first sentence (gloo's error)."""
    words = re.sub(r"^\[[^\]]*\]\s*", "", " ".join(words.split()))
    return words.split(". ")[0][:200]


def lost_peer(error: BaseException, processes: list[tuple[str, int]], rank: int) -> PeerLost | None:
    """``error`` of rank ``rank`` as the loss of a peer (``peer_lost``), or None: a collective's failure
    (``torch.distributed.DistError``, or a ``RuntimeError`` in ``COLLECTIVE_FAILURES``' words) among several
    ``processes`` (``launch_processes``)."""
    words = str(error)
    collective = isinstance(error, torch.distributed.DistError) or any(w in words for w in COLLECTIVE_FAILURES)
    if len(processes) < 2 or not (isinstance(error, RuntimeError) and collective):
        return None
    return peer_lost(processes, rank, ended_ranks(processes), words)


@contextlib.contextmanager
def stopped_by_launcher(processes: list[tuple[str, int]], rank: int) -> Iterator[None]:
    """Within the block, on several ``processes``, the launcher's SIGTERM (torchrun stops every process once
    one has ended, often before a collective fails) raises ``peer_lost`` when a rank of this host has
    ended, else ``KeyboardInterrupt`` (stopped from outside): either ends in one line, not in silence."""
    import signal
    import threading

    if len(processes) < 2 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        ended = ended_ranks(processes, wait=0.0)
        if ended:
            raise peer_lost(processes, rank, ended, "the launcher stopped this process: SIGTERM")
        raise KeyboardInterrupt("the launcher stopped this process: SIGTERM")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def share(batch: tuple[Tensor, Tensor], rank: int, size: int) -> tuple[Tensor, Tensor]:
    """This process's rows ``[rank::size]`` of a global batch; ``ValueError`` unless they split evenly
    (an uneven split would weigh the processes' examples unequally)."""
    rows = len(batch[0])
    if rows % size:
        raise ValueError(f"batch size {rows} does not split over {size} processes; allowed: a multiple of {size}")
    return batch[0][rank::size], batch[1][rank::size]


def fsdp_units(model: nn.Module) -> list[nn.Module]:
    """The modules FSDP shards one by one, in the order they are wrapped: every decoder layer (the
    ``ModuleList`` of ``config.num_hidden_layers`` modules, ``models.hf.decoder_layers_path``), then
    ``model`` itself, whose unit holds what no layer holds (embeddings, final norm, head)."""
    from ..models.hf import decoder_layers_path

    return [*model.get_submodule(decoder_layers_path(model)), model]


def shard_layers(model: nn.Module, device: torch.device) -> nn.Module:
    """FSDP2's ``fully_shard`` on every unit of ``fsdp_units`` (in place: each becomes an ``FSDPModule``
    whose parameters are ``DTensor`` shards over the process group torchrun set up, on ``device``'s
    type: a unit waiting on the host moves to the device as it is sharded); returns ``model``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (torch.distributed.get_world_size(),))
    for unit in fsdp_units(model):
        fully_shard(unit, mesh=mesh)
    return model
