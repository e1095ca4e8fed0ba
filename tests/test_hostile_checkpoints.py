"""Hostile checkpoints given to ``scalemech certify`` (issue 37): no code from a checkpoint directory,
with or without a terminal; no certificate of a broken or non-causal model; a ``--family`` or
``--out`` that does not fit is refused before any work; and every corrupt file is one line naming it.

Each case asserts the one-line message (``scalemech: error: …`` naming the file, exit status 2)
and the absence of side effects: no marker file written by a checkpoint's code, no ``--out`` table.
"""

from __future__ import annotations

import errno
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import transformers
from test_hf import CONFIGS, VOCAB, save_tiny, tiny_config
from transformers import AutoModelForCausalLM

from scalemech.cli import ERROR_STATUS, main
from scalemech.gradients.batches import to_device
from scalemech.gradients.capture import capture_pools, check_finite
from scalemech.models import build_model, hub, save_model
from scalemech.tasks import Examples

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--pool", "12", "--block-size", "8", "--M", "4", "--K", "4", "--batch-size", "4", "--device", "cpu"]
RESNET = {"family": "resnet", "depth": 8, "width": 0.25, "in_channels": 1, "num_classes": 10}
PROGRESS = re.compile(r"^[\w ]+:\s+\d+%\|")
"""A progress bar's line (tqdm), the only output on stderr beside the error."""
CODE = """from pathlib import Path
Path({marker!r}).write_text("the checkpoint's code ran")
"""
"""The ``.py`` a crafted checkpoint ships: importing it writes the marker."""


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    """A tiny random llama with its tokenizer: the checkpoint the crafted ones are made from."""
    return Path(save_tiny("llama", tmp_path_factory.mktemp("llama")))


@pytest.fixture(scope="module")
def ids(tmp_path_factory) -> str:
    """A ``.npy`` of token ids: data that load, so the checkpoint is what is judged."""
    path = tmp_path_factory.mktemp("ids") / "ids.npy"
    np.save(path, np.random.default_rng(0).integers(3, VOCAB, 4000))
    return str(path)


def copy_of(checkpoint: Path, path: Path) -> Path:
    path.mkdir()
    for file in checkpoint.iterdir():
        (path / file.name).write_bytes(file.read_bytes())
    return path


def edit_config(path: Path, **changes) -> None:
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    for key in [key for key, value in changes.items() if value is None]:
        del config[key]
    (path / "config.json").write_text(json.dumps(config))


def one_line_error(capsys, argv: list[str]) -> str:
    """The message of ``scalemech argv``, checked: exit status 2, one ``scalemech: error:`` line, the
    last one, no traceback (lines before it are only progress bars: loading weights, capture …)."""
    assert main(argv) == ERROR_STATUS
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and lines and lines[-1].startswith("scalemech: error: "), err
    assert all(PROGRESS.match(line) for line in lines[:-1]), err
    return lines[-1].removeprefix("scalemech: error: ")


def crafted(path: Path, marker: Path, config: dict) -> Path:
    """A checkpoint directory whose config.json (``config``) points to ``evil.py`` for the config, the
    model and the tokenizer; importing it writes ``marker``."""
    path.mkdir(exist_ok=True)
    auto_map = {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilForCausalLM"}
    (path / "config.json").write_text(json.dumps({**config, "auto_map": auto_map}))
    (path / "evil.py").write_text(CODE.format(marker=str(marker)))
    tokenizer_config = path / "tokenizer_config.json"
    settings = json.loads(tokenizer_config.read_text()) if tokenizer_config.is_file() else {}
    settings["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
    tokenizer_config.write_text(json.dumps(settings))
    return path


def run_cli(argv: list[str], terminal: bool, env: dict[str, str], timeout: float = 90) -> tuple[int, str]:
    """``(exit status, output)`` of ``scalemech argv`` in a fresh Python: without a terminal (stdin
    /dev/null), or on a pty that answers "y" to transformers' "[y/N]" (sent at once, and again at
    every prompt)."""
    script = f"import sys; from scalemech.cli import main; sys.exit(main({argv!r}))"
    if not terminal:
        done = subprocess.run(
            [sys.executable, "-c", script], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env
        )
        return done.returncode, done.stdout + done.stderr
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the pty
        os.execve(sys.executable, [sys.executable, "-c", script], env)
    os.write(fd, b"y\n")
    output, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the pty
            break
        if not chunk:
            break
        output += chunk
        if b"[y/N]" in chunk:
            os.write(fd, b"y\n")
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace")


def subprocess_env(tmp_path: Path) -> dict[str, str]:
    """This interpreter's environment with scalemech importable, offline, and a scratch Hugging Face home
    (where transformers would copy a checkpoint's code before importing it)."""
    path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}


# -- no code from a model directory -----------------------------------------------------------


@pytest.mark.parametrize("terminal", [False, True], ids=["no terminal", "pty answering y"])
def test_a_checkpoint_that_needs_its_own_code_is_refused_and_runs_nothing(tmp_path, ids, terminal) -> None:
    """config.json with auto_map and a model_type transformers does not know: refused from that file
    in one line (status 2), its evil.py never imported, even on a terminal that says "y"."""
    marker = tmp_path / "PWNED"
    config = {"model_type": "evil_lm", "architectures": ["EvilForCausalLM"], "num_hidden_layers": 2}
    checkpoint = crafted(tmp_path / "evil", marker, config)
    argv = ["certify", "--checkpoint", str(checkpoint), "--data", ids, "--device", "cpu"]
    status, output = run_cli(argv, terminal, subprocess_env(tmp_path))
    assert status == ERROR_STATUS, output
    [line] = [line for line in output.splitlines() if "scalemech: error:" in line]
    assert f"{checkpoint / 'config.json'}: model_type 'evil_lm'" in line and "auto_map" in line
    assert "trust_remote_code=False" in line and "Traceback" not in output and "[y/N]" not in output
    assert not marker.exists()


def test_auto_map_beside_a_known_model_type_is_ignored(tmp_path, llama) -> None:
    """A llama checkpoint whose config.json and tokenizer_config.json point to shipped code: certified
    on text with transformers' own classes (trust_remote_code=False), on a pty answering "y" to any
    question; the shipped code never runs."""
    marker = tmp_path / "PWNED"
    checkpoint = copy_of(llama, tmp_path / "llama")
    crafted(checkpoint, marker, json.loads((llama / "config.json").read_text()))
    (tmp_path / "text.txt").write_text(" ".join(["to be or not to be, that is the question"] * 200))
    argv = ["certify", "--checkpoint", str(checkpoint), "--data", str(tmp_path / "text.txt"), *TINY, "--points", "1"]
    status, output = run_cli(argv, True, subprocess_env(tmp_path))
    assert status == 0, output
    assert "layer.1" in output and "[y/N]" not in output and not marker.exists()


# -- which models are causal ------------------------------------------------------------------


def test_the_mappings_come_from_transformers_source_without_importing_it() -> None:
    """hub reads transformers' auto mappings with ast: the same dicts its modules hold, and neither
    torch nor transformers is imported to read them."""
    from transformers.models.auto import auto_mappings, modeling_auto

    mappings = hub.transformers_mappings()
    for name in hub.MAPPINGS["models/auto/modeling_auto.py"]:
        assert mappings[name] == dict(getattr(modeling_auto, name)), name
    configs = auto_mappings.CONFIG_MAPPING_NAMES  # configuration_auto adds a few names to it when imported
    from_source = mappings["CONFIG_MAPPING_NAMES"]
    assert from_source.items() <= configs.items() and len(configs) - len(from_source) < 20
    script = (
        "import sys; from scalemech.models import hub; hub.transformers_mappings(); "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, sorted(sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_every_tested_family_is_a_causal_lm(tmp_path, family) -> None:
    tiny_config(family).save_pretrained(tmp_path)
    assert hub.decoder_config(str(tmp_path))["model_type"] == tiny_config(family).model_type


@pytest.mark.parametrize(
    "config, accepted",
    [
        (transformers.BertConfig(), False),  # an encoder: its ForCausalLM class needs is_decoder
        (transformers.BertConfig(is_decoder=True), True),
        (transformers.RobertaConfig(), False),
        (transformers.BartConfig(is_encoder_decoder=False), False),  # BART's decoder alone, not said
        (transformers.XLNetConfig(), False),  # attends both ways
        (transformers.CLIPTextConfig(), False),  # no causal-LM class
    ],
    ids=["bert", "bert decoder", "roberta", "bart", "xlnet", "clip text"],
)
def test_causality_is_the_model_type_s_causal_lm_class(tmp_path, config, accepted) -> None:
    """Decided from model_type without architectures (removed): what AutoModelForCausalLM makes of it."""
    config.save_pretrained(tmp_path)
    edit_config(tmp_path, architectures=None)
    if accepted:
        hub.decoder_config(str(tmp_path))
    else:
        with pytest.raises(ValueError, match=f"config.json: model_type '{config.model_type}'.*not a causal LM"):
            hub.decoder_config(str(tmp_path))


def test_a_masked_lm_without_architectures_is_refused_by_certify(capsys, tmp_path, ids) -> None:
    """Issue 37's case: a BertForMaskedLM whose config.json lacks architectures was certified as a causal
    LM; now refused in one line naming the file, before its weights load."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2)
    transformers.BertForMaskedLM(config).save_pretrained(tmp_path / "bert")
    edit_config(tmp_path / "bert", architectures=None)
    out = tmp_path / "certificate.csv"
    argv = ["certify", "--checkpoint", str(tmp_path / "bert"), "--data", ids, *TINY, "--out", str(out)]
    message = one_line_error(capsys, argv)
    assert message.startswith(f"{tmp_path / 'bert' / 'config.json'}: model_type 'bert'")
    assert "not a causal LM" in message and "is_decoder: true" in message and not out.exists()


# -- one line naming the file -----------------------------------------------------------------


def _config_text(path: Path, text: bytes) -> str:
    (path / "config.json").write_bytes(text)
    return str(path / "config.json")


def _truncated(path: Path) -> str:
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return str(weights)


def _empty(path: Path) -> str:
    (path / "model.safetensors").write_bytes(b"")
    return str(path / "model.safetensors")


def _wider(path: Path) -> str:
    edit_config(path, hidden_size=64)
    return str(path / "model.safetensors")


def _deeper(path: Path) -> str:
    edit_config(path, num_hidden_layers=4)  # layers 2 and 3 would be left random
    return str(path / "model.safetensors")


def _no_model_type(path: Path) -> str:
    edit_config(path, model_type=None)
    return str(path / "config.json")


CASES = {
    "config is a JSON list": (lambda path: _config_text(path, b"[1, 2, 3]"), "holds a JSON list, not an object"),
    "malformed config": (lambda path: _config_text(path, b'{"model_type": "llama",'), "not valid JSON"),
    "Latin-1 config": (lambda path: _config_text(path, '{"model_type": "llamé"}'.encode("latin-1")), "not UTF-8"),
    "binary config": (lambda path: _config_text(path, bytes(range(256))), "not UTF-8"),
    "config without model_type": (_no_model_type, "model_type None does not name"),
    "truncated safetensors": (_truncated, "truncated, corrupt or missing (SafetensorError"),
    "empty safetensors": (_empty, "truncated, corrupt or missing (SafetensorError"),
    "shapes that do not fit": (_wider, "weights have other shapes than config.json gives"),
    "layers the weights lack": (_deeper, "config.json asks for weights the files lack (model.layers.2."),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_broken_checkpoint_is_one_line_naming_the_file(capsys, tmp_path, llama, ids, case) -> None:
    damage, expected = CASES[case]
    checkpoint = copy_of(llama, tmp_path / "llama")
    named = damage(checkpoint)
    out = tmp_path / "certificate.csv"
    message = one_line_error(
        capsys, ["certify", "--checkpoint", str(checkpoint), "--data", ids, *TINY, "--out", str(out)]
    )
    assert message.startswith(f"{named}: ") and expected in message, message
    assert not out.exists()


def test_a_pytorch_model_bin_carrying_code_is_refused_in_one_line(capsys, tmp_path, llama, ids) -> None:
    """A pickle that would run ``touch`` when unpickled: refused by torch's weights-only loading, in one
    line naming the file and the object, and nothing runs."""

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    marker = tmp_path / "PWNED"
    checkpoint = copy_of(llama, tmp_path / "llama")
    (checkpoint / "model.safetensors").unlink()
    torch.save({"model.embed_tokens.weight": Payload()}, checkpoint / "pytorch_model.bin")
    message = one_line_error(capsys, ["certify", "--checkpoint", str(checkpoint), "--data", ids, *TINY])
    assert message.startswith(f"{checkpoint / 'pytorch_model.bin'}: refused, it holds posix.system")
    assert not marker.exists()


def test_an_existing_file_is_not_said_to_be_missing(capsys, tmp_path, ids) -> None:
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\0" * 64)
    message = one_line_error(capsys, ["certify", "--checkpoint", str(weights), "--data", ids, "--device", "cpu"])
    assert str(weights) in message and "is a file, not a Hugging Face checkpoint directory" in message
    assert "does not exist" not in message


# -- no silent certificate --------------------------------------------------------------------


def test_nan_weights_are_refused_at_the_first_batch(capsys, tmp_path, llama, ids) -> None:
    """Issue 37's case: NaN weights gave exit 0 and every row nan; now one line at the train pool's first
    batch (of 3), and no table written."""
    model = AutoModelForCausalLM.from_pretrained(llama)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.fill_(float("nan"))
    model.save_pretrained(tmp_path / "nan")
    out = tmp_path / "certificate.csv"
    argv = ["certify", "--checkpoint", str(tmp_path / "nan"), "--data", ids, *TINY, "--out", str(out)]
    message = one_line_error(capsys, argv)
    assert message == (
        f"{tmp_path / 'nan'} (train pool, batch 1 of 3): the model's loss on these data is nan: "
        "its weights or inputs are broken"
    )
    assert not out.exists()


def test_a_non_finite_gradient_is_named_with_its_point() -> None:
    finite = {"layer.0": {"full": torch.ones(2, 3)}, "layer.1": {"full": torch.ones(2, 3)}}
    check_finite(torch.tensor(1.5), finite, [[torch.ones(3)]], "m")
    broken = {**finite, "layer.1": {"full": torch.tensor([[1.0, float("inf"), 0.0]] * 2)}}
    with pytest.raises(ValueError, match=r"^m: the model's loss on these data is finite \(1.5\) but its gradient "):
        check_finite(torch.tensor(1.5), broken, [], "m")
    with pytest.raises(ValueError, match="gradient of a new block's weights is not"):
        check_finite(torch.tensor(1.5), finite, [[torch.tensor([float("nan")])]], "m")


def test_the_pipeline_s_capture_keeps_non_finite_numbers(tmp_path) -> None:
    """The check is certify's (``require_finite``): the pipeline's measurement of a NaN model still
    captures its pools, with a nan mean loss."""
    torch.manual_seed(0)
    model = build_model(RESNET).eval()
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    examples = Examples("train", torch.randn(6, 1, 8, 8), torch.arange(6) % 10, torch.arange(6), 0)
    points = model.insertion_points()[:1]
    pools = capture_pools(model, examples, points, tmp_path / "a", 3, to_device("cpu"), "float32", ("full",))
    assert np.isnan(pools[points[0], "full"].meta["mean_loss"])
    with pytest.raises(ValueError, match=r"^the model \(train pool, batch 1 of 2\): the model's loss .* is nan"):
        capture_pools(
            model, examples, points, tmp_path / "b", 3, to_device("cpu"), "float32", ("full",), require_finite=True
        )


@pytest.fixture
def resnet_pt(tmp_path) -> Path:
    torch.manual_seed(0)
    path = tmp_path / "model.pt"
    save_model(path, build_model(RESNET), RESNET)
    return path


def test_a_family_the_file_does_not_hold_is_refused(capsys, tmp_path, resnet_pt) -> None:
    """Issue 37's case: --family llama on a ResNet model.pt was ignored; now refused naming both."""
    data = tmp_path / "data.txt"
    data.write_text("x" * 10_000)
    for family, expected in [
        ("llama", f"--family llama: {resnet_pt} holds a resnet model (its spec's family); give --family resnet"),
        ("hf", "--family hf needs a Hugging Face checkpoint (directory or hub name);"),
    ]:
        argv = ["certify", "--checkpoint", str(resnet_pt), "--data", str(data), "--family", family, *TINY]
        message = one_line_error(capsys, argv)
        assert message.startswith(expected) and str(resnet_pt) in message, message


# -- --out ------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["missing directory", "a directory", "unwritable"])
def test_an_unwritable_out_is_refused_before_any_work(capsys, tmp_path, monkeypatch, llama, ids, where) -> None:
    from scalemech.certify import measurement, output

    out = {
        "missing directory": tmp_path / "nowhere" / "c.csv",
        "a directory": tmp_path,
        "unwritable": tmp_path / "c.csv",
    }[where]
    if where == "unwritable":  # as root no mode bit stops a write: the refusal mkstemp gives elsewhere

        def refused(**kwargs):
            raise PermissionError(errno.EACCES, "Permission denied")

        monkeypatch.setattr(output.tempfile, "mkstemp", refused)
    started = lambda *args: pytest.fail("work started before --out was checked")  # noqa: E731
    monkeypatch.setattr(measurement, "checkpoint_spec", started)
    message = one_line_error(capsys, ["certify", "--checkpoint", str(llama), "--data", ids, *TINY, "--out", str(out)])
    assert message.startswith(f"--out {str(out)!r}"), message
    expected = {
        "missing directory": "does not exist",
        "a directory": "is a directory",
        "unwritable": "Permission denied",
    }
    assert expected[where] in message and not (tmp_path / "nowhere").exists()


def test_a_full_disk_at_the_end_is_named_and_leaves_no_partial_table(capsys, tmp_path, monkeypatch, llama, ids) -> None:
    out = tmp_path / "tables" / "c.csv"
    out.parent.mkdir()

    def full(self, target, *args, **kwargs):
        target.write("point,point_index\n")  # a partial write, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    argv = ["certify", "--checkpoint", str(llama), "--data", ids, *TINY, "--points", "1", "--out", str(out)]
    message = one_line_error(capsys, argv)
    assert message.startswith(f"--out {str(out)!r}: the table could not be written (No space left on device)")
    assert list(out.parent.iterdir()) == []


def test_out_is_written_whole(capsys, tmp_path, llama, ids) -> None:
    out = tmp_path / "c.csv"
    assert main(["certify", "--checkpoint", str(llama), "--data", ids, *TINY, "--points", "1", "--out", str(out)]) == 0
    assert f"written {out}" in capsys.readouterr().err
    assert list(pd.read_csv(out)["point"]) == ["layer.1"] and sorted(p.name for p in tmp_path.iterdir()) == ["c.csv"]
