"""Each step's cost against a recorded run (benchmarks/bench_steps.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scalemech.pipeline.stepcost import against, recorded_runtime


def runtime(rows: list[tuple[str, str, float, float]], cpu_from: str | None = "job") -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["step", "job", "wall_seconds", "cpu_seconds"])
    return frame if cpu_from is None else frame.assign(cpu_from=cpu_from)


def test_steps_are_summed_over_jobs_and_compared_with_the_recorded_run() -> None:
    now = runtime([("train", "a", 10, 8), ("train", "b", 10, 12), ("growth", "a", 5, 4), ("report", "-", 1, 1)])
    before = runtime([("train", "a", 30, 30), ("train", "b", 30, 30), ("growth", "a", 20, 16)], cpu_from=None)
    table = against(now, before)
    assert table.index.tolist() == ["train", "growth", "report", "total"]  # by this run's CPU, then the total
    assert table.loc["train", ["jobs_now", "cpu_seconds_now", "cpu_seconds_before"]].tolist() == [2, 20, 60]
    assert table.loc["train", "cpu_ratio"] == pytest.approx(1 / 3) and table.loc["growth", "cpu_ratio"] == 0.25
    assert np.isnan(table.loc["report", "cpu_ratio"]) and table.loc["report", "jobs_before"] == 0  # a new step
    assert table.loc["total", "cpu_seconds_now"] == 25 and table.loc["total", "cpu_seconds_before"] == 76
    assert (
        table.loc["train", "cpu_counted_by_now"] == "job" and table.loc["train", "cpu_counted_by_before"] == "benchmark"
    )


def test_the_recorded_run_is_the_previous_one_once_docs_recorded_this_run(tmp_path: Path) -> None:
    results, docs = tmp_path / "results/quick/tables/runtime.csv", tmp_path / "docs/quick/runtime.csv"
    for path, text in ((results, "a"), (docs, "b"), (tmp_path / "docs/quick/previous/runtime.csv", "c")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert recorded_runtime("quick", tmp_path) == (results, docs)
    docs.write_text("a")  # make docs copied this run
    assert recorded_runtime("quick", tmp_path)[1] == tmp_path / "docs/quick/previous/runtime.csv"
    (tmp_path / "docs/quick/previous/runtime.csv").unlink()
    with pytest.raises(FileNotFoundError, match="previous/runtime.csv: no runtime table"):
        recorded_runtime("quick", tmp_path)
