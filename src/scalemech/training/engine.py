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

A model larger than one device shards with FSDP (``accelerate launch --config_file`` with an FSDP
config, README "Growing a 7B model"). ``fsdp_units`` names the units the per-decoder-layer wrapping
forms: each decoder layer on its own, so the frozen old layers and the trainable new ones never share
a flat parameter (FSDP1 refuses a ``FlatParameter`` of mixed ``requires_grad``, pytorch#104690), and
``shard_layers`` applies FSDP2's ``fully_shard`` to each of them, then to the root.
"""

from __future__ import annotations

from functools import cache

from torch import Tensor


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
            f"grow: accelerate's {kind} is not supported yet (an arm's resume states are full tensors); "
            "allowed: one process, or data-parallel processes launched by torchrun or accelerate launch"
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
