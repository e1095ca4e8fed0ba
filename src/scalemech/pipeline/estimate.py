"""How long a run will take, said before it starts (``snakemake -n`` prints it).

Each computing job of the config (data preparation and the per-model steps) is looked up by
step and job name in the runtime records of a finished run (``tables/runtime.csv``): this
machine's own records of the run first, then the reference records that ``make docs`` ships in
``docs/<run>/runtime.csv``. The estimate sums the recorded wall seconds of the matched jobs and
spreads them over the jobs Snakemake runs at once (``cores // threads``):

    wall ≈ Σ_matched wall_j / ⌊cores / threads⌋   (perfect packing: a lower bound)

Jobs with no record (another grid, another model) are counted and named by step, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Estimate:
    """The recorded wall seconds of the planned jobs that have a record, and the ones that have none."""

    matched_seconds: float
    matched: int
    unmatched: dict[str, int]  # step -> jobs without a record
    source: str  # which records

    def line(self, cores: int, threads: int, cluster_jobs: int | None = None) -> str:
        """One line for the terminal: the estimate on ``cores`` with ``threads`` per job, or with
        ``cluster_jobs`` jobs at once on a cluster (each on its own CPUs)."""
        total = self.matched + sum(self.unmatched.values())
        if not self.matched:
            return (
                f"estimated run time: cannot estimate, none of the {total} computing jobs has a record "
                f"({self.source}); a finished run of this config records them in tables/runtime.csv"
            )
        at_once = cluster_jobs or max(1, cores // max(1, threads))
        where = (
            f"with {at_once} cluster jobs at once" if cluster_jobs else f"on {cores} cores ({at_once} job(s) at once"
        )
        text = (
            f"estimated run time: {self.matched_seconds / at_once / 60:.0f} min {where}"
            f"{'' if cluster_jobs else ')'}; {self.matched} of {total} computing jobs recorded in {self.source}, "
            f"{self.matched_seconds / 60:.0f} min of job time"
        )
        if self.unmatched:
            missing = ", ".join(f"{step} {count}" for step, count in sorted(self.unmatched.items()))
            text += f"; not counted, no record: {missing}"
        return text


def planned_jobs(datasets: Iterable[str], per_step: dict[str, Sequence[str]]) -> list[tuple[str, str]]:
    """``(step, job)`` of every computing job: ``data``/<dataset> and each step's ``<dataset>/<model>``."""
    return [("data", dataset) for dataset in sorted(datasets)] + [
        (step, key) for step, keys in per_step.items() for key in keys
    ]


def read_records(paths: Sequence[str | Path]) -> tuple[pd.DataFrame, str]:
    """The first existing runtime table of ``paths`` and its path ("no records" when none exists)."""
    for path in map(Path, paths):
        if path.is_file():
            return pd.read_csv(path), str(path)
    return pd.DataFrame(columns=["step", "job", "wall_seconds"]), "no records"


def estimate(jobs: Sequence[tuple[str, str]], records: pd.DataFrame, source: str) -> Estimate:
    """Match ``jobs`` to ``records`` (columns step, job, wall_seconds) and sum what matched."""
    recorded = dict(zip(zip(records["step"], records["job"]), records["wall_seconds"]))
    unmatched: dict[str, int] = {}
    matched_seconds, matched = 0.0, 0
    for step, job in jobs:
        if (step, job) in recorded:
            matched_seconds, matched = matched_seconds + float(recorded[step, job]), matched + 1
        else:
            unmatched[step] = unmatched.get(step, 0) + 1
    return Estimate(matched_seconds, matched, unmatched, source)
