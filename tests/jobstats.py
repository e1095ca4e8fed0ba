"""Snakemake's job-stats table ("job  count" ... "total"), read by the workflow tests and the SLURM check."""

from __future__ import annotations


def planned(output: str) -> dict[str, int]:
    """``{rule: count}`` from the job-stats table Snakemake prints when it plans a run (not its total)."""
    counts, table = {}, False
    for line in output.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            table = True
        elif table and parts and parts[0] == "total":
            break
        elif table and len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    return counts
