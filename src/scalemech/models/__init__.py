"""Model families behind one insertion-point interface (``base.ResidualModel``).

A model is described by a plain ``spec`` dict (it travels inside ``model.pt`` and the
config), whose ``family`` picks the builder:

- ``resnet``:   CIFAR ResNet (He et al. 2016), keys ``depth`` (6n+2), ``width`` (multiplier k),
                ``norm``, ``placement``, ``in_channels``, ``num_classes``.
- ``tvresnet``: torchvision ResNet-18/34/50 for ImageNet, keys ``depth`` (18/34/50),
                ``width`` (multiplier), ``num_classes``.
- ``llama``:    pre-norm decoder, keys ``width`` (d_model), ``depth`` (n_layer), ``head_dim``,
                ``vocab_size``, ``block_size``.
- ``hf``:       any Hugging Face causal LM, keys ``checkpoint``, ``revision``, ``local_files_only``.

``FAMILIES`` is the one list of families: the config's checks, the CLI's ``--family`` and
``certify`` read it. Importing this package loads no torch (the CLI's ``--help`` reads
``FAMILIES``); a family's module is imported when a model of it is built. A trained family's
config dataclass and insertion-point names live in its torch-free ``configs.<family>``, which
``family_config``, ``insertion_points`` and ``point_count`` read: the config checks (and so the
workflow's planning) import no torch.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..core.integrity import load_torch, save_torch

if TYPE_CHECKING:
    import torch

    from .base import ResidualModel


@dataclass(frozen=True)
class Family:
    """A model family: the module ``scalemech.models.<name>`` (its ``build``) and, if trained here,
    the torch-free ``scalemech.models.configs.<name>`` (its config dataclass and ``point_names``)."""

    name: str
    data: str | None  # the kind of data a grid of it trains on; None: not trained here (Hugging Face checkpoints)
    config: (
        str | None
    )  # its config dataclass in configs.<name> (defaults and architecture rules); None: the checkpoint's

    @property
    def trained(self) -> bool:
        """Whether grids train it (its models are scalemech ``model.pt`` files with weights)."""
        return self.data is not None


FAMILIES = {
    family.name: family
    for family in (
        Family("resnet", "image", "ResNetConfig"),
        Family("tvresnet", "image", "TVResNetConfig"),
        Family("llama", "text", "LlamaConfig"),
        Family("hf", None, None),
    )
}


def _known(family: Any) -> Family:
    """The ``Family`` named ``family``; ``ValueError`` naming the allowed ones if there is none."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; allowed: {sorted(FAMILIES)}")
    return FAMILIES[family]


def _family(family: Any) -> ModuleType:
    """The module of ``family`` (its ``build``)."""
    return importlib.import_module(f"scalemech.models.{_known(family).name}")


def family_rules(family: str) -> ModuleType:
    """The torch-free ``configs.<family>`` of a trained ``family``: its config dataclass, ``point_names``
    and the optional rules the config checks read (``narrowest_stage``, ``agreeing``)."""
    if not _known(family).trained:
        trained = sorted(name for name, known in FAMILIES.items() if known.trained)
        raise ValueError(
            f"family {family!r} is not trained here (a checkpoint fixes its architecture); allowed: {trained}"
        )
    return importlib.import_module(f"scalemech.models.configs.{family}")


def family_config(family: str) -> type:
    """The config dataclass of a trained ``family``: its defaults and its architecture rules
    (raised as ``ValueError`` by its ``__post_init__``), without torch."""
    return getattr(family_rules(family), FAMILIES[family].config)


@cache
def insertion_points(family: str, depth: int) -> tuple[str, ...]:
    """The insertion-point names of a trained ``family`` model of ``depth`` from the depth alone,
    as its model class names its blocks; no model is built, so a deep model costs nothing
    (tests/test_hostile_configs.py compares them with those of models built on the meta device)."""
    return family_rules(family).point_names(depth)


def fit_geometry(spec: dict[str, Any], geometry: dict[str, Any], data: str) -> dict[str, Any]:
    """``spec`` with the input geometry its family's config takes from the data (``geometry``: a task's
    ``spec_keys``, the manifest's channels, image size and classes, or its vocabulary); a size ``spec``
    already states otherwise is a ``ValueError`` in one line naming both (a model of 16 x 16 images given
    14 x 14 ones)."""
    fields = {f.name for f in dataclasses.fields(family_config(spec["family"]))}
    taken = {key: value for key, value in geometry.items() if key in fields}
    clash = [f"{key} {spec[key]} in the model, {value} in the data" for key, value in taken.items()
             if spec.get(key, value) != value]  # fmt: skip
    if clash:
        raise ValueError(f"{spec['family']} model on data {data!r}: {'; '.join(clash)}")
    return {**spec, **taken}


def build_model(spec: dict[str, Any]) -> ResidualModel:
    """A fresh model of ``spec['family']`` (weights from the seed set by the caller)."""
    return _family(spec.get("family")).build(spec)


@cache
def point_count(family: str, depth: int) -> int | None:
    """Insertion points of a ``family`` model of ``depth`` without building it (they depend on depth
    alone); None where depth does not fix them (``hf``: the checkpoint does)."""
    return len(insertion_points(family, depth)) if _known(family).trained else None


def save_model(path: str | Path, model: ResidualModel, spec: dict[str, Any], **extra: Any) -> None:
    """Write ``{'spec', 'state_dict', **extra}`` to ``path`` (atomic, with a sha256 sidecar);
    ``extra`` holds plain Python values only, so the file loads with ``weights_only=True``."""
    save_torch(path, {"spec": spec, "state_dict": model.state_dict(), **extra})


def load_model(
    path: str | Path, map_location: str | torch.device = "cpu", checksum_required: bool = True
) -> tuple[ResidualModel, dict[str, Any]]:
    """``(model, payload)`` from a ``model.pt`` written by ``save_model``; model in eval mode.

    A pretrained model's ``model.pt`` holds only its spec: the weights come from its checkpoint.
    The file is checked against its sha256 sidecar (a user's own file without one only when
    ``checksum_required`` is False) and loaded with ``weights_only=True``. A missing file raises
    ``FileNotFoundError``; a changed, truncated or code-carrying one, or one that is not a
    ``save_model`` payload, ``ValueError``; all naming ``path``.
    """
    payload = load_torch(path, map_location=map_location, checksum_required=checksum_required)
    if not isinstance(payload, dict) or not isinstance(payload.get("spec"), dict):
        raise ValueError(f"{path}: not a scalemech model file (no 'spec' dict); write it with save_model")
    model = build_model(payload["spec"])
    if "state_dict" in payload:
        try:
            model.load_state_dict(payload["state_dict"])
        except (RuntimeError, TypeError, AttributeError) as error:
            summary = " ".join(str(error).split())[:200]
            raise ValueError(f"{path}: its weights do not fit its spec {payload['spec']} ({summary})") from None
    return model.to(map_location).eval(), payload


__all__ = [
    "FAMILIES",
    "Family",
    "build_model",
    "family_config",
    "family_rules",
    "fit_geometry",
    "insertion_points",
    "load_model",
    "point_count",
    "save_model",
]
