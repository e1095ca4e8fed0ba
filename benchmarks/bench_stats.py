"""Benchmark: Gram-matrix U-statistics (scalemech.stats) against the D×D covariance.

PAPERS.md §3 claim W5: d_align is cheap because it never forms the D×D covariance. Two runs:

1. D = 16 384 (a 16×32×32 CIFAR feature map), n = 1 024: ``alignment_stats`` (Gram, float64
   accumulation) against forming the float32 sample covariance and reading the same moments
   from it (plug-in ``‖μ̂‖²``, ``μ̂ᵀΣ̂μ̂``, ``‖Σ̂‖_F²``; biased, and cheaper than any correction,
   so the ratio favours the baseline).
2. D = 2²⁰, n = 256: the Gram path alone; the covariance would need D²·4 bytes = 4 TiB.

Each measurement runs in a fresh spawned process: wall time of the call, and its peak extra
resident memory (``ru_maxrss`` after the call minus after the rows were made in place).

Usage: ``python benchmarks/bench_stats.py [--dim 16384 --n 1024 --big-dim 1048576 --big-n 256]``.
"""

from __future__ import annotations

import argparse
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import torch

from scalemech.cost import covariance_moments
from scalemech.stats import alignment_stats


def _rows(n: int, dim: int, seed: int) -> torch.Tensor:
    """``(n, dim)`` float32 gradients-like rows with a small common mean, made in place."""
    rows = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))
    return rows.add_(0.05)


def _truth(dim: int) -> dict[str, float]:
    """Population moments of ``_rows``: ``μ = 0.05·1``, ``Σ = I``."""
    mu_sq = 0.05**2 * dim
    return {"mu_sq": mu_sq, "mu_sigma_mu": mu_sq, "tr_sigma_sq": float(dim), "d_align": mu_sq**2 / max(mu_sq, dim)}


def _gram_moments(rows: torch.Tensor) -> dict[str, float]:
    stats = alignment_stats(rows)
    return {"mu_sq": stats.mu_sq, "mu_sigma_mu": stats.mu_sigma_mu, "tr_sigma_sq": stats.tr_sigma_sq,
            "d_align": stats.d_align}


METHODS = {"gram": _gram_moments, "covariance": covariance_moments}


def _measure(method: str, n: int, dim: int, seed: int) -> tuple[float, float, dict[str, float]]:
    """In a fresh process: (seconds, peak extra MiB, moments) of ``METHODS[method]``."""
    rows = _rows(n, dim, seed)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    start = time.perf_counter()
    moments = METHODS[method](rows)
    seconds = time.perf_counter() - start
    peak_extra_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    return seconds, peak_extra_mib, moments


def measure(method: str, n: int, dim: int, seed: int = 0) -> tuple[float, float, dict[str, float]]:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(_measure, method, n, dim, seed).result()


def _report(label: str, seconds: float, mib: float, moments: dict[str, float]) -> None:
    values = ", ".join(f"{k}={v:.4g}" for k, v in moments.items())
    print(f"  {label:<11} {seconds:8.2f} s  {mib:9.1f} MiB peak extra   {values}")


def main(argv: list[str] | None = None) -> None:
    """Benchmark hook: runs both comparisons and prints time and memory ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=16_384)
    parser.add_argument("--n", type=int, default=1_024)
    parser.add_argument("--big-dim", type=int, default=2**20)
    parser.add_argument("--big-n", type=int, default=256)
    args = parser.parse_args(argv)

    print(f"[1] D = {args.dim}, n = {args.n}  (threads: {torch.get_num_threads()})")
    gram = measure("gram", args.n, args.dim)
    covariance = measure("covariance", args.n, args.dim)
    _report("gram", *gram)
    _report("covariance", *covariance)
    _report("truth", 0.0, 0.0, _truth(args.dim))
    print(f"  covariance / gram: time x{covariance[0] / gram[0]:.1f}, "
          f"peak extra memory x{covariance[1] / max(gram[1], 1e-3):.1f}")

    print(f"[2] D = {args.big_dim}, n = {args.big_n}: Gram path only "
          f"(rows {args.big_n * args.big_dim * 4 / 2**30:.2f} GiB float32; "
          f"the D×D float32 covariance would need {args.big_dim**2 * 4 / 2**40:.1f} TiB)")
    _report("gram", *measure("gram", args.big_n, args.big_dim))
    _report("truth", 0.0, 0.0, _truth(args.big_dim))


if __name__ == "__main__":
    main()
