"""models.hf_export: a trained llama as a plain transformers checkpoint computing the same function."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from scalemech.models import build_model
from scalemech.models.hf_export import save_hf, to_hf


def _llama(tie: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model({"family": "llama", "width": 32, "depth": 3, "head_dim": 8, "block_size": 48,
                         "tie_embeddings": tie, "rope_base": 500.0})  # fmt: skip
    with torch.no_grad():  # weights far from their init, output projections included
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model.eval()


@pytest.mark.parametrize("tie", [False, True])
def test_export_computes_the_same_logits(tie):
    model = _llama(tie)
    x = torch.randint(0, 256, (4, 48))
    with torch.no_grad():
        ours, theirs = model(x), to_hf(model)(input_ids=x).logits
    assert ours.abs().max() > 1.0  # not a vanishing signal
    torch.testing.assert_close(theirs, ours, atol=2e-5, rtol=2e-5)
    exported = to_hf(model)
    assert (exported.lm_head.weight is exported.model.embed_tokens.weight) == tie


def test_saved_checkpoint_loads_with_plain_transformers(tmp_path):
    model = _llama(False)
    save_hf(model, tmp_path)
    loaded, tokenizer = AutoModelForCausalLM.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)
    text = "def f(x):\n\treturn 'héllo wörld' 🙂\n"
    ids = tokenizer(text)["input_ids"]
    assert ids == list(text.encode())  # token id = byte, as the project's text data sets store them
    assert tokenizer.decode(ids) == text
    x = torch.tensor([ids])
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=x).logits, model(x), atol=2e-5, rtol=2e-5)


def test_export_refuses_another_family():
    resnet = build_model({"family": "resnet", "depth": 8, "width": 0.25})
    with pytest.raises(TypeError, match="exports a scalemech llama; got "):
        to_hf(resnet)
