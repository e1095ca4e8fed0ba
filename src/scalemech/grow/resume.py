"""What an interrupted ``grow`` resumes: the run's identity, checked before any work, and its wall time.

``--out/.grow-state/run.json`` records the options that change an arm (training, placement,
certificate, held-out windows, seed) and the sha256 of the checkpoint's weights, of the data and of
the ``--retain`` data. A rerun whose identity differs is refused in one line naming what changed (an
arm trained under one identity is never continued or reused under another); ``wall_seconds`` adds up
over the runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.integrity import IntegrityError, read_json, write_json
from .output import RUN_JSON, STATE_DIR


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [
        f"{key} {old.get(key)!r} -> {new.get(key)!r}"
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]


@dataclass
class RunRecord:
    """The identity of the run resumed into ``out`` and the wall seconds of its earlier runs."""

    out: Path
    identity: dict[str, Any]
    earlier_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    @property
    def path(self) -> Path:
        return self.out / STATE_DIR / RUN_JSON

    def check(self) -> None:
        """Refuse resume states of a run with another identity (``ValueError`` naming what changed and how
        to start over); read the earlier runs' wall seconds."""
        if not self.path.is_file():
            return
        try:
            recorded = read_json(self.path)
            identity, seconds = recorded["identity"], float(recorded["wall_seconds"])
        except (IntegrityError, KeyError, TypeError, ValueError):
            identity, seconds = {"unreadable": str(self.path)}, 0.0
        if identity != self.identity:
            raise ValueError(
                f"--out {str(self.out)!r} holds the resume states of a grow run with other inputs "
                f"({'; '.join(_changes(identity, self.identity))}); rerun with those, or delete "
                f"{self.out / STATE_DIR} to start over"
            )
        self.earlier_seconds = seconds

    def wall_seconds(self) -> float:
        """Seconds of this run and the earlier ones it resumes."""
        return round(self.earlier_seconds + time.perf_counter() - self.started, 1)

    def save(self) -> None:
        """Record the identity and the wall seconds so far (at the start, after each arm, on any exit)."""
        record = {"identity": self.identity, "wall_seconds": self.wall_seconds()}
        write_json(self.path, record, "the run's identity and wall time")
