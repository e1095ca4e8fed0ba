"""User-facing failures: one-line ``scalemech`` CLI errors, checks before work, and job logs."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from huggingface_hub import constants as hub_constants

from scalemech import __version__
from scalemech.certify import B_GROW, VERDICTS
from scalemech.cli import ERROR_STATUS, main, parser
from scalemech.data import prepare_dataset
from scalemech.models import build_model, save_model
from scalemech.pipeline.jobs import job_context

SPEC = {"family": "resnet", "depth": 8, "width": 0.25, "in_channels": 1, "num_classes": 10}


@pytest.fixture(scope="module")
def mnist(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "mnist5k"
    prepare_dataset("mnist5k", {}, path)  # 4000 train, 1000 test images
    return path


@pytest.fixture(scope="module")
def model_pt(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "model.pt"
    torch.manual_seed(0)
    save_model(path, build_model(SPEC), SPEC)
    return path


def _error(capsys, argv: list[str]) -> str:
    """The one stderr line of a failing ``scalemech`` run (checked: status 2, no traceback)."""
    assert main(argv) == ERROR_STATUS
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("scalemech: error: ")
    return err.removeprefix("scalemech: error: ").strip()


def certify_argv(checkpoint: Path, data: Path) -> list[str]:
    """``scalemech certify`` on ``checkpoint`` and ``data`` with sizes small enough for the test data."""
    sizes = ["--pool", "8", "--M", "4", "--K", "4", "--device", "cpu"]
    return ["certify", "--checkpoint", str(checkpoint), "--data", str(data), *sizes]


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"scalemech {__version__}"


@pytest.mark.parametrize(
    "options,message",
    [
        (["--M", "0"], "M = 0 must be at least 1"),
        (["--K", "300"], "K = 300 is more than the 256 examples of each pool measured; allowed: 1 <= K <= 256"),
        (["--pool", "4", "--M", "4", "--K", "4"], "pool = 4 must be at least 5"),
        (
            ["--pool", "8"],
            "M = 16 is more than the 8 examples of each pool measured; allowed: 1 <= M <= 8; "
            "K = 16 is more than the 8 examples of each pool measured; allowed: 1 <= K <= 8",
        ),
        (["--batch-size", "0"], "batch_size = 0 must be at least 1"),
        (["--block-size", "1"], "block_size = 1 must be at least 2"),
    ],
)
def test_certify_sizes_are_checked_before_anything_loads(capsys, tmp_path, options, message) -> None:
    # neither the checkpoint nor the data exist: the sizes are judged first
    argv = ["certify", "--checkpoint", str(tmp_path / "absent.pt"), "--data", str(tmp_path / "absent"), *options]
    assert _error(capsys, argv) == f"certify: {message}"


def test_debug_shows_the_traceback(tmp_path) -> None:
    with pytest.raises(ValueError, match="M = 0"):
        main(["--debug", "certify", "--checkpoint", "x.pt", "--data", str(tmp_path), "--M", "0"])


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("data.pt", "torch", "is a binary file, not UTF-8 text, a .npy of token ids or nanoGPT's train.bin/val.bin"),
        ("weights.bin", b"\x00\xff" * 64, "is a binary file, not UTF-8 text"),
        (
            "floats.npy",
            np.linspace(0, 1, 100),
            "a .npy of token ids must hold a 1-D integer array (one stream) or a 2-D one (n documents of T "
            "tokens); this one holds float64",
        ),
        (
            "cube.npy",
            np.zeros((2, 5, 10), dtype=np.int64),
            "must hold a 1-D integer array (one stream) or a 2-D one (n documents of T tokens); this one holds "
            "int64 of shape (2, 5, 10)",
        ),
        ("documents.npy", np.zeros((10, 10), dtype=np.int64), "holds token ids, which only a Hugging Face causal LM"),
        ("train.bin", np.arange(100, dtype=np.uint16).tobytes(), "need both train.bin and val.bin"),
        ("ids.npy", np.arange(100), "holds token ids, which only a Hugging Face causal LM takes"),
    ],
)
def test_unusable_data_file_is_refused(capsys, tmp_path, model_pt, name, content, message) -> None:
    data = tmp_path / name
    if isinstance(content, np.ndarray):
        np.save(data, content)
    elif content == "torch":
        torch.save({"x": torch.arange(100)}, data)
    else:
        data.write_bytes(content)
    error = _error(capsys, certify_argv(model_pt, data))
    assert name in error and message in error
    if "binary file" in message:
        assert "prepared dataset directory" in error and ".npy of token ids (1-D integer array)" in error


def _options(top: argparse.ArgumentParser):
    """``(command, action)`` for every option of every subcommand."""
    [subparsers] = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                yield name, sub, action


def test_every_option_has_help_and_shows_its_default() -> None:
    for name, sub, action in _options(parser()):
        assert action.help, f"{name} {action.option_strings[0]} has no help text"
        if action.required or isinstance(action, argparse._StoreTrueAction):
            continue
        text = sub._get_formatter()._get_help_string(action) % vars(action)
        if action.default is None:
            assert "default" in action.help, f"{name} {action.option_strings[0]}: say what happens without it"
        else:
            assert f"(default: {action.default})" in text, f"{name} {action.option_strings[0]}: {text!r}"
    certify_help = next(sub for name, sub, _ in _options(parser()) if name == "certify").format_help()
    assert "(default: 256)" in certify_help and "(default: full)" in certify_help


def test_help_is_plain_text_with_an_example_and_the_verdicts() -> None:
    """No reStructuredText markup on the terminal; certify's help shows a command and the verdict rule."""
    certify_help = next(sub for name, sub, _ in _options(parser()) if name == "certify").format_help()
    for text in (parser().format_help(), certify_help):
        assert "``" not in text
    assert "example" in certify_help and "scalemech certify --checkpoint " in certify_help
    for verdict_word in VERDICTS:
        assert f"\n  {verdict_word} " in certify_help
    assert f"b_exact < {B_GROW}" in certify_help  # the rule certify.verdict applies


def test_misalign_takes_no_device(capsys) -> None:
    """E6 runs on the stored pools: a --device there would be accepted and ignored, so it is not offered."""
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["misalign", "--model", "d/m", "--device", "cpu"])
    assert exit_.value.code == 2 and "unrecognized arguments: --device cpu" in capsys.readouterr().err
    assert parser().parse_args(["measure", "--model", "d/m", "--device", "cpu"]).device == "cpu"


def test_help_imports_nothing_heavy() -> None:
    """``scalemech --help`` must not wait for torch (seconds): the CLI imports its commands' modules lazily."""
    code = (
        "import sys\nfrom scalemech.cli import main\n"
        "for argv in (['--help'], ['certify', '--help'], ['--version']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "heavy = ('torch', 'pandas', 'numpy', 'transformers', 'scalemech.pipeline.jobs'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_pool_larger_than_the_image_split(capsys, mnist) -> None:
    message = _error(capsys, ["certify", "--checkpoint", "never-loaded.pt", "--data", str(mnist), "--pool", "2000"])
    assert message.startswith("certify: pool = 2000 is larger than the splits") and "1000 test" in message


def test_unknown_hub_name_offline(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    text = tmp_path / "corpus.txt"
    text.write_text("To be, or not to be. " * 200)
    message = _error(
        capsys, ["certify", "--checkpoint", "nobody/no-such-model", "--data", str(text), "--device", "cpu"]
    )
    assert "'nobody/no-such-model'" in message
    assert "neither a local directory nor in the local Hugging Face cache" in message
    assert "it cannot be downloaded: offline mode (HF_HUB_OFFLINE=1)" in message


@pytest.mark.parametrize("damage", ["truncated", "zeroed", "empty"])
def test_corrupt_model_file_is_named(capsys, tmp_path, mnist, model_pt, damage) -> None:
    intact = model_pt.read_bytes()
    broken = {
        "truncated": intact[: len(intact) // 2],
        "empty": b"",
        "zeroed": intact[:1000] + bytes(4096) + intact[5096:],
    }[damage]
    path = tmp_path / "model.pt"
    path.write_bytes(broken)
    message = _error(capsys, certify_argv(path, mnist))
    assert message.startswith(f"{path}: cannot read this file, it is truncated or corrupt")


def test_invalid_config_is_one_line(capsys, tmp_path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("run: smoke\ndatasets: {}\n")
    message = _error(capsys, ["report", "--config", str(config)])
    assert message.startswith("invalid config") and "'grids' is a required property" in message


def test_job_log_holds_the_exception(tmp_path) -> None:
    log = tmp_path / "job.log"
    with pytest.raises(ValueError), job_context(str(log), threads=1):
        print("progress", file=sys.stderr)
        raise ValueError("pool of 300 images, the split holds 200")
    text = log.read_text()
    assert text.startswith("progress\n")
    assert "job failed: ValueError: pool of 300 images, the split holds 200\n" in text
    assert "Traceback (most recent call last)" in text and 'raise ValueError("pool of 300' in text
