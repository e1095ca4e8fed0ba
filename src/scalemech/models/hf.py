"""Any Hugging Face decoder-only causal LM behind the insertion-point interface, through hooks.

The model runs its own ``forward`` (``input_ids`` only, no cache), so masks, positions and every
family's quirks stay the library's. The residual stream after decoder layer ``i`` is the point
``layer.{i}`` (docs/science.md §1, E9); it is reached by a forward hook on that layer, which

- records the layer's output hidden states ``z`` (the lowest requested one made a leaf that
  requires grad, so ``∇_z ℓ`` exists with frozen weights and nothing below it keeps activations),
- applies the blocks inserted after the point, ``z ← b(z; the layer's own mask, positions …)``,
- or replaces ``z`` (``f_top``) or stops the forward there (``f_bot``).

The decoder layers are found generically: the ``ModuleList`` of ``config.num_hidden_layers``
modules. An inserted block (``new_block``) is a copy of the layer at the point, trained weights
kept, with its output projections (``OUTPUT_PROJECTIONS``, weights and biases) zeroed, so
``b_0(z) = z``: LLaMA-Pro's block expansion, and the layer ``scalemech grow`` inserts
(``models.hf_growth``). Tested families: tests/test_hf.py (``CONFIGS``). References: the
``modeling_*.py`` forwards of ``transformers`` v5.
"""

from __future__ import annotations

import copy
import logging
import pickle
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from torch import Tensor, nn
from transformers import AutoModelForCausalLM, PreTrainedModel

from ..data.prepared import Prepared
from ..data.tokenized import TokenIds
from ..stats.sizes import MIN_BLOCK_SIZE
from ..tasks.tokens import DocumentIdTask, TokenIdTask, TokenTask
from .base import LanguageModel
from .hub import decoder_config

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}
"""``auto``: the checkpoint's own dtype (``config.json``'s ``dtype`` / ``torch_dtype``)."""
OUTPUT_PROJECTIONS = frozenset({"o_proj", "down_proj", "c_proj", "dense", "dense_4h_to_h", "out_proj", "fc2", "fc_out"})
"""Names of the linears (or MoE expert weights) that write a decoder layer's branches into the stream."""


def is_output_projection(name: str) -> bool:
    """Whether parameter ``name`` belongs to an ``OUTPUT_PROJECTIONS`` module (its weight or bias)."""
    return bool(OUTPUT_PROJECTIONS & set(name.split(".")))


def output_projections(layer: nn.Module, model_type: str) -> list[nn.Parameter]:
    """The parameters of decoder ``layer``'s ``OUTPUT_PROJECTIONS``; ``ValueError`` naming ``model_type``,
    in a user's words, when it has none (such a model can be neither grown nor certified)."""
    found = [param for name, param in layer.named_parameters() if is_output_projection(name)]
    if not found:
        raise ValueError(
            f"model_type {model_type!r} cannot be grown or certified: a new layer is a copy of one of its decoder "
            f"layers with the projections that write into the residual stream zeroed, and its layers have none "
            f"of the known names ({', '.join(sorted(OUTPUT_PROJECTIONS))}); allowed: a model of the families "
            "scalemech certify --help lists"
        )
    return found


def zero_output_copy(layer: nn.Module, model_type: str) -> nn.Module:
    """A deep copy of decoder ``layer``, its trained weights kept and every output projection's
    parameters zeroed (``output_projections``): the layer writes nothing into the stream, ``b_0(z) = z``."""
    copied = copy.deepcopy(layer)
    zeroed = output_projections(copied, model_type)
    with torch.no_grad():
        for param in zeroed:
            param.zero_()
    return copied


def decoder_layers_path(hf_model: PreTrainedModel) -> str:
    """Where the decoder layers are: the first ``ModuleList`` holding ``num_hidden_layers`` modules."""
    count = hf_model.config.get_text_config().num_hidden_layers
    for name, module in hf_model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == count:
            return name
    raise ValueError(f"model_type {hf_model.config.model_type!r}: no ModuleList of its {count} decoder layers")


def hidden_of(output: Tensor | tuple) -> Tensor:
    """A decoder layer's output hidden states (``transformers`` layers return them alone or first)."""
    return output[0] if isinstance(output, tuple) else output


def with_hidden(output: Tensor | tuple, hidden: Tensor) -> Tensor | tuple:
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


class NewLayer(nn.Module):
    """An inserted decoder layer, called with the stream and the arguments of the layer it follows."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, z: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return hidden_of(self.layer(z, *args, **kwargs))


class Stop(Exception):
    """Ends a forward pass at a point, carrying the stream there (``f_bot``)."""

    def __init__(self, stream: Tensor):
        self.stream = stream


class HFCausalLM(LanguageModel):
    """A Hugging Face causal LM whose streams are reached by hooks on its decoder layers (module doc).

    ``blocks`` lists, aligned with ``insertion_points()``, the module that writes each point: the
    model's decoder layer ``i`` for ``layer.{i}``, the inserted block for ``<point>+new``.
    """

    family = "hf"

    def __init__(self, hf_model: PreTrainedModel, spec: dict[str, Any]):
        nn.Module.__init__(self)  # no stem/head chain: the parts stay inside hf_model's own forward
        self.hf_model = hf_model
        self.layers_path = decoder_layers_path(hf_model)
        self.inserted = nn.ModuleList()  # blocks inserted by insert_block, named in inserted_names
        self.inserted_names: list[str] = []
        self.config = hf_model.config
        self.depth: int = len(self.layers)
        self.block_names = [f"layer.{i}" for i in range(self.depth)]
        self.spec = dict(spec)
        self.width: int = self.config.get_text_config().hidden_size
        self.tokenizer_name: str = spec.get("tokenizer") or spec["checkpoint"]
        self.block_size: int = int(spec.get("block_size", max_positions(self.config)))
        check_block_size(self.block_size, self.config, spec["checkpoint"])

    @property
    def layers(self) -> nn.ModuleList:
        return self.hf_model.get_submodule(self.layers_path)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the forward pass runs in (the weights')."""
        return next(self.hf_model.parameters()).dtype

    @property
    def blocks(self) -> list[nn.Module]:
        inserted = dict(zip(self.inserted_names, self.inserted))
        return [inserted[name] if name in inserted else self.layers[self._layer_of(name)] for name in self.block_names]

    def _layer_of(self, point: str) -> int:
        """The decoder layer whose hook writes ``point`` (``layer.3+new+new`` → 3)."""
        return int(point.split("+")[0].removeprefix("layer."))

    # -- running it through hooks ----------------------------------------------------------
    @contextmanager
    def _hooks(
        self,
        record: Sequence[str] = (),
        extra: Mapping[str, nn.Module] | None = None,
        replace: tuple[str, Tensor] | None = None,
        stop: str | None = None,
    ) -> Iterator[dict[str, Tensor]]:
        """Hooks for one forward pass: yields the dict that receives the streams at ``record``.

        After point ``p`` (its layer, then its inserted block), the stream is replaced when
        ``replace[0] == p``, recorded when ``p`` is in ``record``, stops the pass when ``stop == p``,
        and goes through ``extra[p]`` (a block applied without being part of the model).
        """
        extra = extra or {}
        inserted = dict(zip(self.inserted_names, self.inserted))
        streams: dict[str, Tensor] = {}
        lowest = min((self.index(p) for p in record), default=None)
        chains: dict[int, list[str]] = {}
        for name in self.block_names:
            chains.setdefault(self._layer_of(name), []).append(name)

        def hook(layer_index: int):
            def run(module: nn.Module, args: tuple, kwargs: dict, output: Tensor | tuple) -> Tensor | tuple:
                z = hidden_of(output)
                for name in chains[layer_index]:
                    if name in inserted:
                        z = inserted[name](z, *args[1:], **kwargs)
                    if replace is not None and replace[0] == name:
                        z = replace[1]
                    if name in record:
                        if self.index(name) == lowest and torch.is_grad_enabled() and not z.requires_grad:
                            z = z.detach().requires_grad_()
                        streams[name] = z
                    if name == stop:
                        raise Stop(z)
                    if name in extra:
                        z = extra[name](z, *args[1:], **kwargs)
                return with_hidden(output, z)

            return run

        busy = set(inserted) | set(record) | set(extra) | {stop} | {replace[0] if replace else None}
        handles = [
            self.layers[i].register_forward_hook(hook(i), with_kwargs=True)
            for i, names in chains.items()
            if busy & set(names)
        ]
        try:
            yield streams
        finally:
            for handle in handles:
                handle.remove()

    def _logits(self, ids: Tensor) -> Tensor:
        return self.hf_model(input_ids=ids, use_cache=False).logits

    def forward(self, x: Tensor) -> Tensor:
        with self._hooks():
            return self._logits(x)

    def activation_checkpointing_enable(self, activation_checkpointing_kwargs: dict | None = None) -> None:
        """Nothing: the checkpoint keeps its activations (its inserted layers run in forward hooks, which a
        recomputed layer would run again); ``grow.activation_checkpointing`` says so."""

    def activation_checkpointing_disable(self) -> None:
        """Nothing (``activation_checkpointing_enable``)."""

    def forward_streams(
        self, x: Tensor, points: Sequence[str], inserted: Mapping[str, nn.Module] | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Logits and the stream at each of ``points``; ``inserted`` blocks run after their points."""
        for point in [*points, *(inserted or {})]:
            self.index(point)
        with self._hooks(points, inserted) as streams:
            return self._logits(x), streams

    def split(self, point: str) -> tuple[nn.Module, nn.Module]:
        """``f_bot`` stops the model's forward at ``point``; ``f_top(z)`` runs it on placeholder ids of
        ``z``'s shape with the stream at ``point`` replaced by ``z`` (the layers below it run
        needlessly: nothing of theirs reaches the output)."""
        self.index(point)
        return Bottom(self, point), Top(self, point)

    def new_block(self, point: str) -> NewLayer:
        """``zero_output_copy`` of the decoder layer writing ``point``, so ``b_0(z) = z``; its parameters
        require grad."""
        layer = zero_output_copy(self.layers[self._layer_of(point)], self.config.model_type)
        return NewLayer(layer.requires_grad_(True).train(self.training))

    def first_order_parameters(self, block: NewLayer) -> list[nn.Parameter]:
        """The output projections: every other parameter reaches the stream through them, so its
        gradient is 0 at ``θ = 0``."""
        return [p for name, p in block.named_parameters() if is_output_projection(name)]

    def insert_block(self, point: str) -> tuple[HFCausalLM, NewLayer]:
        """A deep copy with ``new_block(point)`` applied after ``point``, named ``<point>+new``."""
        i = self.index(point)
        block = self.new_block(point)
        expanded = copy.deepcopy(self)
        expanded.inserted.append(block)
        expanded.inserted_names.append(f"{point}+new")
        expanded.block_names.insert(i + 1, f"{point}+new")
        return expanded, block

    def task(self, data: Prepared | TokenIds) -> TokenTask | TokenIdTask | DocumentIdTask:
        """Next-token prediction on ``data``: token ids given directly (a stream: ``TokenIdTask``;
        documents, 2-D: ``DocumentIdTask``), or a prepared text split in the model's tokens
        (``TokenTask``)."""
        if getattr(data, "kind", None) == "tokens":
            return token_id_task(data, self.block_size, self.config.get_text_config().vocab_size)
        return TokenTask(
            data,
            self.tokenizer_name,
            self.spec.get("revision"),
            bool(self.spec.get("local_files_only", False)),
            self.block_size,
        )


def max_positions(config: Any) -> int:
    """The context of a model of ``config``: its ``max_position_embeddings`` (2048 when it has none)."""
    return getattr(config, "max_position_embeddings", None) or 2048


def check_block_size(block_size: int, config: Any, checkpoint: str) -> None:
    """``ValueError`` unless ``MIN_BLOCK_SIZE <= block_size <=`` the context of ``config`` (``max_positions``)."""
    if not MIN_BLOCK_SIZE <= block_size <= max_positions(config):
        raise ValueError(
            f"block_size = {block_size} is outside what {checkpoint!r} takes; allowed: "
            f"{MIN_BLOCK_SIZE} <= block_size <= {max_positions(config)} (its max_position_embeddings)"
        )


def token_id_task(data: TokenIds, block_size: int, vocab_size: int) -> TokenIdTask | DocumentIdTask:
    """Next-token prediction on token ids given directly: a stream (``TokenIdTask``) or documents, 2-D
    (``DocumentIdTask``); built from the config alone, before any weight loads."""
    kind = DocumentIdTask if data.documents else TokenIdTask
    return kind(data, block_size, vocab_size)


class Bottom(nn.Module):
    """``f_bot``: the model's forward up to the stream at ``point``."""

    def __init__(self, model: HFCausalLM, point: str):
        super().__init__()
        self.model, self.point = model, point

    def forward(self, x: Tensor) -> Tensor:
        try:
            with self.model._hooks(stop=self.point):
                self.model._logits(x)
        except Stop as stop:
            return stop.stream
        raise RuntimeError(f"the forward pass never reached {self.point!r}")


class Top(nn.Module):
    """``f_top``: the model's forward from the stream at ``point`` on."""

    def __init__(self, model: HFCausalLM, point: str):
        super().__init__()
        self.model, self.point = model, point

    def forward(self, z: Tensor) -> Tensor:
        placeholder = torch.zeros(z.shape[:2], dtype=torch.long, device=z.device)
        with self.model._hooks(replace=(self.point, z)):
            return self.model._logits(placeholder)


WEIGHT_FILE_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".index.json")
"""The files ``from_pretrained`` takes weights from (``weights_label`` names those a directory holds)."""
LOAD_ERRORS = (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError, SafetensorError)
"""What ``from_pretrained`` raises for weights it cannot read: a truncated or empty safetensors file
(``SafetensorError``), a pickle that ``torch.load(weights_only=True)`` refuses (``UnpicklingError``), a
missing file (``OSError``) …; ``load_weights`` turns each into one ``ValueError`` naming the file."""


def weights_label(checkpoint: str) -> str:
    """The weight files of ``checkpoint`` as messages name them: ``dir/model.safetensors`` (or the directory
    with its weight files listed), or ``the weights of 'hub/name'``."""
    path = Path(checkpoint).expanduser()
    if not path.is_dir():
        return f"the weights of {checkpoint!r}"
    files = sorted(p.name for p in path.iterdir() if p.name.endswith(WEIGHT_FILE_SUFFIXES))
    if len(files) == 1:
        return str(path / files[0])
    return f"{path} ({', '.join(files) if files else 'no weight file'})"


class _NoLoadReport(logging.Filter):
    """Drops transformers' multi-line LOAD REPORT table: ``load_weights`` says the same in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "LOAD REPORT" not in str(record.msg)


def load_failure(err: BaseException) -> str:
    """Why ``from_pretrained`` failed, in one line: an object the safe unpickler refused is named."""
    named = re.search(r"GLOBAL ([\w.]+)", str(err)) if isinstance(err, pickle.UnpicklingError) else None
    if named:
        return (
            f"refused, it holds {named.group(1)}, an object other than tensors and plain Python values, and "
            "loading it could run code; scalemech loads weights only (torch.load with weights_only=True)"
        )
    reason = " ".join(str(err).split())[:300] or type(err).__name__
    return f"cannot be loaded as a causal LM, it is truncated, corrupt or missing ({type(err).__name__}: {reason})"


def _keys(names: Sequence[str], count: int = 3) -> str:
    names = sorted(names)
    return ", ".join(names[:count]) + (f" and {len(names) - count} more" if len(names) > count else "")


def load_weights(checkpoint: str, revision: str, local_files_only: bool, dtype: Any) -> PreTrainedModel:
    """``AutoModelForCausalLM.from_pretrained`` of ``checkpoint`` with ``trust_remote_code=False`` (no
    code shipped with a checkpoint is ever run), refusing in one ``ValueError`` naming its weight files
    (``weights_label``) what does not load as the model its ``config.json`` describes: an unreadable
    file (``LOAD_ERRORS``), weights whose shapes differ from the config's, a weight the files lack
    (it would be left random) or a weight the model has no place for."""
    label = weights_label(checkpoint)
    report = logging.getLogger("transformers.modeling_utils")
    quiet = _NoLoadReport()
    report.addFilter(quiet)
    try:
        hf_model, info = AutoModelForCausalLM.from_pretrained(
            checkpoint,
            revision=revision,
            local_files_only=local_files_only,
            dtype=dtype,
            trust_remote_code=False,
            ignore_mismatched_sizes=True,  # refused below, in one line
            output_loading_info=True,
        )
    except LOAD_ERRORS as err:
        raise ValueError(f"{label}: {load_failure(err)}") from None
    finally:
        report.removeFilter(quiet)
    problems = []
    if info.get("mismatched_keys"):
        name, found, expected = sorted(info["mismatched_keys"])[0]
        problems.append(
            f"{len(info['mismatched_keys'])} weights have other shapes than config.json gives "
            f"(e.g. {name}: {list(found)} in the file, {list(expected)} by the config)"
        )
    if info.get("missing_keys"):
        problems.append(f"config.json asks for weights the files lack ({_keys(info['missing_keys'])})")
    unexpected = [name for name in info.get("unexpected_keys") or () if name.endswith(".weight")]
    if unexpected:
        problems.append(f"the files hold weights config.json has no place for ({_keys(unexpected)})")
    if problems:
        raise ValueError(f"{label}: the weights do not fit config.json: {'; '.join(problems)}")
    return hf_model


def build(spec: dict[str, Any]) -> HFCausalLM:
    """Load ``spec['checkpoint']`` (hub name or local directory) as an ``HFCausalLM`` in eval mode.

    ``config.json`` is read and checked first (``hub.decoder_config``: a missing path, a config that is
    not a JSON object, one that needs the checkpoint's own code (``auto_map``) and a model that is not a
    decoder-only causal LM are refused before any weight is fetched); the weights are loaded without
    running any code of the checkpoint and checked against the config (``load_weights``). Every
    refusal is one ``ValueError`` (or ``FileNotFoundError``) naming the file.

    Keys: ``checkpoint``; ``revision`` (a pin, None for local directories); ``local_files_only``
    (default False); ``dtype`` (``DTYPES``, default "float32"); ``frozen`` (default True: no
    parameter requires grad); ``block_size`` (tokens per example, default
    ``max_position_embeddings``); ``tokenizer`` (default: the checkpoint's).
    """
    if "checkpoint" not in spec:
        raise ValueError(f"an 'hf' model spec needs a 'checkpoint' (hub name or directory), got keys {sorted(spec)}")
    dtype_name = spec.get("dtype", "float32")
    if dtype_name not in DTYPES:
        raise ValueError(f"dtype {dtype_name!r} is not supported for 'hf' models; allowed: {sorted(DTYPES)}")
    revision, local_files_only = spec.get("revision") or "main", bool(spec.get("local_files_only", False))
    decoder_config(spec["checkpoint"], revision, local_files_only)
    hf_model = load_weights(spec["checkpoint"], revision, local_files_only, DTYPES[dtype_name])
    if spec.get("frozen", True):
        hf_model.requires_grad_(False)
    return HFCausalLM(hf_model, spec).eval()
