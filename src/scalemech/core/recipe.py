"""``Recipe``: how one model is trained (optimizer, schedule, budget, augmentation, evaluation).

A plain record with its defaults and checks, read by the tasks (batches and evaluation sets), by
``training.train`` and by the pipeline, which builds it from a grid's ``recipe`` mapping.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

BUDGETS = ("epochs", "steps", "tokens", "tokens_per_parameter")  # a recipe names exactly one


@dataclass
class Recipe:
    """How to train: optimizer, schedule, budget, augmentation and evaluation."""

    optimizer: str = "sgd"  # sgd | adamw
    lr: float = 0.1  # peak learning rate
    momentum: float = 0.9  # SGD momentum; AdamW beta1
    beta2: float = 0.95  # AdamW beta2
    weight_decay: float = 5e-4  # on conv/linear weight matrices only
    nesterov: bool = True  # SGD only
    batch_size: int = 128  # examples (LM: sequences of block_size tokens) per step
    epochs: int | None = None  # budget: passes over the train split ...
    steps: int | None = None  # ... or optimizer steps ...
    tokens: int | None = None  # ... or tokens (LMs): steps = tokens // (batch_size·block_size) ...
    tokens_per_parameter: float | None = None  # ... or tokens per non-embedding parameter (LMs; Chinchilla ~20)
    warmup_fraction: float = 0.0  # share of the steps with linear warmup from lr/warmup_steps
    min_lr_fraction: float = 0.0  # cosine floor as a fraction of lr (1: a constant lr)
    grad_clip: float | None = None  # max global gradient norm, None = no clipping
    eval_batch_size: int = 512  # examples per evaluation batch
    augment: bool | str = "auto"  # auto: crop+flip for 3×32×32 images only; true/false; shift: translations only
    eval_every_epoch: int = 1  # images: test-split evaluation every this many epochs
    eval_every_steps: int = 200  # LMs: test-window evaluation every this many steps
    eval_examples: int = 10_000  # images: final train-split metrics on at most this many examples
    eval_windows: int = 256  # LMs: fixed windows per split for test and final train metrics
    label_smoothing: float = 0.0  # of the training loss only; reported losses are plain CE

    def __post_init__(self) -> None:
        if self.optimizer not in ("sgd", "adamw"):
            raise ValueError(f"recipe optimizer {self.optimizer!r} is not one of ('sgd', 'adamw')")
        budgets = {k: getattr(self, k) for k in BUDGETS if getattr(self, k) is not None}
        if len(budgets) != 1:
            raise ValueError(f"a recipe needs exactly one budget of {' | '.join(BUDGETS)}, got {budgets or 'none'}")
        if self.tokens_per_parameter is not None and not self.tokens_per_parameter > 0:
            raise ValueError(f"recipe tokens_per_parameter must be > 0, got {self.tokens_per_parameter!r}")
        for key, value in (
            *((k, v) for k, v in budgets.items() if k != "tokens_per_parameter"),
            ("batch_size", self.batch_size),
            ("eval_batch_size", self.eval_batch_size),
            ("eval_every_epoch", self.eval_every_epoch),
            ("eval_every_steps", self.eval_every_steps),
            ("eval_examples", self.eval_examples),
            ("eval_windows", self.eval_windows),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"recipe {key} must be an integer >= 1, got {value!r}")
        if not self.lr > 0:
            raise ValueError(f"recipe lr must be > 0, got {self.lr!r}")
        for key in ("warmup_fraction", "label_smoothing"):
            if not 0 <= getattr(self, key) < 1:
                raise ValueError(f"recipe {key} must lie in [0, 1), got {getattr(self, key)!r}")
        if not 0 <= self.min_lr_fraction <= 1:
            raise ValueError(f"recipe min_lr_fraction must lie in [0, 1], got {self.min_lr_fraction!r}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"recipe grad_clip must be None or > 0, got {self.grad_clip!r}")
        if self.augment not in ("auto", True, False, "shift"):
            raise ValueError(f"recipe augment must be 'auto', true, false or 'shift', got {self.augment!r}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Recipe:
        """A ``Recipe`` from a config mapping; unknown keys raise ``ValueError`` listing the allowed ones."""
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(allowed))
        if unknown:
            raise ValueError(f"unknown recipe key(s) {unknown}; allowed: {allowed}")
        return cls(**d)
