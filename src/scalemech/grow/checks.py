"""What ``grow`` refuses before any weight loads, each refusal naming the option and what is allowed:
options beyond the caps the config schema sets for the pipeline's ``grow:``; a family flag that makes
layers depend on their index, or layers without an output projection; ``--shard`` on one process, or a
batch the processes cannot share; data too short for the certificate's pools and the held-out windows,
or holding ids outside the vocabulary; ``--retain`` data that are ``--data``; a training step whose
estimated memory exceeds the device's."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ..config.schema import schema
from ..models.hf import decoder_layers_path, output_projections
from ..tasks.tokens import DocumentIdTask, TokenIdTask, check_vocabulary
from ..training.footprint import activation_bytes

CAPS = {"steps": "steps", "batch_size": "batch_size", "eval_windows": "heldout"}
"""``GrowSettings`` field -> the key of the schema's ``grow:`` section whose ``maximum`` caps it."""
STATE_COPIES = 4
"""Copies of the weights while training: the weights, their gradients, AdamW's two moments."""


def cap_problems(settings: Any) -> list[str]:
    """Each of ``steps``, ``batch_size``, ``eval_windows`` above the schema's ``maximum`` of its
    ``grow:`` key, and a certificate ``pool`` above ``grow.certificate.pool``'s."""
    grow = schema()["properties"]["grow"]["properties"]
    limits = {name: grow[key]["maximum"] for name, key in CAPS.items()}
    limits["pool"] = grow["certificate"]["properties"]["pool"]["maximum"]
    return [
        f"{name} = {getattr(settings, name)} is more than {limit}; allowed: 1 <= {name} <= {limit}"
        for name, limit in limits.items()
        if getattr(settings, name) > limit
    ]


def check_insertable(config: Any) -> None:
    """Refuse a model whose decoder layer has no output projection (``models.hf.output_projections``: a
    new layer could not start as the identity), found on a copy built from ``config`` on the meta device."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    output_projections(skeleton.get_submodule(decoder_layers_path(skeleton))[0], config.model_type)


def check_processes(batch_size: int, shard: bool, processes: int) -> None:
    """Refuse ``--shard`` on one process (nothing to shard over) and a ``--batch-size`` that the
    ``processes`` cannot share evenly (``training.engine.share``: each takes ``batch_size / processes``)."""
    if shard and processes == 1:
        raise ValueError(
            "--shard shards each arm over the processes of a launch, and this is one process; allowed: "
            "torchrun --nproc_per_node N -m scalemech.cli grow ... --shard (N >= 2), or leave --shard out"
        )
    if batch_size % processes:
        raise ValueError(
            f"--batch-size {batch_size} does not split over the {processes} processes of this launch; allowed: a "
            f"multiple of {processes}"
        )


def check_retain(retain: dict[str, str], data: dict[str, str]) -> None:
    """Refuse ``--retain`` data that are the training data: ``retain`` and ``data`` are their records
    (``path`` and ``sha256``: the same path, or the same bytes under another name)."""
    if retain["sha256"] == data["sha256"]:
        how = "is" if Path(retain["path"]).resolve() == Path(data["path"]).resolve() else "holds the same bytes as"
        raise ValueError(
            f"--retain {retain['path']!r} {how} --data {data['path']!r}: forgetting would be measured on the domain "
            "the arms train on; allowed: the model's old domain, data other than --data"
        )


def check_windows(task: TokenIdTask | DocumentIdTask, pool: int, eval_windows: int) -> None:
    """The train split holds the certificate's train pool; the test split its test pool and, apart from
    it, ``eval_windows`` held-out windows (``tasks.draw_disjoint``)."""
    kept = task.overlaps_per_example * pool
    source, size = task.data.source, task.block_size + 1
    for split, need in (("train", pool), ("test", kept + eval_windows)):
        count = task.count(split)
        if need <= count:
            continue
        if split == "test" and kept < count:
            raise ValueError(
                f"--eval-windows {eval_windows}: the test split of {source} holds {count} windows of {size} "
                f"tokens, {kept} of them kept apart for the certificate's test pool (--pool {pool}); "
                f"allowed: --eval-windows <= {count - kept}"
            )
        raise ValueError(
            f"--pool {pool}: the {split} split of {source} holds {count} windows of {size} tokens, too few for "
            f"the certificate's pools and {eval_windows} held-out windows; give more data, or a smaller --pool, "
            "--eval-windows or --block-size"
        )


def check_ids(task: TokenIdTask | DocumentIdTask, option: str = "--data") -> None:
    """Every id an example of either split can hold lies in the model's vocabulary (the whole data,
    not just the windows drawn first); a bad one is named with ``option``."""
    for split in ("train", "test"):
        check_vocabulary(task.used_ids(split), task.vocab_size, f"{option} {task.data.source}")


def memory_limit(device: torch.device) -> int:
    """Bytes of memory of ``device``: the GPU's, or this machine's RAM."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def training_bytes(
    config: Any,
    batch_size: int,
    block_size: int,
    new_layers: int,
    processes: int = 1,
    sharded: bool = False,
    recompute: bool = False,
    train_all: bool = False,
) -> int:
    """Estimated peak bytes on one device of the largest arm's training step (``config``: the source's
    text config; ``new_layers`` inserted) over ``processes`` processes. Its state: the controls' (every
    old weight ``STATE_COPIES`` times) or the grown arm's (its weights, and ``STATE_COPIES - 1`` more
    copies of the new layers', of every weight with ``train_all``), whichever is larger; ``sharded``:
    shared among the processes, yet never below the grown model whole, which each device scores. Then
    the activations of the process's share of the batch (``footprint.activation_bytes``; ``recompute``:
    with activation checkpointing), with its logits, their float32 copy and gradient."""
    hidden, vocab = config.hidden_size, config.vocab_size
    layers = config.num_hidden_layers + new_layers
    inner = getattr(config, "intermediate_size", None) or 4 * hidden
    layer = 4 * hidden * hidden + 3 * hidden * inner
    grown = 2 * vocab * hidden + layers * layer
    trained = grown if train_all else new_layers * layer
    state = max(STATE_COPIES * (grown - new_layers * layer), grown + (STATE_COPIES - 1) * trained)
    state = max(state // processes, grown) if sharded else state
    return 4 * state + activation_bytes(hidden, layers, vocab, batch_size // processes * block_size, recompute)


def check_memory(
    config: Any,
    batch_size: int,
    block_size: int,
    new_layers: int,
    device: torch.device,
    processes: int = 1,
    sharded: bool = False,
    recompute: bool = False,
    train_all: bool = False,
) -> None:
    """Refuse a training step whose estimated memory (``training_bytes``) exceeds ``device``'s."""
    needed = training_bytes(config, batch_size, block_size, new_layers, processes, sharded, recompute, train_all)
    limit = memory_limit(device)
    if needed > limit:
        how = f" over {processes} processes ({'sharded' if sharded else 'replicated'})" if processes > 1 else ""
        raise ValueError(
            f"--batch-size {batch_size} x --block-size {block_size}{how}: a training step needs about "
            f"{needed / 1e9:.3g} GB per device (estimated), more than the {limit / 1e9:.3g} GB of {device}'s memory; "
            "lower --batch-size or --block-size, recompute activations (--activation-checkpointing), or shard the "
            "arms (--shard) over more processes"
        )
