"""``scalemech certify`` on a random GPT-NeoX of Pythia-160m's shape vs. its plain forward + backward.

The checkpoint (12 layers, hidden 768, 12 heads, vocabulary 50 304, random weights) is saved with
``save_pretrained``; token ids are a ``.npy``. Timed in the same run, over the same number of
sequences (``2·pool``: train and test pools) of ``block_size`` tokens in batches of ``batch_size``:

- ``certify``: the whole command (weights loaded, pools captured to disk, statistics);
- the baseline: the same model's training-style forward and backward (``loss.backward()``,
  parameters requiring grad), weights already loaded.

Prints the ratio (goal ≤ 1.5), certify's peak memory (CUDA: ``max_memory_allocated``; CPU: the
process's peak RSS, reset before certify) against the weights and the pools' size on disk.

    python benchmarks/bench_certify.py --pool 256 --block-size 512          # the issue's sizes (GPU)
    python benchmarks/bench_certify.py --pool 16 --block-size 64 --device cpu  # a small CPU run
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, GPTNeoXConfig

from scalemech.certify import certify
from scalemech.device import resolve_device

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


def peak_memory_reset(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak RSS


def peak_memory(device: torch.device) -> float:
    """Bytes: the CUDA allocator's peak, or the process's peak RSS (VmHWM)."""
    if device.type == "cuda":
        return float(torch.cuda.max_memory_allocated(device))
    status = Path("/proc/self/status").read_text().split("VmHWM:")[1]
    return float(status.split()[0]) * 1024


def synchronized(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def forward_backward(model, ids: torch.Tensor, block_size: int, batch_size: int, device: torch.device) -> float:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pool", type=int, default=256)
    parser.add_argument("--block-size", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    device = resolve_device(args.device)
    window = args.block_size + 1
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint, ids_file = Path(scratch) / "neox", Path(scratch) / "ids.npy"
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(GPTNeoXConfig(**PYTHIA_160M)).save_pretrained(checkpoint)
        rng = np.random.default_rng(0)
        np.save(ids_file, rng.integers(0, PYTHIA_160M["vocab_size"], 40 * args.pool * window).astype(np.int32))

        peak_memory_reset(device)
        synchronized(device)
        start = time.perf_counter()
        table = certify(
            str(checkpoint),
            str(ids_file),
            pool=args.pool,
            M=min(16, args.pool),
            K=min(16, args.pool),
            batch_size=args.batch_size,
            block_size=args.block_size,
            device=str(device),
        )
        synchronized(device)
        certify_s = time.perf_counter() - start
        certify_peak = peak_memory(device)

        model = AutoModelForCausalLM.from_pretrained(checkpoint).to(device).eval()
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        sequences = torch.from_numpy(rng.integers(0, PYTHIA_160M["vocab_size"], (2 * args.pool, window)))
        forward_backward(model, sequences[: args.batch_size], args.block_size, args.batch_size, device)  # warm-up
        baseline_s = forward_backward(model, sequences, args.block_size, args.batch_size, device)
    points, d = len(table), PYTHIA_160M["hidden_size"]
    pools = 2 * points * args.pool * (args.block_size * d + d) * 4  # train + test, full + pooled views, float32
    print(
        f"Pythia-160m shape (random), {points} points, pool {args.pool} x {args.block_size} tokens, "
        f"batch {args.batch_size}, {device}, {torch.get_num_threads()} threads:\n"
        f"  certify {certify_s:.1f} s; forward+backward over the same {2 * args.pool} sequences {baseline_s:.1f} s; "
        f"ratio {certify_s / baseline_s:.2f} (goal <= 1.5)\n"
        f"  certify's peak memory {certify_peak / GB:.2f} GB; weights {weights / GB:.2f} GB; "
        f"pools on disk {pools / GB:.2f} GB ({table.attrs['ran']})"
    )


if __name__ == "__main__":
    main()
