"""BatchNorm measured as trained: running statistics recomputed on training data before a measurement.

A BatchNorm network trains on batch statistics, but is measured in eval mode (per-example gradients
must not couple the examples of a batch), where it uses its running statistics: an exponential
average over the last steps' batches, taken under earlier weights. Early in training (a snapshot
in warmup) those lag the weights so far that the eval-mode network is a broken one, with losses
far above chance while the train-mode loss is ordinary. ``recalibrate_batch_norm`` therefore
recomputes them at the weights being measured, as ``torch.optim.swa_utils.update_bn`` does: a
cumulative average (``momentum=None``) of the batch means and variances over a fixed, seeded set of
train examples. Every measurement (measure, intervene, expand, trajectory at each snapshot) calls
it on the model it measures; the final model too, so every measured model is treated alike (its
running statistics, an average over the last steps, change little). Models without BatchNorm are
left untouched.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.optim.swa_utils import update_bn

from ..core.seeding import derive_seed
from ..models.base import ResidualModel
from ..tasks import Task, draw_examples

RECALIBRATION_EXAMPLES = 512
"""Train examples behind the recomputed statistics (all of them if the split holds fewer)."""
RECALIBRATION_BATCH = 128
"""Examples per forward pass of the recalibration (a typical training batch)."""


def has_batch_norm(model: nn.Module) -> bool:
    """Whether any module of ``model`` is a BatchNorm layer (with running statistics)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats for m in model.modules())


@torch.no_grad()
def recalibrate_batch_norm(model: ResidualModel, task: Task, identity: str, device: torch.device | str) -> bool:
    """Recompute every BatchNorm layer's running mean and variance of ``model`` (in place) as the
    cumulative average over batches of ``RECALIBRATION_BATCH`` from ``RECALIBRATION_EXAMPLES`` train
    examples of ``task``, drawn with ``derive_seed(0, identity, "batch_norm")``: the same examples for
    one model in every job and at every snapshot, so the same weights give the same statistics.
    The model's train/eval mode is kept. Returns whether there was anything to recalibrate."""
    if not has_batch_norm(model):
        return False
    n = min(RECALIBRATION_EXAMPLES, task.count("train"))
    examples = draw_examples(task, "train", n, derive_seed(0, identity, "batch_norm"))
    update_bn((x.to(device) for x in examples.x.split(RECALIBRATION_BATCH)), model)
    return True
