"""Cross-Gram draws against direct means; empirical misalignment against the true-moment certificate."""

import math

import pandas as pd
import pytest
import torch

import scalemech.experiments.misalign as misalign_module
from scalemech.core.seeding import derive_seed
from scalemech.core.tables import check_columns
from scalemech.experiments.misalign import (
    block_means,
    misalignment,
    misalignment_draws,
    ordered_subsets,
    wilson_interval,
)
from scalemech.gradients.pools import GradientPool, pool_path
from scalemech.stats import (
    AlignmentStats,
    TwoSampleStats,
    alignment_stats,
    certificates,
    two_sample_certificate,
    two_sample_variance,
)


def _direct(Q_train, Q_test, rows, cols, M, K):
    """μ_Mᵀ g_K of each draw from the gradient rows themselves."""
    return torch.stack([Q_train[r[:M]].mean(0) @ Q_test[c[:K]].mean(0) for r, c in zip(rows, cols)])


@pytest.mark.parametrize("n_train,n_test,Ms,Ks", [(30, 20, [1, 4, 9], [2, 5]), (12, 40, [3, 12], [1, 7, 30])])
def test_block_means_equal_direct_computation(n_train, n_test, Ms, Ks):
    generator = torch.Generator().manual_seed(0)
    Q_train = torch.randn(n_train, 6, dtype=torch.float64, generator=generator) + 0.3
    Q_test = torch.randn(n_test, 6, dtype=torch.float64, generator=generator) + 0.3
    rows = ordered_subsets(25, n_train, Ms[-1], generator)
    cols = ordered_subsets(25, n_test, Ks[-1], generator)
    assert all(len(set(r.tolist())) == Ms[-1] for r in rows)  # without replacement
    values = block_means(Q_train @ Q_test.T, rows, cols, Ms, Ks)
    for a, M in enumerate(Ms):
        for b, K in enumerate(Ks):
            torch.testing.assert_close(values[:, a, b], _direct(Q_train, Q_test, rows, cols, M, K))


def test_prefixes_of_ordered_subsets_are_uniform():
    counts = torch.bincount(ordered_subsets(20_000, 5, 5, torch.Generator().manual_seed(1))[:, 0], minlength=5)
    assert (counts - 4000).abs().max() < 5 * math.sqrt(20_000 * 0.2 * 0.8)


def test_wilson_interval_solves_its_defining_quadratic():
    z = 1.959963984540054
    for k, n in [(0, 50), (7, 50), (50, 50), (3, 10_000)]:
        lo, hi = wilson_interval(k, n)
        p_hat = k / n
        assert lo <= p_hat <= hi
        for bound in (lo, hi):  # (p̂ − p)² = z² p (1 − p) / n at both ends
            assert (p_hat - bound) ** 2 == pytest.approx(z * z * bound * (1 - bound) / n, abs=1e-12)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)


def _gaussian(n, mu, L, generator):
    return mu + torch.randn(n, len(mu), dtype=torch.float64, generator=generator) @ L.T


def test_gaussian_misalignment_stays_below_true_certificate():
    generator = torch.Generator().manual_seed(2)
    D = 8
    mu = torch.full((D,), 0.5, dtype=torch.float64)
    L = torch.randn(D, D, dtype=torch.float64, generator=generator) / math.sqrt(D)
    sigma = L @ L.T
    truth = AlignmentStats.from_moments(
        0, D, float(mu @ mu), float(mu @ mu) ** 2, float(mu @ sigma @ mu), float(torch.trace(sigma @ sigma))
    )
    Q_train, Q_test = _gaussian(3000, mu, L, generator), _gaussian(3000, mu, L, generator)
    grid = [(1, 1), (2, 3), (4, 4), (10, 5)]
    draws = 20_000
    values = misalignment_draws(Q_train @ Q_test.T, grid, draws, seed=3)
    for M, K in grid:
        p = float((values[M, K] <= 0).double().mean())
        bound = certificates(truth, M, K)
        assert 0 < bound.b_exact <= bound.b_align
        assert p <= bound.b_exact + 4 * math.sqrt(bound.b_exact * (1 - bound.b_exact) / draws)
        assert values[M, K].mean().item() == pytest.approx(truth.mu_sq, abs=6 * math.sqrt(bound.var / draws))
        assert values[M, K].var().item() == pytest.approx(bound.var, rel=0.15)  # Paper W's variance formula
    assert float((values[1, 1] <= 0).double().mean()) > 0.05  # the test is not vacuous


def test_misalignment_table_from_pools(tmp_path):
    generator = torch.Generator().manual_seed(4)
    split_rows = {
        "train": torch.randn(40, 5, dtype=torch.float64, generator=generator) + 0.2,
        "test": torch.randn(30, 5, dtype=torch.float64, generator=generator) + 0.2,
    }
    for split, rows in split_rows.items():
        writer = GradientPool.create(
            pool_path(tmp_path, split, "p", "full"), len(rows), 5, "float32", point="p", point_index=3
        )
        writer.write(rows)
        writer.finish()
    keys = {"run": "t", "dataset": "d", "family": "f", "depth": 1, "width": 1.0, "seed": 0, "model": "m"}
    moments = {split: alignment_stats(rows) for split, rows in split_rows.items()}
    dalign = pd.DataFrame(
        [
            {
                "point": "p",
                "view": "full",
                "split": split,
                "n": m.n,
                "dim": m.dim,
                "mu_sq": m.mu_sq,
                "mu_four": m.mu_four,
                "mu_sigma_mu": m.mu_sigma_mu,
                "tr_sigma_sq": m.tr_sigma_sq,
            }
            for split, m in moments.items()
        ]
    )
    table = misalignment(tmp_path, keys, dalign, sizes=[2, 5], draws=500, seed=9, views=["full"])
    check_columns(table, "misalignment")
    assert len(table) == 2 * 2 and (table.point_index == 3).all()
    stored = {split: GradientPool(pool_path(tmp_path, split, "p", "full")).rows() for split in split_rows}
    grid = [(M, K) for M in (2, 5) for K in (2, 5)]
    expected = misalignment_draws(
        stored["train"] @ stored["test"].T, grid, 500, seed=derive_seed(9, "d/m", "p", "full")
    )[2, 5]
    row = table[(table.M == 2) & (table.K == 5)].iloc[0]
    assert row.p_misalign == pytest.approx(float((expected <= 0).double().mean()))
    assert row.p_lo <= row.p_misalign <= row.p_hi and row.b_exact_common <= row.b_align
    assert row.b_align == pytest.approx(certificates(moments["train"], 2, 5).b_align)
    two_sample = TwoSampleStats.from_cross(stored["train"] @ stored["test"].T)
    assert row.mu_cross == pytest.approx(two_sample.mu_cross)
    assert row.b_exact == pytest.approx(two_sample_certificate(two_sample, 2, 5))
    assert row.v_mk == pytest.approx(two_sample_variance(two_sample, 2, 5))


def _brute_force_means(C, rows, cols, Ms, Ks):
    """``(R, len(Ms), len(Ks))``: ``mean(C[rows[r, :M]][:, cols[r, :K]])``, one cell at a time."""
    return torch.tensor(
        [[[C[r[:M]][:, c[:K]].mean().item() for K in Ks] for M in Ms] for r, c in zip(rows, cols)], dtype=torch.float64
    )


@pytest.mark.parametrize("dense_share", [0.0, 0.25, 10.0])  # every segment dense, the default mix, every one sparse
@pytest.mark.parametrize("slab_bytes", [8 * 8, 2**19])  # slabs of 8 columns (the last one padded), or one slab
@pytest.mark.parametrize(
    "n_train,n_test,Ms,Ks", [(30, 21, [1, 4, 9, 30], [2, 5, 21]), (12, 43, [3, 12], [1, 7, 30]), (50, 9, [40], [1, 2])]
)  # the last one sums over columns
def test_block_means_kernels_equal_brute_force(n_train, n_test, Ms, Ks, dense_share, slab_bytes, monkeypatch):
    monkeypatch.setattr(misalign_module, "DENSE_SHARE", dense_share)
    monkeypatch.setattr(misalign_module, "SLAB_BYTES", slab_bytes)
    generator = torch.Generator().manual_seed(11)
    C = torch.randn(n_train, n_test, dtype=torch.float64, generator=generator) + 0.1
    rows, cols = ordered_subsets(17, n_train, Ms[-1], generator), ordered_subsets(17, n_test, Ks[-1], generator)
    torch.testing.assert_close(
        block_means(C, rows, cols, Ms, Ks), _brute_force_means(C, rows, cols, Ms, Ks), rtol=1e-12, atol=1e-12
    )


def test_ordered_subsets_are_uniform_ordered_subsets():
    draws, n = 24_000, 4
    subsets = ordered_subsets(draws, n, 2, torch.Generator().manual_seed(12))
    assert subsets.shape == (draws, 2) and subsets.dtype == torch.int64
    assert ((subsets >= 0) & (subsets < n)).all() and (subsets[:, 0] != subsets[:, 1]).all()
    counts = torch.bincount(subsets[:, 0] * n + subsets[:, 1], minlength=n * n).reshape(n, n)
    expected = draws / (n * (n - 1))  # each of the 12 ordered pairs
    off_diagonal = counts[~torch.eye(n, dtype=torch.bool)]
    assert (off_diagonal - expected).abs().max() < 5 * math.sqrt(expected)
    permutations = ordered_subsets(100, 7, 7, torch.Generator().manual_seed(13))
    assert (permutations.sort(1).values == torch.arange(7)).all()  # size = n: whole permutations
    assert ordered_subsets(3, 5, 0, torch.Generator()).shape == (3, 0)
    with pytest.raises(ValueError, match="size"):
        ordered_subsets(3, 5, 6, torch.Generator())


@pytest.mark.parametrize("grid", [[(2, 3), (9, 3), (9, 14)], [(18, 1), (18, 2)]])  # the second sums over columns
def test_misalignment_draws_follow_the_documented_stream(grid, monkeypatch):
    monkeypatch.setattr(misalign_module, "DRAW_CHUNK", 7)
    C = torch.randn(20, 15, dtype=torch.float64, generator=torch.Generator().manual_seed(14))
    Ms, Ks = sorted({M for M, _ in grid}), sorted({K for _, K in grid})
    values = misalignment_draws(C, grid, 17, seed=5)
    generator = torch.Generator().manual_seed(5)
    chunks = []
    for size in (7, 7, 3):  # per chunk: the rows, then the columns, from one generator
        rows, cols = ordered_subsets(size, 20, Ms[-1], generator), ordered_subsets(size, 15, Ks[-1], generator)
        chunks.append(_brute_force_means(C, rows, cols, Ms, Ks))
    expected = torch.cat(chunks)
    for (M, K), value in values.items():
        torch.testing.assert_close(value, expected[:, Ms.index(M), Ks.index(K)], rtol=1e-12, atol=1e-12)
    again = misalignment_draws(C, grid, 17, seed=5)
    assert all(torch.equal(again[cell], values[cell]) for cell in grid)
