"""Hugging Face causal LMs behind the insertion-point interface, and checkpoint tokenization.

Tiny random checkpoints (2 layers, hidden size 32, ``VOCAB`` tokens) of every family in ``CONFIGS``
and a byte-level BPE tokenizer are written with ``save_pretrained`` into a temporary directory and
loaded through ``build_model`` (the hub code path, offline). The hooked model is checked against
the HF model itself: logits, the streams (``output_hidden_states``) and their gradients (autograd
on HF's own hidden states).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from scalemech.data import Prepared
from scalemech.data.tokenized import (
    text_from_bytes,
    token_pool,
    tokenize_text,
)
from scalemech.models import build_model
from scalemech.models.hf import OUTPUT_PROJECTIONS
from scalemech.tasks import draw_examples

CORPUS = [
    "To be, or not to be, that is the question:",
    "Whether 'tis nobler in the mind to suffer",
    "The slings and arrows of outrageous fortune,",
    "Or to take arms against a sea of troubles",
]
VOCAB = 300
TOKENS = dict(vocab_size=VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=0)
TINY_DECODER = dict(
    **TOKENS,
    hidden_size=32,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    num_hidden_layers=2,
)
"""What most tiny decoder configs below share."""
GPT_NAMES = dict(**TOKENS, n_embd=32, n_layer=2, n_head=4, n_positions=64)
"""The same, in GPT-2's field names."""
CONFIGS = {
    "gpt2": ("GPT2Config", GPT_NAMES),
    "gpt_neox": ("GPTNeoXConfig", dict(TINY_DECODER, rotary_pct=0.25)),
    "gpt_neox_sequential": ("GPTNeoXConfig", dict(TINY_DECODER, use_parallel_residual=False)),
    "llama": ("LlamaConfig", dict(TINY_DECODER, num_key_value_heads=2)),
    # sliding window 4 < T = 12: a full causal mask would change the logits
    "mistral": ("MistralConfig", dict(TINY_DECODER, num_key_value_heads=2, sliding_window=4)),
    "mixtral": ("MixtralConfig", dict(TINY_DECODER, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)),
    # layer 0 attends fully, layer 1 within a window of 4
    "qwen2": (
        "Qwen2Config",
        dict(TINY_DECODER, num_key_value_heads=2, use_sliding_window=True, sliding_window=4, max_window_layers=1),
    ),
    "qwen3": ("Qwen3Config", dict(TINY_DECODER, num_key_value_heads=2, head_dim=8)),
    "phi": ("PhiConfig", TINY_DECODER),
    "phi3": ("Phi3Config", TINY_DECODER),
    "gemma": ("GemmaConfig", dict(TINY_DECODER, num_key_value_heads=2, head_dim=8)),
    "gemma2": ("Gemma2Config", dict(TINY_DECODER, num_key_value_heads=2, head_dim=8, sliding_window=4)),
    "gemma3_text": ("Gemma3TextConfig", dict(TINY_DECODER, num_key_value_heads=2, head_dim=8, sliding_window=4)),
    "olmo": ("OlmoConfig", TINY_DECODER),
    "olmo2": ("Olmo2Config", TINY_DECODER),
    "falcon": ("FalconConfig", dict(**TOKENS, hidden_size=32, num_attention_heads=4, num_hidden_layers=2)),
    "opt": (
        "OPTConfig",
        dict(
            **TOKENS,
            hidden_size=32,
            num_attention_heads=4,
            ffn_dim=64,
            num_hidden_layers=2,
            max_position_embeddings=64,
            word_embed_proj_dim=32,
        ),
    ),
    "gptj": ("GPTJConfig", dict(GPT_NAMES, rotary_dim=4)),
    "bloom": ("BloomConfig", dict(**TOKENS, hidden_size=32, n_layer=2, n_head=4)),
    "starcoder2": ("Starcoder2Config", dict(TINY_DECODER, num_key_value_heads=2)),
    "gpt_bigcode": ("GPTBigCodeConfig", GPT_NAMES),
}
"""``name: (config class in transformers, its arguments)`` of every tested family."""
B, T = 3, 12


def tiny_config(name: str) -> transformers.PreTrainedConfig:
    cls, kwargs = CONFIGS[name]
    return getattr(transformers, cls)(**kwargs)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE with ``VOCAB`` entries trained on ``CORPUS`` (round-trips any text)."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    bpe.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe)


def save_tiny(name: str, path, tokenizer: bool = True) -> str:
    """A tiny random checkpoint of family ``name`` (seeded) in ``path``; with the tiny tokenizer."""
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(tiny_config(name)).save_pretrained(path)
    if tokenizer:
        tiny_tokenizer().save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def checkpoint(request, tmp_path_factory) -> str:
    """Directory holding a tiny random checkpoint of one config and the tiny tokenizer."""
    return save_tiny(request.param, tmp_path_factory.mktemp(request.param))


def load(checkpoint: str, **spec):
    model = build_model({"family": "hf", "checkpoint": checkpoint, "local_files_only": True, **spec})
    reference = AutoModelForCausalLM.from_pretrained(checkpoint, local_files_only=True, **spec).eval()
    return model, reference


def token_ids(seed: int = 0) -> torch.Tensor:
    return torch.randint(3, VOCAB, (B, T + 1), generator=torch.Generator().manual_seed(seed))


def test_logits_streams_and_gradients_equal_hf(checkpoint):
    """Hooked logits = HF logits; the stream after layer i = HF's hidden_states[i + 1] (the last one
    is after the final norm there), and so are their gradients, taken here by autograd on HF's own
    hidden states."""
    model, reference = load(checkpoint)
    ids = token_ids()
    x, y = ids[:, :-1], ids[:, 1:]
    expected = reference(x, output_hidden_states=True)
    points = model.insertion_points()
    logits, streams = model.forward_streams(x, points)
    torch.testing.assert_close(logits, expected.logits, rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(model(x), expected.logits, rtol=0, atol=0)
    assert points == [f"layer.{i}" for i in range(2)] and model.depth == 2 and model.width == 32
    inner = points[:-1]
    for i, point in enumerate(inner):
        torch.testing.assert_close(streams[point], expected.hidden_states[i + 1], rtol=0, atol=0)
    grads = torch.autograd.grad(model.per_example_loss(logits, y).sum(), [streams[p] for p in points])
    hf_loss = model.per_example_loss(expected.logits, y).sum()
    hf_grads = torch.autograd.grad(hf_loss, [expected.hidden_states[i + 1] for i in range(len(inner))])
    for grad, hf_grad in zip(grads, hf_grads):
        torch.testing.assert_close(grad, hf_grad, rtol=1e-5, atol=1e-8)
    assert all(g.abs().sum() > 0 for g in grads)
    assert not any(p.requires_grad for p in model.parameters()) and not model.training


def test_split_composes_at_every_point(checkpoint):
    model, _ = load(checkpoint)
    x = token_ids(1)[:, :-1]
    with torch.no_grad():
        expected = model(x)
        for point in model.insertion_points():
            f_bot, f_top = model.split(point)
            z = f_bot(x)
            assert z.shape == (B, T, model.width)
            torch.testing.assert_close(f_top(z), expected, rtol=0, atol=0)


def test_insert_block_is_identity_with_a_first_order_gradient(checkpoint):
    """A zero-output copy of the layer: f_new = f_old, and Condition 1 is measurable (a nonzero
    gradient, carried by the output projections alone)."""
    model, _ = load(checkpoint)
    x, y = token_ids(2)[:, :-1], token_ids(2)[:, 1:]
    with torch.no_grad():
        expected = model(x)
    for point in model.insertion_points():
        expanded, block = model.insert_block(point)
        assert expanded.insertion_points()[model.index(point) + 1] == f"{point}+new"
        assert expanded.blocks[model.index(point) + 1] is block
        assert type(block.layer) is type(model.blocks[0])
        zeroed = [p for name, p in block.named_parameters() if OUTPUT_PROJECTIONS & set(name.split("."))]
        assert zeroed and all(torch.all(p == 0) for p in zeroed)
        with torch.no_grad():
            torch.testing.assert_close(expanded(x), expected, rtol=0, atol=0)
        loss = expanded.per_example_loss(expanded(x), y).mean()
        params = list(block.parameters())
        grads = dict(zip(params, torch.autograd.grad(loss, params, allow_unused=True)))
        first_order = {id(p) for p in expanded.first_order_parameters(block)}
        assert sum(grads[p].abs().sum() for p in params if id(p) in first_order) > 0
        assert all(grads[p] is None or torch.all(grads[p] == 0) for p in params if id(p) not in first_order)
    assert len(model.blocks) == model.depth  # the original is untouched


@pytest.mark.parametrize("checkpoint", ["llama", "gpt2"], indirect=True)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_loads_as_saved(checkpoint, dtype, tmp_path):
    """A checkpoint saved in bf16/fp16 runs in that dtype with dtype "auto", with HF's logits."""
    AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype).save_pretrained(tmp_path)
    model, reference = load(str(tmp_path), dtype="auto")
    assert model.dtype == dtype and reference.dtype == dtype
    x = token_ids()[:, :-1]
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(x).logits, rtol=0, atol=0)
        _, block = model.insert_block("layer.0")
    assert all(p.dtype == dtype for p in block.parameters())


@pytest.mark.parametrize("checkpoint", ["llama", "gpt2"], indirect=True)
def test_per_example_stream_grads_from_one_batch(checkpoint):
    """One batched forward/backward of the summed per-example loss gives each sequence's ∇_z ℓ."""
    model, _ = load(checkpoint)
    points = model.insertion_points()
    ids = token_ids(3)
    x, y = ids[:, :-1], ids[:, 1:]
    output, streams = model.forward_streams(x, points)
    batched = torch.autograd.grad(model.per_example_loss(output, y).sum(), [streams[p] for p in points])
    for b in range(B):
        output_b, streams_b = model.forward_streams(x[b : b + 1], points)
        single = torch.autograd.grad(
            model.per_example_loss(output_b, y[b : b + 1]).sum(), [streams_b[p] for p in points]
        )
        for grad_batched, grad_single in zip(batched, single):
            torch.testing.assert_close(grad_batched[b : b + 1], grad_single, rtol=1e-4, atol=1e-7)
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize(
    "config, refusal",
    [
        (transformers.T5Config(vocab_size=VOCAB, d_model=16, num_layers=1, num_heads=2), "encoder-decoder"),
        (
            transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2),
            "not a causal LM",
        ),
    ],
)
def test_other_models_are_refused_before_the_weights(tmp_path, config, refusal):
    """Only config.json is there: a refusal that needed the weights would be an OSError."""
    config.architectures = ["T5ForConditionalGeneration"] if config.model_type == "t5" else ["BertForMaskedLM"]
    config.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=f"model_type '{config.model_type}'.*{refusal}"):
        build_model({"family": "hf", "checkpoint": str(tmp_path), "local_files_only": True})
    with pytest.raises(ValueError, match="float64"):
        build_model({"family": "hf", "checkpoint": str(tmp_path), "dtype": "float64"})


def test_a_missing_checkpoint_path_is_named(tmp_path):
    for missing in (str(tmp_path / "nowhere"), "/nonexistent/dir/"):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            build_model({"family": "hf", "checkpoint": missing})


@pytest.mark.parametrize("checkpoint", ["llama"], indirect=True)
def test_tokenize_text_round_trips(checkpoint):
    text = "\n".join(CORPUS) + "\nunseen wörds ✓"
    tokens = tokenize_text(text, checkpoint, revision=None, local_files_only=True)
    assert tokens.dtype == torch.int64 and tokens.dim() == 1
    assert len(text.encode()) > tokens.numel() > 0  # merges learned on CORPUS compress it
    assert int(tokens.max()) < VOCAB
    tokenizer = PreTrainedTokenizerFast.from_pretrained(checkpoint)
    assert tokenizer.decode(tokens.tolist()) == text


def test_text_from_bytes():
    raw = "héllo".encode() + b"\xff!"
    assert text_from_bytes(torch.tensor(list(raw), dtype=torch.uint8)) == "héllo\ufffd!"
    with pytest.raises(ValueError, match="uint8"):
        text_from_bytes(torch.zeros(3, dtype=torch.int64))


@pytest.mark.parametrize("checkpoint", ["llama"], indirect=True)
def test_examples_are_checkpoint_tokens_of_the_split(checkpoint):
    model = build_model({"family": "hf", "checkpoint": checkpoint, "local_files_only": True, "block_size": 4})
    train_text, test_text = "\n".join(CORPUS[:3]), CORPUS[3]
    stream = {
        split: torch.tensor(list(text.encode()), dtype=torch.uint8)
        for split, text in [("train", train_text), ("test", test_text)]
    }
    data = Prepared(
        name="tiny",
        kind="text",
        train_x=stream["train"],
        train_y=None,
        test_x=stream["test"],
        test_y=None,
        manifest={},
        vocab_size=256,
    )
    tokenizer = PreTrainedTokenizerFast.from_pretrained(checkpoint)
    for split, text in [("train", train_text), ("test", test_text)]:
        examples = draw_examples(model.task(data), split, n=2, seed=0)
        x, y = examples.x, examples.y
        assert x.shape == y.shape == (2, 4)
        assert model.task(data).count(split) == len(tokenize_text(text, checkpoint, None, True)) // 5
        torch.testing.assert_close(x[:, 1:], y[:, :-1])
        for row_x, row_y in zip(x, y):
            assert tokenizer.decode(torch.cat([row_x, row_y[-1:]]).tolist()) in text
    with pytest.raises(ValueError, match="block_size = 100 is outside"):
        build_model({"family": "hf", "checkpoint": checkpoint, "local_files_only": True, "block_size": 100})


@pytest.mark.parametrize("n,block_size", [(1, 5), (7, 4), (10, 9)])
def test_token_pool_windows_are_disjoint_and_seeded(n, block_size):
    tokens = torch.arange(100) * 3 + 1  # unique values: a window's first token gives its offset
    x, y = token_pool(tokens, n, block_size, seed=0)
    assert x.shape == y.shape == (n, block_size) and x.dtype == tokens.dtype
    torch.testing.assert_close(x[:, 1:], y[:, :-1])
    starts = ((x[:, 0] - 1) // 3).sort().values
    for start, row_x, row_y in zip(((x[:, 0] - 1) // 3), x, y):
        torch.testing.assert_close(torch.cat([row_x, row_y[-1:]]), tokens[start : start + block_size + 1])
    assert torch.all(starts.diff() >= block_size + 1)
    again = token_pool(tokens, n, block_size, seed=0)
    assert torch.equal(again[0], x) and torch.equal(again[1], y)
    draws = {tuple(token_pool(tokens, n, block_size, seed=s)[0][:, 0].tolist()) for s in range(5)}
    assert len(draws) > 1


def test_token_pool_rejects_too_many_windows():
    with pytest.raises(ValueError, match="n=5"):
        token_pool(torch.arange(20), 5, 4, seed=0)


@pytest.mark.parametrize("checkpoint", ["gpt2"], indirect=True)
def test_token_ids_are_cut_without_a_tokenizer(checkpoint, tmp_path):
    """Token ids given directly: model.task is a TokenIdTask; its examples are windows of the stream."""
    from scalemech.data.tokenized import load_token_ids
    from scalemech.tasks import draw_disjoint
    from scalemech.tasks.tokens import TokenIdTask

    ids = np.arange(1000) * 7 % VOCAB  # a window's first id and the next ones give its offset
    np.save(tmp_path / "ids.npy", ids.astype(np.int32))
    data = load_token_ids(tmp_path / "ids.npy")
    model = build_model({"family": "hf", "checkpoint": checkpoint, "local_files_only": True, "block_size": 6})
    task = model.task(data)
    assert isinstance(task, TokenIdTask) and task.block_size == 6 and task.vocab_size == VOCAB
    for split, stream in (("train", ids[:900]), ("test", ids[900:])):
        examples = draw_examples(task, split, n=5, seed=1)
        assert examples.x.shape == examples.y.shape == (5, 6) and examples.x.dtype == torch.int64
        for start, x, y in zip(examples.index.tolist(), examples.x, examples.y):
            assert (
                x.tolist() == stream[start : start + 6].tolist()
                and y.tolist() == stream[start + 1 : start + 7].tolist()
            )
        assert torch.equal(draw_examples(task, split, n=5, seed=1).x, examples.x)  # seeded
    first = draw_examples(task, "train", n=5, seed=1)
    other = draw_disjoint(task, "train", 5, seed=2, exclude=first.index)
    assert not task.overlaps(other.index, first.index).any()
    with torch.no_grad():
        assert model(task.to_input(first.x)).shape == (5, 6, VOCAB)
    with pytest.raises(ValueError, match="n=200"):
        task.draw("test", 200, seed=0)
    assert task.count("test") == 100 // 7
    starts = task.sample("train", 50, torch.Generator().manual_seed(0))
    assert starts.min() >= 0 and starts.max() <= 900 - 7 and task.examples("train", starts)[0].shape == (50, 6)


def test_token_id_files(tmp_path):
    from scalemech.data.tokenized import TOKEN_TRAIN_SHARE, is_token_ids, load_token_ids

    np.save(tmp_path / "ids.npy", np.arange(1000, dtype=np.int64))
    data = load_token_ids(tmp_path / "ids.npy")
    assert data.kind == "tokens" and len(data.train_x) == int(1000 * TOKEN_TRAIN_SHARE)
    assert np.array_equal(np.concatenate([data.train_x, data.test_x]), np.arange(1000))
    nano = tmp_path / "nano"
    nano.mkdir()
    np.arange(300, dtype=np.uint16).tofile(nano / "train.bin")
    np.arange(300, 350, dtype=np.uint16).tofile(nano / "val.bin")
    for path in (nano, nano / "train.bin", nano / "val.bin"):
        assert is_token_ids(path)
        data = load_token_ids(path)
        assert data.train_x.dtype == np.uint16 and data.train_x.tolist() == list(range(300))
        assert data.test_x.tolist() == list(range(300, 350))
    assert not is_token_ids(tmp_path) and not is_token_ids(tmp_path / "absent.npy")
    (nano / "val.bin").unlink()
    with pytest.raises(FileNotFoundError, match="val.bin"):
        load_token_ids(nano / "train.bin")
    (nano / "val.bin").write_bytes(b"\x01\x02\x03")
    with pytest.raises(ValueError, match="3 bytes is not a nanoGPT token file"):
        load_token_ids(nano)
    np.save(tmp_path / "bad.npy", np.array(["a", "b"]))
    with pytest.raises(ValueError, match="1-D integer array"):
        load_token_ids(tmp_path / "bad.npy")


def test_documents_are_split_by_rows(tmp_path):
    """A 2-D .npy is n documents: its first int(n·TOKEN_TRAIN_SHARE) rows train, the rest test;
    a split without a row, and any other shape, is refused naming the shape."""
    from scalemech.data.tokenized import TOKEN_TRAIN_SHARE, document_length, load_token_ids

    docs = np.arange(30 * 9, dtype=np.int32).reshape(30, 9)
    np.save(tmp_path / "docs.npy", docs)
    data = load_token_ids(tmp_path / "docs.npy")
    cut = int(30 * TOKEN_TRAIN_SHARE)
    assert data.documents and data.kind == "tokens" and data.train_x.shape == (cut, 9)
    assert np.array_equal(data.train_x, docs[:cut]) and np.array_equal(data.test_x, docs[cut:])
    assert document_length(tmp_path / "docs.npy") == 9
    np.save(tmp_path / "stream.npy", docs.ravel())
    assert not load_token_ids(tmp_path / "stream.npy").documents and document_length(tmp_path / "stream.npy") is None
    assert document_length(tmp_path / "absent.npy") is None
    np.save(tmp_path / "one.npy", docs[:1])
    with pytest.raises(ValueError, match=r"shape \(1, 9\).*0 train and 1 test documents"):
        load_token_ids(tmp_path / "one.npy")
    np.save(tmp_path / "cube.npy", docs.reshape(2, 15, 9))
    with pytest.raises(ValueError, match=r"1-D integer array \(one stream\) or a 2-D one.*shape \(2, 15, 9\)"):
        load_token_ids(tmp_path / "cube.npy")
    assert document_length(tmp_path / "cube.npy") is None


@pytest.mark.parametrize("checkpoint", ["gpt2"], indirect=True)
def test_document_examples_start_at_row_starts(checkpoint, tmp_path):
    """Documents given directly: model.task is a DocumentIdTask; an example is a row's first
    block_size + 1 ids, found (brute force, every id unique) nowhere in the array but at a row's start."""
    from scalemech.data.tokenized import load_token_ids
    from scalemech.tasks import draw_disjoint
    from scalemech.tasks.tokens import DocumentIdTask

    docs = np.arange(30 * 9).reshape(30, 9) % VOCAB  # 270 distinct ids: a window's ids give its place
    np.save(tmp_path / "docs.npy", docs)
    data = load_token_ids(tmp_path / "docs.npy")
    model = build_model({"family": "hf", "checkpoint": checkpoint, "local_files_only": True, "block_size": 6})
    task = model.task(data)
    assert isinstance(task, DocumentIdTask) and task.overlaps_per_example == 1 and task.vocab_size == VOCAB
    assert (task.count("train"), task.count("test")) == (27, 3)
    windows = np.lib.stride_tricks.sliding_window_view(docs, 7, axis=1)  # (rows, offsets, 7)
    for split, rows in (("train", docs[:27]), ("test", docs[27:])):
        examples = draw_examples(task, split, n=3, seed=1)
        assert examples.x.shape == examples.y.shape == (3, 6) and examples.x.dtype == torch.int64
        assert len(set(examples.index.tolist())) == 3
        for r, x, y in zip(examples.index.tolist(), examples.x, examples.y):
            assert x.tolist() == rows[r, :6].tolist() and y.tolist() == rows[r, 1:7].tolist()
            found = np.argwhere((windows == np.array([*x.tolist(), y[-1].item()])).all(-1))
            assert found.tolist() == [[r + (27 if split == "test" else 0), 0]]  # at its row's start only
        assert torch.equal(draw_examples(task, split, n=3, seed=1).index, examples.index)  # seeded
    assert sorted(task.draw("train", 27, seed=0).tolist()) == list(range(27))
    with pytest.raises(ValueError, match="n=4 documents from the test split of 3"):
        task.draw("test", 4, seed=0)
    first = draw_examples(task, "train", n=10, seed=1)
    other = draw_disjoint(task, "train", 10, seed=2, exclude=first.index)
    assert not set(other.index.tolist()) & set(first.index.tolist())
    assert task.overlaps(torch.tensor([3, 4]), torch.tensor([4, 5])).tolist() == [False, True]
    rows = task.sample("train", 50, torch.Generator().manual_seed(0))
    assert rows.min() >= 0 and rows.max() < 27 and task.examples("train", rows)[0].shape == (50, 6)
    with torch.no_grad():
        assert model(task.to_input(first.x)).shape == (10, 6, VOCAB)
    assert DocumentIdTask(data, 8).examples("test", torch.tensor([0]))[1].tolist() == [docs[27, 1:].tolist()]
    with pytest.raises(ValueError, match=r"T = 9; the largest allowed block size is T - 1 = 8"):
        DocumentIdTask(data, 9)
    np.save(tmp_path / "far.npy", np.full((10, 9), VOCAB + 2))
    with pytest.raises(ValueError, match=f"token id {VOCAB + 2} is outside"):
        model.task(load_token_ids(tmp_path / "far.npy")).examples("train", torch.tensor([0]))
