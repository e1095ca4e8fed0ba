"""``scalemech certify``: the per-point certificate of a user's own checkpoint, end to end, and the
verdict, recommendation and legend it prints."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from playtext import play_text
from test_hf import CONFIGS, TINY_DECODER, VOCAB, save_tiny, tiny_tokenizer
from transformers import AutoModelForCausalLM, GPTNeoXConfig

from scalemech import stats
from scalemech.certify import (
    B_GROW,
    CERTIFICATE_COLUMNS,
    GROW,
    NO_SIGNAL,
    WEAK,
    certify,
    format_certificate,
    measurement,
    point_row,
    recommendation,
    verdict,
)
from scalemech.certify.forgetting import FORGETTING_COLUMNS
from scalemech.certify.inputs import checkpoint_spec
from scalemech.certify.text import loss_line
from scalemech.cli import main
from scalemech.data import prepare_dataset
from scalemech.gradients.pools import GradientPool, pool_path
from scalemech.models import build_model, save_model

TINY = ["--pool", "12", "--block-size", "8", "--M", "4", "--K", "4", "--batch-size", "12", "--device", "cpu"]
COMPACT_HEADER = ["point", "mu_sq [lo, hi]", "d_align [lo, hi]", "b_exact", "b_align", "block_grad_norm", "verdict"]


@pytest.fixture(scope="module")
def neox_checkpoint(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("neox")
    torch.manual_seed(0)
    config = GPTNeoXConfig(**dict(TINY_DECODER, num_hidden_layers=3))
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    path.write_text(play_text(20_000))
    return path


def _run(argv: list[str]) -> str:
    """stdout of ``scalemech argv`` run in this process (checked: status 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def cli_run(neox_checkpoint: Path, text_file: Path, tmp_path_factory) -> tuple[str, pd.DataFrame]:
    """One ``scalemech certify`` of the tiny GPT-NeoX on the text file: its stdout and its --out CSV."""
    out = tmp_path_factory.mktemp("out") / "certificate.csv"
    argv = ["certify", "--checkpoint", str(neox_checkpoint), "--data", str(text_file), *TINY, "--threads", "1"]
    stdout = _run([*argv, "--out", str(out)])
    return stdout, pd.read_csv(out)


def _table(stdout: str) -> list[str]:
    """The table's lines, after the lines naming the model and its dtype and saying its loss."""
    return stdout.split("\n\n")[0].splitlines()[2:]


def test_cli_names_the_model_and_its_dtype(cli_run) -> None:
    stdout, _ = cli_run
    assert (
        stdout.splitlines()[0].startswith("model: ")
        and "(gpt_neox, 3 points, 8 tokens per example), float32 on cpu, 1 torch thread\n" in stdout
    )


def test_cli_prints_the_loss_beside_a_uniform_guess(cli_run) -> None:
    stdout, _ = cli_run
    assert re.fullmatch(
        r"loss on the train pool: \d+\.\d\d nats per token \(uniform guess: ln 300 = 5\.70\)", stdout.splitlines()[1]
    )


def test_cli_prints_a_compact_table_one_row_per_layer(cli_run) -> None:
    stdout, table = cli_run
    lines = _table(stdout)
    assert [cell.strip() for cell in lines[0].split("  ") if cell.strip()] == COMPACT_HEADER
    assert [line.split()[0] for line in lines[1:]] == ["layer.0", "layer.1", "layer.2"]
    assert max(len(line) for line in lines) <= 110  # compact: not the 19-column, ~200-character table
    for line, verdict_word in zip(lines[1:], table["verdict"]):
        assert line.endswith(verdict_word)
    assert list(table.columns) == CERTIFICATE_COLUMNS and len(table) == 3
    assert (table["view"] == "full").all() and (table["n"] == 12).all() and (table["n_test"] == 12).all()
    bounded = table.dropna(subset=["b_exact_common", "b_align"])
    assert len(bounded) and (bounded["b_exact_common"] <= bounded["b_align"] + 1e-12).all()
    assert (table["block_grad_norm"] > 0).all()
    assert set(table["verdict"]) <= {GROW, WEAK, NO_SIGNAL}


def test_cli_prints_a_recommendation_and_a_legend(cli_run) -> None:
    stdout, table = cli_run
    lines = stdout.splitlines()
    [advice] = [line for line in lines if line.startswith("recommendation: ")]
    assert advice == recommendation(table)
    assert any(line.startswith("verdict: ") for line in lines)
    text = " ".join(lines)
    assert "inf = a spread estimated <= 0" in text and "d_par = inf: mu'Sigma mu estimated <= 0" in text
    assert "nan = the data do not bound it" in text
    assert "< 0: an estimate or bound below 0" in text


def test_wide_table_has_every_column_within_120_characters(cli_run) -> None:
    _, table = cli_run
    lines = format_certificate(table, wide=True).splitlines()
    block = lines[: lines.index("")]
    shown = [
        pair.split("=")[0] for line in block if line.startswith("    ") for pair in re.split(r"\s{2,}", line.strip())
    ]
    assert shown == [c for c in CERTIFICATE_COLUMNS if c != "point"] * len(table)
    assert [line for line in block if not line.startswith(" ")] == [f"{point}:" for point in table["point"]]
    assert max(map(len, block)) <= 120


def test_verdict_rule() -> None:
    assert verdict(1e-3, 0.2, 1.0) == GROW
    assert verdict(1e-3, 0.2, 0.0) == WEAK  # no first-order gain for a new block
    assert verdict(1e-3, B_GROW, 1.0) == WEAK  # detected, not certified at (M, K)
    assert verdict(1e-3, math.nan, 1.0) == WEAK  # no certificate
    assert verdict(-1e-3, 0.2, 1.0) == WEAK  # certified, but the ‖μ‖² interval reaches 0
    assert verdict(-1e-3, math.nan, 1.0) == NO_SIGNAL
    assert verdict(math.nan, 0.9, 1.0) == NO_SIGNAL


def _frame(rows: list[dict]) -> pd.DataFrame:
    base = dict.fromkeys(CERTIFICATE_COLUMNS, 0.0) | dict.fromkeys(FORGETTING_COLUMNS, math.nan)  # no --retain
    base |= {"view": "full", "n": 12, "n_test": 12, "M": 4, "K": 4}
    return pd.DataFrame([base | row for row in rows], columns=CERTIFICATE_COLUMNS)


def test_recommendation_ranks_by_block_gradient() -> None:
    frame = _frame(
        [
            {"point": "a", "verdict": GROW, "b_exact": 0.3, "block_grad_norm": 1.0},
            {"point": "b", "verdict": WEAK, "b_exact": 0.7, "block_grad_norm": 9.0},
            {"point": "c", "verdict": GROW, "b_exact": 0.2, "block_grad_norm": 2.0},
        ]
    )
    advice = recommendation(frame)
    assert advice.startswith("recommendation: grow at c (then a)") and "B_exact = 0.2 < 0.5" in advice
    weak = recommendation(frame.assign(verdict=[WEAK, WEAK, NO_SIGNAL]))
    assert "no point is certified" in weak and "a, b" in weak
    none = recommendation(frame.assign(verdict=NO_SIGNAL))
    assert none.startswith("recommendation: no point has a detectable signal")


def test_advice_never_asks_for_sizes_beyond_the_pools() -> None:
    """Larger --M/--K are suggested only below the pools measured, and with that ceiling."""
    weak = _frame([{"point": "a", "verdict": WEAK}])  # pools of 12, M = K = 4
    assert "larger --M/--K (at most 12" in recommendation(weak)
    full = recommendation(weak.assign(M=12, K=12))
    assert "larger --M/--K" not in full and "larger --pool" in full


def test_compact_table_clips_and_names_inf_and_nan() -> None:
    frame = _frame(
        [
            {
                "point": "layer.0",
                "verdict": NO_SIGNAL,
                "mu_sq": -2e-4,
                "mu_sq_lo": -5e-4,
                "mu_sq_hi": 1e-4,
                "d_align": -0.5,
                "d_align_lo": math.nan,
                "d_align_hi": math.nan,
                "b_exact": math.nan,
                "b_align": math.nan,
                "d_par": math.inf,
            }
        ]
    )
    text = format_certificate(frame)
    row = text.splitlines()[1]
    assert "< 0 [< 0, 0.0001]" in row  # mu_sq and its lower bound below 0
    assert "< 0 [nan, nan]" in row and "[0, 0]" not in row  # d_align below 0, its interval not given by the data
    assert "no detectable signal" in row
    wide = format_certificate(frame, wide=True)
    assert "-0.0005" in wide and "inf" in wide  # raw values in --wide


def _pool(path: Path, rows: torch.Tensor, split: str, point: str, view: str) -> GradientPool:
    writer = GradientPool.create(
        path,
        rows.shape[0],
        rows.shape[1],
        "float32",
        split=split,
        point=point,
        point_index=0,
        view=view,
        block_grad_norm=0.5,
    )
    writer.write(rows)
    return writer.finish()


@pytest.mark.parametrize("view", ["full", "pooled"])
def test_point_row_uses_the_test_pool(tmp_path: Path, view: str) -> None:
    """b_exact is the two-sample certificate of C = Q_tr Q_teᵀ; the one-sample bounds and the ‖μ‖²
    interval come from the train pool alone."""
    generator = torch.Generator().manual_seed(0)
    mu = torch.full((6,), 0.5)
    Q = {
        "train": mu + torch.randn(20, 6, generator=generator),
        "test": 0.5 * mu + torch.randn(15, 6, generator=generator),
    }
    pools = {split: _pool(pool_path(tmp_path, split, "p", view), rows, split, "p", view) for split, rows in Q.items()}
    Q = {split: rows.float().double() for split, rows in Q.items()}
    G = Q["train"] @ Q["train"].T
    estimate, bounds = stats.stats_from_gram(G, 6), stats.alignment_intervals(G, 6, 0.9)
    row = point_row(pools["train"], pools["test"], 3, 5, torch.device("cpu"))
    two_sample = stats.TwoSampleStats.from_cross(Q["train"] @ Q["test"].T)
    assert row["b_exact"] == pytest.approx(stats.two_sample_certificate(two_sample, 3, 5), rel=1e-6)
    assert row["mu_cross"] == pytest.approx(two_sample.mu_cross, rel=1e-6)
    common = stats.certificates(estimate, 3, 5)
    assert row["b_exact_common"] == pytest.approx(common.b_exact) and row["b_align"] == pytest.approx(common.b_align)
    assert row["b_exact"] != pytest.approx(row["b_exact_common"])  # the test pool has another mean
    assert row["d_align"] == pytest.approx(estimate.d_align) and row["n"] == 20 and row["view"] == view
    assert (row["mu_sq_lo"], row["mu_sq_hi"]) == pytest.approx(bounds["mu_sq"])
    assert row["n_test"] == 15 and row["verdict"] == verdict(row["mu_sq_lo"], row["b_exact"], 0.5)


def test_certify_gives_the_numbers_of_the_pipelines_measurement(tmp_path: Path, neox_checkpoint: Path) -> None:
    """certify's rows equal ``experiments.measure`` on the same model, data and seed: the same pools
    (train and test), the same statistics, the same new blocks' gradient on the train pool."""
    from scalemech.data.tokenized import load_token_ids
    from scalemech.experiments.measure import measure
    from scalemech.models.hf import build

    np.save(tmp_path / "ids.npy", _token_ids(3000))
    table = certify(str(neox_checkpoint), str(tmp_path / "ids.npy"), pool=10, M=3, K=4, batch_size=4, block_size=8)
    model = build({"checkpoint": str(neox_checkpoint), "local_files_only": True, "dtype": "auto", "block_size": 8})
    frames = measure(
        model,
        load_token_ids(tmp_path / "ids.npy"),
        {"model": str(neox_checkpoint)},
        tmp_path / "pools",
        points="all",
        train_pool=10,
        test_pool=10,
        batch_size=4,
        covmat_points=0,
        pool_dtype="float32",
        interval_level=0.9,
        null_draws=2,
        seed=0,
        device="cpu",
    )
    dalign = frames["dalign"].query("split == 'train' and view == 'full'").set_index("point")
    signal = frames["signal"].query("split == 'train'").set_index("point")
    for row in table.to_dict("records"):
        for column in ("mu_sq", "d_par", "d_2", "d_align", "d_align_lo", "d_align_hi"):
            assert row[column] == pytest.approx(dalign.loc[row["point"], column], rel=1e-9, nan_ok=True), column
        for column in ("mu_sq_lo", "mu_sq_hi", "block_grad_norm"):
            assert row[column] == pytest.approx(signal.loc[row["point"], column], rel=1e-9), column


def test_certificate_matches_the_statistics(tmp_path: Path) -> None:
    """On a scalemech model.pt and a prepared dataset, pooled view: B_align recomputed from the row's d_align."""
    data_dir = tmp_path / "mnist"
    prepare_dataset("mnist5k", {}, data_dir)
    torch.manual_seed(0)
    spec = {"family": "resnet", "depth": 8, "width": 0.5, "in_channels": 1, "num_classes": 10}
    model = build_model(spec)
    classifier = [m for m in model.head.modules() if isinstance(m, torch.nn.Linear)][-1]
    classifier.bias.data[0] = 5.0  # a confident wrong prior: a strong, shared gradient signal μ
    save_model(tmp_path / "model.pt", model, spec)
    table = certify(
        str(tmp_path / "model.pt"),
        str(data_dir),
        points="2",
        pool=32,
        M=4,
        K=8,
        batch_size=32,
        device="cpu",
        view="pooled",
    )
    assert list(table["point"]) == ["stage2.block1", "stage3.block1"]
    for row in table.to_dict("records"):
        n_eff = 4 * 8 / (4 + 8 + 1)
        assert row["view"] == "pooled" and row["dim"] == {"stage2.block1": 16, "stage3.block1": 32}[row["point"]]
        assert row["b_align"] == pytest.approx(1 / (1 + n_eff * row["d_align"]))
        assert row["d_align"] == pytest.approx(min(row["d_par"], row["d_2"]))
        assert row["d_align_lo"] <= row["d_align"] <= row["d_align_hi"]
        assert row["mu_sq_lo"] <= row["mu_sq"] <= row["mu_sq_hi"]
        assert math.isfinite(row["mu_sq"]) and row["n"] == 32
    assert (table["verdict"] == GROW).any()  # the planted signal is found
    assert "loss" not in table.attrs and loss_line(table.attrs) == ("", None)  # no vocabulary: no loss line


def _token_ids(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, n).astype(np.int64)


@pytest.mark.parametrize("form", ["npy", "nanogpt_dir", "train_bin"])
def test_token_ids_need_no_tokenizer(tmp_path: Path, neox_checkpoint: Path, form: str) -> None:
    """A checkpoint without tokenizer files, on token ids: a .npy, nanoGPT's directory, or its train.bin."""
    bare = tmp_path / "bare"
    AutoModelForCausalLM.from_pretrained(neox_checkpoint).save_pretrained(bare)  # weights only
    assert not list(bare.glob("tokenizer*"))
    if form == "npy":
        np.save(tmp_path / "ids.npy", _token_ids(2000))
        data = tmp_path / "ids.npy"
    else:
        _token_ids(1500).astype(np.uint16).tofile(tmp_path / "train.bin")
        _token_ids(500, 1).astype(np.uint16).tofile(tmp_path / "val.bin")
        data = tmp_path if form == "nanogpt_dir" else tmp_path / "train.bin"
    table = certify(str(bare), str(data), points="1", pool=12, M=4, K=4, batch_size=12, block_size=8, device="cpu")
    assert list(table["point"]) == ["layer.2"] and table["dim"].item() == 8 * 32
    assert math.isfinite(table["mu_sq"].item()) and table["block_grad_norm"].item() > 0


def test_token_ids_outside_the_vocabulary_are_named(tmp_path: Path, neox_checkpoint: Path) -> None:
    np.save(tmp_path / "ids.npy", np.full(2000, VOCAB + 5, dtype=np.int32))
    with pytest.raises(ValueError, match=f"token id {VOCAB + 5} is outside the model's vocabulary"):
        certify(
            str(neox_checkpoint), str(tmp_path / "ids.npy"), points="1", pool=6, M=2, K=2, block_size=4, device="cpu"
        )


def test_bad_data_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        certify("EleutherAI/pythia-14m", str(tmp_path / "nowhere"), device="cpu")


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_every_family_is_certified(tmp_path_factory, family: str) -> None:
    """Each tested family end to end on token ids: a row per layer with a measured signal."""
    checkpoint = save_tiny(family, tmp_path_factory.mktemp(family), tokenizer=False)
    ids = tmp_path_factory.mktemp("ids") / "ids.npy"
    np.save(ids, _token_ids(1000))
    table = certify(checkpoint, str(ids), pool=6, M=2, K=2, batch_size=6, block_size=8, device="cpu")
    assert list(table["point"]) == ["layer.0", "layer.1"] and (table["dim"] == 8 * 32).all()
    assert table["mu_sq"].notna().all() and (table["block_grad_norm"] > 0).all()
    assert "float32 on cpu" in table.attrs["ran"]


def test_text_without_a_tokenizer_says_how_to_give_one(tmp_path: Path, text_file: Path) -> None:
    bare = save_tiny("llama", tmp_path / "bare", tokenizer=False)
    with pytest.raises(ValueError, match=r"needs a tokenizer.*--tokenizer NAME_OR_DIR.*\.npy.*train\.bin/val\.bin"):
        certify(bare, str(text_file), pool=6, M=2, K=2, block_size=8, device="cpu")
    tiny_tokenizer().save_pretrained(tmp_path / "tokenizer")
    table = certify(
        bare, str(text_file), pool=6, M=2, K=2, block_size=8, device="cpu", tokenizer=str(tmp_path / "tokenizer")
    )
    assert len(table) == 2


@pytest.mark.parametrize("form", ["text file", "prepared directory"])
def test_large_text_is_read_only_as_far_as_the_pools_need(
    tmp_path_factory, neox_checkpoint: Path, monkeypatch, form: str
) -> None:
    """50 MB of text, as a file or a prepared dataset, pools of 6 windows of 9 tokens: only a
    prefix of a few kB (of each split) is tokenized."""
    from scalemech.data import tokenized

    tmp_path = tmp_path_factory.mktemp("big")
    big = tmp_path / "big.txt"
    with big.open("w") as f:
        for _ in range(50):
            f.write("To be, or not to be, that is the question. " * 24_000)
    data = big
    if form == "prepared directory":
        prepare_dataset("corpus", {"path": str(big)}, tmp_path / "prepared")
        data = tmp_path / "prepared"
    read = []
    tokenize = tokenized.tokenize_text
    monkeypatch.setattr(tokenized, "tokenize_text", lambda text, *args: read.append(len(text)) or tokenize(text, *args))
    table = certify(str(neox_checkpoint), str(data), points="1", pool=6, M=2, K=2, block_size=8, device="cpu")
    assert len(table) == 1 and read and max(read) <= 4 * tokenized.BYTES_PER_TOKEN * 2 * tokenized.TEXT_SLACK * 6 * 9


def test_without_network_a_cached_hub_name_runs_and_an_uncached_one_is_refused_at_once(
    tmp_path: Path, neox_checkpoint: Path
) -> None:
    """No DNS (as on a machine without network): a hub name in the local cache is certified from
    it, with no download retried; a name not in the cache is refused in one line within seconds."""
    import subprocess
    import sys

    snapshot = tmp_path / "hub" / "models--tiny--neox" / "snapshots" / ("0" * 40)
    AutoModelForCausalLM.from_pretrained(neox_checkpoint).save_pretrained(snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    np.save(tmp_path / "ids.npy", _token_ids(2000))
    common = ["--data", str(tmp_path / "ids.npy"), *TINY, "--points", "1"]
    script = f"""
import socket, time
def no_dns(*args, **kwargs):
    raise socket.gaierror(-2, "Name or service not known")
socket.getaddrinfo = no_dns
from scalemech.certify import measurement
from scalemech.certify.forgetting import FORGETTING_COLUMNS
from scalemech.certify.inputs import checkpoint_spec
from scalemech.certify.text import loss_line
from scalemech.cli import main
assert main(["certify", "--checkpoint", "tiny/neox", *{common!r}]) == 0
start = time.perf_counter()
assert main(["certify", "--checkpoint", "nobody/nothing", *{common!r}]) == 2
print("refused in", time.perf_counter() - start)
"""
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "0"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "layer.2" in done.stdout and "(gpt_neox, 3 points" in done.stdout
    assert (
        "'nobody/nothing'" in done.stderr
        and "cannot be downloaded: no network (huggingface.co does not resolve" in done.stderr
    )
    assert float(done.stdout.split("refused in")[1]) < 5


def test_pools_larger_than_the_free_disk_are_refused_before_any_capture(
    capsys, tmp_path: Path, neox_checkpoint: Path, monkeypatch
) -> None:
    """3 points × 2 pools × 12 rows × 8·32 float32 = 73 728 bytes: with 50 000 bytes free, refused in
    one line naming both sizes before a gradient is captured; with exactly that much, certified."""
    import shutil

    from scalemech.gradients import capture as grads

    np.save(tmp_path / "ids.npy", _token_ids(2000))
    usage = shutil.disk_usage(tmp_path)
    argv = ["certify", "--checkpoint", str(neox_checkpoint), "--data", str(tmp_path / "ids.npy"), *TINY]
    with monkeypatch.context() as patch:
        patch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=50_000))
        patch.setattr(grads, "one_pass", lambda *args, **kwargs: pytest.fail("a gradient was captured"))
        assert main(argv) == 2
    message = capsys.readouterr().err
    assert "gradient pools need 73.7 kB under" in message and "which has 50 kB free" in message
    [error] = [line for line in message.splitlines() if line.startswith("scalemech: error:")]
    assert "gradient pools need" in error and error.endswith("--points-per-pass), a smaller --pool or --block-size, "
                                                             "or certify's --view pooled")  # fmt: skip
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=73_728))
    assert main(argv) == 0


def test_a_missing_checkpoint_directory_is_named(tmp_path: Path) -> None:
    for missing in ("/nonexistent/dir/", str(tmp_path / "nowhere")):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            certify(missing, str(tmp_path), device="cpu")


def test_other_models_are_refused_first_and_in_one_line(tmp_path: Path) -> None:
    """An encoder-decoder checkpoint is refused from its config.json alone, before the data are read
    (here not data at all) and before transformers is imported."""
    import subprocess
    import sys

    config = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "is_encoder_decoder": True}
    (tmp_path / "config.json").write_text(json.dumps(config))
    argv = ["certify", "--checkpoint", str(tmp_path), "--data", str(tmp_path / "config.json"), "--device", "cpu"]
    script = (
        f"import sys; from scalemech.cli import main; status = main({argv!r}); "
        "assert status == 2 and 'transformers' not in sys.modules, sorted(m for m in sys.modules if 'transf' in m)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "model_type 't5'" in line and "encoder-decoder" in line


def _documents(path: Path, n: int = 60, T: int = 9, fill: int | None = None, seed: int = 0) -> Path:
    """A .npy of ``n`` documents of ``T`` tokens, each starting with BOS (id 1): random ids, or ``fill``."""
    docs = np.random.default_rng(seed).integers(3, VOCAB, (n, T)) if fill is None else np.full((n, T), fill)
    docs[:, 0] = 1
    np.save(path, docs)
    return path


def test_documents_are_certified_from_row_starts(tmp_path: Path, neox_checkpoint: Path, monkeypatch) -> None:
    """Certify on a 2-D .npy: the default block size is T - 1, every pool example is a row's prefix
    (train rows from the train split, test rows from the test split), and the loss attr is the
    model's mean next-token loss over the train-pool windows, computed here with the HF model."""
    from scalemech.certify import measurement

    docs = np.load(_documents(tmp_path / "docs.npy"))
    captured = {}
    capture = measurement.capture_split

    def spy(model, examples, *args, **kwargs):
        captured[examples.split] = examples
        return capture(model, examples, *args, **kwargs)

    monkeypatch.setattr(measurement, "capture_split", spy)
    table = certify(str(neox_checkpoint), str(tmp_path / "docs.npy"), pool=6, M=2, K=2, batch_size=4, device="cpu")
    assert "8 tokens per example" in table.attrs["ran"] and len(table) == 3 and table["mu_sq"].notna().all()
    for split, rows in (("train", docs[:54]), ("test", docs[54:])):
        examples = captured[split]
        assert len(set(examples.index.tolist())) == 6
        for r, x, y in zip(examples.index.tolist(), examples.x, examples.y):
            assert x.tolist() == rows[r, :8].tolist() and y.tolist() == rows[r, 1:].tolist()
    reference = AutoModelForCausalLM.from_pretrained(neox_checkpoint).eval()
    with torch.no_grad():
        logits = reference(input_ids=captured["train"].x).logits  # (6, 8, V)
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), captured["train"].y.reshape(-1))
    loss = table.attrs["loss"]
    assert loss["loss"] == pytest.approx(expected.item(), rel=1e-5)
    assert loss["ln_vocab"] == pytest.approx(math.log(VOCAB)) and loss["vocab_size"] == VOCAB
    with pytest.raises(ValueError, match=r"T = 9; the largest allowed block size is T - 1 = 8"):
        certify(str(neox_checkpoint), str(tmp_path / "docs.npy"), pool=6, M=2, K=2, block_size=9, device="cpu")


def test_default_block_size_of_documents(tmp_path: Path, neox_checkpoint: Path) -> None:
    """min(T - 1, max_position_embeddings = 64, HF_BLOCK_SIZE); a stream or a given --block-size: as before."""
    short, long = _documents(tmp_path / "short.npy", n=4, T=9), _documents(tmp_path / "long.npy", n=4, T=200)
    np.save(tmp_path / "stream.npy", _token_ids(100))
    sizes = {
        name: checkpoint_spec(str(neox_checkpoint), None, given, None, str(data))["block_size"]
        for name, data, given in [
            ("short", short, None),
            ("long", long, None),
            ("stream", tmp_path / "stream.npy", None),
            ("given", short, 5),
        ]
    }
    assert sizes == {"short": 8, "long": 64, "stream": 64, "given": 5}


def _predicting(checkpoint: Path, token: int, path: Path) -> Path:
    """A copy of the tiny GPT-NeoX that predicts ``token`` everywhere, with confidence: its final
    norm outputs a constant ``h`` along ``token``'s (enlarged) output row, so that row's logit is 50
    and every other one at most about a tenth of it."""
    model = AutoModelForCausalLM.from_pretrained(checkpoint)
    head, norm = model.get_output_embeddings().weight, model.gpt_neox.final_layer_norm
    with torch.no_grad():
        head[token] *= 10
        norm.weight.zero_()
        norm.bias.copy_(head[token] * 50 / head[token].square().sum())
    model.save_pretrained(path)
    return path


@pytest.mark.parametrize("fill,warned", [(5, False), (7, True)])
def test_a_loss_above_a_uniform_guess_is_warned(
    capsys, tmp_path: Path, neox_checkpoint: Path, fill: int, warned: bool
) -> None:
    """A model sure of token 5, on documents of 5s (loss near 0) and of 7s (far above ln 300): the
    loss line on stdout after the model's, and a warning on stderr only when the loss is above ln(vocab),
    its causes fitting documents (no mid-document windows)."""
    checkpoint = _predicting(neox_checkpoint, 5, tmp_path / "sure")
    data = _documents(tmp_path / "docs.npy", fill=fill)
    sizes = ["--points", "1", "--pool", "6", "--M", "2", "--K", "2", "--batch-size", "6", "--device", "cpu"]
    assert main(["certify", "--checkpoint", str(checkpoint), "--data", str(data), *sizes]) == 0
    out, err = capsys.readouterr()
    line = out.splitlines()[1]
    loss = float(re.fullmatch(r"loss on the train pool: (\d+\.\d\d) nats per token \(uniform guess: .*\)", line)[1])
    assert (loss > math.log(VOCAB)) == warned and (loss < 0.1 or loss > 10)
    warnings = [text for text in err.splitlines() if text.startswith("warning: ")]
    assert len(warnings) == warned
    if warned:
        assert "above a uniform guess" in warnings[0] and "do not open with the start token" in warnings[0]
        assert "mid-document" not in warnings[0]  # the data are documents: every window starts one
        assert "a tokenizer that is not the model's" in warnings[0] and "data unlike the model's" in warnings[0]


def test_loss_line() -> None:
    attrs = {"loss": {"loss": 2.912, "ln_vocab": math.log(512), "vocab_size": 512}}
    assert loss_line(attrs) == ("loss on the train pool: 2.91 nats per token (uniform guess: ln 512 = 6.24)", None)
    line, warning = loss_line({"loss": {**attrs["loss"], "loss": 6.5}})
    assert line.startswith("loss on the train pool: 6.50 nats") and warning.startswith("warning: ")
    assert "windows that start mid-document (give documents as a 2-D .npy" in warning  # a stream's windows
    assert "\n" not in warning and loss_line({"ran": "model: x"}) == ("", None)


def test_points_captured_a_few_per_pass_give_the_certificate_of_one_pass(tmp_path: Path, neox_checkpoint: Path) -> None:
    """``--points-per-pass``: every number equal to one pass over all the points (each point's new block
    seeded by its name), each group's pools deleted once its rows exist; 0 refused in one line."""
    np.save(tmp_path / "ids.npy", _token_ids(3000))
    sizes = dict(pool=10, M=3, K=4, batch_size=4, block_size=8)
    whole = certify(str(neox_checkpoint), str(tmp_path / "ids.npy"), **sizes)
    pooled = []
    real_rows = measurement.pool_rows

    def rows_then_count(paths, *args, **kwargs):
        pooled.append(len(list(tmp_path.glob("*/pools/*/*/*.json"))))  # under certify's scratch directory
        return real_rows(paths, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(measurement, "pool_rows", rows_then_count)
        patch.setenv("TMPDIR", str(tmp_path))
        patch.setattr(tempfile, "tempdir", None)
        grouped = certify(str(neox_checkpoint), str(tmp_path / "ids.npy"), points_per_pass=2, **sizes)
    points = len(whole)
    assert points > 2 and len(pooled) == math.ceil(points / 2) and max(pooled) == 2 * 2, pooled  # 2 splits x 2 points
    pd.testing.assert_frame_equal(whole, grouped, check_exact=True)
    with pytest.raises(ValueError, match="points_per_pass = 0 must be at least 1"):
        certify(str(neox_checkpoint), str(tmp_path / "ids.npy"), points_per_pass=0, **sizes)
