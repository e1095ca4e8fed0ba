"""``scalemech certify`` on a random GPT-NeoX of Pythia-160m's shape vs. its plain forward + backward.

The checkpoint (12 layers, hidden 768, 12 heads, vocabulary 50 304, random weights) is saved with
``save_pretrained``; token ids are a ``.npy``. Each side runs in a fresh process (so each peak
memory is its own), over the same number of sequences (``2·pool``: train and test pools) of
``block_size`` tokens in batches of ``batch_size``:

- ``certify``: the call of ``scalemech.certify.certify`` (weights loaded, pools drawn, captured to
  disk, statistics), every point, full view;
- the baseline: the same model's training-style forward and backward (``loss.backward()``,
  parameters requiring grad), weights loaded and one batch run before the clock starts.

Prints the ratio (goal ≤ 1.5) and each side's peak memory (CUDA: ``max_memory_allocated``; CPU:
the process's peak RSS, ``VmHWM``, which includes torch itself) against the weights and the pools'
size on disk.

Sizes: ``--pool 256 --block-size 512`` on a GPU; on a CPU by default ``--pool 32 --block-size 128``
(the GPU sizes would take hours on a laptop's cores). ``--readme docs/grow.md`` writes the result, with
the machine, the date and the command, into that file's ``bench-certify`` block.

    python benchmarks/bench_certify.py                       # GPU sizes on CUDA, CPU sizes otherwise
    python benchmarks/bench_certify.py --device cpu --readme docs/grow.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from readme_block import check_block, write_block
from transformers import AutoModelForCausalLM, GPTNeoXConfig

from scalemech.certify import certify
from scalemech.core.device import resolve_device

PYTHIA_160M = dict(
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    vocab_size=50_304,
    max_position_embeddings=2048,
    rotary_pct=0.25,
)
GB = 1e9
SIZES = {False: (32, 128), True: (256, 512)}
"""``(pool, block_size)`` by default: on CUDA (the issue's sizes), else on CPU."""


def peak_memory(device: torch.device) -> float:
    """Bytes: the CUDA allocator's peak, or this process's peak RSS (VmHWM)."""
    if device.type == "cuda":
        return float(torch.cuda.max_memory_allocated(device))
    status = Path("/proc/self/status").read_text().split("VmHWM:")[1]
    return float(status.split()[0]) * 1024


def synchronized(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def forward_backward(model, ids: torch.Tensor, batch_size: int, device: torch.device) -> float:
    """Seconds of the training-style forward + backward over ``ids`` (n, block_size + 1)."""
    synchronized(device)
    start = time.perf_counter()
    for batch in ids.split(batch_size):
        batch = batch.to(device)
        logits = model(input_ids=batch[:, :-1], use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        loss.backward()
    synchronized(device)
    return time.perf_counter() - start


def run_certify(args: argparse.Namespace, device: torch.device) -> dict:
    synchronized(device)
    start = time.perf_counter()
    table = certify(
        args.checkpoint,
        args.ids,
        pool=args.pool,
        M=min(16, args.pool),
        K=min(16, args.pool),
        batch_size=args.batch_size,
        block_size=args.block_size,
        device=str(device),
    )
    synchronized(device)
    return {"seconds": time.perf_counter() - start, "points": len(table), "ran": table.attrs["ran"]}


def run_baseline(args: argparse.Namespace, device: torch.device) -> dict:
    model = AutoModelForCausalLM.from_pretrained(args.checkpoint).to(device).eval()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    rng = np.random.default_rng(1)
    sequences = torch.from_numpy(rng.integers(0, PYTHIA_160M["vocab_size"], (2 * args.pool, args.block_size + 1)))
    forward_backward(model, sequences[: args.batch_size], args.batch_size, device)  # warm-up
    return {"seconds": forward_backward(model, sequences, args.batch_size, device), "weights": weights}


def in_child(args: argparse.Namespace, part: str, checkpoint: Path, ids: Path) -> dict:
    """``part``'s result, run by this script in a fresh process."""
    argv = [sys.executable, __file__, "--part", part, "--checkpoint", str(checkpoint), "--ids", str(ids)]
    for name in ("pool", "block_size", "batch_size", "device"):
        argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pool", type=int, help="examples per pool (default: 256 on CUDA, 32 on CPU)")
    parser.add_argument("--block-size", type=int, help="tokens per example (default: 512 on CUDA, 128 on CPU)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--readme", type=Path, help="write the result into this file's bench-certify block")
    parser.add_argument("--part", choices=["certify", "baseline"], help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.readme:
        try:
            check_block(args.readme, "bench-certify")
        except (OSError, ValueError) as error:
            parser.error(f"--readme: {error}")
    device = resolve_device(args.device)
    args.pool = args.pool or SIZES[device.type == "cuda"][0]
    args.block_size = args.block_size or SIZES[device.type == "cuda"][1]
    if args.part:
        result = (run_certify if args.part == "certify" else run_baseline)(args, device)
        print(json.dumps({**result, "peak": peak_memory(device)}))
        return
    args.device = str(device)
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint, ids = Path(scratch) / "neox", Path(scratch) / "ids.npy"
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(GPTNeoXConfig(**PYTHIA_160M)).save_pretrained(checkpoint)
        vocab = PYTHIA_160M["vocab_size"]
        np.save(
            ids, np.random.default_rng(0).integers(0, vocab, 40 * args.pool * (args.block_size + 1)).astype(np.int32)
        )
        measured = in_child(args, "certify", checkpoint, ids)
        baseline = in_child(args, "baseline", checkpoint, ids)
    d = PYTHIA_160M["hidden_size"]
    pools = 2 * measured["points"] * args.pool * (args.block_size * d * 4 + 8)  # train + test, float32 rows, scales
    result = (
        f"Pythia-160m shape (random), {measured['points']} points, pool {args.pool} x {args.block_size} tokens, "
        f"batch {args.batch_size}, {device}, {torch.get_num_threads()} threads:\n"
        f"  certify {measured['seconds']:.1f} s; forward+backward over the same {2 * args.pool} sequences "
        f"{baseline['seconds']:.1f} s; ratio {measured['seconds'] / baseline['seconds']:.2f} (goal <= 1.5)\n"
        f"  peak memory: certify {measured['peak'] / GB:.2f} GB, forward+backward {baseline['peak'] / GB:.2f} GB; "
        f"weights {baseline['weights'] / GB:.2f} GB; pools on disk {pools / GB:.2f} GB"
    )
    print(result)
    if args.readme:
        write_block(args.readme, "bench-certify", result, device)


if __name__ == "__main__":
    main()
