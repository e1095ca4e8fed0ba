"""Benchmark: each step's CPU seconds in the last run against the recorded run (scalemech.pipeline.stepcost).

``results/<run>/tables/runtime.csv`` (the last ``make reproduce``) against ``docs/<run>/runtime.csv``
(the run ``make docs`` recorded; after ``make docs`` of this run, the one recorded before it). Both
runs' machines are printed: a ratio between different CPUs is the code's change times theirs.

Usage: ``python benchmarks/bench_steps.py [--run quick]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from scalemech.pipeline.stepcost import against, recorded_runtime


def machine(runtime: Path) -> str:
    """The CPU, cores and date of the run record beside a runtime table (``reproduce.json``)."""
    for record in (runtime.parent / "reproduce.json", runtime.parent.parent / "reproduce.json"):
        if record.is_file():
            r = json.loads(record.read_text())
            caps = f", caps {r['kernel_caps']}" if r.get("kernel_caps") else ""
            return f"{r['cpu']}, {r['cores']} cores{caps}, {r['date']}: {r['wall_seconds']:.0f} s wall"
    return "no run record"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="quick")
    args = parser.parse_args()
    current, recorded = recorded_runtime(args.run)
    print(f"now:    {current} ({machine(current)})\nbefore: {recorded} ({machine(recorded)})\n")
    table = against(pd.read_csv(current), pd.read_csv(recorded))
    print(table.to_string(float_format=lambda x: f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"))


if __name__ == "__main__":
    main()
