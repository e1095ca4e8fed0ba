"""One trainer per checkpoint directory (issue 37): ``checkpoint_lock`` refuses a second trainer at
once, in one line naming the directory and the holder, without touching the holder's checkpoints;
once the holder dies (SIGKILL included) the next trainer gets the lock and resumes."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import errno
import hashlib
import os
import socket
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from test_workflow_training import ONE_MODEL
from transformers import AutoModelForCausalLM, LlamaConfig

import scalemech
from scalemech.cli import main
from scalemech.core.layout import Layout
from scalemech.core.recipe import Recipe
from scalemech.data import load_prepared, prepare_dataset
from scalemech.data.tokenized import load_token_ids
from scalemech.tasks.tokens import TokenIdTask
from scalemech.training import checkpoints, continued
from scalemech.training.checkpoints import (
    COMPLETE,
    CheckpointLockedError,
    checkpoint_lock,
    lock_path,
    mark_complete,
    resume_state,
)
from scalemech.training.train import train

TINY_RESNET = {
    "family": "resnet",
    "depth": 8,
    "width": 0.25,
    "norm": "batch",
    "placement": "branch",
    "in_channels": 1,
    "num_classes": 10,
}
RECIPE = Recipe(steps=20, batch_size=64, lr=0.05, eval_batch_size=256, eval_examples=256, warmup_fraction=0.1)
HOLD_AT = 13  # the subprocess trainer stops here, holding the lock, with checkpoints of steps 6 and 12
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(Path(scalemech.__file__).parents[1]), str(Path(__file__).parent)]),
}
HOLDER = """
import sys, time
from scalemech.training.checkpoints import checkpoint_lock
with checkpoint_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(600)
"""
"""A process that takes the lock of ``argv[1]`` and sleeps holding it."""


class Killed(Exception):
    """A simulated kill of a grow arm (not KeyboardInterrupt: a regression must not stop pytest)."""


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data") / "mnist5k"
    prepare_dataset("mnist5k", {}, out)
    return out


def train_small(data_dir: str | Path, out: str | Path, on_step: Callable[[int], None] | None = None) -> dict:
    """Train TINY_RESNET on 512 digits of ``data_dir`` into ``out`` (checkpoints every 6 steps in ``out/ckpt``)."""
    data = load_prepared(data_dir)
    small = dataclasses.replace(
        data, train_x=data.train_x[:512], train_y=data.train_y[:512], test_x=data.test_x[:256], test_y=data.test_y[:256]
    )
    out = Path(out)
    return train(
        TINY_RESNET, RECIPE, small, out, out / "ckpt", 3, "cpu", checkpoint_every=6, progress=False, on_step=on_step
    )


def hold_while_training(data_dir: str, out: str) -> None:
    """The subprocess trainer: train, and at step ``HOLD_AT`` say so and sleep (holding the lock)."""
    torch.set_num_threads(1)

    def on_step(step: int) -> None:
        if step == HOLD_AT:
            print("holding", flush=True)
            time.sleep(600)

    train_small(data_dir, out, on_step)


@contextmanager
def running(code: str, *args: str, ready: str, stderr: Path) -> Iterator[subprocess.Popen]:
    """A Python subprocess running ``code``, once it has printed ``ready``; SIGKILLed at the end."""
    with open(stderr, "w") as err:
        process = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=err, env=ENV)
    try:
        line = process.stdout.readline().decode().strip()
        assert line == ready, f"the subprocess said {line!r}: {stderr.read_text()[-3000:]}"
        yield process
    finally:
        process.kill()  # SIGKILL: no cleanup runs in the holder
        process.wait()
        process.stdout.close()


def holder(directory: Path, tmp_path: Path) -> contextlib.AbstractContextManager[subprocess.Popen]:
    return running(HOLDER, str(directory), ready="locked", stderr=tmp_path / "holder.err")


def files(directory: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``directory``."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def assert_refusal(error: pytest.ExceptionInfo, directory: Path, pid: int) -> None:
    message = str(error.value)
    assert isinstance(error.value, OSError)  # a user error of the CLI: one line
    assert "\n" not in message and str(directory) in message
    assert f"pid {pid} on host {socket.gethostname()}" in message


def test_a_second_trainer_is_refused_and_resumes_once_the_first_is_killed(mnist_dir: Path, tmp_path: Path) -> None:
    code = "import sys, test_checkpoint_lock as t; t.hold_while_training(sys.argv[1], sys.argv[2])"
    out = tmp_path / "run"
    with running(code, str(mnist_dir), str(out), ready="holding", stderr=tmp_path / "trainer.err") as first:
        before = files(out)
        assert {"ckpt/step-000000006.pt", "ckpt/step-000000012.pt"} <= set(before)
        with pytest.raises(CheckpointLockedError) as refused:
            train_small(mnist_dir, out)
        assert_refusal(refused, out / "ckpt", first.pid)
        assert files(out) == before  # nothing set aside, removed or written
        assert sorted(p.name for p in out.iterdir()) == [".ckpt.lock", "ckpt"]
    # the first trainer is dead (SIGKILL): the kernel released its lock
    resumed: list[int] = []
    train_small(mnist_dir, out, resumed.append)
    assert resumed[0] == HOLD_AT  # resumed from its step-12 checkpoint, not from 0
    assert (out / "ckpt" / COMPLETE).exists() and (out / "model.pt").exists()
    assert not [p for p in out.iterdir() if p.name.startswith("ckpt.")]  # nothing set aside


def test_the_lock_function_refuses_until_its_holder_dies(tmp_path: Path) -> None:
    directory = tmp_path / "checkpoints" / "model"
    with holder(directory, tmp_path) as process:
        with pytest.raises(CheckpointLockedError) as refused:
            with checkpoint_lock(directory):
                pytest.fail("entered a held lock")
        assert_refusal(refused, directory, process.pid)
        assert not directory.exists()  # the lock is beside the directory and creates nothing in it
    with checkpoint_lock(directory):
        assert f'"pid": {os.getpid()}' in lock_path(directory).read_text()
    assert lock_path(directory).read_text() == ""  # a released lock names no holder


def test_the_lock_stays_on_the_directory_when_its_contents_are_set_aside(tmp_path: Path) -> None:
    """``resume_state`` renames a finished run's directory aside: the lock, beside it, does not move,
    so the directory stays locked while its holder trains there afresh."""
    directory = tmp_path / "ckpt"
    mark_complete(directory, {"run": 1})
    assert lock_path(directory) == tmp_path / ".ckpt.lock"
    with checkpoint_lock(directory):
        assert resume_state(directory, {"run": 1}) is None
        assert not directory.exists() and (tmp_path / f"ckpt.{checkpoints.identity_hash({'run': 1})}").is_dir()
        with pytest.raises(CheckpointLockedError):  # a second lock, even of this process, is refused
            with checkpoint_lock(directory):
                pass
        with pytest.raises(CheckpointLockedError):
            with checkpoint_lock(os.path.relpath(directory)):  # another spelling of the same path
                pass


def test_scalemech_train_by_hand_is_refused_in_one_line(mnist_dir: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    config = copy.deepcopy(ONE_MODEL)  # the training test's one model, smaller and checkpointed every step
    config["run"] = "lock"
    config["grids"]["resnet"]["widths"] = [0.25]
    config["grids"]["resnet"]["recipe"]["steps"] = 2
    config["train"]["checkpoint_every"] = 1
    monkeypatch.chdir(tmp_path)
    Path("config.yaml").write_text(yaml.safe_dump(config))
    assert main(["prepare", "--config", "config.yaml", "--dataset", "mnist5k"]) == 0
    directory = Path(Layout("lock").checkpoints("mnist5k", "resnet-d8-w0.25-s0"))
    argv = ["train", "--config", "config.yaml", "--model", "mnist5k/resnet-d8-w0.25-s0"]
    capsys.readouterr()
    with holder(directory, tmp_path) as process:
        assert main(argv) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"scalemech: error: checkpoint directory {directory} ")
        assert f"pid {process.pid}" in lines[0]
        assert not directory.exists()
    assert main(argv) == 0  # the holder is dead
    assert (directory / COMPLETE).exists()


def test_a_grow_arm_is_locked_the_same_way(tmp_path: Path, monkeypatch) -> None:
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_hidden_layers=2,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    np.save(tmp_path / "ids.npy", np.random.default_rng(0).integers(3, 300, 4000))
    task = TokenIdTask(load_token_ids(tmp_path / "ids.npy"), 8, 300)
    recipe = Recipe(optimizer="adamw", lr=1e-3, steps=6, batch_size=4, warmup_fraction=0.25)
    directory = tmp_path / ".grow-state" / "arm"

    def arm() -> continued.Arm:
        return continued.train_arm("arm", model, task, recipe, 7, directory, {"arm": 1}, 0, 2, progress=False)

    original, calls = continued.TaskBatches.next, {"n": 0, "dies_after": 3}

    def counted(self):  # the batches drawn: one a step; a kill after ``dies_after`` steps
        calls["n"] += 1
        if calls["n"] > calls["dies_after"]:
            raise Killed("simulated kill")
        return original(self)

    monkeypatch.setattr(continued.TaskBatches, "next", counted)
    with pytest.raises(Killed):
        arm()
    before = files(directory)
    assert list(before) == ["step-000000002.pt", "step-000000002.pt.sha256"]
    with holder(directory, tmp_path) as process:
        with pytest.raises(CheckpointLockedError) as refused:
            arm()
        assert_refusal(refused, directory, process.pid)
        assert files(directory) == before
    calls.update(n=0, dies_after=recipe.steps)
    arm()
    assert calls["n"] == 4  # steps 3..6: resumed from the step-2 state
    assert (directory / COMPLETE).exists()


def test_without_fcntl_training_runs_unlocked(tmp_path: Path, monkeypatch) -> None:
    """Windows has no ``fcntl``: the lock is skipped (module doc of ``training.checkpoints``)."""
    directory = tmp_path / "ckpt"
    with checkpoint_lock(directory):
        monkeypatch.setattr(checkpoints, "fcntl", None)
        with checkpoint_lock(directory):  # would be refused with a lock
            pass


def test_a_file_system_without_flock_warns_and_runs_unlocked(tmp_path: Path, monkeypatch, caplog) -> None:
    def refuse(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(checkpoints, "fcntl", types.SimpleNamespace(LOCK_EX=2, LOCK_NB=4, flock=refuse))
    with checkpoint_lock(tmp_path / "ckpt"):
        pass
    assert "No locks available" in caplog.text and "unlocked" in caplog.text
