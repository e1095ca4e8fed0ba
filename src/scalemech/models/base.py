"""The one insertion-point interface that every model family implements.

A normalized residual network is read as ``head ∘ block_L ∘ … ∘ block_1 ∘ stem``: every
block maps the residual stream to a stream of the same role, so the stream right after
a block is an insertion point ``l*`` (docs/science.md §1). With ``z = f_bot(x)``:

    f_old = f_top ∘ f_bot,        f_new(x) = f_top(z + h_θ(z)),  h_0 = 0.

Families (CIFAR ResNet, torchvision ResNet, llama, Hugging Face causal LMs) only say how
to build their stem, blocks and head, how to make a new zero-output block at a point
(``new_block``), and how an example's loss is computed (``per_example_loss``).
Gradient capture, interventions and expansion use nothing else.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from ..data import Prepared
from ..tasks import Task
from ..tasks.images import ImageTask
from ..tasks.windows import TextTask
from . import fit_geometry

PRESERVED_ATOL = 1e-5
"""The function check's tolerance: ``max |f_new − f_old| ≤ PRESERVED_ATOL · max(1, max |f_old|)`` in float32."""


def check_preserved(old: Tensor, new: Tensor, what: str, output: str = "output", hint: str = "") -> float:
    """``gap = max |new − old|`` of the outputs of ``f_old`` and ``f_new`` on the same inputs: the check
    that an insertion left the function as it was (``h_0 = 0``), shared by E11 and ``grow``.
    ``ValueError`` ("``what`` changed the model's ``output`` by …``hint``") when ``gap`` exceeds
    ``PRESERVED_ATOL · max(1, max |old|)`` (relative for large outputs: float32 sums in another order
    differ by a few ulps of their size)."""
    gap = float((new.float() - old.float()).abs().max())
    allowed = PRESERVED_ATOL * max(1.0, float(old.float().abs().max()))
    if not gap <= allowed:  # nan fails too
        raise ValueError(f"{what} changed the model's {output} by {gap:.3g} (allowed {allowed:.3g} in float32){hint}")
    return gap


def _at_least_float32(logits: Tensor) -> Tensor:
    """Logits for the loss: half precision promoted to float32, float64 kept as is."""
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


def fitted(model: ResidualModel, task: Task) -> Task:
    """``task`` once its geometry (``spec_keys``) agrees with ``model.spec`` (``models.fit_geometry``)."""
    fit_geometry(model.spec, task.spec_keys(), task.data.name)
    return task


class Chain(nn.Module):
    """Apply modules in order (a ``nn.Sequential`` that keeps the modules it was given)."""

    def __init__(self, modules: Sequence[nn.Module]):
        super().__init__()
        self.parts = nn.ModuleList(modules)

    def forward(self, x: Tensor) -> Tensor:
        for part in self.parts:
            x = part(x)
        return x


class ResidualModel(nn.Module):
    """``stem`` → named ``blocks`` on the residual stream → ``head``.

    Subclasses call ``super().__init__(stem, blocks, names, head)`` and implement
    ``new_block``; classification is the default ``per_example_loss``.
    """

    family: str = "abstract"
    recompute: bool = False
    """Recompute each block's activations in the backward instead of keeping them (``torch.utils.checkpoint``,
    non-reentrant, the RNG state replayed): the same gradients, one block's activations held at a time. For
    eval-mode norms (E11's arms): in train mode a BatchNorm would count its batch twice."""
    last_point_low_rank: bool = False
    """The (pooled) gradient at the last point is low-rank by construction: a head that is a linear
    classifier on the stream (averaged over space, for a ResNet) gives ``∇z ℓ = Wᵀ(p − y)/HW``, in the span
    of the classes' rows, rank at most classes − 1; D1 leaves that point out (``low_rank``)."""

    def __init__(self, stem: nn.Module, blocks: Sequence[nn.Module], names: Sequence[str], head: nn.Module):
        super().__init__()
        if len(blocks) != len(names) or len(set(names)) != len(names):
            raise ValueError(f"need one unique name per block, got {len(blocks)} blocks and names {list(names)}")
        self.stem = stem
        self.blocks = nn.ModuleList(blocks)
        self.block_names = list(names)
        self.head = head

    # -- the interface ---------------------------------------------------------------
    def insertion_points(self) -> list[str]:
        """Names of the residual-stream points, one after each block, input to output."""
        return list(self.block_names)

    def index(self, point: str) -> int:
        """Position of ``point`` in ``insertion_points()``; a clear error for unknown names."""
        try:
            return self.block_names.index(point)
        except ValueError:
            raise KeyError(
                f"unknown insertion point {point!r}; this {self.family} model has {self.block_names}"
            ) from None

    def low_rank(self, point: str) -> bool:
        """Whether the pooled gradient at ``point`` is low-rank by construction (``last_point_low_rank``)."""
        return self.last_point_low_rank and self.index(point) == len(self.block_names) - 1

    def split(self, point: str) -> tuple[nn.Module, nn.Module]:
        """``(f_bot, f_top)`` sharing this model's modules, with ``f_top(f_bot(x)) == self(x)``."""
        i = self.index(point)
        f_bot = Chain([self.stem, *self.blocks[: i + 1]])
        f_top = Chain([*self.blocks[i + 1 :], self.head])
        return f_bot, f_top

    def new_block(self, point: str) -> nn.Module:
        """A fresh residual block of this family for the stream at ``point``, ``h(z) = z`` at init."""
        raise NotImplementedError

    def insert_block(self, point: str) -> tuple[ResidualModel, nn.Module]:
        """A deep copy with ``new_block(point)`` placed right after ``point``.

        Returns ``(f_new, block)``; ``f_new`` equals this model at initialization.
        The new stream point is named ``"<point>+new"``.
        """
        i = self.index(point)
        block = self.new_block(point)
        expanded = copy.deepcopy(self)
        expanded.blocks.insert(i + 1, block.to(next(self.parameters()).device))
        expanded.block_names.insert(i + 1, f"{point}+new")
        return expanded, expanded.blocks[i + 1]

    # -- running it --------------------------------------------------------------------
    def forward(self, x: Tensor) -> Tensor:
        z = self.stem(x)
        recompute = self.recompute and torch.is_grad_enabled()
        for block in self.blocks:
            z = checkpoint(block, z, use_reentrant=False) if recompute else block(z)
        return self.head(z)

    def activation_checkpointing_enable(self, activation_checkpointing_kwargs: dict | None = None) -> None:
        """``recompute`` on: the name ``transformers`` gives it, which ``continued.train_arm`` calls."""
        self.recompute = True

    def activation_checkpointing_disable(self) -> None:
        self.recompute = False

    def forward_streams(
        self, x: Tensor, points: Sequence[str], inserted: Mapping[str, nn.Module] | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Output and the residual stream ``z`` at each of ``points`` (kept in the graph; with grad
        mode on, the stem's output requires grad, so ``∇_z ℓ`` exists with frozen weights). Each
        block of ``inserted`` runs right after its point, which records the stream before it."""
        wanted = {self.index(p): p for p in points}
        after = {self.index(p): block for p, block in (inserted or {}).items()}
        streams: dict[str, Tensor] = {}
        z = self.stem(x)
        if torch.is_grad_enabled() and not z.requires_grad:
            z = z.detach().requires_grad_()
        for i, block in enumerate(self.blocks):
            z = block(z)
            if i in wanted:
                streams[wanted[i]] = z
            if i in after:
                z = after[i](z)
        return self.head(z), streams

    def first_order_parameters(self, block: nn.Module) -> list[nn.Parameter]:
        """The parameters of a ``new_block`` whose gradient at ``θ = 0`` can be nonzero (default: all): the
        first-order signal and gradient capture differentiate these only. A block ``h(z) = W₂ σ(W₁ z)`` with
        ``W₂ = 0`` returns ``[W₂ (and its bias)]``: ``∂h/∂W₁ = 0`` while ``W₂ = 0``."""
        return list(block.parameters())

    def per_example_loss(self, output: Tensor, target: Tensor) -> Tensor:
        """Loss of each example, shape ``(B,)``: cross-entropy of class logits."""
        return F.cross_entropy(_at_least_float32(output), target, reduction="none")

    def correct(self, output: Tensor, target: Tensor) -> Tensor:
        """Number of correct predictions (tokens for language models) in the batch."""
        return (output.argmax(-1) == target).sum()

    def task(self, data: Prepared) -> Task:
        """The task this model solves on ``data`` (``scalemech.tasks``): image classification, refused in
        one line where the data's geometry is not the model's (``models.fit_geometry``)."""
        return fitted(self, ImageTask(data))


class LanguageModel(ResidualModel):
    """A causal LM on ``(B, T)`` token ids; an example is one sequence (docs/science.md §1).

    Subclasses set ``block_size``, the sequence length of an example.
    """

    block_size: int

    def per_example_loss(self, output: Tensor, target: Tensor) -> Tensor:
        """ℓ(sequence) = mean over its T positions of the next-token cross-entropy, shape ``(B,)``."""
        B, T, V = output.shape
        token_loss = F.cross_entropy(
            _at_least_float32(output).reshape(B * T, V), target.reshape(B * T), reduction="none"
        )
        return token_loss.view(B, T).mean(dim=1)

    def task(self, data: Prepared) -> Task:
        """Next-token prediction on windows of ``block_size`` tokens of ``data`` (``tasks.windows.TextTask``),
        refused where the data's vocabulary is not the model's (``models.fit_geometry``)."""
        return fitted(self, TextTask(data, self.block_size))
