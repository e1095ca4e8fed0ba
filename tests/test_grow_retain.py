"""``scalemech grow --retain``: every arm on a tiny model (grown, the two controls, ``inplace``, ``lora``),
LoRA's rank matched to the new layers, ``inplace`` training exactly the copied layers, forgetting as a
paired difference against brute force, the decision, the placement rules on constructed models, the
model card, and bad ``--at`` values."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from test_grow import TINY, TINY_ARGV, token_file
from test_hf import CONFIGS, save_tiny, tiny_config
from transformers import AutoModelForCausalLM

from scalemech.certify.forgetting import pareto_ranking
from scalemech.cli import main
from scalemech.grow import GrowSettings, grow
from scalemech.grow import arms as grow_arms
from scalemech.grow.alternatives import layers_count, lora_model, lora_rank, lora_units, trainable_count
from scalemech.grow.placement import parse_at, resolve
from scalemech.grow.retained import Retained
from scalemech.grow.scores import adept_importance, block_influence
from scalemech.grow.tradeoff import MAX_FORGETTING, decide_tradeoff, pareto_front, summary
from scalemech.training import continued

ARMS = {"grown", "control_tokens", "control_flops", "inplace", "lora"}


def zeroed_llama(path: Path, layers: int = 3, dead: int = 1) -> str:
    """A tiny random llama of ``layers`` layers whose layer ``dead`` has zero ``o_proj`` and ``down_proj``:
    it is the identity (block influence 0) and no weight of it moves the loss (ADEPT importance 0)."""
    config = tiny_config("llama")
    config.num_hidden_layers = layers
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        model.model.layers[dead].self_attn.o_proj.weight.zero_()
        model.model.layers[dead].mlp.down_proj.weight.zero_()
    model.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def retained_run(tmp_path_factory) -> tuple[Path, Path, Path, dict]:
    """``(source, retain data, out, record)``: a tiny llama grown after layer 0 on one token stream with
    another as ``--retain``; the decision is forced to name ``inplace`` so that ``--fallback`` writes it."""
    root = tmp_path_factory.mktemp("retain")
    source, data = Path(save_tiny("llama", root / "llama")), token_file(root / "new.npy")
    retain = token_file(root / "old.npy", seed=1)
    settings = GrowSettings(**{**vars(TINY), "retain": str(retain), "fallback": True})

    def forced(new, retain, max_forgetting):
        return {**decide_tradeoff(new, retain, max_forgetting), "recommended": False, "winner": "inplace"}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grow_arms, "decide_tradeoff", forced)
        record = grow(str(source), str(data), root / "out", settings)
    return source, retain, root / "out", record


@pytest.mark.timeout(300)
def test_every_arm_trains_on_the_same_tokens_and_is_scored_on_both_domains(retained_run) -> None:
    _, _, out, record = retained_run
    arms = record["arms"]
    assert set(arms) == ARMS and set(record["held_out"]["arms"]) == ARMS | {"old"}
    for name in ARMS - {"control_flops"}:
        assert arms[name]["tokens"] == 3 * 4 * 8, name
    for name in ARMS:
        assert arms[name]["flops"] > 0 and arms[name]["trainable_parameters"] > 0, name
        row = record["held_out"]["arms"][name]
        assert {"new_loss", "gain", "gain_se", "retain_loss", "forgetting", "forgetting_se", "forgetting_hi"} <= set(
            row
        ), name
    assert record["held_out"]["mean_loss"].keys() == ARMS | {"old"}
    assert record["retain"]["max_forgetting"] == MAX_FORGETTING and record["retain"]["pareto_front"]
    assert (
        arms["inplace"]["layers"] == [0]
        and arms["inplace"]["trainable_parameters"] == arms["grown"]["trainable_parameters"]
    )
    assert (out / "growth.json").is_file()


@pytest.mark.timeout(300)
def test_inplace_trains_exactly_the_copied_layers(retained_run) -> None:
    """The written ``inplace`` model (``--fallback`` with ``inplace`` named): layer 0's tensors moved,
    every other tensor is bit-identical to the source's."""
    source, _, out, record = retained_run
    assert record["decision"]["written"] == "inplace" and record["inserted_layers"] == []
    old, new = load_file(source / "model.safetensors"), load_file(out / "model.safetensors")
    assert old.keys() == new.keys()
    moved = {key for key in old if not torch.equal(old[key], new[key])}
    assert moved and all(key.startswith("model.layers.0.") for key in moved), moved


@pytest.mark.timeout(300)
def test_forgetting_is_the_paired_difference_brute_force_gives(retained_run) -> None:
    """The written model's forgetting, recomputed window by window with a plain cross-entropy on the same
    held-out retain windows, and its SE as ``sd(d) / √n`` by hand."""
    source, retain, out, record = retained_run
    held = Retained(str(retain), {"block_size": 8}, 300, TINY.eval_windows, 4, TINY.seed, TINY.pool)

    def window_losses(path: Path) -> list[float]:
        model = AutoModelForCausalLM.from_pretrained(path).eval()
        with torch.no_grad():
            return [float(F.cross_entropy(model(x[None]).logits[0], y)) for x, y in zip(held.x, held.y, strict=True)]

    d = np.array(window_losses(out)) - np.array(window_losses(source))
    row = record["held_out"]["arms"]["inplace"]
    assert row["forgetting"] == pytest.approx(d.mean(), abs=1e-6)
    assert row["forgetting_se"] == pytest.approx(np.sqrt(((d - d.mean()) ** 2).sum() / (len(d) - 1) / len(d)), abs=1e-6)


@pytest.mark.timeout(300)
def test_the_model_card_loads_and_names_the_base_model(retained_run) -> None:
    """A local directory outside the hub's cache: no ``base_model`` id (the Hub takes only ids), its path in
    the text, said to be local."""
    source, _, out, record = retained_run
    card = ModelCard.load(out / "README.md")
    assert card.data.base_model is None and record["source"]["hub_id"] is None
    assert f"`{source.resolve()}`, a local directory (not from the Hugging Face Hub)" in card.text
    for text in ("inserted layers", "--at layer.0", "forgetting ± SE", "gain over old ± SE", "layer.0",
                 "## Certificate behind the placement"):  # fmt: skip
        assert text in card.text, text
    assert record["decision"]["why"] in card.text and "lora" in card.text and "grow(" in card.text


def test_summary_and_the_decision_follow_their_rule() -> None:
    """Forgetting against a by-hand paired difference; the two ways to be recommended and the winner."""
    rng = np.random.default_rng(0)
    base = rng.normal(3.0, 0.5, 200)
    retain_old = rng.normal(2.0, 0.5, 200)
    new = {"old": base, "grown": base - 0.2, "lora": base - 0.1 + rng.normal(0, 0.01, 200)}
    retain = {"old": retain_old, "grown": retain_old + 0.01, "lora": retain_old + 0.005 + rng.normal(0, 0.01, 200)}
    rows = summary(new, retain)
    d = retain["lora"] - retain_old
    assert rows["lora"]["forgetting"] == pytest.approx(d.mean())
    assert rows["lora"]["forgetting_se"] == pytest.approx(d.std(ddof=1) / np.sqrt(200))
    judged = decide_tradeoff(new, retain, 0.02)
    assert judged["recommended"] and judged["winner"] == "grown" and "lowest new-domain loss" in judged["why"]
    strict = decide_tradeoff(new, retain, 0.001)  # grown forgets too much; lora, worse on new, forgets less
    assert strict["pareto_front"] == ["grown", "lora"] and not strict["recommended"]
    assert strict["winner"] == "lora" and "forgets 0.0100 (upper end 0.0100) > 0.001" in strict["why"]
    assert "no front arm's forgetting is within 0.001" in strict["why"]
    alternating = 0.1 * (-1.0) ** np.arange(200)  # lora within 2 SE of grown on new, forgetting more
    lora = {"new": base - 0.095 + alternating, "retain": retain_old + 0.02}
    only = decide_tradeoff({**new, "lora": lora["new"]}, {**retain, "lora": lora["retain"]}, 0.001)
    assert only["recommended"] and only["pareto_front"] == ["grown"] and "only arm on the Pareto front" in only["why"]
    arms = ["grown", "lora"]
    assert pareto_front(arms, new, retain) == arms  # each lower on one axis by > 2 SE, higher on the other


def test_a_noise_level_difference_dominates_nothing() -> None:
    """Grown lower on both axes by a fraction of an SE: the plain front of the means named grown alone;
    with paired SEs both arms stay on it, and grown is not recommended by the Pareto branch."""
    rng = np.random.default_rng(1)
    base, retain_old = rng.normal(3.0, 0.5, 200), rng.normal(2.0, 0.5, 200)
    noise = 0.05 * (-1.0) ** np.arange(200)  # mean 0: lora is higher by 0.001 exactly, ~0.3 paired SE
    new = {"old": base, "grown": base - 0.1, "lora": base - 0.1 + 0.001 + noise}
    retain = {"old": retain_old, "grown": retain_old + 0.05, "lora": retain_old + 0.05 + 0.001 + noise}
    assert new["grown"].mean() < new["lora"].mean() and retain["grown"].mean() < retain["lora"].mean()
    assert pareto_front(["grown", "lora"], new, retain) == ["grown", "lora"]
    judged = decide_tradeoff(new, retain, 0.02)
    assert not judged["recommended"] and judged["pareto_front"] == ["grown", "lora"]
    clear = {**new, "lora": new["lora"] + 0.05}  # now lora is higher on the new domain by ~10 SE
    assert pareto_front(["grown", "lora"], clear, retain) == ["grown"]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_loras_rank_matches_the_new_layers_parameters(name: str) -> None:
    """``lora_units`` is what PEFT's ``all-linear`` adapts (a rank-r adapter trains exactly ``r · units``),
    and the rank brings it within half a rank step of the new layer's parameters."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config(name))
    units, target = lora_units(model), layers_count(model, [0])
    rank = lora_rank(target, units)
    adapted = lora_model(model, rank, 0)
    assert trainable_count(adapted) == rank * units, name
    assert abs(trainable_count(adapted) - target) <= units / 2 or rank == 1, (name, rank, units, target)


def test_each_placement_rule_picks_the_layer_it_should(tmp_path: Path) -> None:
    """On a llama whose layer 1 is the identity: ADEPT's importance and block influence are 0 there and
    larger elsewhere, so both duplicate layer 1; ``top`` is after the last layer, ``every:K`` LLaMA-Pro's."""
    model = AutoModelForCausalLM.from_pretrained(zeroed_llama(tmp_path / "llama")).eval()
    x = torch.randint(3, 300, (6, 8))
    importance = adept_importance(model, x, torch.randint(3, 300, (6, 8)), 4)
    influence = block_influence(model, x, 4)
    assert importance[1] == 0 and min(importance[0], importance[2]) > 0
    assert influence[1] == pytest.approx(0, abs=1e-6) and min(influence[0], influence[2]) > 1e-4
    assert all(p.requires_grad and p.grad is None for p in model.parameters())  # left as they were
    assert resolve(parse_at("adept", None, retain=True), 3, importance) == (1,)
    assert resolve(parse_at("bi", None, retain=True), 3, influence) == (1,)
    second = 0 if influence[0] < influence[2] else 2
    assert resolve(parse_at("bi", 2, retain=True), 3, influence) == tuple(sorted((1, second)))
    assert resolve(parse_at("top", None), 3) == (2,) and resolve(parse_at("top", 2), 3) == (2, 2)
    assert resolve(parse_at("every:3", None), 3) == (2,)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("rule", ["adept", "bi"])
def test_grow_at_a_rule_on_the_command_line_duplicates_the_identity_layer(
    tmp_path: Path, capsys, recwarn, rule: str
) -> None:
    """``--at adept|bi --retain``: the scores printed and kept, the new layer after layer 1 (index 2), the
    rule that chose it and the certificate's word on it against its first point, the arms' table printed
    once with forgetting and the Pareto front, no library's deprecation warning (PEFT's call of
    transformers' ``is_gradient_checkpointing`` raises one)."""
    source = zeroed_llama(tmp_path / "llama")
    data, retain = token_file(tmp_path / "new.npy"), token_file(tmp_path / "old.npy", seed=1)
    argv = ["grow", "--checkpoint", source, "--data", str(data), "--out", str(tmp_path / "out"), "--at", rule,
            "--retain", str(retain), "--steps", "2", "--batch-size", "4", "--block-size", "8", "--eval-windows", "8",
            "--pool", "6", "--M", "2", "--K", "2", "--device", "cpu", "--max-forgetting", "0.5"]  # fmt: skip
    assert main(argv) == 0
    record = json.loads((tmp_path / "out" / "growth.json").read_text())
    scores = record["decisions"][0]["scores"]
    assert scores["rule"] == rule and int(np.argmin(scores["per_layer"])) == 1
    assert record["inserted_layers"] == [2] and record["retain"]["max_forgetting"] == 0.5
    out = capsys.readouterr().out
    assert f"{rule} scores per layer on --retain" in out and "forgetting ± SE" in out and "Pareto front" in out
    assert re.search(
        rf"grow: --at {rule} \(.*\) chose layer\.1; the certificate ranks layer\.1 (first|\d+[a-z]{{2}}) of 3", out
    )
    assert len(record["decisions"][0]["certificate"]) == 3  # every point certified, the chosen one judged by them
    assert out.count("held-out loss per token") == 1 and "gain_over_" not in out
    assert not [w for w in recwarn if issubclass(w.category, (FutureWarning, DeprecationWarning))], list(recwarn)
    assert record["command"].startswith("scalemech grow --checkpoint") and f"--at {rule}" in record["command"]


@pytest.mark.timeout(300)
def test_grow_at_pareto_takes_the_first_point_of_its_ranking(tmp_path: Path, capsys) -> None:
    """``--at pareto``: the certificate carries the predicted gain and forgetting at every point, the point
    grown is the first of ``pareto_ranking`` on it, said with its reason, kept in growth.json."""
    source = save_tiny("llama", tmp_path / "llama")
    data, retain = token_file(tmp_path / "new.npy"), token_file(tmp_path / "old.npy", seed=1)
    settings = GrowSettings(**{**vars(TINY), "at": "pareto", "retain": str(retain), "steps": 2})
    record = grow(source, str(data), tmp_path / "out", settings)
    certificate = pd.DataFrame(record["decisions"][0]["certificate"])
    assert certificate["forget"].notna().all() and certificate["n_retain"].eq(TINY.pool).all()
    first = pareto_ranking(certificate, MAX_FORGETTING)["point"].iloc[0]
    assert record["decisions"][0]["chosen"] == first and record["predicted_first_order_gain"][0]["point"] == first
    assert {"forget", "forget_lo", "forget_hi", "mu_cross"} <= set(record["predicted_first_order_gain"][0])
    out = capsys.readouterr().out
    assert "grow: --at pareto (" in out and f") chose {first}: " in out and "forget_A [lo, hi]" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--at", "pareto"], "--at 'pareto' weighs the forgetting of the old domain: give it with --retain DATA"),
        (["--at", "adept"], "--at 'adept' scores layers on the old domain: give it with --retain DATA"),
        (["--at", "bi"], "--at 'bi' scores layers on the old domain: give it with --retain DATA"),
        (["--at", "every:x"], "'every:x' is not a point; allowed: 'auto', 'best', comma-separated points"),
        (["--at", "every:0"], "'every:0' is not a point"),
        (["--at", "bottom"], "'bottom' is not a point; allowed: 'auto'"),
        (["--at", "top", "--blocks", "0"], "--blocks 0 must be at least 1"),
        (["--at", "adept", "--retain", "DATA", "--blocks", "5"], "--blocks 5: --at adept picks distinct layers"),
        (["--retain", "missing.npy"], "--retain 'missing.npy' does not exist"),
        (["--max-forgetting", "-1"], "max_forgetting = -1.0 must be a finite number >= 0"),
    ],
)
def test_bad_placements_and_retain_options_get_one_line(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    source = save_tiny("llama", tmp_path / "llama")
    data = token_file(tmp_path / "ids.npy", n=400)
    base = ["grow", "--checkpoint", source, "--data", str(data), "--out", str(tmp_path / "out"), "--device", "cpu"]
    capsys.readouterr()
    assert main([*base, *(str(data) if arg == "DATA" else arg for arg in argv)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("scalemech: error: ") and error.count("\n") == 0 and message in error, error


def test_without_retain_no_alternative_arm_is_trained_and_a_card_names_the_hub_id(tmp_path: Path) -> None:
    """A checkpoint in the hub's cache layout (``models--owner--name/snapshots/<revision>``): the card's
    ``base_model`` is its Hub id; every model has its gain over the old one."""
    source = save_tiny("llama", tmp_path / "hub" / "models--owner--tiny-llama" / "snapshots" / "0123abc")
    record = grow(source, str(token_file(tmp_path / "ids.npy")), tmp_path / "out", copy.copy(TINY))
    assert set(record["arms"]) == {"grown", "control_tokens", "control_flops"} and record["retain"] is None
    card = ModelCard.load(tmp_path / "out" / "README.md")
    assert card.data.base_model == "owner/tiny-llama" == record["source"]["hub_id"]
    assert "`owner/tiny-llama` on the Hugging Face Hub" in card.text and "gain over old ± SE" in card.text
    assert set(record["held_out"]["arms"]) == {"old", "grown", "control_tokens", "control_flops"}


@pytest.mark.timeout(600)
def test_every_family_grows_with_retain_and_every_arm(tmp_path: Path) -> None:
    """Every family of certify's table: the five arms trained, LoRA within half a rank step of the new
    layer's parameters, ``inplace`` as many as the new layer's, the card naming the base model."""
    data, retain = token_file(tmp_path / "new.npy"), token_file(tmp_path / "old.npy", seed=1)
    settings = GrowSettings(**{**vars(TINY), "retain": str(retain), "steps": 2})
    for name in sorted(CONFIGS):
        source = save_tiny(name, tmp_path / name)
        record = grow(source, str(data), tmp_path / f"{name}-out", settings)
        arms = record["arms"]
        assert set(arms) == ARMS and set(record["held_out"]["arms"]) == ARMS | {"old"}, name
        lora, target = arms["lora"], arms["lora"]["new_layer_parameters"]
        assert lora["trainable_parameters"] == lora["rank"] * lora["parameters_per_rank"], name
        assert abs(lora["trainable_parameters"] - target) <= lora["parameters_per_rank"] / 2, name
        assert arms["inplace"]["trainable_parameters"] == target == arms["grown"]["trainable_parameters"], name
        assert ModelCard.load(tmp_path / f"{name}-out" / "README.md").data.base_model is None, name


@pytest.mark.timeout(300)
def test_a_grow_killed_inside_the_lora_arm_resumes_to_the_same_result(tmp_path: Path, monkeypatch) -> None:
    """The LoRA adapters' resume state (PEFT's parameter names) is read back: the same held-out losses
    on both domains and the same arms as an uninterrupted run."""
    source = save_tiny("llama", tmp_path / "llama")
    data, retain = token_file(tmp_path / "new.npy"), token_file(tmp_path / "old.npy", seed=1)
    settings = GrowSettings(**{**vars(TINY), "retain": str(retain), "steps": 4, "checkpoint_every": 2})
    whole = grow(source, str(data), tmp_path / "whole", settings)
    original_train, original_next = grow_arms.train_arm, continued.TaskBatches.next
    calls = {"lora": 0}

    def dying(self):
        if calls["lora"]:
            calls["lora"] += 1
            if calls["lora"] > 1 + 3:  # its FLOP count's batch, then dies in its third step
                raise KeyboardInterrupt
        return original_next(self)

    def train_arm(name, *args, **kwargs):
        calls["lora"] = int(name == "lora")
        return original_train(name, *args, **kwargs)

    monkeypatch.setattr(continued.TaskBatches, "next", dying)
    monkeypatch.setattr(grow_arms, "train_arm", train_arm)
    with pytest.raises(KeyboardInterrupt):
        grow(source, str(data), tmp_path / "killed", settings)
    assert (tmp_path / "killed" / ".grow-state" / "lora" / "step-000000002.pt").is_file()
    monkeypatch.undo()
    resumed = grow(source, str(data), tmp_path / "killed", settings)
    assert resumed["held_out"]["mean_loss"] == whole["held_out"]["mean_loss"]
    assert resumed["held_out"]["arms"] == whole["held_out"]["arms"] and resumed["arms"] == whole["arms"]


def test_the_help_states_the_default_max_forgetting(capsys) -> None:
    """``--max-forgetting``'s help names ``tradeoff.MAX_FORGETTING`` (the CLI imports nothing heavy)."""
    with pytest.raises(SystemExit):
        main(["grow", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default: {MAX_FORGETTING:g}, grow.tradeoff.MAX_FORGETTING" in text
    for rule in ("every:K LLaMA-Pro's stride (arXiv 2401.02415)", "ADEPT (arXiv 2510.10071)", "(arXiv 2403.03853)"):
        assert rule in text, rule


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_both_scores_run_on_every_family(name: str) -> None:
    """ADEPT's importance and block influence: one finite score per layer, ≥ 0 (|g·W| sums; 1 − cos ≥ 0
    up to rounding), on every family certify serves (its layers' hidden states found by the hooks)."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config(name)).eval()
    x, y = torch.randint(3, 300, (5, 8)), torch.randint(3, 300, (5, 8))
    for scores in (adept_importance(model, x, y, 2), block_influence(model, x, 2)):
        assert len(scores) == 2 and all(np.isfinite(v) and v >= -1e-6 for v in scores), (name, scores)


def test_retain_ids_outside_the_vocabulary_are_refused_naming_retain(tmp_path: Path, capsys) -> None:
    source = save_tiny("llama", tmp_path / "llama")
    retain = tmp_path / "old.npy"
    np.save(retain, np.full(6000, 300))
    argv = ["grow", "--checkpoint", source, "--data", str(token_file(tmp_path / "new.npy")), "--out",
            str(tmp_path / "out"), "--retain", str(retain), *TINY_ARGV]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"scalemech: error: --retain {retain}: token id 300 is outside"), error
    assert not (tmp_path / "out").exists()
