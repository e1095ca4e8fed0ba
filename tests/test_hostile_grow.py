"""Hostile and careless inputs to ``grow``, third pass (issue 59): a model card that carries no markup from
a path, a name or the command; no traceback on a full disk, a file-size limit or a lost torchrun process;
nothing a launcher or a flag asks for ignored in silence; every refusal before the work, once, exit 2,
naming the option typed; E12's ``adapt`` sizes checked against its data when the config is validated.

Each case asserts its one line and that the inputs (checkpoint, data, retain data) keep their sha256.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import os
import resource
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml
from markdown_it import MarkdownIt
from snakemake_run import snakemake
from test_grow import token_file
from test_hardening import grow_argv, last_line_error, no_weights, tree_digest
from test_hf import save_tiny

from scalemech.cli import ERROR_STATUS, main
from scalemech.config import ConfigError, validate_config
from scalemech.data import DataError
from scalemech.training import engine

ROOT = Path(__file__).resolve().parents[1]
TORCHRUN = Path(sys.executable).parent / "torchrun"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
HOSTILE = "x<script>alert(1)</script>\n```\n<img src=x onerror=alert(1)>](javascript:alert(1))"
"""A name that, written into Markdown unescaped, opens a script, closes a fence, and adds an image handler."""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A tiny llama, its data and other (retain) data, in one directory: what no case may change."""
    root = tmp_path_factory.mktemp("inputs")
    return {
        "source": Path(save_tiny("llama", root / "llama")),
        "data": token_file(root / "ids.npy"),
        "retain": token_file(root / "old.npy", seed=1),
    }


@pytest.fixture
def unchanged(inputs):
    """The inputs' sha256 before the case, checked after it."""
    root = inputs["source"].parent
    before = tree_digest(root)
    yield inputs
    assert tree_digest(root) == before, "an input changed"


# -- 1. the model card carries no markup from user input ----------------------------------------


class Tags(HTMLParser):
    """Every tag and attribute of rendered HTML."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.add(tag)
        self.attributes += attrs


CARD_TAGS = {"h1", "h2", "p", "ul", "li", "code", "pre", "strong", "table", "thead", "tbody", "tr", "th", "td"}


def rendered(markdown: str) -> Tags:
    """``markdown`` rendered as CommonMark with raw HTML on (and GFM tables, as the Hub renders cards)."""
    tags = Tags()
    tags.feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))
    return tags


def assert_inert(markdown: str) -> None:
    """Only the card's own tags, and no attribute at all: no live tag, handler or link."""
    tags = rendered(markdown)
    assert tags.tags <= CARD_TAGS and not tags.attributes, (tags.tags - CARD_TAGS, tags.attributes)


def test_the_card_escapes_every_string_a_user_controls() -> None:
    """A checkpoint path, a ``--data`` path inside the command, a model_type and point names holding a
    script, a fence breaker, an image handler and a ``](javascript:…)`` link: rendered, none is live,
    and each reads as written."""
    from scalemech.grow.card import card_text

    record = {
        "source": {"checkpoint": f"/models/{HOSTILE}", "hub_id": None, "model_type": f"llama{HOSTILE}", "layers": 2},
        "layers": 3,
        "inserted_layers": [1],
        "placement": {"at": "layer.0"},
        "decision": {"recommended": False, "why": "no gain", "rule": "2 SE", "written": f"grown{HOSTILE}"},
        "decisions": [{"round": 1, "chosen": f"layer.0{HOSTILE}", "certificate": [{"point": HOSTILE, "mu_sq": 0.5}]}],
        "held_out": {
            "windows": 8,
            "arms": {"old": {"new_loss": 5.7}, HOSTILE: {"new_loss": 5.6, "gain": 0.1, "gain_se": 0.01}},
        },
        "arms": {},
        "command": f"scalemech grow --checkpoint /models/x --data '{HOSTILE}' --out '/o/````'",
    }
    text = card_text(record)
    assert_inert(text)
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 6 and "](javascript:alert(1))" in html
    assert "<pre><code>scalemech grow --checkpoint /models/x --data 'x&lt;script&gt;" in html  # the command, whole


def test_a_grown_cards_paths_render_inert(tmp_path, unchanged) -> None:
    """``grow`` itself, from a checkpoint directory and a data file whose names hold ``HOSTILE``."""
    source = Path(shutil.copytree(unchanged["source"], tmp_path / HOSTILE.replace("/", "_")))
    data = Path(shutil.copyfile(unchanged["data"], tmp_path / f"{HOSTILE.replace('/', '_')}.npy"))
    assert main(grow_argv(source, data, tmp_path / "out", "--train", "none")) == 0
    card = (tmp_path / "out" / "README.md").read_text()
    body = card.split("\n---\n", 1)[1]  # the YAML front matter: huggingface_hub's, checked by its own tests
    assert_inert(body)
    assert "<script>" in body and "onerror" in body  # written, as text, not as markup


# -- 2. no traceback reaches a user --------------------------------------------------------------


@contextlib.contextmanager
def file_size_limit(size: int):
    """This process's file-size limit (``ulimit -f``, the soft one) at ``size`` bytes for the block. Python
    ignores SIGXFSZ, so a write beyond it fails with ``EFBIG`` as it does under a shell's ``ulimit -f``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@pytest.mark.parametrize("where", ["final write", "resume state"])
def test_a_file_size_limit_at_any_write_says_so(capsys, tmp_path, unchanged, where) -> None:
    """A file-size limit below the grown weights (``--train none``: the final write is the first large one)
    or below the first resume state (torch's archive writer says only "unexpected pos"): one line naming
    what, where, the limit, the size needed and the rerun; ``--out`` never appears whole."""
    out = tmp_path / "out"
    more = ["--train", "none"] if where == "final write" else []
    with file_size_limit(100_000):
        message = last_line_error(capsys, grow_argv(unchanged["source"], unchanged["data"], out, *more))
    if where == "final write":
        assert message.startswith(f"writing the grown checkpoint to {out} failed (File too large (the file-size "
                                  "limit, ulimit -f, is 100 kB, about 188 kB needed: raise it))"), message  # fmt: skip
        assert message.endswith("rerun the same command") and not out.exists()
    else:
        state = f"{out}/.grow-state/grown-1/step-000000003.pt"
        assert message.startswith(
            f"writing the resume state of step 3 to {state} failed: File too large (the file-size limit, ulimit -f, "
            f"is 100 kB, about 116 kB needed: raise it); rerun the same command to resume from the last resume state"
        ), message
        assert "unexpected pos" not in message and not (out / "growth.json").exists()


def test_a_full_disk_in_safetensors_says_so(capsys, monkeypatch, tmp_path, unchanged) -> None:
    """safetensors reports a full disk as ``SafetensorError`` ("os error 28"), not an ``OSError``."""
    from safetensors import SafetensorError
    from transformers import PreTrainedModel

    def full(self, directory, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", full)
    out = tmp_path / "out"
    message = last_line_error(capsys, grow_argv(unchanged["source"], unchanged["data"], out, "--train", "none"))
    assert message.startswith(f"writing the grown checkpoint to {out} failed (No space left on device (")
    assert "kB needed: free space there)" in message and message.endswith("rerun the same command")
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == []


def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("where", ["lock record", "run record", "gradient pools"])
def test_a_full_disk_at_any_write_names_it(capsys, monkeypatch, tmp_path, unchanged, where) -> None:
    """The lock's record of its holder, the run record (``--out/.grow-state/run.json``) and the
    certificate's scratch pools (neither writer names its file) fail on a full disk: one line naming what,
    where, and how to resume."""
    from scalemech.gradients import pools
    from scalemech.training import checkpoints

    out = tmp_path / "out"
    if where == "lock record":
        monkeypatch.setattr(checkpoints.os, "pwrite", full)
        expected = f"writing the lock's record of its holder to {out}/..grow-state.lock failed: No space left"
    elif where == "run record":
        original = Path.write_text

        def write_text(self, *args, **kwargs):
            return full() if self.name.startswith(".run.json.tmp") else original(self, *args, **kwargs)

        monkeypatch.setattr(Path, "write_text", write_text)
        expected = f"writing the run's identity and wall time to {out}/.grow-state/run.json failed: No space left"
    else:
        monkeypatch.setattr(pools.PoolWriter, "write", full)
        expected = "writing certify's gradient pools to /"
    message = last_line_error(capsys, grow_argv(unchanged["source"], unchanged["data"], out))
    assert message.startswith(expected) and "No space left on device (" in message, message
    assert message.endswith("(one every --checkpoint-every 50 steps)") and "rerun the same command" in message


def test_pools_beyond_the_file_size_limit_are_refused_before_any_capture(capsys, monkeypatch, tmp_path, unchanged):
    from scalemech.certify import measurement
    from scalemech.gradients import pools

    monkeypatch.setattr(measurement, "file_size_limit", lambda: 1000)
    monkeypatch.setattr(pools.PoolWriter, "__init__", lambda *a, **k: pytest.fail("a pool was written"))
    message = last_line_error(capsys, grow_argv(unchanged["source"], unchanged["data"], tmp_path / "out"))
    assert message.startswith("certify's gradient pools need files of 6.14 kB, beyond this shell's file-size limit "
                              "(ulimit -f) of 1 kB; raise the limit"), message  # fmt: skip


def test_a_lost_peer_is_named_by_the_rank_left(tmp_path) -> None:
    """``engine.lost_peer`` on a collective's error, its peer's process ended: the rank named, reported by
    the lowest rank left only; any other error is not a lost peer."""
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    reset = RuntimeError("[../gloo/transport/tcp/pair.cc:545] Read error [127.0.0.1]:4242: Connection reset by "
                         "peer. This is typically caused by a remote worker hanging")  # fmt: skip
    processes = [(host, os.getpid()), (host, dead.pid)]
    lost = engine.lost_peer(reset, processes, 0)
    assert str(lost) == ("rank 1 of the 2 processes of this launch ended mid-run, and rank 0 stopped with it (Read "
                         "error [127.0.0.1]:4242: Connection reset by peer)") and lost.report  # fmt: skip
    assert engine.lost_peer(reset, [(host, dead.pid), (host, os.getpid())], 1).report  # rank 0 lost: 1 says so
    three = [(host, os.getpid()), ("elsewhere", 1), (host, dead.pid)]
    assert engine.lost_peer(reset, three, 0).report and not engine.peer_lost(three, 1, [2], "x").report
    assert engine.lost_peer(ValueError("Connection reset by peer"), processes, 0) is None
    assert engine.lost_peer(RuntimeError("CUDA out of memory"), processes, 0) is None
    assert engine.lost_peer(reset, processes[:1], 0) is None


def test_the_launchers_sigterm_ends_in_one_line(tmp_path) -> None:
    """torchrun stops every process once one has ended (SIGTERM), often before a collective fails: within
    ``stopped_by_launcher`` that is the lost peer when a rank of this host has ended, else an interruption;
    outside it, SIGTERM's handler is as it was."""
    import signal
    import socket
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a SIGTERM handler is set from the main thread only: this one would end the test process")
    host, dead = socket.gethostname(), subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    before = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(engine.PeerLost, match="^rank 1 of the 2 processes .* rank 0 stopped with it \\(the "):
            with engine.stopped_by_launcher([(host, os.getpid()), (host, dead.pid)], 0):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
        with pytest.raises(KeyboardInterrupt, match="the launcher stopped this process: SIGTERM"):
            with engine.stopped_by_launcher([(host, os.getpid()), (host, alive.pid)], 0):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
    finally:
        alive.kill()
    assert signal.getsignal(signal.SIGTERM) == before


def test_an_fsdp_configuration_accelerate_refuses_is_one_line(monkeypatch) -> None:
    import accelerate.utils

    def refused():
        raise RuntimeError("FSDP parameter initialization with `sync_module_states=True` is not supported on cpu.")

    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setattr(accelerate.utils, "FullyShardedDataParallelPlugin", refused)
    with pytest.raises(ValueError, match=r"^grow: accelerate refuses its FSDP configuration \(FSDP parameter .* on "
                                         r"cpu\.\); grow shards as config/accelerate/fsdp2.yaml says$"):  # fmt: skip
        engine.check_engine("cpu")


def torchrun(out: Path, inputs: dict[str, Path], *more: str, processes: int = 2) -> subprocess.Popen:
    command = [str(TORCHRUN), "--standalone", "--nproc_per_node", str(processes), "-m", "scalemech.cli",
               *grow_argv(inputs["source"], inputs["data"], out, *more)]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def worker(launcher: subprocess.Popen, rank: int) -> int:
    """The pid of torchrun's worker of ``rank``."""
    for _ in range(600):
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(launcher.pid)], capture_output=True, text=True)
        for pid in map(int, children.stdout.split()):
            try:
                if f"RANK={rank}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    return pid
            except OSError:
                continue
        time.sleep(0.1)
    pytest.fail("no worker found")


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds torchrun's workers in /proc")
def test_a_killed_torchrun_worker_is_one_line_and_the_rerun_resumes(tmp_path, unchanged) -> None:
    """``kill -9`` of rank 1 once the grown arm has a resume state: rank 0 says in one line that rank 1
    ended and how to resume (no traceback of grow's); the same command then finishes from the states."""
    out, more = tmp_path / "out", ("--steps", "100", "--checkpoint-every", "10")
    launcher = torchrun(out, unchanged, *more)
    victim = worker(launcher, 1)
    for _ in range(1200):
        if list(out.glob(".grow-state/grown-1/step-*.pt")) or launcher.poll() is not None:
            break
        time.sleep(0.1)
    os.kill(victim, 9)
    _, err = launcher.communicate(timeout=120)
    lines = [line.split("\r")[-1] for line in err.splitlines()]
    said = [line for line in lines if "scalemech: " in line]
    assert len(said) == 1, err[-3000:]
    assert said[0].startswith("scalemech: error: rank 1 of the 2 processes of this launch ended mid-run, and rank 0 "
                              "stopped with it ("), said  # fmt: skip
    assert said[0].endswith(f"rerun the same command to resume from the last resume state in {out}/.grow-state (one "
                            "every --checkpoint-every 10 steps)"), said  # fmt: skip
    assert not any(line.startswith("[rank") for line in lines), err[-3000:]  # no worker's traceback
    done = torchrun(out, unchanged, *more)
    _, err = done.communicate(timeout=240)
    assert done.returncode == 0 and (out / "growth.json").is_file(), err[-3000:]


# -- 3. nothing a launcher or a flag asks for is ignored in silence; 4. refusals before the work --


def accelerate_env(tmp_path: Path, *launch: str, config: str | None = None) -> dict[str, str]:
    """The environment ``accelerate launch *launch`` (with ``config`` as its config file) gives grow's
    processes, by accelerate's own parsing."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env, prepare_simple_launcher_cmd_env

    if config is not None:
        (tmp_path / "accelerate.yaml").write_text(config)
        launch = ("--config_file", str(tmp_path / "accelerate.yaml"), *launch)
    args = _validate_launch_command(launch_command_parser().parse_args([*launch, "-m", "scalemech.cli", "grow"]))[0]
    several = (args.use_fsdp or args.multi_gpu) and not args.cpu
    env = prepare_multi_gpu_env(args) if several else prepare_simple_launcher_cmd_env(args)[1]
    return {key: value for key, value in env.items() if key.startswith(("ACCELERATE_", "FSDP_", "MASTER_"))}


MULTI_CPU = "distributed_type: MULTI_CPU\nnum_machines: 1\nnum_processes: 2\nmixed_precision: 'no'\nuse_cpu: true\n"
FSDP1 = """distributed_type: FSDP
num_machines: 1
num_processes: 2
mixed_precision: 'no'
fsdp_config:
  fsdp_version: 1
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_offload_params: true
  fsdp_sync_module_states: false
  fsdp_cpu_ram_efficient_loading: false
"""
LAUNCHES = {
    "--mixed_precision bf16": ((), "--mixed_precision", "bf16"),
    "mixed_precision: bf16 in a config file": ("distributed_type: 'NO'\nnum_processes: 1\nmixed_precision: bf16\n",),
    "MULTI_CPU with num_processes: 2": (MULTI_CPU,),
    "FSDP1 with offload, and --shard": (FSDP1,),
}
REFUSED_LAUNCHES = {
    "--mixed_precision bf16": "the launcher asks for what grow does not do: mixed_precision bf16 (allowed: no",
    "mixed_precision: bf16 in a config file": "mixed_precision bf16 (allowed: no: grow sets its own",
    "MULTI_CPU with num_processes: 2": "num_processes above 1, yet one process started (accelerate launch starts "
    "several CPU processes only with --mpirun_hostfile) (allowed: torchrun --nproc_per_node N",
    "FSDP1 with offload, and --shard": "accelerate's FSDP configuration asks for what grow does not do: fsdp_version "
    "1 (allowed: 2); fsdp_state_dict_type SHARDED_STATE_DICT (allowed: FULL_STATE_DICT); fsdp_offload_params true",
}


@pytest.mark.parametrize("case", sorted(LAUNCHES))
def test_what_accelerate_launch_asks_is_refused_before_any_weight_loads(capsys, monkeypatch, tmp_path, unchanged,
                                                                        case) -> None:  # fmt: skip
    """Each launch's environment (accelerate's own parsing of its flags or config file), refused in one
    line naming every setting grow would not follow, before any weight loads (FSDP1 with ``--shard``,
    which once skipped the check, before the certificate too)."""
    config, *flags = LAUNCHES[case]
    for key, value in accelerate_env(tmp_path, *flags, config=config or None).items():
        monkeypatch.setenv(key, value)
    no_weights(monkeypatch)
    more = ["--shard"] if "--shard" in case else []
    message = last_line_error(capsys, grow_argv(unchanged["source"], unchanged["data"], tmp_path / "out", *more))
    assert REFUSED_LAUNCHES[case] in message, message
    assert not (tmp_path / "out").exists()


def test_launch_problems_name_each_setting() -> None:
    problems = engine.launch_problems("cuda", {"ACCELERATE_DYNAMO_BACKEND": "INDUCTOR", "ACCELERATE_USE_CPU": "True",
                                               "ACCELERATE_USE_DEEPSPEED": "true"})  # fmt: skip
    assert problems == [
        "dynamo_backend inductor (allowed: no: grow runs eagerly)",
        "use_cpu true, yet grow computes on cuda (allowed: grow --device cpu, or no --cpu)",
        "distributed_type DEEPSPEED (allowed: MULTI_CPU, MULTI_GPU or FSDP version 2)",
    ]
    assert engine.launch_problems("cpu", {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "h"}) == []  # not accelerate's
    torchrun_env = {"ACCELERATE_MIXED_PRECISION": "no", "MASTER_ADDR": "h", "WORLD_SIZE": "2"}
    assert engine.launch_problems("cpu", torchrun_env) == []


FLAGS = {
    "--shard without a launcher": (["--shard"], "--shard shards each arm over the processes of a launch, and this is "
                                   "one process; allowed: torchrun --nproc_per_node N"),
    "--max-forgetting without --retain": (["--max-forgetting", "0.05"], "grow: --max-forgetting 0.05 bounds "
                                          "forgetting on --retain data: give --retain"),
    "--retain the same path as --data": (["--retain", "{data}"], "--retain '{data}' is --data '{data}': forgetting "
                                         "would be measured on the domain the arms train on"),
    "--retain a copy of --data": (["--retain", "{copy}"], "--retain '{copy}' holds the same bytes as --data "
                                  "'{data}'"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(FLAGS))
def test_a_flag_grow_would_ignore_is_refused_before_any_weight_loads(capsys, monkeypatch, tmp_path, unchanged, case):
    more, expected = FLAGS[case]
    names = {"data": unchanged["data"], "copy": shutil.copyfile(unchanged["data"], tmp_path / "copy.npy")}
    no_weights(monkeypatch)
    argv = grow_argv(unchanged["source"], unchanged["data"], tmp_path / "out", *(m.format(**names) for m in more))
    message = last_line_error(capsys, argv)
    assert message.startswith(expected.format(**names)), message


@pytest.mark.timeout(120)
def test_a_batch_two_processes_cannot_share_is_refused_once_before_the_certificate(tmp_path, unchanged) -> None:
    """``--batch-size 3`` on 2 torchrun processes: one line, from rank 0, exit 2 from each process, and no
    certificate printed (no output at all on stdout)."""
    launcher = torchrun(tmp_path / "out", unchanged, "--batch-size", "3")
    out, err = launcher.communicate(timeout=100)
    said = [line for line in err.splitlines() if line.startswith("scalemech: ")]
    assert said == ["scalemech: error: --batch-size 3 does not split over the 2 processes of this launch; allowed: "
                    "a multiple of 2"], err[-3000:]  # fmt: skip
    assert out == "" and "rank      : 0 (local_rank: 0)\n  exitcode  : 2" in err, err[-3000:]  # torchrun's table
    assert not (tmp_path / "out").exists()


def test_a_model_whose_layers_cannot_start_as_the_identity_is_refused(capsys, monkeypatch, tmp_path, unchanged):
    """jetmoe's layers have no output projection of a known name: refused before any weight loads."""
    from transformers import AutoModelForCausalLM, JetMoeConfig

    config = JetMoeConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_key_value_heads=2, kv_channels=8,
                          intermediate_size=64, num_local_experts=2, num_experts_per_tok=1)  # fmt: skip
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "jetmoe")
    no_weights(monkeypatch)
    message = last_line_error(capsys, grow_argv(tmp_path / "jetmoe", unchanged["data"], tmp_path / "out"))
    assert message.startswith(
        "model_type 'jetmoe' cannot be grown or certified: a new layer is a copy of one of its decoder layers with "
        "the projections that write into the residual stream zeroed"
    ), message
    assert "OUTPUT_PROJECTIONS" not in message and "allowed: a model of the families" in message


# -- 5. errors name the option the user typed ----------------------------------------------------

BAD_RETAIN = {
    "an empty directory": "is a directory holding no manifest.json nor train.bin and val.bin",
    "a junk directory": "is a directory holding no manifest.json nor train.bin and val.bin",
    "the checkpoint directory": "is a directory holding no manifest.json nor train.bin and val.bin",
    "a symlink to model.safetensors": "is a binary file, not UTF-8 text",
    "Latin-1 text": "is a binary file, not UTF-8 text",
    "/dev/null": "is no regular file",
    "a FIFO": "is no regular file",
    "a text file named .npy": "not a .npy file (no .npy header)",
}


@pytest.mark.parametrize("case", sorted(BAD_RETAIN))
def test_a_bad_retain_is_named_as_retain(capsys, monkeypatch, tmp_path, unchanged, case) -> None:
    retain = {
        "an empty directory": tmp_path / "empty",
        "a junk directory": tmp_path / "junk",
        "the checkpoint directory": unchanged["source"],
        "a symlink to model.safetensors": tmp_path / "weights",
        "Latin-1 text": tmp_path / "latin1.txt",
        "/dev/null": Path("/dev/null"),
        "a FIFO": tmp_path / "fifo",
        "a text file named .npy": tmp_path / "text.npy",
    }[case]
    if case in ("an empty directory", "a junk directory"):
        retain.mkdir()
        if case == "a junk directory":
            (retain / "notes.bin").write_bytes(b"\x00\x01" * 100)
    elif case == "a symlink to model.safetensors":
        retain.symlink_to(unchanged["source"] / "model.safetensors")
    elif case == "Latin-1 text":
        retain.write_bytes("café naïve résumé ".encode("latin-1") * 200)
    elif case == "a FIFO":
        os.mkfifo(retain)
    elif case == "a text file named .npy":
        retain.write_text("once upon a time " * 400)
    no_weights(monkeypatch)
    argv = grow_argv(unchanged["source"], unchanged["data"], tmp_path / "out", "--retain", str(retain))
    message = last_line_error(capsys, argv)
    assert message.startswith(f"--retain {str(retain)!r} " if "named .npy" not in case else "--retain: "), message
    assert BAD_RETAIN[case] in message and "--data" not in message.split(";")[0], message


# -- 6. E12's sizes against its data, at validation ---------------------------------------------


def growth() -> dict:
    return yaml.safe_load((ROOT / "config" / "growth.yaml").read_text())


ADAPT = {
    "pool 1000000": ({"pool": 1000000}, ["adapt.pool: 1000000 is more than the 5728 windows of 65 tokens of the "
                                         "pydoc train split; allowed: at most 5728"]),
    "eval_windows 1000000": ({"eval_windows": 1000000}, [
        "adapt.eval_windows + 2 x adapt.pool (the certificate's test pool keeps two windows apart per example): "
        "1000000 + 512 is more than the 1442 windows of 65 tokens of the pydoc test split; "
        "allowed: eval_windows <= 930",
        "windows of 65 tokens of the bases' pystdlib test split (the retain data)",
    ]),
    "batch_size 65536": ({"batch_size": 65536}, ["adapt.batch_size: 65536 is more than the 5728 windows of 65 "
                                                 "tokens of the pydoc train split; allowed: at most 5728"]),
    "steps 10000000": ({"steps": 10000000}, ["adapt.steps: 10000000 steps of 16 x 64 tokens pass over the 372320 "
                                             "tokens of the pydoc train split more than 100 times; allowed: 1 <= "
                                             "steps <= 36359"]),
}  # fmt: skip
"""Each absurd ``adapt`` size of issue 59 on ``config/growth.yaml`` (pydoc, this interpreter's: sizes read
from ``pydoc_data.topics``), and the lines that refuse it."""


@pytest.mark.parametrize("case", sorted(ADAPT))
def test_adapt_sizes_are_checked_against_the_data(case) -> None:
    from scalemech.data.text import pydoc_topics

    if sum(len(text.encode()) for text in pydoc_topics().values()) != 466117:
        pytest.skip("another Python's pydoc topics: other window counts")
    config = growth()
    changes, expected = ADAPT[case]
    config["adapt"].update(changes)
    with pytest.raises(ConfigError) as refused:
        validate_config(config)
    for line in expected:
        assert line in str(refused.value), str(refused.value)
    validate_config(growth())  # the shipped config passes


@pytest.mark.timeout(300)
def test_a_missing_corpus_fails_snakemake_n(capsys, tmp_path) -> None:
    """E12 grown into a corpus whose file does not exist: refused by ``scalemech check`` and by
    ``snakemake -n``, in one line naming the key."""
    config = growth()
    config["adapt"]["domain"] = "corpus"
    config["datasets"]["corpus"] = {"path": str(tmp_path / "missing.txt")}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    expected = f"datasets.corpus.path: '{tmp_path / 'missing.txt'}' does not exist, and E12 (adapt) sizes"
    assert main(["check", "--config", str(path)]) == ERROR_STATUS
    assert expected in capsys.readouterr().err
    result = snakemake("-n", "--cores", "1", "--directory", str(tmp_path), "--configfile", str(path), timeout=280)
    assert result.returncode != 0 and expected in result.stdout + result.stderr, result.stderr[-3000:]
    (tmp_path / "missing.txt").write_text("a corpus of prose. " * 100_000)
    validate_config(copy.deepcopy(config))  # there now: valid


def test_split_bytes_are_what_prepare_writes(tmp_path) -> None:
    """``data.text.split_bytes`` (the sizes E12 is checked against) against the prepared splits: pydoc, a
    few stdlib files, a corpus cut contiguously and in chunks."""
    from scalemech.data import text

    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(np.random.default_rng(0).integers(97, 123, 100_001).astype(np.uint8).tobytes())
    cases = [("pydoc", {"test_fraction": 0.2}), ("pystdlib", {"max_files": 40}), ("corpus", {"path": str(corpus)}),
             ("corpus", {"path": str(corpus), "split": "chunks", "chunk_bytes": 7000, "split_seed": 3})]  # fmt: skip
    for i, (name, settings) in enumerate(cases):
        (tmp_path / str(i)).mkdir()
        text.prepare(name, settings, tmp_path / str(i), offline=True)
        prepared = tmp_path / str(i)
        written = {split: len(np.load(prepared / f"{split}_x.npy", mmap_mode="r")) for split in ("train", "test")}
        assert text.split_bytes(name, settings) == written, name
    assert text.split_bytes("tinyshakespeare", {}) is None  # a download: unknown before it
    with pytest.raises(DataError, match="corpus: .*no does not exist"):
        text.split_bytes("corpus", {"path": str(tmp_path / "no")})
