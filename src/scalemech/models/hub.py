"""A Hugging Face checkpoint's ``config.json``, read without importing torch or transformers.

``decoder_config`` finds the checkpoint (a local directory, or a hub name: downloaded, or from the
local cache when downloads are off) and refuses, in one line naming the file, what ``models.hf``
cannot serve or must not load: a path that does not exist or is a file, a ``config.json`` that is
not UTF-8 JSON holding an object, a model that needs code shipped with the checkpoint (``auto_map``
with a ``model_type`` transformers does not know: scalemech never runs such code,
``trust_remote_code=False`` everywhere), and any model that is not a decoder-only causal LM. That is
decided from the class ``AutoModelForCausalLM`` maps the ``model_type`` to (``causal_lm_class``),
not from ``architectures`` alone: an encoder-decoder, a model type without a causal-LM class, and
an encoder family whose causal-LM class is a causal decoder only with ``is_decoder: true`` (BERT,
RoBERTa, BART …) without it, are refused. transformers' mappings are read from its source files
(``transformers_mappings``), which imports neither it nor torch.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import socket
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

CAUSAL_LM_SUFFIXES = ("ForCausalLM", "LMHeadModel")
"""How ``transformers`` names the class of a decoder-only LM with its head (``architectures``)."""
MAPPINGS = {
    "models/auto/auto_mappings.py": ("CONFIG_MAPPING_NAMES",),
    "models/auto/modeling_auto.py": (
        "MODEL_MAPPING_NAMES",
        "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
        "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
        "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
        "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    ),
}
"""The ``model_type → class name`` dicts of transformers that ``decoder_config`` reads, by source file."""
ENCODER_FAMILIES = (
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
)
"""A model type in one of these (a masked LM, an encoder-decoder) has a causal-LM class that is only its
decoder (``BertLMHeadModel``, ``BartForCausalLM`` …): causal only with ``is_decoder: true``."""
BIDIRECTIONAL = frozenset({"xlnet"})
"""Model types whose causal-LM class attends both ways unless given permutation masks, which certify
does not give."""


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
"""Suffixes of a checkpoint's weight files."""


def is_checkpoint_directory(directory: Path) -> bool:
    """Whether ``directory`` holds a Hugging Face checkpoint: a ``config.json`` beside weight files."""
    return (directory / "config.json").is_file() and any(
        path.is_file() and path.name.endswith(WEIGHT_SUFFIXES) for path in directory.iterdir()
    )


def looks_like_path(checkpoint: str) -> bool:
    """Whether ``checkpoint`` can only be a local path: a hub name is ``name`` or ``owner/name``."""
    return checkpoint.startswith(("/", ".", "~")) or checkpoint.endswith("/") or checkpoint.count("/") > 1


def hub_id(checkpoint: str) -> str | None:
    """The Hugging Face Hub id of ``checkpoint``: a hub name as given, a directory inside the hub's cache
    (``…/models--owner--name/snapshots/<revision>``) as ``owner/name``; None for any other local path."""
    path = Path(checkpoint).expanduser()
    if not path.exists():
        return checkpoint
    from huggingface_hub import constants

    resolved = path.resolve()
    for snapshots in resolved.parents:
        repo = snapshots.parent
        if snapshots.name == "snapshots" and repo.name.startswith("models--"):
            return repo.name.removeprefix("models--").replace(constants.REPO_ID_SEPARATOR, "/")
    return None


def hub_unreachable() -> str | None:
    """Why the hub cannot be downloaded from, or None: offline mode (``HF_HUB_OFFLINE=1``), or its
    host name does not resolve (no network: told at once, where downloading would retry for ~30 s)."""
    from huggingface_hub import constants, is_offline_mode

    if is_offline_mode():
        return "offline mode (HF_HUB_OFFLINE=1)"
    host = urlparse(constants.ENDPOINT).hostname or constants.ENDPOINT
    try:
        socket.getaddrinfo(host, 443)
    except OSError as err:
        return f"no network ({host} does not resolve: {err})"
    return None


def config_file(checkpoint: str, revision: str | None, local_files_only: bool) -> Path:
    """The ``config.json`` of ``checkpoint``: in its directory, else from the hub (or its cache).

    ``FileNotFoundError`` for a path that does not exist, a directory without ``config.json``, and a
    hub name that is not cached while downloads are off (``local_files_only``, ``hub_unreachable``);
    ``ValueError`` for a path that is a file.
    """
    path = Path(checkpoint).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"checkpoint directory {checkpoint!r} has no config.json")
        return path / "config.json"
    if path.exists():
        raise ValueError(
            f"checkpoint {checkpoint!r} is a file, not a Hugging Face checkpoint directory (with config.json) "
            "or a scalemech model.pt"
        )
    if looks_like_path(checkpoint):
        raise FileNotFoundError(f"checkpoint {checkpoint!r} does not exist (no such directory)")
    from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    revision = revision or "main"
    try:
        why = "local_files_only" if local_files_only else hub_unreachable()
        if why:
            cached = try_to_load_from_cache(checkpoint, "config.json", revision=revision)
            if isinstance(cached, str):
                return Path(cached)
            raise FileNotFoundError(
                f"{checkpoint!r} (revision {revision!r}) is neither a local directory nor in the local "
                f"Hugging Face cache ({constants.HF_HUB_CACHE}), and it cannot be downloaded: {why}"
            )
        return Path(hf_hub_download(checkpoint, "config.json", revision=revision))
    except HFValidationError as err:
        raise FileNotFoundError(f"checkpoint {checkpoint!r} is neither a directory nor a hub name ({err})") from None


def _literal_mappings(source: Path, names: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """The dicts ``names`` assigned at the top of ``source`` as ``OrderedDict([(key, value), …])``
    literals (how transformers writes its auto mappings), read with ``ast``: nothing is imported."""
    found: dict[str, dict[str, str]] = {}
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            if name in names and isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
                found[name] = dict(ast.literal_eval(value.args[0]))
    return found


@cache
def transformers_mappings() -> dict[str, dict[str, str]]:
    """``MAPPINGS`` of the installed transformers, read from its source (``_literal_mappings``: no
    torch, no transformers import); if its source is laid out otherwise, imported from its modules."""
    spec = importlib.util.find_spec("transformers")
    root = Path(spec.origin).parent if spec is not None and spec.origin else None
    found: dict[str, dict[str, str]] = {}
    for relative, names in MAPPINGS.items():
        try:
            found.update(_literal_mappings(root / relative, names) if root else {})
        except (OSError, SyntaxError, ValueError, TypeError):
            pass
    missing = [name for names in MAPPINGS.values() for name in names if name not in found]
    if missing:  # another layout of transformers' source: its modules (importing torch) say the same
        for relative, names in MAPPINGS.items():
            module = importlib.import_module("transformers." + relative.removesuffix(".py").replace("/", "."))
            found.update({name: dict(getattr(module, name)) for name in names if name in missing})
    return found


def transformers_version() -> str:
    try:
        return version("transformers")
    except PackageNotFoundError:
        return "?"


def read_config(path: Path, label: str) -> dict[str, Any]:
    """``path`` (a ``config.json``, called ``label`` in messages) as a dict: ``ValueError`` naming it when
    it is not UTF-8 text, not JSON, or JSON that is not an object."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{label}: not UTF-8 text (byte {err.start}: {err.reason}); config.json is UTF-8 JSON"
        ) from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{label}: not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{label}: holds a JSON {type(config).__name__}, not an object of a model's settings")
    return config


def causal_lm_class(config: dict[str, Any], label: str) -> str:
    """The class ``AutoModelForCausalLM`` makes of ``config`` (a ``config.json`` called ``label``), after
    checking that it is a decoder-only causal LM that needs no code from the checkpoint; ``ValueError``
    naming ``label``, the ``model_type`` and the reason otherwise (module doc)."""
    model_type, architectures = config.get("model_type"), config.get("architectures") or []
    architectures = architectures if isinstance(architectures, list) else [architectures]
    about = f"{label}: model_type {model_type!r}, architectures {architectures}"
    serves = "certify serves decoder-only causal LMs (…ForCausalLM / …LMHeadModel)"
    if config.get("is_encoder_decoder"):
        raise ValueError(f"{about}: an encoder-decoder model; {serves}")
    if not isinstance(model_type, str) or not model_type:
        raise ValueError(f"{label}: model_type {model_type!r} does not name a transformers model family (e.g. 'llama')")
    mappings = transformers_mappings()
    known = set().union(*(mappings[name] for names in MAPPINGS.values() for name in names))
    causal = mappings["MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"].get(model_type)
    if model_type not in known:
        auto_map = config.get("auto_map")
        if auto_map:
            code = sorted(auto_map) if isinstance(auto_map, dict) else auto_map
            raise ValueError(
                f"{about}: needs the code shipped with the checkpoint (auto_map: {code}), and scalemech never "
                f"runs a checkpoint's code (trust_remote_code=False); transformers {transformers_version()} "
                "has no model_type of that name"
            )
        raise ValueError(f"{about}: transformers {transformers_version()} knows no model_type of that name")
    if causal is None or not causal.endswith(CAUSAL_LM_SUFFIXES):
        what = "has no class for it" if causal is None else f"maps it to {causal}, not a text causal-LM class"
        raise ValueError(f"{about}: not a causal LM (AutoModelForCausalLM {what}); {serves}")
    if model_type in BIDIRECTIONAL:
        raise ValueError(f"{about}: not a causal LM ({causal} attends both ways without permutation masks); {serves}")
    if any(model_type in mappings[name] for name in ENCODER_FAMILIES) and config.get("is_decoder") is not True:
        raise ValueError(
            f"{about}: not a causal LM (an encoder or encoder-decoder family: {causal} is a causal decoder only when "
            f"config.json sets is_decoder: true, which it does not); {serves}"
        )
    if architectures and not any(str(a).endswith(CAUSAL_LM_SUFFIXES) for a in architectures):
        raise ValueError(f"{about}: not a causal LM (its architectures name no causal-LM class); {serves}")
    return causal


def decoder_config(checkpoint: str, revision: str | None = None, local_files_only: bool = False) -> dict[str, Any]:
    """``config.json`` of ``checkpoint`` as a dict (``read_config``), after checking that it is a
    decoder-only causal LM that needs no code from the checkpoint (``causal_lm_class``): ``ValueError``
    naming the file, its ``model_type`` and the reason otherwise. Imports neither torch nor transformers."""
    path = config_file(checkpoint, revision, local_files_only)
    label = str(path) if Path(checkpoint).expanduser().is_dir() else f"config.json of {checkpoint!r} ({path})"
    config = read_config(path, label)
    causal_lm_class(config, label)
    return config
