"""Hardening: nothing runs code from a file, a changed byte is refused by name, nothing is written
outside results/, and bad input fails early in one line naming the key."""

from __future__ import annotations

import copy
import errno
import logging
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from scalemech.cli import ERROR_STATUS, main
from scalemech.config import ConfigError, validate_config
from scalemech.core import integrity
from scalemech.core.device import DeviceError, resolve_device
from scalemech.core.tables import read_table, write_table
from scalemech.experiments.misalign import measured_in_both
from scalemech.gradients.pools import PoolError
from scalemech.models import build_model, load_model, save_model
from scalemech.training import checkpoints

ROOT = Path(__file__).resolve().parents[1]
SPEC = {"family": "resnet", "depth": 8, "width": 0.25, "in_channels": 1, "num_classes": 10}


class Payload:
    """Unpickling this runs ``touch <marker>``: what an attacker's ``.pt`` would carry."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def model_pt(tmp_path) -> Path:
    torch.manual_seed(0)
    path = tmp_path / "model.pt"
    save_model(path, build_model(SPEC), SPEC, metrics={"torch_version": str(torch.__version__)})
    return path


def flip_byte(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    offset = len(data) // 2 if offset is None else offset
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def token_ids(tmp_path: Path) -> str:
    """A ``.npy`` of token ids: data that loads, so the checkpoint is what is judged."""
    path = tmp_path / "ids.npy"
    np.save(path, (np.arange(4096) % 50).astype(np.int64))
    return str(path)


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == ERROR_STATUS
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.removeprefix("scalemech: error: ").strip()


# -- no code execution ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["torch.save", "raw pickle"])
def test_a_crafted_file_runs_nothing_and_is_refused_in_one_line(capsys, tmp_path, kind) -> None:
    marker, path = tmp_path / "PWNED", tmp_path / "evil.pt"
    payload = {"spec": Payload(marker), "state_dict": {}}
    if kind == "torch.save":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload))
    with pytest.raises(ValueError, match="evil.pt"):
        load_model(path, checksum_required=False)
    message = one_line_error(
        capsys, ["certify", "--checkpoint", str(path), "--data", token_ids(tmp_path), "--device", "cpu"]
    )
    assert str(path) in message and not marker.exists()
    if kind == "torch.save":
        assert "refused" in message and "posix.system" in message


def test_a_model_file_holds_plain_values_only(model_pt) -> None:
    payload = torch.load(model_pt, weights_only=True)  # raises on any non-plain object
    assert type(payload["metrics"]["torch_version"]) is str


def test_a_spec_that_is_not_a_dict_is_one_line(capsys, tmp_path) -> None:
    path = tmp_path / "model.pt"
    torch.save({"spec": [1, 2], "state_dict": {}}, path)
    message = one_line_error(
        capsys, ["certify", "--checkpoint", str(path), "--data", token_ids(tmp_path), "--device", "cpu"]
    )
    assert message.startswith(f"{path}: not a scalemech model file")


# -- silent corruption ------------------------------------------------------------------------


def test_a_changed_byte_in_model_pt_is_refused_by_name(model_pt) -> None:
    load_model(model_pt)  # intact: loads
    flip_byte(model_pt, offset=len(model_pt.read_bytes()) - 2000)  # inside a weight tensor's bytes
    with pytest.raises(integrity.IntegrityError, match=f"{model_pt}: sha256 differs"):
        load_model(model_pt)


def test_a_workflow_model_file_without_its_checksum_is_refused(model_pt) -> None:
    integrity.sidecar(model_pt).unlink()
    with pytest.raises(integrity.IntegrityError, match="no checksum file model.pt.sha256"):
        load_model(model_pt)
    load_model(model_pt, checksum_required=False)  # a user's own file: weights-only, unchecked


def test_a_flipped_checkpoint_is_never_resumed(tmp_path, caplog) -> None:
    identity = {"spec": SPEC, "seed": 0}
    for step in (6, 12):
        checkpoints.save_checkpoint(tmp_path, {"step": step, "run": identity, "weights": torch.full((64,), step)})
    newest = checkpoints.checkpoint_paths(tmp_path)[-1]
    flip_byte(newest, offset=len(newest.read_bytes()) - 300)
    with caplog.at_level(logging.WARNING):
        state = checkpoints.resume_state(tmp_path, identity)
    assert state["step"] == 6 and torch.equal(state["weights"], torch.full((64,), 6))
    assert str(newest) in caplog.text and "sha256 differs" in caplog.text


def test_a_corrupt_complete_json_is_set_aside_not_stuck(tmp_path) -> None:
    run = tmp_path / "ckpt"
    checkpoints.save_checkpoint(run, {"step": 3, "run": {"a": 1}})
    (run / checkpoints.COMPLETE).write_text("{not json")
    assert checkpoints.resume_state(run, {"a": 1}) is None
    assert not run.exists() and (tmp_path / "ckpt.unreadable").is_dir()


def test_a_cut_table_is_refused_by_name(tmp_path) -> None:
    path = tmp_path / "runtime.csv"
    frame = pd.DataFrame({"step": ["train"] * 8, "job": list("abcdefgh"), "wall_seconds": 1.0})
    write_table(frame.assign(cpu_seconds=1.0, cpu_from="job", max_rss_mb=1.0), path, "runtime")
    assert len(read_table(path, "runtime")) == 8
    path.write_text("\n".join(path.read_text().splitlines()[:3]) + "\n")
    with pytest.raises(integrity.IntegrityError, match=f"{path}: sha256 differs"):
        read_table(path, "runtime")


def test_a_failed_write_leaves_the_old_file_and_no_orphan(tmp_path, monkeypatch) -> None:
    path = tmp_path / "model.pt"
    integrity.save_torch(path, {"a": torch.zeros(2)})
    before = path.read_bytes()

    def disk_full(value, target) -> None:
        Path(target).write_bytes(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(OSError, match=f"writing {path} failed: No space left on device"):
        integrity.save_torch(path, {"a": torch.ones(2)})
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["model.pt", "model.pt.sha256"]


def test_stale_pools_name_the_pool_and_the_fix(tmp_path) -> None:
    meta = {"point": "stage2.block1", "point_index": 1}
    for split in ("train", "test"):
        (tmp_path / split / "stage2.block1").mkdir(parents=True)
        (tmp_path / split / "stage2.block1" / "full.json").write_text(__import__("json").dumps(meta))
    dalign = pd.DataFrame({"point": ["stage1.block1"], "view": ["full"], "split": ["train"]})
    with pytest.raises(PoolError, match="stage2.block1.*stale.*forcerun measure_model"):
        measured_in_both(tmp_path, dalign, ["full"])


# -- bad config: one line naming the key, at planning -----------------------------------------


def quick() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def edited(path: str, value) -> dict:
    config = copy.deepcopy(quick())
    *parents, last = path.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return config


BAD = {
    "run escapes results/": ("run", "..", "run"),
    "run hidden": ("run", ".x", "run"),
    "infinite width": ("grids.resnet_mnist.widths", [float("inf")], "grids.resnet_mnist.widths[0]: inf"),
    "nan test fraction": ("datasets.mnist5k.test_fraction", float("nan"), "datasets.mnist5k.test_fraction: nan"),
    "infinite lr": ("grids.resnet_mnist.recipe.lr", float("inf"), "grids.resnet_mnist.recipe.lr: inf"),
    "nan lr": ("grids.resnet_mnist.recipe.lr", float("nan"), "grids.resnet_mnist.recipe.lr: nan"),
    "nan step fraction": ("intervene.step_fractions", [float("nan")], "intervene.step_fractions[0]: nan"),
    "nan interval level": ("measure.interval_level", float("nan"), "measure.interval_level: nan"),
    "file url": ("datasets.tinyshakespeare", {"url": "file:///etc/passwd"}, "datasets.tinyshakespeare.url"),
    "label smoothing 1": (
        "grids.resnet_mnist.recipe.label_smoothing",
        1.0,
        "grids.resnet_mnist.recipe.label_smoothing",
    ),
    "warmup 1": ("grids.resnet_mnist.recipe.warmup_fraction", 1.0, "grids.resnet_mnist.recipe.warmup_fraction"),
    "points 999": ("measure.points", 999, "measure.points: 999"),
    "trajectory pool over the split": ("trajectory.pool", 5000, "trajectory.pool: 5000"),
    "tokens on images": ("grids.resnet_mnist.recipe.tokens", 10000, "grids.resnet_mnist.recipe.tokens"),
    "max_files 1": ("datasets.pystdlib.max_files", 1, "datasets.pystdlib.max_files"),
    "same width twice": ("grids.resnet_mnist.widths", [1, 1.0], "grids.resnet_mnist.widths"),
    "same seed twice": ("grids.resnet_mnist.seeds", [0, 0], "grids.resnet_mnist.seeds"),
    "two GPUs": ("grids.resnet_mnist.resources.gpu", 2, "grids.resnet_mnist.resources.gpu"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_config_fails_in_one_line_naming_the_key(name) -> None:
    key, value, expected = BAD[name]
    config = edited(key, value)
    if name == "tokens on images":  # one budget only: the schema already refuses two
        config["grids"]["resnet_mnist"]["recipe"].pop("epochs", None)
        config["grids"]["resnet_mnist"]["recipe"].pop("steps", None)
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    message = str(info.value)
    assert "\n" not in message and expected in message, message


def test_a_gpu_grid_with_device_cpu_is_refused() -> None:
    config = edited("grids.resnet_mnist.resources.gpu", 1)
    config["device"] = "cpu"
    with pytest.raises(ConfigError, match="grids.resnet_mnist.resources.gpu: 1 but device is cpu"):
        validate_config(config)


# -- devices ----------------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_a_job_given_a_gpu_fails_at_once_without_cuda() -> None:
    with pytest.raises(DeviceError, match=r"resources.gpu: 1.*sees no usable GPU"):
        resolve_device("auto", gpu_required=True)
    assert resolve_device("auto").type == "cpu"  # without a GPU request auto falls back


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_cli_device_cuda_without_a_gpu_is_one_line(capsys, model_pt, tmp_path) -> None:
    message = one_line_error(
        capsys, ["certify", "--checkpoint", str(model_pt), "--data", str(tmp_path)] + ["--device", "cuda"]
    )
    assert message.startswith("device cuda was requested but torch")


# -- the CLI and the workflow -----------------------------------------------------------------


def test_negative_seed_is_an_argument_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["certify", "--checkpoint", "x.pt", "--data", "d", "--seed", "-1"])
    assert exit_.value.code == 2 and "-1 is negative" in capsys.readouterr().err


def test_report_without_tables_is_an_error(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text((ROOT / "config" / "config.yaml").read_text())
    message = one_line_error(capsys, ["report", "--config", "config.yaml"])
    assert "no tables to report on" in message


@pytest.mark.timeout(300)
def test_config_overrides_alone_plan_on_the_default_config(tmp_path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text((ROOT / "config" / "config.yaml").read_text())
    command = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "-n"]
    result = subprocess.run([*command, "--config", "threads=1"], capture_output=True, text=True, timeout=280)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "train_model" in result.stdout + result.stderr


def test_check_names_the_file_and_line_of_a_yaml_error(capsys, tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("run: x\ngrids: [unclosed\n")
    message = one_line_error(capsys, ["check", "--config", str(path)])
    assert message.startswith(f"{path}:") and "YAML syntax error" in message
    assert main(["check", "--config", str(ROOT / "config" / "config.yaml")]) == 0
    assert "valid; run 'quick'" in capsys.readouterr().out
