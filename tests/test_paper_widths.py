"""W1 at the paper's widths: the E10 width exponent among models ≥ 512 wide, step by step, tested against
Paper W's (3.9 → 9.5: d_align ∝ width^0.50), and F9; not measured on narrower grids. The rule's power
against noise and per-model offsets: tests/test_rules_power.py."""

from __future__ import annotations

import numpy as np
import pandas as pd

from scalemech.core.tables import columns
from scalemech.figures.f9_dalign_at_paper_widths import fig_dalign_paper_widths
from scalemech.report import CONFIRMED, NOT_MEASURED, REFUTED, claims
from scalemech.report.rules.w1_paper import rule_w1_paper

WIDTHS, SEEDS, STEPS, POINTS = [512, 768, 1024, 1536, 2048, 3072], [0, 1], [0, 1, 2, 4], [0, 1]
DRAWS = 20


def trajectory(slope: float, seed: int, widths=WIDTHS, se: float = 1.0) -> pd.DataFrame:
    """E10 rows (train split, full view): d_align = 4 + slope·log₂(w/512) at step 0, halving each step,
    plus noise of sd ``se`` (halving too)."""
    rng = np.random.default_rng(seed)
    rows = []
    for w in widths:
        for s in SEEDS:
            for k, step in enumerate(STEPS):
                for p in POINTS:
                    scale = 0.5**k
                    d = scale * (4 + slope * np.log2(w / 512) + rng.normal(0, se))
                    rows.append(
                        dict(run="t", dataset="pystdlib", family="llama", depth=2, width=w, seed=s,
                             model=f"llama-d2-w{w}-s{s}", step=step, point=f"layer.{p}", point_index=p, view="full",
                             split="train", n=32, d_align=d, d_align_se=scale * se, d_align_ucb=d + 1.645 * scale * se,
                             d_align_lo=d - 1.96 * scale * se, d_align_hi=d + 1.96 * scale * se)
                    )  # fmt: skip
    return pd.DataFrame(rows)


def verdict_counts(slope: float) -> dict[str, int]:
    counts: dict[str, int] = {}
    for seed in range(DRAWS):
        verdict = rule_w1_paper({"trajectory": trajectory(slope, seed)}).verdict
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def test_the_papers_slope_is_confirmed_and_a_smaller_growth_refuted():
    """2.2 per doubling (the paper's 3.9 → 9.5) confirmed; no growth or a fall refuted: the size is tested."""
    planted, flat, opposite = verdict_counts(2.2), verdict_counts(0.0), verdict_counts(-1.0)
    assert planted.get(CONFIRMED, 0) >= 0.8 * DRAWS and planted.get(REFUTED, 0) <= 3, planted
    assert flat.get(REFUTED, 0) >= 0.8 * DRAWS and flat.get(CONFIRMED, 0) == 0, flat
    assert opposite.get(REFUTED, 0) >= 0.8 * DRAWS and opposite.get(CONFIRMED, 0) == 0, opposite


def test_every_step_is_stated_beside_the_papers_values():
    result = rule_w1_paper({"trajectory": trajectory(2.2, 0)})
    assert result.statistic.startswith("step 0: γ ") and "512 → 3072" in result.statistic
    assert "paper: 3.9 → 9.5, γ ≈ 0.50" in result.statistic
    assert len(result.statistic) <= 260
    for step in STEPS:
        assert f"step {step}: γ " in result.detail


def test_narrow_models_are_not_measured():
    narrow = trajectory(2.2, 0, widths=[32, 64, 128])
    row = claims({"trajectory": narrow}).set_index("claim").loc["W1 at the paper's widths"]
    assert (
        row["verdict"] == NOT_MEASURED and "no trajectory rows at widths ≥ 512 (widths 32, 64, 128)" in row["statistic"]
    )


def test_f9_marks_the_papers_points(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr("scalemech.figures.common._save", lambda fig, *args, **kwargs: drawn.append(fig))
    fig_dalign_paper_widths(trajectory(2.2, 0), pd.DataFrame(columns=columns("verdicts")), tmp_path / "F9.pdf")
    (ax,) = drawn[0].axes
    stars = [line for line in ax.get_lines() if line.get_marker() == "*"]
    assert [tuple(line.get_xdata()) for line in stars] == [(512, 3072)]
    assert {f"step {s}" for s in STEPS} <= set(ax.get_legend_handles_labels()[1])
