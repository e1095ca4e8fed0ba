"""Data-parallel arms (``training.engine`` through ``accelerate``): two CPU processes under ``torchrun``
(gloo) train an arm as one process does at the same global batch; only the main process writes and
locks; the memory arithmetic of growing a 7B model."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from scalemech.experiments.decision import ARMS
from scalemech.training.checkpoints import checkpoint_lock
from scalemech.training.engine import share

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("ddp_check", ROOT / "benchmarks" / "ddp_check.py")
ddp_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ddp_check)  # the worker that make gpu-check-2 runs on GPUs


def _run(out: Path, ids: Path, processes: int, shard: bool = False) -> subprocess.CompletedProcess:
    return ddp_check.launch(out, ids, processes, "cpu", shard=shard)


def _losses(out: Path) -> dict:
    return json.loads((out / "losses.json").read_text())


@pytest.mark.timeout(600)
def test_two_processes_train_an_arm_as_one_and_only_the_main_one_writes(tmp_path: Path) -> None:
    ids = ddp_check.token_ids(tmp_path / "ids.npy")
    runs = {}
    for processes in (1, 2):
        done = _run(tmp_path / f"p{processes}", ids, processes)
        assert done.returncode == 0, done.stderr[-3000:]
        runs[processes] = json.loads((tmp_path / f"p{processes}" / "losses.json").read_text())
    assert (runs[1]["world"], runs[2]["world"]) == (1, 2)
    one, two = np.array(runs[1]["losses"]), np.array(runs[2]["losses"])
    assert np.abs(one - two).max() <= ddp_check.TOLERANCE, np.abs(one - two).max()
    assert one.mean() < np.mean(runs[1]["before"]) - 100 * ddp_check.TOLERANCE  # the arm trained the model
    written = {p: sorted(q.name for q in (tmp_path / f"p{p}" / "arm").iterdir()) for p in (1, 2)}
    assert written[1] == written[2], written  # one set of checkpoints, not one per process


@pytest.mark.timeout(600)
def test_two_processes_sharded_per_layer_train_an_arm_as_one_and_resume_from_full_states(tmp_path: Path) -> None:
    """FSDP2 per decoder layer (``--shard``): the held-out losses of one process within the tolerance; the
    resume states hold full tensors (one process reads them); a sharded run killed after its first
    state resumes from it to the same losses."""
    ids = ddp_check.token_ids(tmp_path / "ids.npy")
    done = _run(tmp_path / "p1", ids, 1)
    assert done.returncode == 0, done.stderr[-3000:]
    done = _run(tmp_path / "sharded", ids, 2, shard=True)
    assert done.returncode == 0, done.stderr[-3000:]
    one, sharded = np.array(_losses(tmp_path / "p1")["losses"]), np.array(_losses(tmp_path / "sharded")["losses"])
    assert _losses(tmp_path / "sharded")["world"] == 2
    assert np.abs(one - sharded).max() <= ddp_check.TOLERANCE, np.abs(one - sharded).max()
    arm = tmp_path / "sharded" / "arm"
    states = sorted(arm.glob("step-*.pt"))
    full = torch.load(states[-1], weights_only=False)
    unsharded = torch.load(sorted((tmp_path / "p1" / "arm").glob("step-*.pt"))[-1], weights_only=False)
    assert full["trainable"].keys() == unsharded["trainable"].keys()
    assert all(full["trainable"][k].shape == v.shape for k, v in unsharded["trainable"].items())  # not shards
    for path in (states[-1], *arm.glob("step-*6.pt.sha256"), arm / "complete.json"):  # killed after step 3
        path.unlink(missing_ok=True)
    (tmp_path / "sharded" / "losses.json").unlink()
    done = _run(tmp_path / "sharded", ids, 2, shard=True)
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = np.array(_losses(tmp_path / "sharded")["losses"])
    assert np.abs(resumed - sharded).max() <= ddp_check.TOLERANCE, np.abs(resumed - sharded).max()


def test_the_fsdp_units_are_the_decoder_layers_then_the_root() -> None:
    """Every decoder layer is a unit of its own (a frozen old layer never shares one with a trainable new
    one), and the root holds the rest: embeddings, final norm and head."""
    from scalemech.training.engine import fsdp_units

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=4)  # fmt: skip
    model = AutoModelForCausalLM.from_config(config)
    units = fsdp_units(model)
    assert units[:-1] == list(model.model.layers) and units[-1] is model
    inside = {id(p) for layer in units[:-1] for p in layer.parameters()}
    rest = [name for name, p in model.named_parameters() if id(p) not in inside]
    assert rest == ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]


@pytest.mark.timeout(300)
def test_a_locked_arm_stops_two_processes_at_once(tmp_path: Path) -> None:
    """Another trainer holds the arm's lock: the main process refuses at once, torchrun ends the other,
    and nothing is written."""
    ids = ddp_check.token_ids(tmp_path / "ids.npy")
    arm = tmp_path / "p2" / "arm"
    arm.mkdir(parents=True)
    with checkpoint_lock(arm):
        before = sorted(p.name for p in arm.iterdir())
        done = _run(tmp_path / "p2", ids, 2)
        assert sorted(p.name for p in arm.iterdir()) == before
    assert done.returncode != 0 and "CheckpointLockedError" in done.stderr, done.stderr[-3000:]
    assert not (tmp_path / "p2" / "losses.json").exists()


def test_a_batch_is_shared_evenly_or_refused() -> None:
    x, y = torch.arange(8).reshape(4, 2), torch.arange(4)
    parts = [share((x, y), rank, 2) for rank in range(2)]
    assert torch.equal(torch.cat([parts[0][1], parts[1][1]]).sort().values, y)
    with pytest.raises(ValueError, match="batch size 4 does not split over 3 processes"):
        share((x, y), 0, 3)


def test_the_memory_arithmetic_counts_a_llama_and_its_lora_as_transformers_and_peft_do() -> None:
    """``footprint.Decoder`` against brute force: a tiny untied Llama's parameters, one layer's, and
    PEFT LoRA's trainable parameters at rank 3 on every linear layer; LLaMA-2-7B's published count."""
    from peft import LoraConfig, get_peft_model

    from scalemech.models.hf import HFCausalLM
    from scalemech.training.footprint import LLAMA_2, Decoder, arm_bytes

    tiny = Decoder("tiny", 32, 72, 3, vocab=64)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=72, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False)  # fmt: skip
    model = AutoModelForCausalLM.from_config(config)
    assert tiny.params() == sum(p.numel() for p in model.parameters())
    assert tiny.layer_params() == sum(p.numel() for p in model.model.layers[0].parameters())
    wrapped = HFCausalLM(model, {"checkpoint": "tiny", "block_size": 8})
    block = wrapped.new_block(wrapped.insertion_points()[0])  # certify's new layer: its first-order parameters
    assert tiny.output_params() == sum(p.numel() for p in wrapped.first_order_parameters(block))
    linear = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    lora = get_peft_model(model, LoraConfig(r=3, target_modules=linear))
    assert 3 * tiny.lora_params_per_rank() == sum(p.numel() for p in lora.parameters() if p.requires_grad)
    assert LLAMA_2[0].params() == 6_738_415_616  # LLaMA-2-7B's parameter count
    assert arm_bytes(10, 4) == 4 * 10 + 4 * 4 + 8 * 4  # float32 weights, gradients, AdamW's two moments


def fsdp_launch_env(config: Path = ROOT / "config" / "accelerate" / "fsdp2.yaml") -> dict[str, str]:
    """The environment ``accelerate launch --config_file config`` gives its processes (accelerate's own
    parsing): what ``check_engine`` reads."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(["--config_file", str(config), "-m", "scalemech.cli", "grow"])
    env = prepare_multi_gpu_env(_validate_launch_command(args)[0])
    return {key: value for key, value in env.items() if key.startswith(("ACCELERATE_", "FSDP_"))}


def test_accelerates_fsdp_configuration_is_followed_or_refused_naming_what_grow_does_not_do(monkeypatch) -> None:
    """``config/accelerate/fsdp2.yaml`` selects grow's sharding (``check_engine``: True); each setting grow
    would not follow is refused in one line naming it and what is allowed."""
    from scalemech.training.engine import check_engine

    env = fsdp_launch_env()
    assert env["ACCELERATE_USE_FSDP"] == "true" and env["FSDP_VERSION"] == "2"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert check_engine("cpu") is True
    refused = {
        "FSDP_VERSION": ("1", "fsdp_version 1 (allowed: 2)"),
        "FSDP_AUTO_WRAP_POLICY": ("SIZE_BASED_WRAP", "fsdp_auto_wrap_policy size_based_auto_wrap_policy"),
        "FSDP_STATE_DICT_TYPE": ("SHARDED_STATE_DICT", "fsdp_state_dict_type SHARDED_STATE_DICT (allowed: FULL"),
        "FSDP_OFFLOAD_PARAMS": ("true", "fsdp_offload_params true (allowed: false)"),
        "FSDP_ACTIVATION_CHECKPOINTING": (
            "true",
            "fsdp_activation_checkpointing true (allowed: false; grow --activation-checkpointing",
        ),
        "ACCELERATE_MIXED_PRECISION": ("bf16", "mixed_precision bf16 (allowed: no"),
    }
    for key, (value, named) in refused.items():
        monkeypatch.setenv(key, value)
        with pytest.raises(ValueError, match=re.escape(named)):
            check_engine("cpu")
        monkeypatch.setenv(key, env[key])
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    assert check_engine("cpu") is False


SHARD_ARGS = {"--shard": ["--shard", "--activation-checkpointing"]}
"""Sharded by the flag, with activations recomputed (FSDP2 around transformers' checkpointed layers)."""


@pytest.mark.timeout(600)
@pytest.mark.parametrize("shard", ["", "--shard", "fsdp2.yaml"], ids=["replicated", "sharded", "accelerate-fsdp"])
def test_grow_on_two_processes_matches_one_and_records_its_world(tmp_path: Path, shard: str) -> None:
    """``torchrun -m scalemech.cli grow --retain`` on 1 and 2 CPU processes at the same global batch
    (replicated, or ``--shard``: FSDP2 per decoder layer, PEFT's LoRA model too): every arm's held-out
    loss within ``TOLERANCE``, one output written whole, ``growth.json`` naming its world size and
    whether it sharded."""
    from test_grow import token_file
    from test_hf import save_tiny

    source, data = save_tiny("llama", tmp_path / "src"), token_file(tmp_path / "ids.npy")
    retain = token_file(tmp_path / "old.npy", seed=1)
    grow = ["grow", "--checkpoint", source, "--data", str(data), "--retain", str(retain), "--at", "layer.0",
            "--steps", "6", "--lr", "1e-2",
            "--batch-size", "4", "--block-size", "8", "--eval-windows", "8", "--pool", "6", "--M", "2", "--K", "2",
            "--device", "cpu"]  # fmt: skip
    records = {}
    for processes in (1, 2):
        out = tmp_path / f"out{processes}"
        command = [str(ddp_check.TORCHRUN), "--standalone", "--nproc_per_node", str(processes), "-m", "scalemech.cli",
                   *grow, "--out", str(out), *SHARD_ARGS.get(shard, [])]  # fmt: skip
        if processes == 1 and "--shard" in command:  # one process: nothing to shard over (refused)
            command.remove("--shard")
        env = {**ddp_check.ENV, **(fsdp_launch_env() if shard == "fsdp2.yaml" else {})}  # accelerate launch's
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.count("held-out loss per token") == 1, done.stdout[-3000:]  # the main process prints
        records[processes] = json.loads((out / "growth.json").read_text())
    assert [records[p]["machine"]["world_size"] for p in (1, 2)] == [1, 2]
    assert [records[p]["machine"]["sharded"] for p in (1, 2)] == [False, bool(shard)]
    assert [records[p]["training"]["activation_checkpointing"] for p in (1, 2)] == [shard == "--shard"] * 2
    one, two = (records[p]["held_out"]["mean_loss"] for p in (1, 2))
    moved = max(abs(one[arm] - one["old"]) for arm in one)  # the arms trained: the comparison is not vacuous
    assert one.keys() == two.keys() == {"old", *ARMS} and moved > 100 * ddp_check.TOLERANCE, one
    assert all(abs(one[arm] - two[arm]) <= ddp_check.TOLERANCE for arm in one), {a: one[a] - two[a] for a in one}
    written = [sorted(p.name for p in (tmp_path / f"out{n}").iterdir()) for n in (1, 2)]
    assert written[0] == written[1], written
