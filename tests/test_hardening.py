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
from types import SimpleNamespace

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
    "certificate M over its pool": (
        "grow.certificate",
        {"pool": 128, "M": 100000},
        "grow.certificate.M: 100000 is more than the 128 examples of each pool measured; allowed: 1 <= M <= 128",
    ),
    "grow points 0": ("grow.points", 0, "grow.points: 0 is not allowed; allowed: 'all' or an integer from 1 to 100000"),
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
    assert message.startswith("device cuda was requested but torch") and "resources.gpu" not in message


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


# -- grow and certify: sources, outputs, resumes (issue 48) --------------------------------------


def tree_digest(directory: Path) -> dict[str, str]:
    """sha256 of every file under ``directory``, by relative path."""
    return {
        str(p.relative_to(directory)): integrity.file_digest(p) for p in sorted(directory.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> tuple[Path, Path, Path]:
    """``(source, data, out)``: a tiny llama grown once by ``grow`` (``test_grow.TINY``)."""
    from test_grow import TINY, token_file
    from test_hf import save_tiny

    from scalemech.grow import grow

    root = tmp_path_factory.mktemp("grown")
    source, data = Path(save_tiny("llama", root / "llama")), token_file(root / "ids.npy")
    grow(str(source), str(data), root / "out", TINY)
    return source, data, root / "out"


def last_line_error(capsys, argv: list[str]) -> str:
    """The message of ``scalemech argv``: exit status 2, no traceback, one ``scalemech: error:`` line, the
    last (before it only progress, the certificate and its warnings)."""
    assert main(argv) == ERROR_STATUS
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines[-1].startswith("scalemech: error: "), err
    assert not any(line.startswith("scalemech: ") for line in lines[:-1]), err
    return lines[-1].removeprefix("scalemech: error: ")


def grow_argv(source: Path, data: Path, out: Path, *more: str) -> list[str]:
    from test_grow import TINY_ARGV

    return ["grow", "--checkpoint", str(source), "--data", str(data), "--out", str(out), *TINY_ARGV, *more]


def no_weights(monkeypatch) -> None:
    """Make loading any weights in ``grow`` fail the test: what is refused must be refused before."""
    from scalemech.grow import run

    monkeypatch.setattr(run, "build_model", lambda spec: pytest.fail("grow loaded the weights before refusing"))


def copied(path: Path, to: Path) -> Path:
    """A copy of the file or directory ``path`` at ``to``."""
    import shutil

    shutil.copytree(path, to, symlinks=True) if path.is_dir() else shutil.copyfile(path, to)
    return to


@pytest.mark.parametrize("where", ["the source", "a symlink to it", "inside it", "its parent", "its weights file"])
def test_grow_never_writes_its_source(capsys, monkeypatch, tmp_path, grown, where) -> None:
    """``--checkpoint ck --out ck`` on an earlier grow output (the natural "grow it again"), a symlink to
    it, a directory inside it or holding it: refused in one line before any weight loads."""
    _, data, earlier = grown
    source = copied(earlier, tmp_path / "ck")
    (tmp_path / "link").symlink_to(source)
    out = {
        "the source": source,
        "a symlink to it": tmp_path / "link",
        "inside it": source / "sub",
        "its parent": tmp_path,
        "its weights file": source / "model.safetensors",
    }[where]
    before = tree_digest(tmp_path)
    no_weights(monkeypatch)
    message = last_line_error(capsys, grow_argv(source, data, out))
    assert message.startswith(f"--out {str(out)!r}") and "checkpoint directory" in message, message
    assert tree_digest(tmp_path) == before


def test_grow_into_another_checkpoint_s_output_is_refused(capsys, monkeypatch, tmp_path, grown) -> None:
    from test_hf import save_tiny

    _, data, earlier = grown
    other, out = Path(save_tiny("qwen3", tmp_path / "qwen3")), copied(earlier, tmp_path / "out")
    before = tree_digest(out)
    no_weights(monkeypatch)
    message = last_line_error(capsys, grow_argv(other, data, out))
    assert "holds the output of growing another checkpoint" in message and tree_digest(out) == before


@pytest.mark.parametrize("where", ["weights", "new file in the checkpoint", "text file"])
def test_certify_out_never_overwrites_a_checkpoint(capsys, tmp_path, grown, where) -> None:
    source, data, _ = grown
    checkpoint = copied(source, tmp_path / "ck")
    (tmp_path / "notes.txt").write_text("mine")
    out = {
        "weights": checkpoint / "model.safetensors",
        "new file in the checkpoint": checkpoint / "certificate.csv",
        "text file": tmp_path / "notes.txt",
    }[where]
    before = tree_digest(tmp_path)
    argv = ["certify", "--checkpoint", str(checkpoint), "--data", str(data), "--pool", "6", "--M", "2", "--K", "2"]
    message = last_line_error(capsys, [*argv, "--block-size", "8", "--device", "cpu", "--out", str(out)])
    expected = (
        "lies in the checkpoint directory" if where == "new file in the checkpoint" else "not a certificate table"
    )
    assert message.startswith(f"--out {str(out)!r}") and expected in message, message
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize("fault", ["disk full", "killed"])
def test_a_failed_final_write_leaves_the_earlier_output_whole(capsys, monkeypatch, tmp_path, grown, fault) -> None:
    """Growing again into an earlier output (the same source), the final write fails: ``--out`` is the
    earlier output, byte for byte (no new config beside old weights, no growth.json claiming the new
    run), no temporary directory is left, the source is intact; the rerun reuses the trained arms."""
    from transformers import PreTrainedModel

    source, data, earlier = grown
    out = copied(earlier, tmp_path / "out")
    before, source_before = tree_digest(out), tree_digest(source)

    def failing(self, directory, **kwargs):
        (Path(directory) / "config.json").write_text("{}")  # a partial write, then the fault
        if fault == "killed":
            raise KeyboardInterrupt
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", failing)
    argv = grow_argv(source, data, out, "--steps", "4")  # another run: the earlier output is replaced
    if fault == "killed":
        assert main(argv) == 130
        assert "rerun the same command to resume" in capsys.readouterr().err
    else:
        message = last_line_error(capsys, argv)
        assert f"writing the grown checkpoint to {out} failed (No space left on device (" in message, message
        assert "kB needed: free space there)" in message and message.endswith("rerun the same command"), message
    assert {k: v for k, v in tree_digest(out).items() if ".grow-state" not in k} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and tree_digest(source) == source_before
    monkeypatch.undo()
    assert main(argv) == 0
    assert json_of(out / "growth.json")["arms"]["control_tokens"]["steps"] == 4 and not (out / ".grow-state").exists()


def json_of(path: Path) -> dict:
    import json

    return json.loads(path.read_text())


def interrupted_after(monkeypatch, batches: int) -> None:
    """Ctrl-C at the training batch after ``batches`` (``continued.TaskBatches.next``)."""
    from scalemech.training import continued

    original, calls = continued.TaskBatches.next, {"n": 0}

    def next_batch(self):
        calls["n"] += 1
        if calls["n"] > batches:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(continued.TaskBatches, "next", next_batch)


def test_ctrl_c_says_where_to_resume_and_a_resume_checks_what_it_resumes(capsys, monkeypatch, tmp_path, grown) -> None:
    """Ctrl-C inside the grown arm: one line saying where to resume. A rerun with another ``--train`` or
    with the data changed in place is refused before any weight loads, naming what changed and how to
    start over; the same command resumes, and ``wall_seconds`` counts both runs."""
    source, data, _ = grown
    data = copied(data, tmp_path / "ids.npy")
    out = tmp_path / "out"
    argv = grow_argv(source, data, out, "--checkpoint-every", "1")
    interrupted_after(monkeypatch, 3)  # the FLOP count's batch, then two steps of grown-1
    assert main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and err.splitlines()[-1] == (
        f"scalemech: interrupted; rerun the same command to resume from the last resume state in {out}/.grow-state "
        "(one every --checkpoint-every 1 steps)"
    )
    first = json_of(out / ".grow-state" / "run.json")["wall_seconds"]
    monkeypatch.undo()
    no_weights(monkeypatch)
    message = last_line_error(capsys, [*argv, "--train", "all"])
    assert "train 'new' -> 'all'" in message and f"delete {out}/.grow-state to start over" in message, message
    ids = np.load(data)
    np.save(data, np.roll(ids, 1))
    message = last_line_error(capsys, argv)
    assert "other inputs (data_sha256 " in message, message
    np.save(data, ids)
    monkeypatch.undo()
    assert main(argv) == 0
    record = json_of(out / "growth.json")
    assert record["wall_seconds"] > first > 0 and record["data"]["sha256"] == integrity.file_digest(data)


def test_seeds_do_not_depend_on_how_the_checkpoint_path_is_spelled(monkeypatch, tmp_path, grown) -> None:
    from test_grow import TINY

    from scalemech.grow.run import Grower

    source, data, _ = grown
    monkeypatch.chdir(source.parent)
    spellings = (source.name, f"./{source.name}", str(source), f"{source}/")
    growers = [Grower(name, str(data), tmp_path / "out", TINY) for name in spellings]
    assert len({g.batches_seed() for g in growers}) == 1 and len({g.name for g in growers}) == 1
    assert not (tmp_path / "out").exists()  # nothing is written before the run


def test_tied_embeddings_stay_tied_in_every_arm_mode_and_dtype(tmp_path) -> None:
    """Grown (``grow_layers``, then ``.to(bfloat16)``), trained under ``--train all`` and written: one
    embedding matrix, as the config says, and it trained."""
    from safetensors.torch import load_file
    from test_grow import TINY, token_file
    from test_hf import CONFIGS, save_tiny, tiny_config
    from transformers import AutoModelForCausalLM

    from scalemech.grow import GrowSettings, grow
    from scalemech.models.hf_growth import grow_layers

    def tied(model) -> bool:
        return model.get_output_embeddings().weight is model.get_input_embeddings().weight

    for name in sorted(CONFIGS):
        model = AutoModelForCausalLM.from_config(tiny_config(name))
        grown_model = grow_layers(model, [0])[0]
        assert tied(grown_model) == tied(model) == tied(grown_model.to(torch.bfloat16)), name
    source = Path(save_tiny("gpt2", tmp_path / "gpt2"))
    settings = GrowSettings(**{**vars(TINY), "train": "all"})
    grow(str(source), str(token_file(tmp_path / "ids.npy")), tmp_path / "out", settings)
    old, new = load_file(source / "model.safetensors"), load_file(tmp_path / "out" / "model.safetensors")
    assert "lm_head.weight" not in new and not torch.equal(new["transformer.wte.weight"], old["transformer.wte.weight"])
    assert tied(AutoModelForCausalLM.from_pretrained(tmp_path / "out"))


def test_every_certificate_takes_the_same_sizes(capsys, tmp_path, grown) -> None:
    """M above the pool: refused by ``certify_model`` itself (the pipeline's ``grow:`` certificate), by
    ``grow`` and, for the config, by ``validate_config`` (``BAD`` above)."""
    from scalemech.certify import Sampling, certify_model

    with pytest.raises(ValueError, match=r"M = 100000 is more than the 128 examples of each pool measured"):
        certify_model(None, None, "x", "all", tmp_path, Sampling(pool=128, M=100000, K=4, batch_size=1),
                      device=torch.device("cpu"))  # fmt: skip
    source, data, _ = grown
    message = last_line_error(capsys, grow_argv(source, data, tmp_path / "out", "--M", "7"))
    assert "M = 7 is more than the 6 examples of each pool measured; allowed: 1 <= M <= 6" in message


def _ids_past(path: Path, value: int, dtype=np.int64) -> None:
    """Token ids in the vocabulary except the last one, ``value``: a region the pools never draw."""
    ids = np.random.default_rng(0).integers(3, 300, 6000).astype(dtype)
    ids[-1] = value
    np.save(path, ids)


REFUSED = {
    "eval windows beyond the data": (["--eval-windows", "100000"], "--eval-windows 100000: the test split of"),
    "steps beyond the schema's cap": (["--steps", str(10**12)], "steps = 1000000000000 is more than 10000000"),
    "batch beyond the schema's cap": (["--batch-size", "300000000"], "batch_size = 300000000 is more than 65536"),
    "an id past the vocabulary": ([], "token id 300 is outside the model's vocabulary [0, 300)"),
    "an id of 2**63 + 5": ([], "token id 9223372036854775813 is outside"),
    "float ids": ([], "must hold a 1-D integer array"),
    "text named .npy": ([], "not a .npy file (no .npy header); give a .npy of integer token ids"),
    "layers scaled by their index": ([], "scale_attn_by_inverse_layer_idx: true computes each layer by its index"),
    "memory beyond the device's": ([], "a training step needs about"),
    "an unwritable out": ([], "is not writable"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_grow_refuses_before_any_weight_loads(capsys, monkeypatch, tmp_path, grown, case) -> None:
    from test_hf import save_tiny

    from scalemech.grow import checks, output

    source, data, _ = grown
    more, expected = REFUSED[case]
    if case == "an id past the vocabulary":
        _ids_past(data := tmp_path / "ids.npy", 300)
    elif case == "an id of 2**63 + 5":
        _ids_past(data := tmp_path / "ids.npy", 2**63 + 5, np.uint64)
    elif case == "float ids":
        np.save(data := tmp_path / "ids.npy", np.linspace(0, 1, 6000))
    elif case == "text named .npy":
        (data := tmp_path / "ids.npy").write_text("once upon a time " * 400)
    elif case == "layers scaled by their index":
        source = copied(Path(save_tiny("gpt2", tmp_path / "gpt2")), tmp_path / "scaled")
        config = json_of(source / "config.json")
        (source / "config.json").write_text(
            __import__("json").dumps({**config, "scale_attn_by_inverse_layer_idx": True})
        )
    elif case == "memory beyond the device's":
        monkeypatch.setattr(checks, "memory_limit", lambda device: 10**6)
    elif case == "an unwritable out":  # as root no mode bit stops a write
        monkeypatch.setattr(output.os, "access", lambda path, mode: False)
    no_weights(monkeypatch)
    message = last_line_error(capsys, grow_argv(source, data, tmp_path / "out", *more))
    assert expected in message, message
    assert not (tmp_path / "out").exists()


def test_a_full_disk_while_saving_a_resume_state_says_so(capsys, monkeypatch, tmp_path, grown) -> None:
    """torch's archive writer fails with "unexpected pos" on a full disk: the message says "No space left
    on device" and where; nothing claims to be done; ``--debug`` keeps the traceback."""
    source, data, _ = grown
    out = tmp_path / "out"

    def full(value, target) -> None:
        Path(target).write_bytes(b"PK")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 2")

    monkeypatch.setattr(torch, "save", full)
    full_disk = SimpleNamespace(disk_usage=lambda path: SimpleNamespace(free=10))
    monkeypatch.setattr(integrity, "shutil", full_disk)  # integrity's view of the disk only
    message = last_line_error(capsys, grow_argv(source, data, out))
    assert message.startswith(f"writing the resume state of step 3 to {out}/.grow-state/grown-1/step-"), message
    assert "No space left on device (0.01 kB free in" in message, message
    assert message.endswith(f"rerun the same command to resume from the last resume state in {out}/.grow-state "
                            "(one every --checkpoint-every 50 steps)"), message  # fmt: skip
    assert not (out / "growth.json").exists() and not list(out.glob(".grow-state/*/*.pt"))
    with pytest.raises(OSError, match="No space left on device"):
        main(["--debug", *grow_argv(source, data, out)])


def test_a_finished_or_refused_grow_leaves_no_lock_file(capsys, monkeypatch, tmp_path, grown) -> None:
    """The finished output holds no lock file and states the equal-FLOPs control's rule; a run refused
    after it started (here: the insertion check) leaves no ``--out`` it created."""
    from scalemech.grow import placing

    source, data, earlier = grown
    assert not [p.name for p in earlier.iterdir() if p.name.endswith(".lock") or p.name.startswith(".")]
    assert "deeper insertion" in json_of(earlier / "growth.json")["arms"]["control_flops"]["rule"]

    def changed(*args, **kwargs):
        raise ValueError("model_type 'llama': inserting layers changed the model's logits")

    monkeypatch.setattr(placing, "check_grown", changed)
    message = last_line_error(capsys, grow_argv(source, data, tmp_path / "out"))
    assert "changed the model's logits" in message and not (tmp_path / "out").exists()


def test_smaller_messages(capsys, tmp_path) -> None:
    """Block sizes: one range in every message; token ids of a uint64 array stay positive."""
    from test_hf import tiny_config

    from scalemech.models.hf import check_block_size
    from scalemech.tasks.tokens import check_vocabulary

    with pytest.raises(ValueError, match=r"allowed: 2 <= block_size <= 64 \(its max_position_embeddings\)"):
        check_block_size(1, tiny_config("llama"), "x")
    with pytest.raises(ValueError, match=r"token id 18446744073709551615 is outside"):
        check_vocabulary(np.array([3, 2**64 - 1], dtype=np.uint64), 300, "ids")


def test_grows_memory_check_counts_a_process_share_and_shards_down_to_one_whole_model(monkeypatch) -> None:
    """``checks.training_bytes`` per device over G processes: the largest arm's state (at every:4 the
    full controls', 16 bytes per old weight; the grown arm's with ``--train all``), whole when
    replicated, ``/ G`` when sharded but never below the grown model (each device scores it); the
    activations of the share ``batch / G``, kept or recomputed. At LLaMA-2-7B's sizes on an H200, one
    sequence of 2048 tokens a GPU: 8 replicas are refused, 8 shards pass, and so does one GPU that
    recomputes its activations."""
    from transformers import LlamaConfig

    from scalemech.grow import checks
    from scalemech.training.footprint import activation_bytes

    config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, vocab_size=32000)
    layer = 4 * 4096**2 + 3 * 4096 * 11008
    old, grown = 2 * 32000 * 4096 + 32 * layer, 2 * 32000 * 4096 + 40 * layer
    one_sequence = activation_bytes(4096, 40, 32000, 2048)
    assert checks.training_bytes(config, 8, 2048, 8, 8) == 16 * old + one_sequence
    assert checks.training_bytes(config, 1, 2048, 8, train_all=True) == 16 * grown + one_sequence
    assert checks.training_bytes(config, 8, 2048, 8, 8, sharded=True) == 4 * grown + one_sequence  # the floor
    assert checks.training_bytes(config, 2, 2048, 8, 2, sharded=True) == 8 * old + one_sequence  # 16 old / 2
    recomputed = activation_bytes(4096, 40, 32000, 2048, recompute=True)  # each layer's input kept, one rebuilt
    assert recomputed == 4 * 2048 * (4096 * 40 + 34 * 4096 + 3 * 32000) < one_sequence / 10
    monkeypatch.setattr(checks, "memory_limit", lambda device: 141 * 10**9)
    with pytest.raises(ValueError, match=r"over 8 processes \(replicated\): a training step needs about"):
        checks.check_memory(config, 8, 2048, 8, torch.device("cuda"), 8)
    checks.check_memory(config, 8, 2048, 8, torch.device("cuda"), 8, sharded=True)
    checks.check_memory(config, 1, 2048, 8, torch.device("cuda"), recompute=True)
