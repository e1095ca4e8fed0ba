"""W5 timing table: the covariance baseline computes what it claims, and the table is well formed."""

import numpy as np
import pytest
import torch

from scalemech.core.tables import check_columns
from scalemech.stats.cost import cost_table, covariance_moments


def test_covariance_baseline_equals_numpy() -> None:
    rows = torch.randn(30, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) + 0.3
    q = rows.numpy()
    sigma = np.cov(q, rowvar=False)
    mean = q.mean(0)
    moments = covariance_moments(rows)
    assert moments["mu_sq"] == pytest.approx(mean @ mean)
    assert moments["mu_sigma_mu"] == pytest.approx(mean @ sigma @ mean)
    assert moments["tr_sigma_sq"] == pytest.approx(np.trace(sigma @ sigma))


def test_cost_table_rows() -> None:
    table = check_columns(cost_table([64, 16, 64], n=12, max_covariance_mb=1), "benchmarks")
    assert list(table["dim"]) == [16, 64]  # each measured D once
    assert (table["gram_seconds"] > 0).all() and (table["covariance_seconds"] > 0).all()
    assert table["gram_over_cov_time"].tolist() == pytest.approx(
        (table["gram_seconds"] / table["covariance_seconds"]).tolist()
    )
    assert table["covariance_bytes"].tolist() == [4 * 16**2, 4 * 64**2]


def test_covariance_beyond_the_memory_cap_is_not_formed() -> None:
    table = cost_table([16, 1024], n=8, max_covariance_mb=1)  # 1024² float32 = 4 MiB > 1 MiB
    assert table["covariance_seconds"].isna().tolist() == [False, True]
    assert table["gram_over_cov_time"].iloc[1] == 0.0
