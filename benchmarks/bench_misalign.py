"""Misalignment draws from the cross-Gram: this version against the previous one, same run, 2 threads.

Pools of 2048 × 2048 rows with D = 16384 (random, like a 16×32×32 CIFAR feature map); the cross-Gram
``C = Q_tr Q_teᵀ`` (2048 × 2048, float64) is formed once. For each (M, K), 10 000 draws by

- ``previous``: the cross-Gram path as it was (``ordered_subsets`` as the top ``size`` of ``n`` float32
  random keys per draw, ``block_means`` as ``embedding_bag`` row sums over whole rows of ``C``),
  kept below as a reference;
- ``current``: ``misalign.misalignment_draws`` (partial Fisher–Yates subsets; row sums as a sparse
  0/1 indicator times ``C``, column slab by column slab, or a dense product for long segments).

Both are exact draws of uniform M- and K-subsets; their random streams differ, so the printed
``P(μ_Mᵀ g_K <= 0)`` agree within sampling error, not exactly (the kernels themselves are checked
for equality on the same subsets). Times are the best of ``--repeats`` runs.
Goal: 10 000 draws at (M, K) = (256, 256) in < 1 s on 2 CPU cores.

``--rows`` also times the original baseline, recomputing ``μ_M = mean(Q_tr[I])``, ``g_K = mean(Q_te[J])``
and their dot product for each draw (on ``--rows-draws`` draws, scaled to 10 000; linear in draws).

Usage: ``python benchmarks/bench_misalign.py [--repeats 3] [--rows]``; to emulate CI's AVX2 CPUs
prefix ``ONEDNN_MAX_CPU_ISA=AVX2`` (oneDNN), and ``ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2``
for PyTorch's own kernels and MKL.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from scalemech.experiments.misalign import block_means, misalignment_draws, ordered_subsets

N, D, DRAWS = 2048, 16384, 10_000
GRID = [(8, 8), (32, 32), (64, 64), (256, 256)]
GOAL_CELL, GOAL_SECONDS = (256, 256), 1.0
PREVIOUS_CHUNK = 2048


# ----------------------------------------------------------------------------- the previous path (reference)


def previous_ordered_subsets(draws: int, n: int, size: int, generator: torch.Generator) -> torch.Tensor:
    """The ``size`` largest of ``n`` i.i.d. float32 uniform keys per draw, in order."""
    return torch.rand(draws, n, generator=generator).topk(size, dim=1).indices


def previous_block_means(
    C: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, Ms: Sequence[int], Ks: Sequence[int]
) -> torch.Tensor:
    """Row sums ``1_Iᵀ C`` over whole rows (``embedding_bag``), then a gather of the columns and a cumsum."""
    if rows.shape[1] * C.shape[1] > cols.shape[1] * C.shape[0]:
        return previous_block_means(C.T.contiguous(), cols, rows, Ks, Ms).transpose(1, 2)
    out = torch.empty(rows.shape[0], len(Ms), len(Ks), dtype=C.dtype)
    row_sums = torch.zeros(rows.shape[0], C.shape[1], dtype=C.dtype)
    K_index = torch.as_tensor(Ks) - 1
    done = 0
    for a, M in enumerate(Ms):
        row_sums += F.embedding_bag(rows[:, done:M], C, mode="sum")
        done = M
        corner_sums = row_sums.gather(1, cols[:, : Ks[-1]]).cumsum(1)[:, K_index]
        out[:, a] = corner_sums / (M * torch.as_tensor(Ks, dtype=C.dtype))
    return out


def previous_draws(
    C: torch.Tensor, grid: Sequence[tuple[int, int]], draws: int, seed: int
) -> dict[tuple[int, int], torch.Tensor]:
    Ms, Ks = sorted({M for M, _ in grid}), sorted({K for _, K in grid})
    generator = torch.Generator().manual_seed(seed)
    chunks = []
    for start in range(0, draws, PREVIOUS_CHUNK):
        size = min(PREVIOUS_CHUNK, draws - start)
        rows = previous_ordered_subsets(size, C.shape[0], Ms[-1], generator)
        cols = previous_ordered_subsets(size, C.shape[1], Ks[-1], generator)
        chunks.append(previous_block_means(C, rows, cols, Ms, Ks))
    values = torch.cat(chunks)
    return {(M, K): values[:, Ms.index(M), Ks.index(K)] for M, K in grid}


# ----------------------------------------------------------------------------- timing


def best_of(repeats: int, work: Callable[[], object]) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - start)
    return best, result


def rows_baseline(Q_train: torch.Tensor, Q_test: torch.Tensor, M: int, K: int, draws: int) -> float:
    generator = torch.Generator().manual_seed(0)
    rows, cols = ordered_subsets(draws, N, M, generator), ordered_subsets(draws, N, K, generator)
    start = time.perf_counter()
    for train_rows, test_rows in zip(rows, cols):
        float(Q_train[train_rows].double().mean(0) @ Q_test[test_rows].double().mean(0))
    return time.perf_counter() - start


def _misaligned(values: torch.Tensor) -> float:
    return float((values <= 0).double().mean())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", action="store_true", help="also time recomputing the means from the rows")
    parser.add_argument("--rows-draws", type=int, default=200)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    generator = torch.Generator().manual_seed(0)
    Q_train = torch.randn(N, D, generator=generator) + 0.01
    Q_test = torch.randn(N, D, generator=generator) + 0.01
    start = time.perf_counter()
    C = (Q_train @ Q_test.T).double()  # formed once
    print(f"cross-Gram {N}x{N} from D={D}: {time.perf_counter() - start:.2f} s (once per point and view)")
    print(
        f"threads: {torch.get_num_threads()}, CPU capability: {torch.backends.cpu.get_cpu_capability()}, "
        f"best of {args.repeats}"
    )

    subsets = torch.Generator().manual_seed(1)
    rows, cols = ordered_subsets(512, N, 256, subsets), ordered_subsets(512, N, 256, subsets)
    Ms = Ks = [M for M, _ in GRID]
    difference = (block_means(C, rows, cols, Ms, Ks) - previous_block_means(C, rows, cols, Ms, Ks)).abs().max()
    print(
        f"kernels on the same 512 subsets, whole grid: max |current - previous| = {difference:.2e} "
        f"(entries of C up to {C.abs().max():.3g})"
    )

    goal = None
    for cells in [[cell] for cell in GRID] + [GRID]:
        old_s, old = best_of(args.repeats, lambda cells=cells: previous_draws(C, cells, DRAWS, seed=0))
        new_s, new = best_of(args.repeats, lambda cells=cells: misalignment_draws(C, cells, DRAWS, seed=0))
        label = f"(M, K) = {cells[0]}" if len(cells) == 1 else f"whole grid {cells} at once (nested prefixes)"
        shares = ", ".join(f"{_misaligned(old[cell]):.4f} vs {_misaligned(new[cell]):.4f}" for cell in cells)
        print(
            f"{label}: previous {old_s:.3f} s, current {new_s:.3f} s / {DRAWS} draws, "
            f"ratio x{old_s / new_s:.1f}; P(<= 0) previous vs current: {shares}"
        )
        if cells == [GOAL_CELL]:
            goal = new_s
        if args.rows and len(cells) == 1:
            M, K = cells[0]
            slow = rows_baseline(Q_train, Q_test, M, K, args.rows_draws) * DRAWS / args.rows_draws
            print(f"    rows baseline ~{slow:.1f} s (scaled from {args.rows_draws} draws), ratio x{slow / new_s:.0f}")
    print(
        f"goal: {DRAWS} draws at (M, K) = {GOAL_CELL} in < {GOAL_SECONDS:.0f} s on {args.threads} threads: "
        f"{goal:.3f} s, {'met' if goal < GOAL_SECONDS else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
