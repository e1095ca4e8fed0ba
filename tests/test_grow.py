"""``scalemech grow``: a tiny random model of every family grown, trained and written, then reloaded by
plain ``transformers`` in a process without scalemech; a trained tiny llama grown on a real corpus
(Python's own standard library, which every install ships); placement, decision and resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from test_hf import CONFIGS, VOCAB, save_tiny, tiny_config
from transformers import AutoModelForCausalLM, LlamaConfig

from scalemech.cli import main
from scalemech.core.recipe import Recipe
from scalemech.data.tokenized import load_token_ids
from scalemech.experiments.decision import decide
from scalemech.grow import GrowSettings, grow, run
from scalemech.grow.placement import parse_at, resolve
from scalemech.models.hf import decoder_layers_path
from scalemech.models.hf_growth import check_grown, grow_layers, grown_config, new_positions
from scalemech.tasks.tokens import TokenIdTask
from scalemech.training import continued
from scalemech.training.train import SYNC_EVERY

TINY = GrowSettings(
    at="layer.0", steps=3, lr=1e-3, batch_size=4, block_size=8, eval_windows=8, pool=6, M=2, K=2, device="cpu"
)
"""A grow at toy size: one new layer after layer 0, three steps per arm, 8 held-out windows."""
TINY_ARGV = ["--at", "layer.0", "--steps", "3", "--batch-size", "4", "--block-size", "8", "--eval-windows", "8",
             "--pool", "6", "--M", "2", "--K", "2", "--device", "cpu"]  # fmt: skip
"""``TINY`` on the command line."""


def token_file(path: Path, n: int = 6000, seed: int = 0) -> Path:
    ids = np.random.default_rng(seed).integers(3, VOCAB, n)
    np.save(path, ids)
    return path


@pytest.fixture(scope="module")
def grown_families(tmp_path_factory) -> dict[str, tuple[Path, Path, dict]]:
    """``{family: (source, out, growth record)}``: every family of certify's table grown by ``grow``."""
    root = tmp_path_factory.mktemp("families")
    data = token_file(root / "ids.npy")
    grown = {}
    for name in sorted(CONFIGS):
        source = Path(save_tiny(name, root / name))
        record = grow(str(source), str(data), root / f"{name}-grown", TINY)
        grown[name] = (source, root / f"{name}-grown", record)
    return grown


@pytest.mark.timeout(600)
def test_every_family_grows_preserving_its_function_and_old_weights(grown_families) -> None:
    """Before training the grown logits equal the old ones; after training the new layers only, every
    old tensor is bit-identical under its new index, the new layer's output projections have moved
    off zero, and config, tokenizer and growth.json say what was done."""
    for name, (source, out, record) in grown_families.items():
        assert record["decisions"][0]["max_abs_logit_change"] <= 1e-5, name
        assert record["inserted_layers"] == [1] and record["layers"] == 3, name
        config = json.loads((out / "config.json").read_text())
        old_state, new_state = load_file(source / "model.safetensors"), load_file(out / "model.safetensors")
        path = decoder_layers_path(AutoModelForCausalLM.from_pretrained(source))
        moved = {f"{path}.1.": f"{path}.2."}
        for key, tensor in old_state.items():
            renamed = next((key.replace(a, b, 1) for a, b in moved.items() if key.startswith(a)), key)
            assert torch.equal(new_state[renamed], tensor), (name, key)
        new_layer = {k: v for k, v in new_state.items() if k.startswith(f"{path}.1.")}
        assert any(v.abs().sum() > 0 for k, v in new_layer.items() if "proj" in k or "dense" in k or "fc" in k), name
        assert (out / "tokenizer.json").is_file() and record["tokenizer_copied"], name
        assert record["source"]["sha256"] and record["arms"]["control_tokens"]["tokens"] == 3 * 4 * 8, name
        assert config.get("num_hidden_layers", config.get("n_layer")) == 3, name


RELOAD = r"""
import json, sys, torch
from transformers import AutoModelForCausalLM
out = {}
for name, path in json.loads(sys.argv[1]).items():
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    prompt = torch.arange(3, 9)[None]
    with_cache = model.generate(prompt, max_new_tokens=8, do_sample=False, use_cache=True, pad_token_id=0)
    without = model.generate(prompt, max_new_tokens=8, do_sample=False, use_cache=False, pad_token_id=0)
    tied = getattr(model.config.get_text_config(), "tie_word_embeddings", False)
    out[name] = {
        "same_tokens": torch.equal(with_cache, without),
        "layers": model.config.get_text_config().num_hidden_layers,
        "tied": (not tied) or model.get_output_embeddings().weight is model.get_input_embeddings().weight,
        "logits": model(prompt).logits[0, -1, :4].tolist(),
    }
assert "scalemech" not in sys.modules
print(json.dumps(out))
"""


@pytest.mark.timeout(600)
def test_every_grown_family_reloads_without_scalemech_and_generates_the_same_with_the_cache(grown_families) -> None:
    """A fresh interpreter that never imports scalemech loads each grown directory with plain
    ``AutoModelForCausalLM.from_pretrained``: the same logits as grow's model, ``generate`` gives the
    same tokens with and without the KV cache (the new layer is trained, so a cache slot shared with
    another layer would change them), and tied embeddings stay tied."""
    paths = {name: str(out) for name, (_, out, _) in grown_families.items()}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    result = subprocess.run(
        [sys.executable, "-c", RELOAD, json.dumps(paths)], capture_output=True, text=True, env=env, timeout=500
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reloaded = json.loads(result.stdout.strip().splitlines()[-1])
    for name, path in paths.items():
        row = reloaded[name]
        assert row["same_tokens"] and row["tied"] and row["layers"] == 3, (name, row)
        here = AutoModelForCausalLM.from_pretrained(path).eval()
        with torch.no_grad():
            expected = here(torch.arange(3, 9)[None]).logits[0, -1, :4]
        torch.testing.assert_close(torch.tensor(row["logits"]), expected, rtol=0, atol=1e-6)


def test_per_layer_config_lists_follow_their_layers() -> None:
    """Qwen2 with a sliding window from layer 1: a layer copied after layer 0 attends fully, one after
    layer 1 within the window, and the grown config keeps every old layer's type."""
    config = tiny_config("qwen2")
    assert config.layer_types == ["full_attention", "sliding_attention"]
    grown = grown_config(config, [0, 1, 1])
    assert grown.num_hidden_layers == 5 and config.num_hidden_layers == 2
    assert grown.layer_types == ["full_attention", "full_attention", *["sliding_attention"] * 3]
    assert new_positions(2, [0, 1, 1]) == ([0, 2], [(1, 0), (3, 1), (4, 1)])
    with pytest.raises(ValueError, match=r"cannot insert after layers \[2\]: the model has layers 0..1"):
        new_positions(2, [2])


def test_a_family_whose_layers_depend_on_their_index_is_refused() -> None:
    """GPT-2 with ``scale_attn_by_inverse_layer_idx`` scales each layer's attention by its index, so a
    layer moved up changes the function: refused, naming the family, before any training."""
    config = tiny_config("gpt2")
    config.scale_attn_by_inverse_layer_idx = True
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    grown, _ = grow_layers(model, [0])
    with pytest.raises(ValueError, match="model_type 'gpt2': inserting layers changed the model's logits"):
        check_grown(model, grown, torch.randint(3, VOCAB, (2, 8)), torch.device("cpu"))


def test_placements_are_parsed_and_every_k_is_llama_pros_stride() -> None:
    assert resolve(parse_at("every:2", None), 6) == (1, 3, 5)  # LLaMA-Pro: a copy after each group of K
    assert resolve(parse_at("every:3", None), 7) == (2, 5)
    assert resolve(parse_at("layer.4,layer.1", None), 6) == (1, 4)
    assert parse_at("auto", None).blocks == 1 and parse_at("auto", 3).blocks == 3
    together = parse_at("best:2", None)  # the certificate's first two points, one round: every:2's new parameters
    assert together.auto and together.together and together.blocks == 2 and together.rule == "best"
    assert parse_at("pareto:3", 3, retain=True).blocks == 3 and not parse_at("best", 2).together
    for at, blocks, message in [
        ("best:2", 3, "--blocks 3 differs from the 2 points of --at 'best:2'"),
        ("pareto:2", None, "--at 'pareto:2' weighs the forgetting of the old domain: give it with --retain"),
        ("layer.x", None, "'layer.x' is not a point"),
        ("every:0", None, "is not a point"),
        ("layer.1,layer.2", 3, "--blocks 3 differs from the 2 points"),
        ("auto", 0, "--blocks 0 must be at least 1"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_at(at, blocks)
    with pytest.raises(ValueError, match="no layer.6"):
        resolve(parse_at("layer.6", None), 6)
    with pytest.raises(ValueError, match="every:1..every:6"):
        resolve(parse_at("every:7", None), 6)


@pytest.mark.timeout(300)
def test_best_grows_at_the_certificates_first_point_where_auto_may_grow_nothing(tmp_path: Path) -> None:
    """``--at best`` takes the certificate's whole ranking (``point_ranks``), ``auto`` its "grow here" points only."""
    from scalemech.certify import point_ranks

    source, data = Path(save_tiny("llama", tmp_path / "llama")), token_file(tmp_path / "ids.npy")
    runs = {at: grow(str(source), str(data), tmp_path / at, GrowSettings(**{**vars(TINY), "at": at, "train": "none"}))
            for at in ("auto", "best")}  # fmt: skip
    certificate = pd.DataFrame(runs["best"]["decisions"][0]["certificate"])
    first = certificate.loc[point_ranks(certificate).idxmin(), "point"]
    assert runs["best"]["decisions"][0]["chosen"] == first and runs["best"]["inserted_layers"]
    certified = "grow here" in set(certificate["verdict"])
    assert runs["auto"]["decisions"][0]["chosen"] == (first if certified else None)


def test_the_decision_needs_both_controls_beaten_by_two_paired_se() -> None:
    rng = np.random.default_rng(0)
    old = rng.normal(3.0, 0.5, 400)
    control = old - 0.1 + rng.normal(0, 0.01, 400)
    better = {"old": old, "grown": control - 0.05, "control_tokens": control, "control_flops": control + 0.001}
    assert decide(better, trained=True, inserted=True)["recommended"]
    noise = {**better, "grown": control + rng.normal(0, 0.05, 400)}
    judged = decide(noise, trained=True, inserted=True)
    assert not judged["recommended"] and "does not beat control_tokens" in judged["why"]
    gain = judged["gains"]["gain_over_control_tokens"]
    assert gain["se"] == pytest.approx(np.std(control - noise["grown"], ddof=1) / 20)
    assert not decide(better, trained=False, inserted=True)["recommended"]


def test_an_arm_killed_mid_run_resumes_to_the_same_weights(tmp_path: Path, monkeypatch) -> None:
    """Kill after 5 of 8 steps (checkpoints every 2), rerun: the weights equal an uninterrupted run's."""
    torch.manual_seed(0)
    source = AutoModelForCausalLM.from_config(tiny_config("llama"))
    task = TokenIdTask(load_token_ids(token_file(tmp_path / "ids.npy")), 8, VOCAB)
    recipe = Recipe(optimizer="adamw", lr=1e-3, steps=8, batch_size=4, warmup_fraction=0.25)

    def arm(directory: Path) -> dict[str, torch.Tensor]:
        model = AutoModelForCausalLM.from_config(tiny_config("llama"))
        model.load_state_dict(source.state_dict())
        continued.train_arm("arm", model, task, recipe, 7, directory, {"arm": 1}, 0, checkpoint_every=2)
        return model.state_dict()

    reference = arm(tmp_path / "whole")
    calls = {"n": 0}
    original = continued.TaskBatches.next

    def dying(self):
        calls["n"] += 1
        if calls["n"] > 5:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(continued.TaskBatches, "next", dying)
    with pytest.raises(KeyboardInterrupt):
        arm(tmp_path / "killed")
    monkeypatch.setattr(continued.TaskBatches, "next", original)
    resumed = arm(tmp_path / "killed")
    assert all(torch.equal(resumed[k], reference[k]) for k in reference)
    assert not all(torch.equal(reference[k], source.state_dict()[k]) for k in reference)


def test_an_arm_waits_for_the_device_once_per_sync_interval_and_copies_its_batches_in_blocks(
    tmp_path: Path, monkeypatch
) -> None:
    """120 steps without resume states: the losses come to the host 3 times (after steps 50, 100 and 120:
    ``SYNC_EVERY``), and the batches' examples are fetched and copied 3 times (``STEPS_AHEAD`` steps each),
    where a step-by-step loop would do both 120 times."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config("llama"))
    task = TokenIdTask(load_token_ids(token_file(tmp_path / "ids.npy")), 8, VOCAB)
    recipe = Recipe(optimizer="adamw", lr=1e-3, steps=120, batch_size=4)
    waits, fetches = [], []
    check, examples = continued._check_finite, TokenIdTask.examples
    monkeypatch.setattr(continued, "_check_finite", lambda name, losses, *a: waits.append(len(losses)) or check(
        name, losses, *a))  # fmt: skip
    monkeypatch.setattr(TokenIdTask, "examples", lambda self, *a: fetches.append(1) or examples(self, *a))
    continued.train_arm("arm", model, task, recipe, 7, None, {"arm": 1}, progress=False)
    assert waits == [SYNC_EVERY, SYNC_EVERY, 120 - 2 * SYNC_EVERY] and len(fetches) == -(-120 // continued.STEPS_AHEAD)


def test_an_arm_under_bf16_autocast_ends_within_its_tolerance_of_float32(tmp_path: Path) -> None:
    """``grow --precision bf16``: the same steps from the same start end at a held-out loss within 2 %
    (relative) of float32's, the weights stay float32, and bf16 is a different computation."""
    torch.manual_seed(0)
    source = AutoModelForCausalLM.from_config(tiny_config("llama")).state_dict()
    task = TokenIdTask(load_token_ids(stdlib_bytes(tmp_path / "code.npy", 100_000)), 8, VOCAB)  # real text
    recipe = Recipe(optimizer="adamw", lr=3e-3, steps=30, batch_size=8)
    x, y = task.examples("test", task.draw("test", 32, 0))
    losses = {}
    for precision in ("fp32", "bf16"):
        model = AutoModelForCausalLM.from_config(tiny_config("llama"))
        model.load_state_dict(source)
        continued.train_arm("arm", model, task, recipe, 7, None, {}, progress=False, precision=precision)
        assert all(p.dtype == torch.float32 for p in model.parameters())
        losses[precision] = float(continued.sequence_losses(model, x, y, 16).mean())
    model.load_state_dict(source)
    assert losses["fp32"] < float(continued.sequence_losses(model, x, y, 16).mean())  # the arms trained
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=0.02) and losses["bf16"] != losses["fp32"]
    with pytest.raises(ValueError, match="precision = 'fp16' must be one of fp32, bf16"):
        GrowSettings(precision="fp16").check()


def stdlib_bytes(path: Path, size: int = 300_000) -> Path:
    """The first ``size`` bytes of the standard library's ``.py`` files as byte ids: a real corpus every
    Python ships."""
    text = b"".join(p.read_bytes() for p in sorted(Path(os.__file__).parent.glob("*.py")))[:size]
    np.save(path, np.frombuffer(text, dtype=np.uint8).astype(np.int64))
    return path


@pytest.mark.timeout(600)
def test_a_trained_llama_grown_on_real_code_beats_itself_held_out(tmp_path: Path, capsys) -> None:
    """A tiny llama trained on the standard library's bytes, grown after its first layer and trained
    there: held-out loss below the old model's by more than 2 paired SE; the controls were trained
    for equal tokens and for about equal FLOPs, and the CLI states the decision."""
    data = stdlib_bytes(tmp_path / "code.npy")
    config = LlamaConfig(
        vocab_size=256, hidden_size=48, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
        num_hidden_layers=2, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    task = TokenIdTask(load_token_ids(data), 32, 256)
    recipe = Recipe(optimizer="adamw", lr=3e-3, steps=120, batch_size=16, warmup_fraction=0.1, weight_decay=0.0)
    continued.train_arm("pretrain", model, task, recipe, 0, tmp_path / "pretrain", {"pretrain": 1}, 0, progress=False)
    model.save_pretrained(tmp_path / "llama")
    argv = ["grow", "--checkpoint", str(tmp_path / "llama"), "--data", str(data), "--out", str(tmp_path / "out"),
            "--at", "layer.0", "--steps", "40", "--lr", "2e-3", "--batch-size", "16", "--block-size", "32",
            "--eval-windows", "128", "--pool", "16", "--M", "4", "--K", "4", "--device", "cpu"]  # fmt: skip
    assert main(argv) == 0
    record = json.loads((tmp_path / "out" / "growth.json").read_text())
    gain = record["held_out"]["gain_over_old"]
    assert gain["mean"] > 2 * gain["se"] > 0, gain
    arms = record["arms"]
    assert arms["control_tokens"]["tokens"] == sum(stage["tokens"] for stage in arms["grown"]["stages"])
    grown_flops = sum(stage["flops"] for stage in arms["grown"]["stages"])
    per_step = arms["control_tokens"]["flops"] / arms["control_tokens"]["steps"]
    assert abs(arms["control_flops"]["flops"] - grown_flops) <= per_step / 2
    out = capsys.readouterr().out
    assert "decision: " in out and "held-out loss per token on 128 windows" in out
    assert record["decision"]["written"] == "grown" and not (tmp_path / "out" / ".grow-state").exists()


def test_fallback_writes_the_better_control_and_train_none_changes_nothing(tmp_path: Path, monkeypatch) -> None:
    """Not recommended (the decision forced, its rule is tested above): ``--fallback`` writes the control
    with the lower held-out loss, the original's depth; ``--train none`` trains no arm."""
    source = Path(save_tiny("llama", tmp_path / "llama"))
    data = token_file(tmp_path / "ids.npy")
    settings = GrowSettings(**{**vars(TINY), "fallback": True})
    monkeypatch.setattr(run, "decide", lambda losses, **_: {**decide(losses, trained=False, inserted=True)})
    record = grow(str(source), str(data), tmp_path / "fallback", settings)
    losses = record["held_out"]["mean_loss"]
    better = min(("control_tokens", "control_flops"), key=losses.get)
    assert record["decision"]["written"] == better and record["inserted_layers"] == []
    monkeypatch.undo()
    assert json.loads((tmp_path / "fallback" / "config.json").read_text())["num_hidden_layers"] == 2
    untrained = grow(str(source), str(data), tmp_path / "none", GrowSettings(**{**vars(TINY), "train": "none"}))
    assert untrained["decision"]["why"].startswith("not trained") and set(untrained["arms"]) == {"grown"}
    gain = untrained["held_out"]["gain_over_old"]
    assert gain["mean"] == 0 and gain["se"] == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--at", "layer.9"], "--at: the model has points layer.0..layer.1; no layer.9"),
        (["--at", "sometimes"], "'sometimes' is not a point"),
        (["--steps", "0"], "grow: steps = 0 must be at least 1"),
        (["--train", "new", "--lr", "-1"], "grow: lr = -1.0 must be a finite number > 0"),
    ],
)
def test_bad_input_gets_one_line(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    source = save_tiny("llama", tmp_path / "llama")
    data = token_file(tmp_path / "ids.npy", n=400)
    base = ["grow", "--checkpoint", source, "--data", str(data), "--out", str(tmp_path / "out"), "--device", "cpu"]
    capsys.readouterr()  # the fixture's own output
    assert main([*base, *argv]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("scalemech: error: ") and error.count("\n") == 0 and message in error, error


def test_other_models_and_outputs_are_refused_before_any_work(tmp_path: Path, capsys) -> None:
    data = token_file(tmp_path / "ids.npy", n=400)
    (tmp_path / "model.pt").write_bytes(b"")
    assert main(["grow", "--checkpoint", str(tmp_path / "model.pt"), "--data", str(data), "--out", "x"]) == 2
    assert "grow takes a Hugging Face decoder-only causal LM" in capsys.readouterr().err
    source = save_tiny("llama", tmp_path / "llama")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert main(["grow", "--checkpoint", source, "--data", str(data), "--out", str(tmp_path / "busy")]) == 2
    assert "holds other files (notes.txt)" in capsys.readouterr().err
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_train_all_moves_old_weights_and_a_killed_grow_resumes_to_the_same_result(tmp_path: Path, monkeypatch) -> None:
    """``--train all`` trains old weights too; a grow killed inside its second arm and rerun with the
    same command loads the finished arm, resumes the other and ends with the same held-out losses."""
    source = Path(save_tiny("llama", tmp_path / "llama"))
    data = token_file(tmp_path / "ids.npy")
    settings = GrowSettings(**{**vars(TINY), "train": "all", "steps": 4, "checkpoint_every": 2})
    whole = grow(str(source), str(data), tmp_path / "whole", settings)
    old, new = load_file(source / "model.safetensors"), load_file(tmp_path / "whole" / "model.safetensors")
    assert not torch.equal(old["model.embed_tokens.weight"], new["model.embed_tokens.weight"])
    calls = {"n": 0}
    original = continued.TaskBatches.next

    def dying(self):
        calls["n"] += 1
        # one batch per FLOP count: the grown arm's (1 + 4 steps), the controls' per step (1), control_tokens'
        # (1 + 2 steps, checkpointed), then its third step dies
        if calls["n"] == 1 + 4 + 1 + 1 + 3:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(continued.TaskBatches, "next", dying)
    with pytest.raises(KeyboardInterrupt):
        grow(str(source), str(data), tmp_path / "killed", settings)
    state = tmp_path / "killed" / ".grow-state"
    assert (state / "grown-1" / "complete.json").is_file() and (
        state / "control_tokens" / "step-000000002.pt"
    ).is_file()
    monkeypatch.setattr(continued.TaskBatches, "next", original)
    resumed = grow(str(source), str(data), tmp_path / "killed", settings)
    assert resumed["held_out"]["mean_loss"] == whole["held_out"]["mean_loss"]
    assert resumed["arms"] == whole["arms"]


def test_a_second_grow_into_a_locked_out_is_refused(tmp_path: Path, capsys) -> None:
    from scalemech.grow.output import STATE_DIR
    from scalemech.training.checkpoints import checkpoint_lock

    source = save_tiny("llama", tmp_path / "llama")
    data = token_file(tmp_path / "ids.npy")
    capsys.readouterr()
    argv = ["grow", "--checkpoint", source, "--data", str(data), "--out", str(tmp_path / "out"), *TINY_ARGV]
    with checkpoint_lock(tmp_path / "out" / STATE_DIR):
        assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("scalemech: error: checkpoint directory") and "in use" in error, error
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_a_bfloat16_checkpoint_is_written_in_bfloat16_with_its_old_weights(tmp_path: Path) -> None:
    """Trained and checked in float32, written in the source's dtype: the old tensors round-trip exactly."""
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(tiny_config("llama")).to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    grow(str(tmp_path / "bf16"), str(token_file(tmp_path / "ids.npy")), tmp_path / "out", TINY)
    old, new = load_file(tmp_path / "bf16" / "model.safetensors"), load_file(tmp_path / "out" / "model.safetensors")
    assert {t.dtype for t in new.values()} == {torch.bfloat16}
    assert torch.equal(new["model.layers.2.mlp.down_proj.weight"], old["model.layers.1.mlp.down_proj.weight"])


@pytest.mark.parametrize("arm", ["new", "lora"])
def test_a_steps_flops_are_one_windows_times_the_batch(arm: str) -> None:
    """``Grower.flops_of`` counts one window and multiplies by the batch: brute force, the whole batch's
    count, for a grown layer training alone and for PEFT's LoRA."""
    from scalemech.grow.alternatives import lora_model

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config("llama")).requires_grad_(False)
    model.model.layers[1].requires_grad_(True)
    if arm == "lora":
        model = lora_model(model.requires_grad_(False), 2, seed=0)
    x, y = torch.randint(3, VOCAB, (5, 8)), torch.randint(3, VOCAB, (5, 8))
    batch = continued.step_flops(model, lambda: continued.window_loss(model, x, y))
    window = continued.step_flops(model, lambda: continued.window_loss(model, x[:1], y[:1]))
    assert batch == 5 * window > 0
    assert all(p.grad is None for p in model.parameters())  # each gradient dropped once counted


def test_the_device_holds_one_model_at_a_time(tmp_path: Path, monkeypatch) -> None:
    """Every model ``grow --retain`` certifies, checks, scores or trains moves to the device alone
    (``core.device.placed``) and waits on the host otherwise: no placement ever nests in another."""
    import contextlib

    from scalemech.core import device as core_device
    from scalemech.grow import arms, placing
    from scalemech.models import hf_growth

    on_device: list[int] = []
    deepest = [0]

    @contextlib.contextmanager
    def recorded(module, where):
        on_device.append(id(module))
        deepest[0] = max(deepest[0], len(on_device))
        with core_device.placed(module, where) as placed_module:
            yield placed_module
        on_device.pop()

    for module in (placing, arms, continued, hf_growth):
        monkeypatch.setattr(module, "placed", recorded)
    source, data = save_tiny("llama", tmp_path / "src"), token_file(tmp_path / "ids.npy")
    retain = token_file(tmp_path / "old.npy", seed=1)
    grow(source, str(data), tmp_path / "out", GrowSettings(**{**vars(TINY), "retain": str(retain)}))
    assert deepest[0] == 1 and not on_device


@pytest.mark.parametrize("arm", ["new", "lora"])
def test_recomputed_activations_train_an_arm_to_the_same_weights(tmp_path: Path, arm: str) -> None:
    """``train_arm(recompute=True)`` (gradient checkpointing per decoder layer) trains the weights a kept
    backward does, to float32 rounding, a grown layer's and PEFT LoRA's adapters alike; the model comes
    back without checkpointing."""
    from torch.utils.checkpoint import checkpoint
    from transformers import modeling_utils

    from scalemech.grow.alternatives import lora_model

    torch.manual_seed(0)
    source = AutoModelForCausalLM.from_config(tiny_config("llama")).state_dict()
    task = TokenIdTask(load_token_ids(token_file(tmp_path / "ids.npy")), 8, VOCAB)
    recipe = Recipe(optimizer="adamw", lr=1e-2, steps=4, batch_size=4, warmup_fraction=0.25)

    def trainable(model: torch.nn.Module) -> dict[str, torch.Tensor]:
        return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}

    def trained(recompute: bool) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        model = AutoModelForCausalLM.from_config(tiny_config("llama")).requires_grad_(False)
        model.load_state_dict(source)
        model.model.layers[1].requires_grad_(True)
        if arm == "lora":
            model = lora_model(model.requires_grad_(False), 2, seed=0)
        before = trainable(model)
        directory = tmp_path / f"{arm}-{recompute}"
        recomputed = []
        with pytest.MonkeyPatch.context() as patch:  # count the layers transformers recomputes
            patch.setattr(modeling_utils, "checkpoint", lambda *a, **k: recomputed.append(1) or checkpoint(*a, **k))
            continued.train_arm("arm", model, task, recipe, 7, directory, {"arm": 1}, 0, progress=False,
                                recompute=recompute)  # fmt: skip
        assert len(recomputed) == (recipe.steps * 2 if recompute else 0)  # every step, each of 2 layers
        assert not any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
        after = {name: p.detach().clone() for name, p in model.named_parameters() if name in before}
        return before, after

    (before, kept), (_, recomputed) = trained(False), trained(True)
    assert max(float((kept[k] - before[k]).abs().max()) for k in kept) > 1e-3  # the arm trained
    assert all(torch.allclose(kept[k], recomputed[k], rtol=0, atol=1e-6) for k in kept)


def test_grow_with_activation_checkpointing_gives_the_same_losses_and_says_so(tmp_path: Path) -> None:
    """``--activation-checkpointing`` reaches every arm: the held-out losses of a run without it, to float32
    rounding; ``growth.json`` records it."""
    source, data = save_tiny("llama", tmp_path / "src"), token_file(tmp_path / "ids.npy")
    kept = grow(source, str(data), tmp_path / "kept", TINY)
    settings = GrowSettings(**{**vars(TINY), "activation_checkpointing": True})
    recomputed = grow(source, str(data), tmp_path / "recomputed", settings)
    assert [r["training"]["activation_checkpointing"] for r in (kept, recomputed)] == [False, True]
    one, other = kept["held_out"]["mean_loss"], recomputed["held_out"]["mean_loss"]
    assert one.keys() == other.keys() and all(abs(one[k] - other[k]) < 1e-6 for k in one), (one, other)


def test_grow_under_bf16_reaches_every_arm_and_says_so(tmp_path: Path) -> None:
    """``--precision bf16`` reaches every arm: their held-out losses move from float32's, within 2 %, and
    ``growth.json`` records the precision."""
    source, data = save_tiny("llama", tmp_path / "src"), token_file(tmp_path / "ids.npy")
    full = grow(source, str(data), tmp_path / "fp32", TINY)
    half = grow(source, str(data), tmp_path / "bf16", GrowSettings(**{**vars(TINY), "precision": "bf16"}))
    assert [r["training"]["precision"] for r in (full, half)] == ["fp32", "bf16"]
    one, other = full["held_out"]["mean_loss"], half["held_out"]["mean_loss"]
    trained = [k for k in one if k not in ("old", "jump")]
    assert trained and all(one[k] != other[k] and abs(one[k] - other[k]) < 0.02 * one[k] for k in trained), (one, other)
