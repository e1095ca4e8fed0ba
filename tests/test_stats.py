"""Tests of scalemech.stats against brute force, Monte Carlo and known population moments."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scalemech import stats
from scalemech.core import tables
from scalemech.stats import covariance, grams, misalignment, moments


def gaussian_rows(
    n: int | tuple[int, ...], mu: torch.Tensor, chol: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """``n`` rows of ``N(mu, chol cholᵀ)``, float64 (leading batch axes of ``n`` allowed)."""
    shape = (n,) if isinstance(n, int) else n
    noise = torch.randn(*shape, len(mu), generator=generator, dtype=torch.float64)
    return mu + noise @ chol.T


def population(mu: torch.Tensor, chol: torch.Tensor) -> dict[str, float]:
    """Exact moments of N(mu, chol cholᵀ)."""
    sigma = chol @ chol.T
    mu_sq = (mu @ mu).item()
    return {
        "mu_sq": mu_sq,
        "mu_four": mu_sq**2,
        "mu_sigma_mu": (mu @ sigma @ mu).item(),
        "tr_sigma_sq": (sigma * sigma).sum().item(),
    }


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
    for order, term in [
        (2, lambda i, j: g[i][j]),
        (2, lambda i, j: g[i][j] ** 2),
        (3, lambda i, j, k: g[i][j] * g[i][k]),
        (4, lambda i, j, k, m: g[i][j] * g[k][m]),
    ]:
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
    estimates = moments._estimates(stats.u_statistics(Q @ Q.transpose(-1, -2)))  # (trials, 7)
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
    for other in [
        stats.alignment_stats(rows, chunk_size=4),
        stats.alignment_stats(iter(rows.split(3))),
        stats.alignment_stats(np.load(tmp_path / "q.npy", mmap_mode="r"), chunk_size=8),
        stats.alignment_stats(block.numpy() for block in rows.split(5)),
    ]:
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
    row = {**stats.table_row(estimate, intervals), **stats.upper_bounds(G)}
    dalign_columns = tables.columns("dalign")
    assert {c for c in dalign_columns if c.startswith(("d_", "mu_", "tr_", "n", "dim"))} <= set(row)
    assert row["d_align"] <= row["d_align_ucb"] and row["d_2"] <= row["d_2_ucb"] and row["mu_sq"] <= row["mu_sq_ucb"]


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


# ----------------------------------------------------------------------------- two-sample certificate


@pytest.fixture
def two_populations() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Train (μ_tr, chol_tr) and test (μ_te, chol_te) with different means and covariances, μ_trᵀμ_te > 0."""
    mu_tr = torch.tensor([0.8, -0.3, 0.5], dtype=torch.float64)
    chol_tr = torch.tensor([[1.0, 0.0, 0.0], [0.7, 0.6, 0.0], [-0.4, 0.3, 0.9]], dtype=torch.float64)
    mu_te = torch.tensor([0.5, 0.2, 0.9], dtype=torch.float64)
    chol_te = torch.tensor([[1.5, 0.0, 0.0], [-0.2, 0.8, 0.0], [0.3, 0.5, 0.4]], dtype=torch.float64)
    return mu_tr, chol_tr, mu_te, chol_te


def two_sample_truth(mu_tr, chol_tr, mu_te, chol_te) -> stats.TwoSampleStats:
    return stats.TwoSampleStats.from_moments(mu_tr, chol_tr @ chol_tr.T, mu_te, chol_te @ chol_te.T)


def student_rows(
    n: tuple[int, ...], mu: torch.Tensor, chol: torch.Tensor, generator: torch.Generator, df: int = 3
) -> torch.Tensor:
    """Multivariate Student-t rows (df degrees of freedom) scaled to mean mu, covariance chol cholᵀ."""
    z = torch.randn(*n, len(mu), generator=generator, dtype=torch.float64)
    chi2 = (torch.randn(*n, 1, df, generator=generator, dtype=torch.float64) ** 2).sum(-1)  # (*n, 1)
    return mu + (z / (chi2 / df).sqrt() * math.sqrt((df - 2) / df)) @ chol.T


def test_two_sample_u_statistics_equal_brute_force():
    """Each estimate equals its translation-free kernel averaged over distinct (i≠k train, j≠l test) indices."""
    generator = torch.Generator().manual_seed(20)
    Q_tr = torch.randn(7, 3, generator=generator, dtype=torch.float64) + 0.4
    Q_te = torch.randn(6, 3, generator=generator, dtype=torch.float64) - 0.2
    c = (Q_tr @ Q_te.T).tolist()
    sums = dict.fromkeys(stats.TWO_SAMPLE_FIELDS, 0.0)
    tuples = 0
    for (i, k), (j, m) in itertools.product(itertools.permutations(range(7), 2), itertools.permutations(range(6), 2)):
        sums["mu_cross"] += c[i][j]
        sums["mu_cross_sq"] += c[i][j] * c[k][m]
        # ½ (q_i-q_k)ᵀr_j (q_i-q_k)ᵀr_l and its mirror; ¼((q_i-q_k)ᵀ(r_j-r_l))²
        sums["mu_te_sigma_tr_mu_te"] += (c[i][j] - c[k][j]) * (c[i][m] - c[k][m]) / 2
        sums["mu_tr_sigma_te_mu_tr"] += (c[i][j] - c[i][m]) * (c[k][j] - c[k][m]) / 2
        sums["tr_sigma_tr_sigma_te"] += (c[i][j] - c[i][m] - c[k][j] + c[k][m]) ** 2 / 4
        tuples += 1
    estimate = stats.TwoSampleStats.from_grams(Q_tr @ Q_tr.T, Q_te @ Q_te.T, Q_tr @ Q_te.T)
    assert (estimate.n_train, estimate.n_test) == (7, 6)
    for name in stats.TWO_SAMPLE_FIELDS:
        assert getattr(estimate, name) == pytest.approx(sums[name] / tuples, rel=1e-10, abs=1e-12), name
    swapped = stats.TwoSampleStats.from_cross(Q_te @ Q_tr.T)  # train <-> test swaps the two quadratic forms
    assert swapped.mu_te_sigma_tr_mu_te == pytest.approx(estimate.mu_tr_sigma_te_mu_tr, rel=1e-12)
    assert swapped.tr_sigma_tr_sigma_te == pytest.approx(estimate.tr_sigma_tr_sigma_te, rel=1e-12)


def test_two_sample_shapes_checked():
    with pytest.raises(ValueError, match="n_train, n_test"):
        stats.TwoSampleStats.from_grams(torch.eye(4), torch.eye(3), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="square"):
        stats.TwoSampleStats.from_grams(torch.zeros(4, 3), torch.eye(3), torch.zeros(4, 3))
    with pytest.raises(ValueError, match=">= 2"):
        stats.TwoSampleStats.from_cross(torch.ones(5, 1))
    with pytest.raises(ValueError, match="M and K"):
        stats.two_sample_certificate(stats.TwoSampleStats(0, 0, 1.0, 1.0, 1.0, 1.0, 1.0), 0, 3)


def test_two_sample_estimates_unbiased(two_populations):
    """Monte Carlo over 20000 pairs of small samples: every mean lies within 4 standard errors of the truth."""
    mu_tr, chol_tr, mu_te, chol_te = two_populations
    trials = 20000
    generator = torch.Generator().manual_seed(21)
    Q_tr = gaussian_rows((trials, 5), mu_tr, chol_tr, generator)
    Q_te = gaussian_rows((trials, 4), mu_te, chol_te, generator)
    estimates = misalignment._two_sample_estimates(Q_tr @ Q_te.transpose(-1, -2))  # (trials, 5)
    truth = two_sample_truth(*two_populations)
    for index, name in enumerate(stats.TWO_SAMPLE_FIELDS):
        values = estimates[:, index]
        z = (values.mean().item() - getattr(truth, name)) / (values.std().item() / math.sqrt(trials))
        assert abs(z) < 4, (name, z)


@pytest.mark.parametrize("M, K", [(1, 1), (2, 5), (8, 3)])
def test_two_sample_variance_matches_simulation(two_populations, M, K):
    """E and Var of μ_Mᵀg_K over fresh Gaussian draws match μ_trᵀμ_te and the three-term variance."""
    mu_tr, chol_tr, mu_te, chol_te = two_populations
    truth, draws = two_sample_truth(*two_populations), 40000
    generator = torch.Generator().manual_seed(22 + M)
    products = (
        gaussian_rows((draws, M), mu_tr, chol_tr, generator).mean(1)
        * gaussian_rows((draws, K), mu_te, chol_te, generator).mean(1)
    ).sum(1)
    assert abs(products.mean().item() - truth.mu_cross) < 4 * products.std().item() / math.sqrt(draws)
    assert products.var().item() == pytest.approx(stats.two_sample_variance(truth, M, K), rel=0.05)


@pytest.mark.parametrize("law", ["gaussian", "student_t3"])
@pytest.mark.parametrize("M, K", [(1, 1), (3, 2), (8, 4)])
def test_two_sample_certificate_valid(two_populations, law, M, K):
    """Empirical P(μ_Mᵀg_K <= 0) over fresh draws stays below the population bound (plus MC slack)."""
    mu_tr, chol_tr, mu_te, chol_te = two_populations
    rows = gaussian_rows if law == "gaussian" else student_rows
    draws = 20000
    generator = torch.Generator().manual_seed(23 + 10 * M + K)
    products = (
        rows((draws, M), mu_tr, chol_tr, generator).mean(1) * rows((draws, K), mu_te, chol_te, generator).mean(1)
    ).sum(1)
    bound = stats.two_sample_certificate(two_sample_truth(*two_populations), M, K)
    assert 0 < bound < 1
    assert (products <= 0).double().mean().item() <= bound + 3 * math.sqrt(bound * (1 - bound) / draws)


@pytest.mark.parametrize("random_side", ["train", "test"])
@pytest.mark.parametrize("other_size", [1, 5])
def test_two_sample_certificate_attained_by_two_point_law(random_side, other_size):
    """Cantelli is sharp: one side ∈ {0, 2} (fair coin), the other constant 1, one row from the random side.

    Then μ_Mᵀg_K ∈ {0, 2}: E = 1, Var = 1, bound 1/2 = P(μ_Mᵀg_K <= 0). A variance term off by any
    factor moves the bound away from the simulated 1/2.
    """
    draws = 40000
    generator = torch.Generator().manual_seed(24)
    coin = 2 * torch.randint(0, 2, (draws,), generator=generator, dtype=torch.float64)  # one random row
    one, spread, fixed = torch.ones(1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64), torch.zeros(1, 1)
    if random_side == "train":  # M = 1 random row, K = other_size constant rows
        truth, M, K = stats.TwoSampleStats.from_moments(one, spread, one, fixed), 1, other_size
    else:
        truth, M, K = stats.TwoSampleStats.from_moments(one, fixed, one, spread), other_size, 1
    bound = stats.two_sample_certificate(truth, M, K)
    assert bound == pytest.approx(0.5, rel=1e-12)
    empirical = (coin <= 0).double().mean().item()
    assert abs(empirical - bound) < 4 * math.sqrt(bound * (1 - bound) / draws)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), dim=st.integers(1, 6), M=st.integers(1, 10**4), K=st.integers(1, 10**4))
def test_two_sample_reduces_to_b_exact_for_one_population(seed, dim, M, K):
    """μ_tr = μ_te, Σ_tr = Σ_te: the two-sample variance and bound are Theorem 1's ``var`` and ``B_exact``."""
    mu, chol = random_population(seed, dim)
    one_sample = stats.certificates(stats.AlignmentStats.from_moments(0, dim, **population(mu, chol)), M, K)
    two_sample = stats.TwoSampleStats.from_moments(mu, chol @ chol.T, mu, chol @ chol.T)
    assert stats.two_sample_variance(two_sample, M, K) == pytest.approx(one_sample.var, rel=1e-10, abs=1e-300)
    assert stats.two_sample_certificate(two_sample, M, K) == pytest.approx(one_sample.b_exact, rel=1e-10)


def test_two_sample_on_split_sample_agrees_with_one_sample(setting):
    """One population, a large sample split into train/test halves: two-sample ≈ one-sample estimates."""
    mu, chol = setting
    Q = gaussian_rows(2000, mu, chol, torch.Generator().manual_seed(25))
    one = stats.stats_from_gram(Q @ Q.T, 3)
    two = stats.TwoSampleStats.from_grams(Q[:1000] @ Q[:1000].T, Q[1000:] @ Q[1000:].T, Q[:1000] @ Q[1000:].T)
    assert two.mu_cross == pytest.approx(one.mu_sq, rel=0.01)
    assert two.mu_cross_sq == pytest.approx(one.mu_four, rel=0.01)
    assert two.tr_sigma_tr_sigma_te == pytest.approx(one.tr_sigma_sq, rel=0.01)
    # each one-sided quadratic form is noisier (one sample's mean against the other's spread); their average is not
    assert two.mu_te_sigma_tr_mu_te == pytest.approx(one.mu_sigma_mu, rel=0.1)
    assert two.mu_tr_sigma_te_mu_tr == pytest.approx(one.mu_sigma_mu, rel=0.1)
    assert (two.mu_te_sigma_tr_mu_te + two.mu_tr_sigma_te_mu_tr) / 2 == pytest.approx(one.mu_sigma_mu, rel=0.01)
    for M, K in [(1, 1), (4, 8), (32, 32)]:
        assert stats.two_sample_certificate(two, M, K) == pytest.approx(stats.certificates(one, M, K).b_exact, abs=0.01)


def test_two_sample_certificate_uses_unbiased_e_squared():
    """The bound takes E² from ``mu_cross_sq`` (W, unbiased), not ``mu_cross²`` (biased up by Var V1)."""
    estimate = stats.TwoSampleStats(
        10,
        10,
        mu_cross=1.0,
        mu_te_sigma_tr_mu_te=1.0,
        mu_tr_sigma_te_mu_tr=0.5,
        tr_sigma_tr_sigma_te=2.0,
        mu_cross_sq=0.8,
    )
    var = 1.0 / 2 + 0.5 / 4 + 2.0 / 8
    assert stats.two_sample_variance(estimate, 2, 4) == pytest.approx(var, rel=1e-15)
    assert stats.two_sample_certificate(estimate, 2, 4) == pytest.approx(var / (var + 0.8), rel=1e-15)


def test_two_sample_no_certificate_cases(two_populations):
    mu_tr, chol_tr, mu_te, chol_te = two_populations
    opposed = stats.TwoSampleStats.from_moments(mu_tr, chol_tr @ chol_tr.T, -mu_te, chol_te @ chol_te.T)
    assert opposed.mu_cross < 0 and math.isnan(stats.two_sample_certificate(opposed, 4, 4))
    orthogonal = stats.TwoSampleStats.from_moments(
        mu_tr, chol_tr @ chol_tr.T, torch.zeros(3, dtype=torch.float64), chol_te @ chol_te.T
    )
    assert math.isnan(stats.two_sample_certificate(orthogonal, 4, 4))  # E = 0
    undetected = stats.TwoSampleStats(10, 10, 0.1, 1.0, 1.0, 1.0, -0.01)  # E > 0 but the E² estimate < 0
    assert math.isnan(stats.two_sample_certificate(undetected, 4, 4))
    no_spread = stats.TwoSampleStats.from_cross(torch.full((5, 4), 0.3, dtype=torch.float64))  # constant rows
    assert stats.two_sample_variance(no_spread, 3, 3) == pytest.approx(0, abs=1e-15)
    assert math.isnan(stats.two_sample_certificate(no_spread, 3, 3))
    assert math.isnan(stats.two_sample_certificate(stats.TwoSampleStats(0, 0, math.nan, 1.0, 1.0, 1.0, 1.0), 2, 2))


# ----------------------------------------------------------------------------- unbiased off-diagonal energy (D1)


def test_offdiag_energy_equals_brute_force():
    """Both energies equal ¼-kernels of differences averaged over distinct (i, j, k, l); shifts do not matter."""
    generator = torch.Generator().manual_seed(26)
    Q = (
        torch.randn(7, 3, generator=generator, dtype=torch.float64)
        @ torch.randn(3, 3, generator=generator, dtype=torch.float64)
        + 0.5
    )
    total = offdiag = 0.0
    tuples = list(itertools.permutations(range(7), 4))
    for i, j, k, m in tuples:
        a, b = Q[i] - Q[k], Q[j] - Q[m]
        total += (a @ b).item() ** 2 / 4  # ¼((q_i-q_k)ᵀ(q_j-q_l))², E = tr Σ²
        offdiag += ((torch.outer(a, a) * torch.outer(b, b)).sum() - ((a * b) ** 2).sum()).item() / 4  # k≠m terms
    got_offdiag, got_total = stats.offdiag_energy(Q)
    assert got_total == pytest.approx(total / len(tuples), rel=1e-10)
    assert got_offdiag == pytest.approx(offdiag / len(tuples), rel=1e-10)
    assert got_total == pytest.approx(stats.stats_from_gram(Q @ Q.T, 3).tr_sigma_sq, rel=1e-10)
    assert stats.offdiag_energy(Q + 100.0) == pytest.approx((got_offdiag, got_total), rel=1e-8)
    assert stats.offdiag_ratio_unbiased(Q) == pytest.approx(got_offdiag / got_total, rel=1e-12)
    with pytest.raises(ValueError, match="n >= 4"):
        stats.offdiag_energy(Q[:3])


def test_offdiag_energy_unbiased(setting):
    """Monte Carlo (20000 samples of n = 6): both energies' means lie within 4 standard errors of the truth."""
    mu, chol = setting
    trials = 20000
    sigma = chol @ chol.T
    truth = [(sigma**2).sum().item() - (sigma.diagonal() ** 2).sum().item(), (sigma**2).sum().item()]
    energies = covariance._offdiag_energies(gaussian_rows((trials, 6), mu, chol, torch.Generator().manual_seed(27)))
    for index, name in enumerate(["offdiag", "total"]):
        values = energies[:, index]
        z = (values.mean().item() - truth[index]) / (values.std().item() / math.sqrt(trials))
        assert abs(z) < 4, (name, z)


def test_offdiag_ratio_unbiased_near_zero_for_diagonal_population_at_p_equal_n():
    """Diagonal Gaussian, p = n = 64: the plug-in ratio sits near 0.5, the unbiased one near 0."""
    reps, n = 40, 64
    generator = torch.Generator().manual_seed(28)
    Q = torch.randn(reps, n, n, generator=generator, dtype=torch.float64) + 1.0  # (reps, n, p), Σ = I
    energies = covariance._offdiag_energies(Q)
    ratios = energies[:, 0] / energies[:, 1]
    for values in (energies[:, 0], ratios):
        assert abs(values.mean().item()) < 4 * values.std().item() / math.sqrt(reps)
    assert stats.offdiag_ratio_unbiased(Q[0]) == pytest.approx(ratios[0].item(), rel=1e-10)
    plug_in = torch.tensor([stats.offdiag_ratio(q) for q in Q])
    assert 0.4 < plug_in.mean().item() < 0.6  # ≈ p(p-1)/n / (p(p-1)/n + p) = 63/127


def test_offdiag_null_unbiased_separates_diagonal_from_correlated():
    generator = torch.Generator().manual_seed(29)
    n, p = 64, 32
    diagonal = torch.randn(n, p, generator=generator, dtype=torch.float64)
    correlated = 0.5 * torch.randn(n, p, generator=generator, dtype=torch.float64) + torch.randn(
        n, 1, generator=generator, dtype=torch.float64
    )
    null_mean, null_sd = stats.offdiag_null_unbiased(diagonal, draws=20, seed=0)
    assert abs(null_mean) < 4 * null_sd / math.sqrt(20) + 1e-3  # the permutation null is centred at 0
    assert abs(stats.offdiag_ratio_unbiased(diagonal) - null_mean) < 4 * null_sd
    correlated_mean, correlated_sd = stats.offdiag_null_unbiased(correlated, draws=20, seed=0)
    assert stats.offdiag_ratio_unbiased(correlated) > correlated_mean + 20 * correlated_sd
    first = stats.offdiag_null_unbiased(diagonal, draws=5, seed=1)
    assert stats.offdiag_null_unbiased(diagonal, draws=5, seed=1) == first
    assert stats.offdiag_null_unbiased(diagonal, draws=5, seed=2) != first


@pytest.mark.parametrize("kind", ["float32", "float64", "float16 memmap", "numpy float32"])
@pytest.mark.parametrize("chunk_bytes,chunk_size", [(None, 8192), (8 * 11 * 3, 8192), (None, 5), (8 * 11 * 2, 1)])
def test_cross_gram_equals_plain_product(kind, chunk_bytes, chunk_size, tmp_path, monkeypatch):
    if chunk_bytes is not None:  # force several chunks (3 or 1 column(s)), the last one narrower
        monkeypatch.setattr(grams, "_CHUNK_BYTES", chunk_bytes)
        monkeypatch.setattr(grams, "_MIN_CHUNK_COLUMNS", 1)
    generator = torch.Generator().manual_seed(31)
    a64 = torch.randn(6, 23, dtype=torch.float64, generator=generator) + 0.1
    b64 = torch.randn(5, 23, dtype=torch.float64, generator=generator) - 0.2
    if kind == "float16 memmap":
        a64, b64 = a64.half().double(), b64.half().double()  # what the stored pool holds

    def stored(x, name):
        if kind == "float32":
            return x.float()
        if kind == "float64":
            return x
        if kind == "numpy float32":
            return x.float().numpy()
        memmap = np.lib.format.open_memmap(tmp_path / f"{name}.npy", mode="w+", dtype=np.float16, shape=tuple(x.shape))
        memmap[:] = x.numpy()
        memmap.flush()
        return np.load(tmp_path / f"{name}.npy", mmap_mode="r")

    a, b = stored(a64, "a"), stored(b64, "b")
    if kind in ("float32", "numpy float32"):
        a64, b64 = a64.float().double(), b64.float().double()
    for got, want in [
        (stats.cross_gram(a, b, chunk_size), a64 @ b64.T),
        (stats.cross_gram(a, None, chunk_size), a64 @ a64.T),
        *zip(stats.cross_grams(a, [None, b, None], chunk_size), [a64 @ a64.T, a64 @ b64.T, a64 @ a64.T]),
    ]:
        assert got.dtype == torch.float64 and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)
    with pytest.raises(ValueError, match="chunk_size"):
        stats.cross_gram(a, b, 0)


def test_cross_gram_chunk_is_bounded():
    assert grams._chunk_columns(1024, 8192) * 8 * 1024 <= grams._CHUNK_BYTES  # a (1024 × c) float64 chunk
    assert grams._chunk_columns(4, 8192) == 8192 and grams._chunk_columns(10**9, 8192) == grams._MIN_CHUNK_COLUMNS


# ----------------------------------------------------------------------------- upper confidence bounds


def correlated_factor(dim: int, seed: int) -> torch.Tensor:
    """A lower-triangular covariance factor with correlated coordinates."""
    noise = torch.randn(dim, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.eye(dim, dtype=torch.float64) + 0.3 * noise.tril(-1)


@pytest.mark.parametrize("mu_scale", [0.0, 0.05, 0.2, 0.5])  # null, weak, moderate, strong signal
def test_upper_bounds_cover_known_d2(mu_scale):
    """On Gaussian rows with known ‖μ‖², d_2, d_align, each 95 % upper bound lies above the truth in >= 93 % of
    replications (500 pools of n = 100, D = 16), from no signal (d_2 = 0) to a strong one."""
    dim, n, reps = 16, 100, 500
    chol = correlated_factor(dim, 0)
    mu = torch.full((dim,), mu_scale, dtype=torch.float64)
    truth = stats.AlignmentStats.from_moments(0, dim, **population(mu, chol))
    d_align = truth.d_align if mu_scale else 0.0
    rows = gaussian_rows((reps, n), mu, chol, torch.Generator().manual_seed(int(mu_scale * 100)))
    bounds = [stats.upper_bounds(Q @ Q.T) for Q in rows]
    coverage = {
        "mu_sq": np.mean([b["mu_sq_ucb"] >= truth.mu_sq for b in bounds]),
        "d_2": np.mean([b["d_2_ucb"] >= (truth.d_2 if mu_scale else 0.0) for b in bounds]),
        "d_align": np.mean([b["d_align_ucb"] >= d_align for b in bounds]),
    }
    assert min(coverage.values()) >= 0.93, coverage


def test_upper_bounds_tighten_with_n_and_use_jackknife_se(setting):
    """The bounds sit above the estimates and shrink towards the truth as n grows; the se columns are the
    jackknife's."""
    mu, chol = setting
    generator = torch.Generator().manual_seed(5)
    small, large = (gaussian_rows(n, mu, chol, generator) for n in (50, 2000))
    G = small @ small.T
    bounds, estimate = stats.upper_bounds(G), stats.stats_from_gram(G, 3)
    se = dict(zip(stats.FIELDS, stats.jackknife_se(G).tolist()))
    assert bounds["mu_sq_se"] == se["mu_sq"] and bounds["d_2_se"] == se["d_2"] and bounds["d_align_se"] == se["d_align"]
    assert bounds["mu_sq_ucb"] > estimate.mu_sq and bounds["d_2_ucb"] > estimate.d_2
    truth = stats.AlignmentStats.from_moments(0, 3, **population(mu, chol))
    assert stats.upper_bounds(large @ large.T)["d_2_ucb"] - truth.d_2 < bounds["d_2_ucb"] - truth.d_2


def test_two_sample_jackknife_matches_brute_force(two_populations):
    """The O(nm) delete-one values equal the estimates recomputed without each train row and each test row."""
    mu_tr, chol_tr, mu_te, chol_te = two_populations
    generator = torch.Generator().manual_seed(6)
    Q_tr, Q_te = gaussian_rows(7, mu_tr, chol_tr, generator), gaussian_rows(6, mu_te, chol_te, generator)
    C = Q_tr @ Q_te.T
    jack = stats.TwoSampleBounds.from_cross(C)
    keep = lambda n, i: [k for k in range(n) if k != i]  # noqa: E731
    rows = torch.stack([misalignment._two_sample_estimates(C[keep(7, i)]) for i in range(7)])
    cols = torch.stack([misalignment._two_sample_estimates(C[:, keep(6, j)]) for j in range(6)])
    torch.testing.assert_close(jack.without_train_row, rows)
    torch.testing.assert_close(jack.without_test_row, cols)


def test_two_sample_bounds_cover(two_populations):
    """Over 600 pairs of pools (n = 60 train, 50 test rows): the 90 % interval of E = μ_trᵀμ_te covers it in about
    90 % of pairs, and the 95 % upper bound of the certificate lies above the population certificate in >= 93 %."""
    mu_tr, chol_tr, mu_te, chol_te = two_populations
    mu_tr, mu_te = 0.3 * mu_tr, 0.3 * mu_te  # a weak signal: E's interval often reaches 0
    truth = two_sample_truth(mu_tr, chol_tr, mu_te, chol_te)
    generator = torch.Generator().manual_seed(7)
    reps, (M, K) = 600, (4, 8)
    covered, certified = 0, 0
    for _ in range(reps):
        C = gaussian_rows(60, mu_tr, chol_tr, generator) @ gaussian_rows(50, mu_te, chol_te, generator).T
        jack = stats.TwoSampleBounds.from_cross(C)
        _, lo, hi = jack.mu_cross_interval(0.9)
        covered += lo <= truth.mu_cross <= hi
        certified += jack.certificate_ucb(M, K) >= stats.two_sample_certificate(truth, M, K)
    assert 0.86 <= covered / reps <= 0.94
    assert certified / reps >= 0.93


def test_certificate_ucb_trivial_without_signal():
    """An E whose lower bound is <= 0 certifies nothing: the bound is 1, never below the plug-in."""
    generator = torch.Generator().manual_seed(8)
    Q_tr, Q_te = (torch.randn(n, 5, generator=generator, dtype=torch.float64) for n in (40, 30))
    C = Q_tr @ Q_te.T
    assert stats.TwoSampleBounds.from_cross(C).certificate_ucb(4, 4) == 1.0
