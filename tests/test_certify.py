"""``scalemech certify``: the per-point certificate of a user's own checkpoint, end to end."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, GPTNeoXConfig

from scalemech.data import prepare_dataset
from scalemech.models import build_model, save_model
from scalemech.certify import CERTIFICATE_COLUMNS, certify
from test_hf import VOCAB, tiny_tokenizer

SHAKESPEARE = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


@pytest.fixture(scope="module")
def neox_checkpoint(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("neox")
    torch.manual_seed(0)
    config = GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=64)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    text = SHAKESPEARE.read_text()[:60_000] if SHAKESPEARE.exists() else "To be, or not to be. " * 3000
    path.write_text(text)
    return path


def test_cli_prints_one_row_per_layer(neox_checkpoint: Path, text_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "certificate.csv"
    result = subprocess.run([sys.executable, "-m", "scalemech.cli", "certify", "--checkpoint", str(neox_checkpoint),
                             "--data", str(text_file), "--pool", "24", "--block-size", "16", "--M", "8", "--K", "8",
                             "--batch-size", "8", "--device", "cpu", "--out", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines[0].split()[:2] == ["point", "point_index"]
    assert [line.split()[0] for line in lines[1:]] == ["layer.0", "layer.1", "layer.2"]
    table = pd.read_csv(out)
    assert list(table.columns) == CERTIFICATE_COLUMNS and len(table) == 3
    bounded = table.dropna(subset=["b_exact", "b_align"])
    assert len(bounded) and (bounded["b_exact"] <= bounded["b_align"] + 1e-12).all()
    assert (table["block_grad_norm"] > 0).all()


def test_certificate_matches_the_statistics(tmp_path: Path) -> None:
    """On a scalemech model.pt and a prepared dataset: B_align recomputed from the row's d_align."""
    data_dir = tmp_path / "mnist"
    prepare_dataset("mnist5k", {}, data_dir)
    torch.manual_seed(0)
    spec = {"family": "resnet", "depth": 8, "width": 0.5, "in_channels": 1, "num_classes": 10}
    model = build_model(spec)
    classifier = [m for m in model.head.modules() if isinstance(m, torch.nn.Linear)][-1]
    classifier.bias.data[0] = 5.0  # a confident wrong prior: a strong, shared gradient signal μ
    save_model(tmp_path / "model.pt", model, spec)
    table = certify(str(tmp_path / "model.pt"), str(data_dir), points="2", pool=32, M=4, K=8, batch_size=16,
                    device="cpu")
    assert list(table["point"]) == ["stage2.block1", "stage3.block1"]
    for row in table.to_dict("records"):
        n_eff = 4 * 8 / (4 + 8 + 1)
        assert row["b_align"] == pytest.approx(1 / (1 + n_eff * row["d_align"]))
        assert row["d_align"] == pytest.approx(min(row["d_par"], row["d_2"]))
        assert row["d_align_lo"] <= row["d_align"] <= row["d_align_hi"]
        assert math.isfinite(row["mu_sq"]) and row["n"] == 32


def test_bad_data_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        certify("EleutherAI/pythia-14m", str(tmp_path / "nowhere"), device="cpu")

