"""W5 timing table: the covariance baseline computes what it claims, and the table is well formed."""

import numpy as np
import pytest
import torch
from scipy import stats as scipy_stats

from scalemech.core.tables import check_columns
from scalemech.stats.cost import cost_table, covariance_moments, ratio_interval


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
    table = check_columns(cost_table([64, 16, 64], n=12, max_covariance_mb=1, repeats=3), "benchmarks")
    assert list(table["dim"]) == [16, 64] and (table["repeats"] == 3).all()  # each measured D once
    assert (table["gram_seconds"] > 0).all() and (table["covariance_seconds"] > 0).all()
    lo, ratio, hi = (table[f"gram_over_cov_time{end}"] for end in ("_lo", "", "_hi"))
    assert ((0 < lo) & (lo <= ratio) & (ratio <= hi)).all()
    assert table["covariance_bytes"].tolist() == [4 * 16**2, 4 * 64**2]


def test_the_ratio_interval_is_the_t_interval_of_the_log_ratios() -> None:
    gram, covariance = np.array([1.0, 2.0, 4.0, 2.0]), np.array([2.0, 2.0, 2.0, 1.0])
    logs = np.log(gram / covariance)
    lo, hi = scipy_stats.t.interval(0.95, 3, loc=logs.mean(), scale=scipy_stats.sem(logs))
    assert ratio_interval(gram, covariance) == pytest.approx((np.exp(logs.mean()), np.exp(lo), np.exp(hi)))
    with pytest.raises(ValueError, match="repeats 2"):
        cost_table([16], n=8, max_covariance_mb=1, repeats=2)


def test_covariance_beyond_the_memory_cap_is_not_formed() -> None:
    table = cost_table([16, 1024], n=8, max_covariance_mb=1)  # 1024² float32 = 4 MiB > 1 MiB
    assert table["covariance_seconds"].isna().tolist() == [False, True]
    assert table.loc[1, ["gram_over_cov_time", "gram_over_cov_time_lo", "gram_over_cov_time_hi"]].eq(0.0).all()
