"""The old domain under ``--retain``: its held-out windows, on which forgetting is measured, and the
windows of its train split on which ``--at adept`` and ``--at bi`` score the layers (``scores``) and the
certificate predicts forgetting (``certify.forgetting``, its own draw of them).

``--retain`` takes ``--data``'s formats and is read by the same code (``certify.inputs.read_data``,
with the checkpoint's tokenizer). The held-out windows come from its test split, ``eval_windows`` of
them, seeded; the scoring windows from its train split, so the two never share a window.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel

from ..certify.inputs import read_data
from ..core.seeding import derive_seed
from ..models.hf import token_id_task
from ..training.continued import sequence_losses
from .checks import check_ids
from .output import data_digest
from .scores import adept_importance, block_influence


class Retained:
    """The retain data as a task, its held-out windows ``(x, y)`` and its scoring windows."""

    def __init__(
        self, data: str, spec: dict[str, Any], vocab_size: int, windows: int, batch_size: int, seed: int, pool: int
    ):
        """``windows`` held-out (test split) and as many scoring (train split) windows of ``data``,
        checked (``ValueError`` naming ``--retain``): the splits hold them, every id is in the vocabulary;
        ``prepared``, the data read as far as these and the certificate's retain pool of ``pool`` train
        windows need (``certify.forgetting``)."""
        with tempfile.TemporaryDirectory() as unused:
            self.prepared = prepared = read_data(data, Path(unused), spec, max(windows, pool), "--retain")
        if getattr(prepared, "kind", None) != "tokens":
            raise ValueError(f"--retain {data!r} holds {prepared.kind} data; grow takes text or token ids")
        self.task = token_id_task(prepared, spec["block_size"], vocab_size)
        for split, need in (("train", max(windows, pool)), ("test", windows)):
            if (count := self.task.count(split)) < need:
                raise ValueError(
                    f"--retain {data!r}: its {split} split holds {count} windows of {spec['block_size'] + 1} tokens, "
                    f"fewer than the {need} needed (--eval-windows, and --pool for the train split); give more data "
                    "or a smaller --eval-windows or --pool"
                )
        check_ids(self.task, "--retain")
        self.batch_size, self.record = batch_size, {"path": data, "sha256": data_digest(data)}
        self.x, self.y = self.draw("test", windows, derive_seed(seed, "retain", "held-out"))
        self.score_x, self.score_y = self.draw("train", windows, derive_seed(seed, "retain", "scores"))

    def draw(self, split: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` distinct windows ``(x, y)`` of ``split`` drawn with ``seed``."""
        return self.task.examples(split, self.task.draw(split, n, seed))

    def losses(self, model: PreTrainedModel) -> np.ndarray:
        """Per held-out retain window, ``model``'s mean next-token loss."""
        return sequence_losses(model, self.x, self.y, self.batch_size).numpy()

    def scores(self, model: PreTrainedModel, rule: str) -> list[float]:
        """Per decoder layer, ``adept``'s importance or ``bi``'s block influence on the scoring windows."""
        device = next(model.parameters()).device
        x, y = self.score_x.to(device), self.score_y.to(device)
        if rule == "adept":
            return adept_importance(model, x, y, self.batch_size)
        return block_influence(model, x, self.batch_size)
