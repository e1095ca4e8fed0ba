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
takes them either way); ``shard_layers`` applies ``fully_shard`` to each, the root last. accelerate's
own FSDP configuration is not used: its ``prepare`` wraps by its config's policy and checkpoints in its
own layout, while an arm's resume states are full tensors that any world size reads
(``continued.train_arm``).
"""

from __future__ import annotations

from functools import cache

import torch
from torch import Tensor, nn


@cache
def accelerator(device_type: str):  # -> accelerate.Accelerator
    """The process's ``Accelerator`` (one per process: accelerate's state is global), on the CPU when
    ``device_type`` is "cpu"; device placement stays with the caller (``--device``)."""
    from accelerate import Accelerator

    return Accelerator(cpu=device_type == "cpu", device_placement=False)


def check_engine(device_type: str) -> None:
    """``ValueError`` when accelerate was configured to shard (FSDP, DeepSpeed): not supported yet."""
    kind = accelerator(device_type).distributed_type.name
    if kind not in ("NO", "MULTI_CPU", "MULTI_GPU"):
        raise ValueError(
            f"grow: accelerate's {kind} configuration is not used (an arm's resume states are full tensors); "
            "allowed: one process, or processes launched by torchrun or accelerate launch without FSDP or "
            "DeepSpeed, data-parallel, or sharded per decoder layer with grow --shard"
        )


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
