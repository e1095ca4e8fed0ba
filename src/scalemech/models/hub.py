"""A Hugging Face checkpoint's ``config.json``, read without importing torch or transformers.

``decoder_config`` finds the checkpoint (a local directory, or a hub name: downloaded, or from the
local cache when downloads are off) and refuses, in one line, what ``models.hf`` cannot serve: a
path that does not exist, and any model that is not a decoder-only causal LM
(``is_encoder_decoder``, or ``architectures`` naming no ``…ForCausalLM`` / ``…LMHeadModel``).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

CAUSAL_LM_SUFFIXES = ("ForCausalLM", "LMHeadModel")
"""How ``transformers`` names the class of a decoder-only LM with its head (``architectures``)."""


def looks_like_path(checkpoint: str) -> bool:
    """Whether ``checkpoint`` can only be a local path: a hub name is ``name`` or ``owner/name``."""
    return checkpoint.startswith(("/", ".", "~")) or checkpoint.endswith("/") or checkpoint.count("/") > 1


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
    hub name that is not cached while downloads are off (``local_files_only``, ``hub_unreachable``).
    """
    path = Path(checkpoint).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"checkpoint directory {checkpoint!r} has no config.json")
        return path / "config.json"
    if looks_like_path(checkpoint) or path.exists():
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


def decoder_config(checkpoint: str, revision: str | None = None, local_files_only: bool = False) -> dict[str, Any]:
    """``config.json`` of ``checkpoint`` as a dict, after checking that it is a decoder-only causal LM
    (``ValueError`` naming its ``model_type`` and architectures otherwise)."""
    config = json.loads(config_file(checkpoint, revision, local_files_only).read_text())
    model_type, architectures = config.get("model_type", "?"), config.get("architectures") or []
    causal = not architectures or any(a.endswith(CAUSAL_LM_SUFFIXES) for a in architectures)
    if config.get("is_encoder_decoder") or not causal:
        kind = "an encoder-decoder model" if config.get("is_encoder_decoder") else "not a causal LM"
        raise ValueError(
            f"checkpoint {checkpoint!r} (model_type {model_type!r}, architectures {architectures}) is {kind}; "
            "certify serves decoder-only causal LMs (…ForCausalLM / …LMHeadModel)"
        )
    return config
