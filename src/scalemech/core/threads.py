"""How many torch threads ``certify`` and ``grow`` use: ``--threads``, else ``OMP_NUM_THREADS`` when it is
set, else ``default_threads``.

Torch's own default is one thread per core of the machine. On a machine other work keeps busy, its
threads wait on each other at every operation's barrier: on 2 loaded cores, a small llama's training
grow ran 5-9 times slower with 2 threads than with 1 (``docs/science.md`` §7.5.1). So the default
counts the cores this process may use (its CPU affinity, capped by a cgroup's CPU quota) that are idle
now, at least one; under a launcher (``torchrun``, ``LOCAL_WORLD_SIZE > 1``) one per process, as the
processes already share the cores.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

SAMPLE_SECONDS = 0.2
"""How long the cores' idle time is sampled (``/proc/stat``) before the default is chosen."""
IDLE_FRACTION = 0.5
"""A core counts as idle when it was idle for more than this fraction of the sample."""
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2's CPU quota: ``<quota> <period>`` microseconds, or ``max <period>`` for none."""
PROC_STAT = Path("/proc/stat")


def affinity() -> list[int]:
    """The CPUs this process may run on (``os.sched_getaffinity``; every CPU where the platform has none)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def quota_cores(cpu_max: Path = CPU_MAX) -> int | None:
    """The cores a cgroup v2 CPU quota allows (``ceil(quota / period)``), None without a quota."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))


def allowed_cores() -> int:
    """Cores this process may use: its affinity, capped by its cgroup's CPU quota."""
    quota = quota_cores()
    return min(len(affinity()), quota) if quota else len(affinity())


def cpu_times(stat: str) -> dict[int, tuple[int, int]]:
    """Per CPU of a ``/proc/stat`` text: ``(idle, total)`` jiffies (idle counts iowait; total the first
    eight fields, guest time being inside user time)."""
    times = {}
    for line in stat.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            ticks = [int(v) for v in fields[:8]]
            times[int(name[3:])] = (ticks[3] + ticks[4], sum(ticks))
    return times


def idle_cores(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], cpus: list[int]) -> int:
    """How many of ``cpus`` were idle more than ``IDLE_FRACTION`` of the time between two ``cpu_times``."""
    idle = 0
    for cpu in cpus:
        if cpu in before and cpu in after:
            total = after[cpu][1] - before[cpu][1]
            idle += total > 0 and (after[cpu][0] - before[cpu][0]) / total > IDLE_FRACTION
    return idle


def default_threads() -> int:
    """The cores this process may use that are idle now (sampled ``SAMPLE_SECONDS`` from ``/proc/stat``;
    without it, every allowed core), at least 1."""
    allowed = allowed_cores()
    if not PROC_STAT.exists():
        return allowed
    before = cpu_times(PROC_STAT.read_text())
    time.sleep(SAMPLE_SECONDS)
    idle = idle_cores(before, cpu_times(PROC_STAT.read_text()), affinity())
    return max(1, min(allowed, idle))


def torch_threads(requested: int | None) -> tuple[int, str]:
    """The torch threads to use and why: ``requested`` (``--threads``), else ``OMP_NUM_THREADS``, else one
    per process under a launcher with several local processes, else ``default_threads``."""
    if requested is not None:
        return requested, "--threads"
    if os.environ.get("OMP_NUM_THREADS", "").isdigit() and int(os.environ["OMP_NUM_THREADS"]) > 0:
        return int(os.environ["OMP_NUM_THREADS"]), "OMP_NUM_THREADS"
    if int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > 1:
        return 1, "one per process under a launcher"
    return default_threads(), f"the idle ones of the {allowed_cores()} cores this process may use"
