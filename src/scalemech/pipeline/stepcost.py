"""Each step's cost in a run against a recorded run: ``benchmarks/bench_steps.py`` prints it.

Both runs are ``runtime`` tables (one row per job). Per step: jobs, CPU seconds and job wall seconds
summed over its jobs, and ``cpu_ratio`` = this run's CPU / the recorded run's (NaN where a step is
new or gone). CPU counted by Snakemake's sampling (``cpu_from`` "benchmark", or a table older than
the column) misses up to 30 s per job: ``cpu_counted_by`` says which count each run holds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = ["jobs", "cpu_seconds", "wall_seconds"]


def per_step(runtime: pd.DataFrame) -> pd.DataFrame:
    """One row per step: ``jobs``, ``cpu_seconds``, ``wall_seconds`` (sums over its jobs), ``cpu_counted_by``."""
    counted = runtime.get("cpu_from", pd.Series("benchmark", index=runtime.index)).fillna("benchmark")
    frame = runtime.assign(jobs=1, cpu_counted_by=counted)
    sums = frame.groupby("step")[COLUMNS].sum()
    return sums.join(frame.groupby("step")["cpu_counted_by"].agg(lambda c: "/".join(sorted(set(c)))))


def against(current: pd.DataFrame, recorded: pd.DataFrame) -> pd.DataFrame:
    """``per_step`` of both runs side by side (suffixes ``_now``, ``_before``), with ``cpu_ratio``, the
    steps by this run's CPU, largest first, and a ``total`` row."""
    now, before = per_step(current), per_step(recorded)
    table = now.add_suffix("_now").join(before.add_suffix("_before"), how="outer")
    numeric = [f"{c}{s}" for c in COLUMNS for s in ("_now", "_before")]
    table.loc["total", numeric] = table[numeric].sum()
    table[["jobs_now", "jobs_before"]] = table[["jobs_now", "jobs_before"]].fillna(0).astype(int)
    table["cpu_ratio"] = table["cpu_seconds_now"] / table["cpu_seconds_before"].replace(0, np.nan)
    order = table.drop(index="total").sort_values("cpu_seconds_now", ascending=False).index.tolist()
    return table.loc[[*order, "total"]]


def recorded_runtime(run: str, root: Path = Path(".")) -> tuple[Path, Path]:
    """``(this run, the recorded run)``: ``results/<run>/tables/runtime.csv`` against ``docs/<run>/runtime.csv``
    (what ``make docs`` recorded), or, once ``make docs`` has recorded this very run, against
    ``docs/<run>/previous/runtime.csv`` (the run recorded before it)."""
    current, recorded = root / f"results/{run}/tables/runtime.csv", root / f"docs/{run}/runtime.csv"
    if not current.is_file():
        current = recorded
    if current == recorded or current.read_bytes() == recorded.read_bytes():
        recorded = root / f"docs/{run}/previous/runtime.csv"
    for path in (current, recorded):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no runtime table (make reproduce writes it, make docs records it)")
    return current, recorded
