"""One arm of ``grow`` trained data-parallel (``training.engine``) against one process at the same global batch.

    python benchmarks/ddp_check.py --device cuda --processes 2    # make gpu-check-2: two GPUs, nccl
    python benchmarks/ddp_check.py --device cpu --processes 2     # two CPU processes, gloo
    python benchmarks/ddp_check.py --device cpu --processes 2 --shard   # sharded per decoder layer (FSDP2)

launches ``torchrun --standalone`` on 1 and on ``--processes`` processes of this file in worker mode:
each trains a small seeded Llama (``continued.train_arm``, 6 AdamW steps, global batch 8) on token ids
whose next token mostly follows from the last, and the main process writes the held-out losses of 32
windows before and after. Prints the largest difference of the two runs' held-out losses and their
wall times; exits 1 when the difference exceeds ``TOLERANCE`` or the arm did not train.
``tests/test_distributed.py`` runs the worker mode on CPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TOLERANCE = 1e-5
"""Nats: the two runs differ by the order of floating-point sums (the all-reduced mean of the shares'
gradients against the whole batch's), never by more."""


def token_ids(path: Path) -> Path:
    """Token ids whose next token follows from the last one most of the time: an arm learns it."""
    ids = (np.arange(4000) * 7) % 64
    noise = np.random.default_rng(0).random(4000) < 0.2
    ids[noise] = np.random.default_rng(1).integers(0, 64, int(noise.sum()))
    np.save(path, ids.astype(np.int64))
    return path


def worker(out: Path, ids: Path, device: str, shard: bool = False) -> None:
    """Train the arm (every process of the launch) and write ``losses.json`` (the main process)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from scalemech.core.recipe import Recipe
    from scalemech.data.tokenized import load_token_ids
    from scalemech.tasks.tokens import TokenIdTask
    from scalemech.training import continued
    from scalemech.training.engine import world

    rank, size = world(device)
    on = torch.device(f"cuda:{rank}" if device == "cuda" else "cpu")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)  # fmt: skip
    model = AutoModelForCausalLM.from_config(config).to(on)
    task = TokenIdTask(load_token_ids(ids), 8, 64)
    recipe = Recipe(optimizer="adamw", lr=1e-2, steps=6, batch_size=8, warmup_fraction=0.2)
    x, y = task.examples("test", torch.arange(32))
    before = continued.sequence_losses(model, x, y, 8)
    continued.train_arm(
        "arm", model, task, recipe, 7, out / "arm", {"arm": 1}, 0, checkpoint_every=3, progress=False, shard=shard
    )
    losses = continued.sequence_losses(model, x, y, 8)
    if rank == 0:
        record = {"world": size, "before": before.tolist(), "losses": losses.tolist()}
        (out / "losses.json").write_text(json.dumps(record))


TORCHRUN = Path(sys.executable).parent / "torchrun"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # one thread per process, as torchrun's own default


def launch(
    out: Path, ids: Path, processes: int, device: str, timeout: float = 300, shard: bool = False
) -> subprocess.CompletedProcess:
    """``torchrun --standalone`` of this file's worker mode on ``processes`` processes (``shard``: FSDP2)."""
    out.mkdir(parents=True, exist_ok=True)
    command = [str(TORCHRUN), "--standalone", "--nproc_per_node", str(processes), __file__,
               "--worker", str(out), str(ids), "--device", device, *(["--shard"] if shard else [])]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--shard", action="store_true", help="shard the arm per decoder layer (FSDP2), not replicas")
    parser.add_argument("--worker", nargs=2, metavar=("OUT", "IDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker[0]), Path(args.worker[1]), args.device, args.shard)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        ids, found = token_ids(Path(scratch) / "ids.npy"), {}
        for processes in (1, args.processes):
            start = time.perf_counter()
            done = launch(
                Path(scratch) / f"p{processes}", ids, processes, args.device, shard=args.shard and processes > 1
            )
            if done.returncode:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            found[processes] = json.loads((Path(scratch) / f"p{processes}" / "losses.json").read_text())
            print(f"{processes} process(es) on {args.device}: {time.perf_counter() - start:.1f} s")
    one, many = (np.array(found[p]["losses"]) for p in (1, args.processes))
    gap, trained = float(np.abs(one - many).max()), one.mean() < np.mean(found[1]["before"])
    print(f"largest held-out loss difference: {gap:.3g} nats (tolerance {TOLERANCE:g}); trained: {trained}")
    return 0 if gap <= TOLERANCE and trained else 1


if __name__ == "__main__":
    sys.exit(main())
