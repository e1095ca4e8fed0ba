"""The machine a number came from: its CPU model, core count and kernel caps."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

KERNEL_CAPS = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")
"""The variables that cap the instruction set of PyTorch's CPU kernels."""


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """``{"cpu", "cores", "kernel_caps"}`` of this machine (the caps that are set)."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "kernel_caps": {name: os.environ[name] for name in KERNEL_CAPS if name in os.environ},
    }
