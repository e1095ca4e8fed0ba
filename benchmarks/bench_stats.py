"""Benchmark: Gram-matrix U-statistics (scalemech.stats) against the D×D covariance.

docs/science.md §3 claim W5: d_align is cheap because it never forms the D×D covariance. Two runs:

1. D = 16 384 (a 16×32×32 CIFAR feature map), n = 1 024, three methods:

   - ``gram``: ``stats.gram`` alone (``cross_gram``: ``G = Q Qᵀ`` in float64 column chunks), whose
     memory floor is ``n²·8 B`` (G) + one float64 chunk buffer;
   - ``stats``: ``alignment_stats``, the Gram matrix and its U-statistics (the full Gram path);
   - ``covariance``: the float32 sample covariance and the same moments read from it (plug-in
     ``‖μ̂‖²``, ``μ̂ᵀΣ̂μ̂``, ``‖Σ̂‖_F²``; biased, and cheaper than any correction, so the ratio
     favours the baseline).
2. D = 2²⁰, n = 256: the Gram path alone; the covariance would need D²·4 bytes = 4 TiB.

Each measurement runs in a fresh spawned process, the same way for every method: first one call
on small rows (64 × 1024), so that loading the BLAS kernels and starting thread pools is not
counted; then the rows are made in place; then the timed call. Memory is the peak *extra
resident set*: ``ru_maxrss`` after the call minus ``ru_maxrss`` before it (the resident
high-water mark, which sees every allocation -- torch's, BLAS's, numpy's -- unlike tracemalloc;
the process's current RSS is checked to equal the high-water mark before the call, so nothing
hides under an earlier peak). Goals: ``gram`` within 2× of its floor, covariance / Gram ≥ 100×.

Usage: ``python benchmarks/bench_stats.py [--dim 16384 --n 1024 --big-dim 1048576 --big-n 256]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import torch

from scalemech import stats
from scalemech.stats import alignment_stats, grams
from scalemech.stats.cost import covariance_moments


def _rows(n: int, dim: int, seed: int) -> torch.Tensor:
    """``(n, dim)`` float32 gradients-like rows with a small common mean, made in place."""
    rows = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))
    return rows.add_(0.05)


def _truth(dim: int) -> dict[str, float]:
    """Population moments of ``_rows``: ``μ = 0.05·1``, ``Σ = I``."""
    mu_sq = 0.05**2 * dim
    return {"mu_sq": mu_sq, "mu_sigma_mu": mu_sq, "tr_sigma_sq": float(dim), "d_align": mu_sq**2 / max(mu_sq, dim)}


def _gram_moments(rows: torch.Tensor) -> dict[str, float]:
    result = alignment_stats(rows)
    return {
        "mu_sq": result.mu_sq,
        "mu_sigma_mu": result.mu_sigma_mu,
        "tr_sigma_sq": result.tr_sigma_sq,
        "d_align": result.d_align,
    }


def _gram_only(rows: torch.Tensor) -> dict[str, float]:
    G = stats.gram(rows)
    return {"trace_G": float(G.trace()), "sum_G": float(G.sum())}


METHODS = {"gram": _gram_only, "stats": _gram_moments, "covariance": covariance_moments}


def _rss_kib() -> float | None:
    """The current resident set in KiB (Linux), else None."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024
    except (OSError, ValueError, IndexError):
        return None


def _measure(method: str, n: int, dim: int, seed: int) -> tuple[float, float, float | None, dict[str, float]]:
    """In a fresh process: (seconds, peak extra MiB, MiB the high-water mark sat above RSS before, moments)."""
    METHODS[method](_rows(64, 1024, seed + 1))  # warm-up: libraries loaded, thread pools started
    rows = _rows(n, dim, seed)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    current = _rss_kib()
    start = time.perf_counter()
    moments = METHODS[method](rows)
    seconds = time.perf_counter() - start
    peak_extra_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    slack_mib = None if current is None else (before - current) / 1024
    return seconds, peak_extra_mib, slack_mib, moments


def measure(method: str, n: int, dim: int, seed: int = 0) -> tuple[float, float, float | None, dict[str, float]]:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(_measure, method, n, dim, seed).result()


def _report(label: str, seconds: float, mib: float, slack: float | None, moments: dict[str, float]) -> None:
    values = ", ".join(f"{k}={v:.4g}" for k, v in moments.items())
    hidden = "" if slack is None or slack < 1 else f" (high-water mark {slack:.1f} MiB above RSS before: a floor)"
    print(f"  {label:<11} {seconds:8.2f} s  {mib:9.1f} MiB peak extra{hidden}   {values}")


def main(argv: list[str] | None = None) -> None:
    """Benchmark hook: runs both comparisons and prints time and memory ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=16_384)
    parser.add_argument("--n", type=int, default=1_024)
    parser.add_argument("--big-dim", type=int, default=2**20)
    parser.add_argument("--big-n", type=int, default=256)
    args = parser.parse_args(argv)

    columns = grams._chunk_columns(args.n, 8192)
    floor_mib = (8 * args.n**2 + 8 * args.n * columns) / 2**20
    print(
        f"[1] D = {args.dim}, n = {args.n}  (threads: {torch.get_num_threads()}; Gram chunks of {columns} "
        f"columns; floor n²·8 B + one chunk = {floor_mib:.1f} MiB)"
    )
    results = {method: measure(method, args.n, args.dim) for method in METHODS}
    for method, result in results.items():
        _report(method, *result)
    _report("truth", 0.0, 0.0, None, _truth(args.dim))
    covariance = results["covariance"]
    for method in ("gram", "stats"):
        seconds, mib = results[method][:2]
        print(
            f"  covariance / {method}: time x{covariance[0] / seconds:.1f}, "
            f"peak extra memory x{covariance[1] / max(mib, 1e-3):.1f} (goal >= 100)"
        )
    print(f"  gram peak / floor: x{results['gram'][1] / floor_mib:.2f} (goal <= 2)")

    print(
        f"[2] D = {args.big_dim}, n = {args.big_n}: Gram path only "
        f"(rows {args.big_n * args.big_dim * 4 / 2**30:.2f} GiB float32; "
        f"the D×D float32 covariance would need {args.big_dim**2 * 4 / 2**40:.1f} TiB)"
    )
    _report("stats", *measure("stats", args.big_n, args.big_dim))
    _report("truth", 0.0, 0.0, None, _truth(args.big_dim))


if __name__ == "__main__":
    main()
