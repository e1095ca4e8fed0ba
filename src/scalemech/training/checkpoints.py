"""Resume checkpoints of one training run, and how a run knows which run it is.

A run's identity is what decides its weights (``run_identity``): the model spec, the recipe
without its evaluation-only keys, the seed, and the prepared data's fingerprint (so a new split
is a new run). Its checkpoints live in one directory:

    step-<step>.pt     the newest ``KEPT`` resume states (written atomically, each with a
                       ``.sha256`` sidecar checked on load: scalemech.core.integrity)
    complete.json      written once the run's outputs exist: the run is finished

``resume_state`` returns the newest readable state of *this unfinished* run. A directory that
holds another run's checkpoints, or a finished run (a forced or repeated job), is moved aside
to ``<dir>.<identity-hash>`` (kept, never reused) and the run starts afresh. A truncated newest
checkpoint (a kill during ``torch.save`` of a non-atomic file system) is skipped, with a
warning naming it, in favour of the previous one; so is one whose bytes no longer match its
sha256 (a flipped byte is never resumed). A corrupt ``complete.json`` counts as a finished run.

One trainer at a time: a trainer holds ``checkpoint_lock(<dir>)`` from before it reads the first
checkpoint until its run ends, so a second one (a rerun after ``kill -9`` of Snakemake left the
first job running, or ``scalemech train`` by hand) is refused at once with ``CheckpointLockedError``
(an ``OSError``: one line naming the directory and the holder's pid and host), before it touches
anything there. The lock is an advisory ``fcntl.flock`` on ``.<name>.lock`` *beside* the
directory (in its parent), not inside it: ``set_aside`` renames the directory, and a lock file
inside would move with it, so a second trainer would create a fresh ``<dir>/.lock``, lock that and
share ``<dir>`` with the first. Beside it, the lock names the path ``<dir>`` whatever is renamed
under it. The kernel releases the lock when the holder's process dies (``kill -9`` included; so
does a forked child that outlives it), so there is never a stale lock to clean up; the lock file
itself is kept (removing it could let two processes lock two different files of one name).
Where ``fcntl`` does not exist (Windows) there is no lock, and where the file system refuses
``flock`` (``ENOLCK``, some network or FUSE mounts) a warning says training runs unlocked.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

from ..core.integrity import IntegrityError, load_torch, read_json, room, save_torch, sidecar, write_json

try:
    import fcntl
except ImportError:  # Windows: training runs without a lock (module doc)
    fcntl = None

KEPT = 2
COMPLETE = "complete.json"
EVALUATION_KEYS = ("eval_batch_size", "eval_every_epoch", "eval_every_steps", "eval_examples", "eval_windows")
"""Recipe keys that change what is measured, never the weights; not part of a run's identity.
A run resumed after one of them changed keeps the curve points it evaluated before."""

log = logging.getLogger(__name__)


class CheckpointLockedError(OSError):
    """Another live process holds the lock of a checkpoint directory (``checkpoint_lock``)."""


def lock_path(directory: str | Path) -> Path:
    """``<parent>/.<name>.lock``: the lock file of ``directory``, beside it (module doc)."""
    directory = Path(os.path.abspath(directory))
    return directory.with_name(f".{directory.name}.lock")


def _holder(fd: int) -> str:
    """Who holds the lock, from what the holder wrote into the lock file (``checkpoint_lock``)."""
    try:
        record = json.loads(os.pread(fd, 4096, 0))
        return f"pid {int(record['pid'])} on host {record['host']}, since {record['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"  # it has not written its record yet


@contextmanager
def checkpoint_lock(directory: str | Path) -> Iterator[None]:
    """Hold the lock of the checkpoint ``directory`` for the block (module doc): an exclusive
    ``flock`` on ``lock_path(directory)``, which then records the holder's pid, host and start time.

    ``CheckpointLockedError`` at once, naming the directory and the holder, when another process
    (or another ``checkpoint_lock`` of this one) holds it; ``directory`` is not touched then. The
    lock is released when the block ends or the process dies. Without ``fcntl`` (Windows), or on a
    file system that refuses ``flock`` (a warning), the block runs unlocked."""
    if fcntl is None:
        yield
        return
    path = lock_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by exec'd children (PEP 446)
    held = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = True
        except BlockingIOError:
            raise CheckpointLockedError(
                f"checkpoint directory {directory} is in use by another trainer ({_holder(fd)}; lock file {path}); "
                "stop it or let it finish, then rerun: two trainers would interleave their checkpoints"
            ) from None
        except OSError as error:
            log.warning("cannot lock %s (%s); training in %s runs unlocked", path, error.strerror or error, directory)
        if held:
            since = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            record = {"pid": os.getpid(), "host": socket.gethostname(), "since": since}
            with room(path, "the lock's record of its holder"):  # a full disk: one line naming it
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        yield
    finally:
        if held:
            with suppress(OSError):
                os.ftruncate(fd, 0)  # a released lock names no holder
        os.close(fd)  # releases the lock


def run_identity(
    spec: dict[str, Any],
    recipe: dict[str, Any],
    seed: int,
    dataset: str,
    data_fingerprint: str,
    continuation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The settings that decide a run's weights: ``{spec, recipe − EVALUATION_KEYS, seed, dataset, data}``, and
    ``continuation`` (the rounds of continued training a model that misses its criterion gets) where given."""
    training_recipe = {k: v for k, v in recipe.items() if k not in EVALUATION_KEYS}
    identity = {"spec": spec, "recipe": training_recipe, "seed": seed, "dataset": dataset, "data": data_fingerprint}
    return identity | ({"continuation": continuation} if continuation else {})


def identity_hash(identity: dict[str, Any]) -> str:
    """First 12 hex digits of the sha256 of the identity's canonical JSON."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:12]


def checkpoint_paths(directory: Path) -> list[Path]:
    """Checkpoints in ``directory``, oldest first."""
    return sorted(directory.glob("step-*.pt"))


def save_checkpoint(directory: Path, state: dict[str, Any]) -> None:
    """Write ``step-<step>.pt`` atomically (tmp + rename); keep the newest ``KEPT``."""
    directory.mkdir(parents=True, exist_ok=True)
    save_torch(directory / f"step-{state['step']:09d}.pt", state, f"the resume state of step {state['step']}")
    for old in checkpoint_paths(directory)[:-KEPT]:
        old.unlink()
        sidecar(old).unlink(missing_ok=True)


def snapshot_schedule(total_steps: int, count: int) -> list[int]:
    """About ``count`` log-spaced steps from 0 to ``total_steps``, dense at the start (0, 1, 2, 4, …):
    ``{0} ∪ {round(S^(k/(count−2)))}`` for ``k = 0 … count−2``; ``[]`` when ``count`` is 0."""
    if count <= 0:
        return []
    if count == 1 or total_steps <= 1:
        return sorted({0, total_steps})[:count]
    return sorted({0} | {round(total_steps ** (k / (count - 2))) for k in range(count - 1)})


def save_snapshot(directory: Path, step: int, model: torch.nn.Module) -> None:
    """The weights of ``model`` after ``step`` steps as ``step-<step>.pt`` (atomic); never pruned."""
    directory.mkdir(parents=True, exist_ok=True)
    save_torch(directory / f"step-{step:09d}.pt", {k: v.detach().cpu() for k, v in model.state_dict().items()})


def snapshot_paths(directory: Path) -> dict[int, Path]:
    """``{step: path}`` of the snapshots in ``directory``."""
    return {int(p.stem.removeprefix("step-")): p for p in sorted(directory.glob("step-*.pt"))}


def mark_complete(directory: Path, identity: dict[str, Any]) -> None:
    """Record that the run of ``identity`` finished and wrote its outputs."""
    directory.mkdir(parents=True, exist_ok=True)
    write_json(directory / COMPLETE, {"identity": identity_hash(identity)}, "the mark of a finished run")


def set_aside(directory: Path, tag: str, why: str) -> Path:
    """Move ``directory`` to ``<directory>.<tag>`` (replacing an older copy) and return it."""
    aside = directory.with_name(f"{directory.name}.{tag}")
    shutil.rmtree(aside, ignore_errors=True)
    directory.rename(aside)
    log.warning("checkpoints in %s %s; moved to %s, training starts afresh", directory, why, aside)
    return aside


def _newest_readable(paths: list[Path]) -> dict[str, Any] | None:
    """The newest state of ``paths`` that loads and matches its sha256; the others, newer ones
    first, are renamed ``*.unreadable`` with a warning naming them."""
    for path in reversed(paths):
        try:
            return load_torch(path)
        except IntegrityError as error:
            log.warning("skipping checkpoint: %s", error)
            path.rename(path.with_suffix(".pt.unreadable"))
    return None


def resume_state(directory: Path, identity: dict[str, Any]) -> dict[str, Any] | None:
    """The newest readable checkpoint of the unfinished run ``identity`` in ``directory``, or None.

    Anything else found there (another run's checkpoints, a finished run, nothing readable)
    is moved aside by ``set_aside`` and None is returned: the run starts at step 0.
    """
    complete = directory / COMPLETE
    if complete.exists():
        try:
            finished = str(read_json(complete)["identity"])
        except (IntegrityError, KeyError, TypeError):
            finished, why = "unreadable", f"belong to a finished run whose {COMPLETE} is corrupt"
        else:
            why = "belong to a finished run (the job was forced or its outputs removed)"
        set_aside(directory, finished, why)
        return None
    paths = checkpoint_paths(directory)
    if not paths:
        return None
    state = _newest_readable(paths)
    if state is None:
        set_aside(directory, "unreadable", "are all unreadable")
        return None
    if state["run"] != identity:
        differ = sorted(k for k in set(identity) | set(state["run"]) if state["run"].get(k) != identity.get(k))
        set_aside(directory, identity_hash(state["run"]), f"belong to another run (it differs in {differ})")
        return None
    return state
