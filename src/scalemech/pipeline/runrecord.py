"""Run a command and record how long it took and on what machine (``make reproduce`` uses it).

    python -m scalemech.pipeline.runrecord results/quick/reproduce.json -- snakemake --cores all

writes ``{"command", "date", "wall_seconds", "user_cpu_seconds", "system_cpu_seconds", "cpu",
"cores", "kernel_caps", "returncode"}``: wall time of the whole command, and the CPU time of every process it
started (``getrusage(RUSAGE_CHILDREN)``), so the README's numbers come from a run, not a hand.
``kernel_caps``: the variables that cap the instruction set of PyTorch's CPU kernels, when set
(``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2`` runs an AVX-512 machine on AVX2 kernels).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from ..core.machine import machine


def record(command: list[str], out: str | Path) -> int:
    """Run ``command``, write its record to ``out`` (JSON) and return its exit status."""
    start = time.perf_counter()
    returncode = subprocess.call(command)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    entry = {
        "command": " ".join(command),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "wall_seconds": round(time.perf_counter() - start, 1),
        "user_cpu_seconds": round(usage.ru_utime, 1),
        "system_cpu_seconds": round(usage.ru_stime, 1),
        **machine(),
        "returncode": returncode,
    }
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(entry, indent=1) + "\n")
    return returncode


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m scalemech.pipeline.runrecord OUT.json -- COMMAND ...", file=sys.stderr)
        return 2
    return record(args[2:], args[0])


if __name__ == "__main__":
    sys.exit(main())
