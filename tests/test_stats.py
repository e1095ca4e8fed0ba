"""Tests of scalemech.stats against brute force, Monte Carlo and known population moments."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scalemech import stats, tables


def gaussian_rows(n: int | tuple[int, ...], mu: torch.Tensor, chol: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``n`` rows of ``N(mu, chol cholᵀ)``, float64 (leading batch axes of ``n`` allowed)."""
    shape = (n,) if isinstance(n, int) else n
    noise = torch.randn(*shape, len(mu), generator=generator, dtype=torch.float64)
    return mu + noise @ chol.T


def population(mu: torch.Tensor, chol: torch.Tensor) -> dict[str, float]:
    """Exact moments of N(mu, chol cholᵀ)."""
    sigma = chol @ chol.T
    mu_sq = (mu @ mu).item()
    return {"mu_sq": mu_sq, "mu_four": mu_sq**2, "mu_sigma_mu": (mu @ sigma @ mu).item(),
            "tr_sigma_sq": (sigma * sigma).sum().item()}


@pytest.fixture
def setting() -> tuple[torch.Tensor, torch.Tensor]:
    """A 3-dimensional mean and a non-diagonal covariance factor."""
    mu = torch.tensor([0.8, -0.3, 0.5], dtype=torch.float64)
    chol = torch.tensor([[1.0, 0.0, 0.0], [0.7, 0.6, 0.0], [-0.4, 0.3, 0.9]], dtype=torch.float64)
    return mu, chol


# ----------------------------------------------------------------------------- U-statistics

def brute_force_u(G: torch.Tensor) -> list[float]:
    """U1..U4 as explicit averages over ordered tuples of distinct indices."""
    n = G.shape[0]
    g = G.tolist()
    averages = []
    for order, term in [(2, lambda i, j: g[i][j]), (2, lambda i, j: g[i][j] ** 2),
                        (3, lambda i, j, k: g[i][j] * g[i][k]), (4, lambda i, j, k, l: g[i][j] * g[k][l])]:
        tuples = list(itertools.permutations(range(n), order))
        averages.append(sum(term(*t) for t in tuples) / len(tuples))
    return averages


def test_u_statistics_equal_brute_force():
    generator = torch.Generator().manual_seed(1)
    Q = torch.randn(7, 5, generator=generator, dtype=torch.float64) + 0.3
    G = Q @ Q.T
    np.testing.assert_allclose(stats.u_statistics(G).tolist(), brute_force_u(G), rtol=1e-10, atol=1e-12)


def test_u_statistics_batched_equal_one_by_one():
    generator = torch.Generator().manual_seed(2)
    Q = torch.randn(3, 6, 4, generator=generator, dtype=torch.float64)
    G = Q @ Q.transpose(-1, -2)
    batched = stats.u_statistics(G)
    assert batched.shape == (3, 4)
    for b in range(3):
        torch.testing.assert_close(batched[b], stats.u_statistics(G[b]), rtol=1e-12, atol=1e-12)


def test_estimates_unbiased(setting):
    """Monte Carlo: each estimate's mean over many small samples lies within 4 standard errors."""
    mu, chol = setting
    trials, n = 20000, 6
    generator = torch.Generator().manual_seed(3)
    Q = gaussian_rows((trials, n), mu, chol, generator)  # (trials, n, 3)
    estimates = stats._estimates(stats.u_statistics(Q @ Q.transpose(-1, -2)))  # (trials, 7)
    truth = population(mu, chol)
    for index, name in enumerate(["mu_sq", "mu_four", "mu_sigma_mu", "tr_sigma_sq"]):
        values = estimates[:, index]
        standard_error = values.std().item() / math.sqrt(trials)
        assert abs(values.mean().item() - truth[name]) < 4 * standard_error, name


def test_too_few_rows():
    with pytest.raises(ValueError, match="n >= 4"):
        stats.stats_from_gram(torch.eye(3, dtype=torch.float64), dim=3)
    with pytest.raises(ValueError, match="square"):
        stats.u_statistics(torch.zeros(4, 5))


# ----------------------------------------------------------------------------- Gram construction

@pytest.fixture
def rows() -> torch.Tensor:
    return torch.randn(13, 2, 5, 3, generator=torch.Generator().manual_seed(4)) + 0.2  # (n, *shape), D = 30


@pytest.mark.parametrize("chunk_size", [1, 7, 30, 1000])
def test_gram_chunked_equals_direct(rows, chunk_size):
    flat = rows.reshape(13, -1).double()
    torch.testing.assert_close(stats.gram(rows, chunk_size=chunk_size), flat @ flat.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("block_sizes", [[13], [1, 12], [4, 4, 5], [5, 1, 1, 6]])
def test_gram_of_row_blocks_equals_tensor(rows, block_sizes):
    blocks = iter(rows.split(block_sizes))  # a one-pass iterator
    torch.testing.assert_close(stats.gram(blocks, chunk_size=7), stats.gram(rows), rtol=1e-12, atol=1e-12)


def test_alignment_stats_input_kinds_agree(rows, tmp_path):
    reference = stats.alignment_stats(rows)
    assert reference.dim == 30 and reference.n == 13
    memmap = np.lib.format.open_memmap(tmp_path / "q.npy", mode="w+", dtype=np.float32, shape=(13, 30))
    memmap[:] = rows.reshape(13, -1).numpy()
    for other in [stats.alignment_stats(rows, chunk_size=4),
                  stats.alignment_stats(iter(rows.split(3))),
                  stats.alignment_stats(np.load(tmp_path / "q.npy", mmap_mode="r"), chunk_size=8),
                  stats.alignment_stats(block.numpy() for block in rows.split(5))]:
        assert other.n == reference.n and other.dim == reference.dim
        for name in stats.FIELDS:
            assert getattr(other, name) == pytest.approx(getattr(reference, name), rel=1e-10), name


def test_gram_rejects_mismatched_blocks():
    with pytest.raises(ValueError, match="D = 4"):
        stats.gram([torch.zeros(2, 3), torch.zeros(2, 4)])
    with pytest.raises(ValueError, match="empty"):
        stats.gram(iter([]))


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_device_results_match_cpu(rows, device):
    G = stats.gram(rows, chunk_size=7, device=device)
    assert G.device.type == device
    cpu = stats.gram(rows)
    torch.testing.assert_close(G.cpu(), cpu, rtol=1e-12, atol=1e-12)
    for method in ["jackknife", "subsample"]:
        on_device = stats.alignment_intervals(G, 30, method=method, draws=10)
        on_cpu = stats.alignment_intervals(cpu, 30, method=method, draws=10)
        for name in stats.FIELDS:
            np.testing.assert_allclose(on_device[name], on_cpu[name], rtol=1e-9)
    pooled = rows.mean((2, 3)).to(device)  # (n, 2)
    assert stats.offdiag_ratio(pooled) == pytest.approx(stats.offdiag_ratio(pooled.cpu()), rel=1e-9)
    assert stats.offdiag_null(pooled, draws=3) == pytest.approx(stats.offdiag_null(pooled.cpu(), draws=3), rel=1e-9)
    assert stats.correlation(pooled).device.type == device


# ----------------------------------------------------------------------------- jackknife and intervals

def test_leave_one_out_equals_recomputation():
    generator = torch.Generator().manual_seed(5)
    Q = torch.randn(9, 4, generator=generator, dtype=torch.float64) + 0.4
    G = Q @ Q.T
    loo = stats.leave_one_out_u(G)
    for m in range(9):
        keep = [i for i in range(9) if i != m]
        torch.testing.assert_close(loo[m], stats.u_statistics(G[keep][:, keep]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("method", ["jackknife", "subsample"])
def test_interval_coverage(setting, method):
    """The 90 % interval covers the true d_par and tr Σ² in roughly 90 % of repeated samples."""
    mu, chol = setting
    truth = stats.AlignmentStats.from_moments(0, 3, **population(mu, chol))
    generator = torch.Generator().manual_seed(6)
    trials, covered = 120, {"d_par": 0, "tr_sigma_sq": 0}
    for trial in range(trials):
        Q = gaussian_rows(120, mu, chol, generator)
        intervals = stats.alignment_intervals(Q @ Q.T, 3, level=0.9, method=method, draws=60, seed=trial)
        for name in covered:
            lo, hi = intervals[name]
            covered[name] += lo <= getattr(truth, name) <= hi
    for name, count in covered.items():
        assert 0.78 <= count / trials <= 0.98, (name, count / trials)


def test_intervals_bracket_estimate_and_fill_table_row():
    Q = torch.randn(40, 6, generator=torch.Generator().manual_seed(7), dtype=torch.float64) + 0.5
    G = Q @ Q.T
    estimate = stats.stats_from_gram(G, 6)
    intervals = stats.alignment_intervals(G, 6)
    for name in stats.FIELDS:
        lo, hi = intervals[name]
        assert lo <= getattr(estimate, name) <= hi, name
    row = stats.table_row(estimate, intervals)
    dalign_columns = tables.columns("dalign")
    assert {c for c in dalign_columns if c.startswith(("d_", "mu_", "tr_", "n", "dim"))} <= set(row)


def test_interval_arguments_checked():
    G = torch.eye(10, dtype=torch.float64)
    with pytest.raises(ValueError, match="method"):
        stats.alignment_intervals(G, 3, method="bootstrap")
    with pytest.raises(ValueError, match="level"):
        stats.alignment_intervals(G, 3, level=90)
    with pytest.raises(ValueError, match="subsample_size"):
        stats.alignment_intervals(G, 3, method="subsample", subsample_size=10)
    with pytest.raises(ValueError, match="n >= 5"):
        stats.alignment_intervals(torch.eye(4), 3)


# ----------------------------------------------------------------------------- degenerate cases

def test_degenerate_ratios_are_explicit():
    no_spread = stats.AlignmentStats.from_moments(10, 3, 1.0, 1.0, -0.1, 0.5)
    assert no_spread.d_par == math.inf and no_spread.d_2 == 2.0 and no_spread.d_align == 2.0
    no_mean = stats.AlignmentStats.from_moments(10, 3, -0.1, -0.2, 0.3, -0.5)
    assert no_mean.d_par == pytest.approx(-0.2 / 0.3) and math.isnan(no_mean.d_2) and math.isnan(no_mean.d_align)
    assert math.isnan(stats.certificates(no_mean, 10, 10).b_align)
    assert math.isnan(stats.certificates(no_mean, 10, 10).b_exact)
    assert stats.certificates(stats.AlignmentStats.from_moments(10, 3, 1.0, 1.0, -1.0, -1.0), 5, 5).b_exact == 0.0


def test_identical_rows_have_infinite_dimension_and_no_interval():
    """q_i = c for all i: no spread, so μᵀΣμ = tr Σ² = 0 exactly, d = inf, B = 0, d-intervals nan."""
    G = stats.gram(torch.full((6, 3), 0.5, dtype=torch.float64))
    estimate = stats.stats_from_gram(G, 3)
    assert estimate.mu_sigma_mu == 0 and estimate.tr_sigma_sq == 0 and estimate.d_align == math.inf
    bounds = stats.certificates(estimate, 4, 4)
    assert bounds.b_exact == 0 and bounds.b_align == 0
    intervals = stats.alignment_intervals(G, 3)
    assert all(math.isnan(v) for v in intervals["d_par"]) and intervals["mu_sq"] == (0.75, 0.75)


def test_zero_mean_data_give_no_certificate_or_a_weak_one():
    """With μ = 0 the ‖μ‖⁴ estimate hovers around 0: b_align is nan (negative estimate) or near 1."""
    Q = torch.randn(64, 8, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    estimate = stats.alignment_stats(Q)
    b_align = stats.certificates(estimate, 16, 16).b_align
    assert math.isnan(b_align) if estimate.mu_four <= 0 else b_align > 0.5


# ----------------------------------------------------------------------------- certificates

def random_population(draw_seed: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(draw_seed)
    mu = torch.randn(dim, generator=generator, dtype=torch.float64)
    scale = 3 * torch.rand(1, generator=generator, dtype=torch.float64)
    chol = scale * torch.randn(dim, dim, generator=generator, dtype=torch.float64)
    return mu, chol


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), dim=st.integers(1, 6), M=st.integers(1, 10**4), K=st.integers(1, 10**4))
def test_b_exact_at_most_b_align_for_population_moments(seed, dim, M, K):
    mu, chol = random_population(seed, dim)
    truth = stats.AlignmentStats.from_moments(0, dim, **population(mu, chol))
    bounds = stats.certificates(truth, M, K)
    assert 0 <= bounds.b_exact <= bounds.b_align * (1 + 1e-12) <= 1
    assert bounds.n_eff == pytest.approx(1 / (1 / M + 1 / K + 1 / (M * K)), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), scale=st.floats(1e-3, 1e3))
def test_dimensions_invariant_to_scaling(seed, scale):
    Q = torch.randn(12, 5, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) + 0.7
    plain, scaled = stats.alignment_stats(Q), stats.alignment_stats(scale * Q)
    for name in ["d_par", "d_2", "d_align"]:
        a, b = getattr(plain, name), getattr(scaled, name)
        assert (math.isnan(a) and math.isnan(b)) or b == pytest.approx(a, rel=1e-9), name


def test_certificates_broadcast_over_grid(setting):
    truth = stats.AlignmentStats.from_moments(0, 3, **population(*setting))
    M, K = np.array([[4], [16], [64]]), np.array([8, 32])
    grid = stats.certificates(truth, M, K)
    assert grid.b_align.shape == (3, 2)
    for i, j in itertools.product(range(3), range(2)):
        point = stats.certificates(truth, int(M[i, 0]), int(K[j]))
        assert grid.b_exact[i, j] == pytest.approx(point.b_exact) and grid.var[i, j] == pytest.approx(point.var)
    with pytest.raises(ValueError, match="M and K"):
        stats.certificates(truth, 0, 5)


def test_certificate_mean_and_variance_match_simulation(setting):
    """E and Var of μ_Mᵀ g_K over independent train/test draws match the closed forms."""
    mu, chol = setting
    truth = stats.AlignmentStats.from_moments(0, 3, **population(mu, chol))
    M, K, draws = 5, 3, 40000
    generator = torch.Generator().manual_seed(9)
    mu_M = gaussian_rows((draws, M), mu, chol, generator).mean(1)
    g_K = gaussian_rows((draws, K), mu, chol, generator).mean(1)
    products = (mu_M * g_K).sum(1)
    bounds = stats.certificates(truth, M, K)
    standard_error = products.std().item() / math.sqrt(draws)
    assert abs(products.mean().item() - bounds.mean) < 4 * standard_error
    assert products.var().item() == pytest.approx(bounds.var, rel=0.05)
    assert (products <= 0).double().mean().item() <= bounds.b_exact


# ----------------------------------------------------------------------------- covariance structure

def test_offdiag_ratio_and_correlation_match_numpy():
    generator = torch.Generator().manual_seed(10)
    Q = torch.randn(30, 4, generator=generator) @ torch.randn(4, 4, generator=generator)
    cov = np.cov(Q.double().numpy(), rowvar=False)
    expected = (np.sum(cov**2) - np.sum(np.diag(cov) ** 2)) / np.sum(cov**2)
    assert stats.offdiag_ratio(Q) == pytest.approx(expected, rel=1e-10)
    np.testing.assert_allclose(stats.correlation(Q).numpy(), np.corrcoef(Q.double().numpy(), rowvar=False), atol=1e-12)


def test_offdiag_ratio_separates_diagonal_from_correlated():
    generator = torch.Generator().manual_seed(12)
    n, p = 2000, 8
    scales = torch.linspace(0.5, 3.0, p, dtype=torch.float64)
    diagonal = torch.randn(n, p, generator=generator, dtype=torch.float64) * scales
    shared = torch.randn(n, 1, generator=generator, dtype=torch.float64)
    correlated = (0.3 * torch.randn(n, p, generator=generator, dtype=torch.float64) + shared) * scales
    assert stats.offdiag_ratio(diagonal) < 0.02
    assert stats.offdiag_ratio(correlated) > 0.5
    null_mean, null_sd = stats.offdiag_null(diagonal, draws=20, seed=0)
    assert abs(stats.offdiag_ratio(diagonal) - null_mean) < 4 * null_sd + 1e-3
    correlated_null_mean, correlated_null_sd = stats.offdiag_null(correlated, draws=20, seed=0)
    assert stats.offdiag_ratio(correlated) > correlated_null_mean + 20 * correlated_null_sd


def test_offdiag_null_reproducible_from_seed():
    Q = torch.randn(50, 3, generator=torch.Generator().manual_seed(13)).exp()  # heavy-tailed
    assert stats.offdiag_null(Q, draws=5, seed=1) == stats.offdiag_null(Q, draws=5, seed=1)
    assert stats.offdiag_null(Q, draws=5, seed=1) != stats.offdiag_null(Q, draws=5, seed=2)
