"""Misalignment draws from the cross-Gram vs recomputing both means from the gradient rows.

Pools of 2048 × 2048 rows with D = 16384 (random, like a 16×32×32 CIFAR feature map). The
cross-Gram path (``misalign.misalignment_draws``) does 10 000 draws per (M, K); the baseline
computes ``μ_M = mean(Q_tr[I])``, ``g_K = mean(Q_te[J])`` and their dot product for each draw.
The baseline is timed on a few hundred draws and scaled to 10 000 (it is linear in draws).
Goal: 10 000 draws of one (M, K) in < 1 s on 2 CPU cores.
"""

import time

import torch

from scalemech.experiments.misalign import misalignment_draws, ordered_subsets

N, D, DRAWS, BASELINE_DRAWS = 2048, 16384, 10_000, 200
GRID = [(8, 8), (32, 32), (64, 64), (256, 256)]


def baseline(Q_train: torch.Tensor, Q_test: torch.Tensor, M: int, K: int, draws: int) -> float:
    generator = torch.Generator().manual_seed(0)
    rows, cols = ordered_subsets(draws, N, M, generator), ordered_subsets(draws, N, K, generator)
    start = time.perf_counter()
    for I, J in zip(rows, cols):
        float(Q_train[I].double().mean(0) @ Q_test[J].double().mean(0))
    return time.perf_counter() - start


def main() -> None:
    generator = torch.Generator().manual_seed(0)
    Q_train = torch.randn(N, D, generator=generator) + 0.01
    Q_test = torch.randn(N, D, generator=generator) + 0.01
    start = time.perf_counter()
    C = (Q_train @ Q_test.T).double()  # formed once
    print(f"cross-Gram {N}x{N} from D={D}: {time.perf_counter() - start:.2f} s (once per point and view)")
    print(f"threads: {torch.get_num_threads()}")
    for M, K in GRID:
        start = time.perf_counter()
        misalignment_draws(C, [(M, K)], DRAWS, seed=0)
        fast = time.perf_counter() - start
        slow = baseline(Q_train, Q_test, M, K, BASELINE_DRAWS) * DRAWS / BASELINE_DRAWS
        print(f"(M, K) = ({M}, {K}): cross-Gram {fast:.3f} s / {DRAWS} draws, "
              f"rows baseline ~{slow:.1f} s (scaled from {BASELINE_DRAWS}), ratio {slow / fast:.0f}x")
    start = time.perf_counter()
    misalignment_draws(C, GRID, DRAWS, seed=0)
    print(f"whole grid {GRID} at once (nested prefixes): {time.perf_counter() - start:.3f} s / {DRAWS} draws")


if __name__ == "__main__":
    main()
