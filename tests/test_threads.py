"""Torch's threads for ``certify`` and ``grow`` (``core.threads``): ``--threads``, else ``OMP_NUM_THREADS``,
else one per process under a launcher, else the idle cores this process may use, read from ``/proc/stat``
and a cgroup's CPU quota (faked here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalemech.cli import main
from scalemech.core import threads


def stat(busy: list[int], idle: list[int]) -> str:
    """A ``/proc/stat`` text: per CPU ``busy`` user jiffies and ``idle`` idle ones (iowait 1 of them)."""
    lines = [f"cpu  {sum(busy)} 0 0 {sum(idle)} 0 0 0 0 0 0"]
    lines += [f"cpu{i} {b} 0 0 {d - 1} 1 0 0 0 0 0" for i, (b, d) in enumerate(zip(busy, idle, strict=True))]
    return "\n".join([*lines, "intr 1 2 3", "ctxt 5"])


def test_idle_cores_counts_the_cores_idle_most_of_the_sample() -> None:
    before = threads.cpu_times(stat([100, 100, 100, 100], [100, 100, 100, 100]))
    after = threads.cpu_times(stat([200, 110, 160, 100], [100, 190, 140, 100]))  # busy, idle, 40 % idle, no time
    assert before[1] == (100, 200) and set(before) == {0, 1, 2, 3}
    assert threads.idle_cores(before, after, [0, 1, 2, 3]) == 1
    assert threads.idle_cores(before, after, [0, 2]) == 0 and threads.idle_cores(before, after, [1, 7]) == 1


@pytest.mark.parametrize("text, cores", [("200000 100000", 2), ("150000 100000", 2), ("max 100000", None), ("", None)])
def test_a_cgroup_quota_caps_the_cores(tmp_path: Path, text: str, cores: int | None) -> None:
    (tmp_path / "cpu.max").write_text(text)
    assert threads.quota_cores(tmp_path / "cpu.max") == cores
    assert threads.quota_cores(tmp_path / "missing") is None


def test_the_default_takes_the_idle_allowed_cores(tmp_path: Path, monkeypatch) -> None:
    """Busy cores are not counted (at least one thread); idle ones are, up to the quota."""
    samples = iter([stat([0, 0, 0], [0, 0, 0]), stat([100, 0, 0], [0, 100, 100])])
    monkeypatch.setattr(threads, "PROC_STAT", tmp_path / "stat")
    monkeypatch.setattr(Path, "read_text", lambda self: next(samples) if self.name == "stat" else "max 1")
    monkeypatch.setattr(threads, "affinity", lambda: [0, 1, 2])
    monkeypatch.setattr(threads, "SAMPLE_SECONDS", 0)
    (tmp_path / "stat").touch()
    assert threads.default_threads() == 2
    samples = iter([stat([0, 0, 0], [0, 0, 0]), stat([100, 100, 100], [0, 0, 0])])
    assert threads.default_threads() == 1


def test_the_flag_then_the_environment_then_a_launcher_decide(monkeypatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert threads.torch_threads(5) == (5, "--threads")
    assert threads.torch_threads(None) == (3, "OMP_NUM_THREADS")
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert threads.torch_threads(None) == (1, "one per process under a launcher")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setattr(threads, "default_threads", lambda: 2)
    assert threads.torch_threads(None)[0] == 2


@pytest.mark.parametrize("command", ["certify", "grow"])
def test_threads_below_one_are_refused(capsys, command: str) -> None:
    out = ["--out", "z"] if command == "grow" else []
    argv = [command, "--checkpoint", "x", "--data", "y", "--threads", "0", *out]
    with pytest.raises(SystemExit):
        main(argv)
    assert "--threads: 0 is not positive; allowed: integers >= 1" in capsys.readouterr().err
