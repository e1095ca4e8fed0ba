"""Snakemake run by the tests as a user runs it: a subprocess on the repository's Snakefile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def snakemake(
    *args: str,
    cwd: Path = ROOT,
    timeout: int = 600,
    env: dict[str, str] | None = None,
    snakefile: Path = ROOT / "Snakefile",
) -> subprocess.CompletedProcess:
    """``snakemake args`` on ``snakefile`` in ``cwd``, its output captured, ``env`` on top of this process'
    environment."""
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
    )
