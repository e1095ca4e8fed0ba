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

from functools import cache
from typing import Any

import torch
from torch import Tensor, nn


@cache
def accelerator(device_type: str):  # -> accelerate.Accelerator
    """The process's ``Accelerator`` (one per process: accelerate's state is global), on the CPU when
    ``device_type`` is "cpu"; device placement stays with the caller (``--device``)."""
    from accelerate import Accelerator

    return Accelerator(cpu=device_type == "cpu", device_placement=False)


def check_engine(device_type: str) -> bool:
    """Whether accelerate's configuration shards the arms: an FSDP one (``accelerate launch --config_file``
    with ``distributed_type: FSDP``, ``config/accelerate/fsdp2.yaml``) asks for what ``grow --shard`` does,
    and is followed after ``fsdp_problems`` finds nothing else in it; ``ValueError`` naming what grow does
    not do, or for DeepSpeed."""
    from accelerate.utils import FullyShardedDataParallelPlugin, parse_flag_from_env

    kind = accelerator(device_type).distributed_type.name
    if kind not in ("NO", "MULTI_CPU", "MULTI_GPU", "FSDP"):
        raise ValueError(
            f"grow: accelerate's {kind} configuration is not followed; allowed: one process, or processes "
            "launched by torchrun or accelerate launch, data-parallel, or sharded per decoder layer by FSDP2 "
            "(grow --shard, or accelerate's FSDP configuration config/accelerate/fsdp2.yaml)"
        )
    if not parse_flag_from_env("ACCELERATE_USE_FSDP"):  # accelerate reads it on GPUs only: the CPU too
        return False
    problems = fsdp_problems(FullyShardedDataParallelPlugin())
    if problems:
        raise ValueError(
            "grow: accelerate's FSDP configuration asks for what grow does not do: " + "; ".join(problems)
            + "; grow shards as config/accelerate/fsdp2.yaml says"
        )  # fmt: skip
    return True


def fsdp_problems(plugin: Any) -> list[str]:
    """What an accelerate ``FullyShardedDataParallelPlugin`` asks beyond what ``shard_layers`` does (FSDP2,
    every decoder layer a unit, resharded after the forward; float32, no offloading, no activation
    checkpointing; resume states as full state dicts), each naming the setting and what is allowed."""
    import os

    from torch.distributed.fsdp import CPUOffloadPolicy

    wrap = getattr(plugin.auto_wrap_policy, "__name__", plugin.auto_wrap_policy)
    precision = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    checks = {
        f"fsdp_version {plugin.fsdp_version} (allowed: 2)": plugin.fsdp_version == 2,
        f"fsdp_auto_wrap_policy {wrap} (allowed: TRANSFORMER_BASED_WRAP: each decoder layer)": wrap
        in (None, "transformer_auto_wrap_policy"),
        f"fsdp_state_dict_type {plugin.state_dict_type.name} (allowed: FULL_STATE_DICT)": plugin.state_dict_type.name
        == "FULL_STATE_DICT",
        "fsdp_offload_params true (allowed: false)": not isinstance(plugin.cpu_offload, CPUOffloadPolicy),
        "fsdp_activation_checkpointing true (allowed: false; grow --activation-checkpointing recomputes)": not (
            plugin.activation_checkpointing
        ),
        "fsdp_reshard_after_forward false (allowed: true)": plugin.reshard_after_forward is not False,
        f"mixed_precision {precision} (allowed: no: grow trains in float32)": precision == "no"
        and plugin.mixed_precision_policy is None,
    }
    return [problem for problem, allowed in checks.items() if not allowed]


def world(device_type: str = "cpu") -> tuple[int, int]:
    """``(rank, world size)`` of this process: ``(0, 1)`` unless launched by torchrun or accelerate."""
    engine = accelerator(device_type)
    return engine.process_index, engine.num_processes


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
