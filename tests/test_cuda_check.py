"""``make gpu-check --cpu-only``: every section a CPU can run passes on a fixture CIFAR archive."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scalemech.pipeline.smoke import write_cifar_archive

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(900)
def test_cpu_only_sections_pass(tmp_path: Path) -> None:
    archive = write_cifar_archive(tmp_path, "cifar10")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(ROOT / "benchmarks" / "cuda_check.py"), "--cpu-only", "--cifar", str(archive)]
    done = subprocess.run(command + ["--work", str(tmp_path / "work")], capture_output=True, text=True, env=env)
    lines = {line.split()[0]: line.split()[1] for line in done.stdout.splitlines() if line[:1].isupper()}
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert lines["SYNC"] == "skip" and lines["LLAMA3K"] == "skip"  # CUDA only; the stand-in runs once
    assert {lines[name] for name in ("MEAS", "DET")} == {"ok"}
    assert {lines[name] for name in ("ENV", "CIFAR", "LLAMA", "PACK", "E11")} == {"info"}


def test_worst_handles_infinities_and_nans() -> None:
    """The comparison's rule: NaN matches NaN, an infinity the same one; anything else non-finite fails."""
    import pandas as pd

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from cuda_check import MEAS_RTOL, worst
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    reference = pd.DataFrame({"a": [1.0, float("inf"), float("nan")], "b": [10.0, -float("inf"), 2.0]})
    assert worst(reference, reference.copy()) == 0
    near = reference.assign(a=[1.0 + 0.5 * MEAS_RTOL, float("inf"), float("nan")])
    assert worst(reference, near) == pytest.approx(0.5)
    assert worst(reference, reference.assign(b=[10.0, float("inf"), 2.0])) == float("inf")
    assert worst(reference, reference.assign(a=[1.0, float("inf"), 0.0])) == float("inf")
