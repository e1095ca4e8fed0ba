"""Per-example activation gradients at insertion points, from one forward and one backward pass.

For an example ``(x, y)`` and an insertion point with stream ``z = f_bot(x)`` (docs/science.md §1)

    q(x, y) = ∇_z ℓ(f_top(z), y).

In eval mode (norm layers use running statistics) examples do not interact, so row ``b`` of
``∇_Z Σ_b ℓ_b`` for a batched stream ``Z`` is ``q_b``: one forward and one backward per batch
give ``q`` at every requested point at once (docs/science.md §4.3); parameters may be frozen.

Two views of ``q`` per point:

- ``full``:   the stream flattened, ``D = C·H·W`` (CNN) or ``T·d`` (transformer);
- ``pooled``: summed over every axis except batch and the channel axis, which is axis 1 for
  rank >= 4 streams ``(B, C, H, W)`` and the last axis for rank-3 streams ``(B, T, d)``; a rank-2
  stream ``(B, d)`` is its own pooled view. ``pooled`` is the gradient w.r.t. one shift per
  channel broadcast over space/positions (``broadcast_shift``).

``GradientPool`` keeps the rows ``Q`` (n×D) of one split × point × view on disk, so a pass over a
pool never holds all of ``Q`` in memory; its files are checked on every open (``PoolError``).
``block_grad_norms`` is the first-order signal of a zero-initialized inserted block (Paper D's
Condition 1): ``‖∇_θ L(f_new)‖`` at ``θ = 0``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from ..core.seeding import seeded
from ..data.store import DataError, checked_npy, file_record
from ..models.base import ResidualModel
from ..stats import cross_grams
from ..tasks import Examples

VIEWS = ("full", "pooled")
POOL_DTYPES = ("float16", "float32")

PrepareBatch = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]
"""``(x, y)`` of the CPU pool -> model-ready ``(x, y)`` on the device (e.g. image normalization)."""


# ----------------------------------------------------------------------------- views


def channel_dim(stream: Tensor) -> int:
    """The channel/feature axis of a batched stream: 1 for rank >= 4 ``(B, C, ...)``, else -1."""
    if stream.dim() < 2:
        raise ValueError(f"a stream has a batch axis and at least one more; got shape {tuple(stream.shape)}")
    return 1 if stream.dim() >= 4 else stream.dim() - 1


def pool_stream(stream: Tensor) -> Tensor:
    """Sum over all axes but batch and channel: ``(B, C, H, W) -> (B, C)``, ``(B, T, d) -> (B, d)``."""
    keep = channel_dim(stream)
    summed = [a for a in range(1, stream.dim()) if a != keep]
    return stream.sum(dim=summed) if summed else stream


def view_of(grad: Tensor, view: str) -> Tensor:
    """``grad`` (B, *stream) in ``view``: ``full`` (B, D) or ``pooled`` (B, C)."""
    if view == "full":
        return grad.reshape(grad.shape[0], -1)
    if view == "pooled":
        return pool_stream(grad)
    raise ValueError(f"unknown view {view!r}; allowed: {VIEWS}")


def broadcast_shift(delta: Tensor, view: str, stream_shape: Sequence[int]) -> Tensor:
    """A shift ``δ`` given in ``view`` as a tensor of shape ``(1, *stream_shape)`` to add to ``z``.

    ``full``: ``δ`` has ``prod(stream_shape)`` entries. ``pooled``: one entry per channel, repeated
    over space/positions, so ``∂L/∂δ`` is the pooled view of ``q``.
    """
    shape = (1, *stream_shape)
    if view == "full":
        return delta.reshape(shape)
    if view == "pooled":
        keep = channel_dim(torch.empty(shape, device="meta"))
        per_channel = [1] * len(shape)
        per_channel[keep] = shape[keep]
        return delta.reshape(per_channel).expand(shape)
    raise ValueError(f"unknown view {view!r}; allowed: {VIEWS}")


# ----------------------------------------------------------------------------- batches


def to_device(device: torch.device | str) -> PrepareBatch:
    """The default ``prepare_batch``: move ``x`` and ``y`` to ``device`` unchanged."""
    return lambda x, y: (x.to(device), y.to(device))


def iter_batches(x: Tensor, y: Tensor, batch_size: int, prepare_batch: PrepareBatch) -> Iterator[tuple[Tensor, Tensor]]:
    """Consecutive prepared batches of a pool ``(x, y)``, in order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    for start in range(0, len(x), batch_size):
        yield prepare_batch(x[start : start + batch_size], y[start : start + batch_size])


@torch.no_grad()
def per_example_losses(
    model: ResidualModel, x: Tensor, y: Tensor, batch_size: int, prepare_batch: PrepareBatch
) -> Tensor:
    """``(ℓ(f(x_i), y_i))_i`` over the pool, float64 on the CPU, model in eval mode."""
    model.eval()
    return torch.cat(
        [
            model.per_example_loss(model(xb), yb).double().cpu()
            for xb, yb in iter_batches(x, y, batch_size, prepare_batch)
        ]
    )


def mean_loss(model: ResidualModel, x: Tensor, y: Tensor, batch_size: int, prepare_batch: PrepareBatch) -> float:
    """``L = (1/n) Σ_i ℓ(f(x_i), y_i)`` over the pool (``per_example_losses``, float64)."""
    return float(per_example_losses(model, x, y, batch_size, prepare_batch).sum()) / len(x)


# ----------------------------------------------------------------------------- capture


class FirstOrder(nn.Module):
    """A new block ``b_θ`` with ``b_0(z) = z``, measured at ``θ = 0`` without changing the model:
    ``z ↦ z + (b(z̄) − z̄)``, ``z̄ = z`` detached.

    Its value is ``b(z)``, the gradient reaching ``z`` through it is the one at its output (the old
    model's ``q``: nothing is backpropagated through ``b``'s input), and ``∇_θ`` of the loss is
    ``J_θ b(z)ᵀ q``. Extra arguments (a decoder layer's mask, positions …) go to ``b``.
    """

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, z: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        detached = z.detach()
        return z + (self.block(detached, *args, **kwargs) - detached)


def one_pass(
    model: ResidualModel,
    x: Tensor,
    y: Tensor,
    points: Sequence[str],
    views: Sequence[str] = VIEWS,
    blocks: dict[str, nn.Module] | None = None,
) -> tuple[dict[str, dict[str, Tensor]], list[list[Tensor]]]:
    """``({point: {view: q}}, [∇_θ Σ_b ℓ_b of each new block])`` of one prepared batch, one forward
    and one backward: ``q`` float32 (B, D) or (B, C), ``q_b = ∂(Σ_b' ℓ_b')/∂z_b``; each of
    ``blocks`` (new blocks) runs after its point as ``FirstOrder`` (the model is unchanged), its gradient
    taken over ``model.first_order_parameters(block)`` (the others' is 0 at ``θ = 0``).

    The model must be in eval mode (``iter_activation_grads`` sets it).
    """
    blocks = blocks or {}
    params = [model.first_order_parameters(block) for block in blocks.values()]
    with torch.enable_grad():
        output, streams = model.forward_streams(x, points, {p: FirstOrder(b) for p, b in blocks.items()})
        loss = model.per_example_loss(output, y).sum()
        wrt = [streams[p] for p in points] + [param for block in params for param in block]
        grads = iter(torch.autograd.grad(loss, wrt, allow_unused=True))
    views_of = {p: {v: view_of(g.float(), v) for v in views} for p, g in zip(points, grads)}
    block_grads = [[torch.zeros_like(q) if (g := next(grads)) is None else g for q in block] for block in params]
    return views_of, block_grads


def activation_grads(
    model: ResidualModel, x: Tensor, y: Tensor, points: Sequence[str], views: Sequence[str] = VIEWS
) -> dict[str, dict[str, Tensor]]:
    """``{point: {view: q}}`` for one prepared batch (``one_pass`` without new blocks)."""
    return one_pass(model, x, y, points, views)[0]


def iter_activation_grads(
    model: ResidualModel,
    x: Tensor,
    y: Tensor,
    points: Sequence[str],
    batch_size: int,
    prepare_batch: PrepareBatch,
    views: Sequence[str] = VIEWS,
) -> Iterator[dict[str, dict[str, Tensor]]]:
    """``activation_grads`` of each consecutive batch of the pool ``(x, y)``; puts ``model`` in eval mode."""
    model.eval()
    for xb, yb in iter_batches(x, y, batch_size, prepare_batch):
        yield activation_grads(model, xb, yb, points, views)


# ----------------------------------------------------------------------------- on-disk pools


def pool_path(pool_dir: str | Path, split: str, point: str, view: str) -> Path:
    """Where the pool of ``split`` × ``point`` × ``view`` lives under ``pool_dir`` (no suffix)."""
    return Path(pool_dir) / split / point / view


def measured_points(pool_dir: str | Path) -> list[str]:
    """The points whose pools ``pool_dir`` holds, in model order (from the pools' own metadata)."""
    metas = [json.loads(p.read_text()) for p in sorted(Path(pool_dir).glob("*/*/*.json"))]
    if not metas:
        raise FileNotFoundError(f"no gradient pools under {pool_dir}; run the measurement first")
    return [point for _, point in sorted({(m["point_index"], m["point"]) for m in metas})]


class PoolError(DataError):
    """A stored gradient pool is incomplete, modified or corrupt; re-running the measurement rewrites it."""


def _checked_array(path: Path, meta_file: Path, record: dict | None, verify: bool) -> np.ndarray:
    """Memory-map the pool file at ``path`` after checking it against its ``record`` in ``meta_file``
    (``store.checked_npy``)."""
    redo = "re-run the measurement that wrote this pool"
    if record is None:
        raise PoolError(f"{path}: no checksum in {meta_file} (a pool from an older version); {redo}")
    return checked_npy(path, record, meta_file.name, redo, PoolError, mmap_mode="r", verify=verify)


class GradientPool:
    """Rows ``q_i`` (n×D) of one split × point × view, stored as three files at ``path``:

    - ``<path>.npy``: ``q_i / s_i`` in float16 or float32 (memory-mapped), ``s_i = max_k |q_ik|``
      (1 for a zero row), so float16 rows stay in range whatever the gradient's magnitude;
    - ``<path>.scale.npy``: the float64 row scales ``s_i``;
    - ``<path>.json``: ``n``, ``dim``, ``dtype``, labels (``split``, ``point``, ``point_index``,
      ``view``, ``stream_shape``) and ``files``: bytes, shape, dtype and sha256 of both ``.npy``
      files (sha256 None for a scratch pool, ``create(checksum=False)``); written last by
      ``finish``, so a pool with it is complete.

    Opening checks both files' size and header against ``files``, and their sha256 (up to
    ``SHA256_VERIFY_MAX_BYTES``, as for prepared data) unless ``verify`` is False; a mismatch
    raises ``PoolError`` naming the file.
    """

    def __init__(self, path: str | Path, verify: bool = True):
        self.path = Path(path)
        meta_file = self.path.with_suffix(".json")
        if not meta_file.exists():
            raise FileNotFoundError(f"no finished gradient pool at {self.path} ({meta_file.name} missing)")
        try:
            self.meta = json.loads(meta_file.read_text())
        except json.JSONDecodeError as err:
            raise PoolError(f"{meta_file}: unreadable ({err}); re-run the measurement that wrote this pool") from err
        files = self.meta.get("files", {})
        scaled_file, scale_file = self.path.with_suffix(".npy"), self.path.with_suffix(".scale.npy")
        self.scaled = _checked_array(scaled_file, meta_file, files.get(scaled_file.name), verify)  # (n, D)
        self.scale = np.array(_checked_array(scale_file, meta_file, files.get(scale_file.name), verify))  # (n,)

    @staticmethod
    def create(path: str | Path, n: int, dim: int, dtype: str, checksum: bool = True, **labels) -> PoolWriter:
        """A ``PoolWriter`` for ``n`` rows of length ``dim`` stored in ``dtype`` (float16 | float32);
        without ``checksum`` no sha256 is computed (a scratch pool, opened only with ``verify=False``)."""
        return PoolWriter(Path(path), n, dim, dtype, labels, checksum)

    @property
    def n(self) -> int:
        return int(self.meta["n"])

    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    def rows(self, start: int = 0, stop: int | None = None, device: torch.device | str = "cpu") -> Tensor:
        """Rows ``q_start … q_stop-1`` as float64 (b, D) on ``device``."""
        stop = self.n if stop is None else stop
        scaled = torch.from_numpy(np.array(self.scaled[start:stop])).to(device, torch.float64)
        return scaled * torch.from_numpy(self.scale[start:stop]).to(device)[:, None]

    def mean(self, device: torch.device | str = "cpu", chunk_rows: int = 1024) -> Tensor:
        """``(1/n) Σ_i q_i`` (D,), float64."""
        total = sum(self.rows(s, s + chunk_rows, device).sum(0) for s in range(0, self.n, chunk_rows))
        return total / self.n

    def gram(
        self, other: GradientPool | None = None, device: torch.device | str = "cpu", chunk_cols: int = 8192
    ) -> Tensor:
        """``Q_a Q_bᵀ`` (n_a × n_b, float64; ``b = a`` when ``other`` is None), summed over column chunks
        (``grams``)."""
        return self.grams([other], device, chunk_cols)[0]

    def grams(
        self, others: Sequence[GradientPool | None], device: torch.device | str = "cpu", chunk_cols: int = 8192
    ) -> list[Tensor]:
        """``[Q_a Q_bᵀ for b in others]`` (``b = a`` where None), float64, from one pass over the
        column chunks of every pool (``stats.cross_grams``).

        ``G_ij = s_i t_j Σ_k Q̃_ik R̃_jk`` from the stored scaled rows; only a column chunk of
        each pool is in memory at a time (docs/science.md §4).
        """
        pools = [self if other is None else other for other in others]
        for b in pools:
            if b.dim != self.dim:
                raise ValueError(
                    f"pools of different lengths: {self.path} has D = {self.dim}, {b.path} has D = {b.dim}"
                )
        crosses = cross_grams(self.scaled, [None if o is None else o.scaled for o in others], chunk_cols, device)
        a_scale = torch.from_numpy(self.scale).to(device)
        return [
            cross * a_scale[:, None] * torch.from_numpy(b.scale).to(device)[None, :] for cross, b in zip(crosses, pools)
        ]


class PoolWriter:
    """Fills a ``GradientPool`` batch by batch (``write``, appended to the ``.npy`` file, which is
    not memory-mapped: written rows leave the process), then ``finish`` makes it readable."""

    def __init__(self, path: Path, n: int, dim: int, dtype: str, labels: dict, checksum: bool = True):
        if dtype not in POOL_DTYPES:
            raise ValueError(f"pool dtype {dtype!r}; allowed: {POOL_DTYPES}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".json").unlink(missing_ok=True)
        self.path, self.meta = path, {"n": n, "dim": dim, "dtype": dtype, **labels}
        self.shape, self.dtype = (n, dim), np.dtype(dtype)
        self.file = path.with_suffix(".npy").open("wb")
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": self.shape}
        np.lib.format.write_array_header_1_0(self.file, header)
        self.scale = np.ones(n, dtype=np.float64)
        self.filled, self.checksum = 0, checksum

    def write(self, rows: Tensor) -> None:
        """Append ``rows`` (b, D)."""
        stop = self.filled + rows.shape[0]
        if stop > self.shape[0] or rows.shape[1] != self.shape[1]:
            raise ValueError(
                f"rows of shape {tuple(rows.shape)} after {self.filled} rows do not fit the pool "
                f"{self.path} of shape {self.shape}"
            )
        # A float32 pool takes single-precision rows' quotients in float32: operands and result in
        # float32, that is the float64 quotient rounded once. A float16 pool needs the float64 one (a
        # float32 quotient of float32 rows can land on a float16 midpoint and round the other way).
        wide = rows.dtype == torch.float64 or self.dtype == np.float16
        rows = rows.detach().double() if wide else rows.detach().float()
        scale = rows.abs().amax(dim=1)
        scale = torch.where(scale > 0, scale, 1.0)  # (b,), exact
        self.file.write((rows / scale[:, None]).cpu().numpy().astype(self.dtype, copy=False).tobytes())
        self.scale[self.filled : stop] = scale.double().cpu().numpy()
        self.filled = stop

    def finish(self) -> GradientPool:
        """Flush; write the scales, then the metadata with each file's record; return the pool for reading."""
        if self.filled != self.shape[0]:
            raise ValueError(f"pool {self.path} got {self.filled} of its {self.shape[0]} rows")
        self.file.close()
        np.save(self.path.with_suffix(".scale.npy"), self.scale)
        files = {
            p.name: file_record(p, self.checksum)
            for p in (self.path.with_suffix(suffix) for suffix in (".npy", ".scale.npy"))
        }
        self.path.with_suffix(".json").write_text(json.dumps({**self.meta, "files": files}, indent=1))
        return GradientPool(self.path, verify=False)  # just written


def capture_pools(
    model: ResidualModel,
    examples: Examples,
    points: Sequence[str],
    pool_dir: str | Path,
    batch_size: int,
    prepare_batch: PrepareBatch,
    dtype: str,
    views: Sequence[str] = VIEWS,
    labels: dict[str, Any] | None = None,
    progress: bool = False,
    new_block_seeds: Sequence[int] | None = None,
    checksum: bool = True,
) -> dict[tuple[str, str], GradientPool]:
    """Capture ``q`` of ``examples`` at ``points`` and store one ``GradientPool`` per point × view.

    One forward and one backward per batch (``one_pass``); returns ``{(point, view): pool}``. Each
    pool records its provenance (``examples.provenance()``: split, seed, example index) and
    ``labels`` (the model). With ``new_block_seeds`` (one per point), the same passes give the
    first-order signal of a new block at each point, recorded as each pool's ``block_grad_norm``
    (``block_grad_norms``). Without ``checksum`` the pools are scratch (``GradientPool.create``).
    """
    x, y, split = examples.x, examples.y, examples.split
    provenance = {**examples.provenance(), **(labels or {})}
    blocks = new_blocks(model, points, new_block_seeds) if new_block_seeds is not None else {}
    sums = BlockGradSums(model, blocks)
    writers: dict[tuple[str, str], PoolWriter] = {}
    model.eval()
    batches = iter_batches(x, y, batch_size, prepare_batch)
    for xb, yb in tqdm(batches, total=math.ceil(len(x) / batch_size), desc=f"capture {split}", disable=not progress):
        grads, block_grads = one_pass(model, xb, yb, points, views, blocks)
        sums.add(block_grads)
        if not writers:
            with torch.no_grad():
                _, streams = model.forward_streams(xb[:1], points)
            writers = {
                (p, v): GradientPool.create(
                    pool_path(pool_dir, split, p, v),
                    len(x),
                    grads[p][v].shape[1],
                    dtype,
                    checksum,
                    point=p,
                    point_index=model.index(p),
                    view=v,
                    stream_shape=list(streams[p].shape[1:]),
                    **provenance,
                )
                for p in points
                for v in views
            }
        for (p, v), writer in writers.items():
            writer.write(grads[p][v])
    norms = dict(zip(blocks, sums.norms(len(x))))
    for (p, _), writer in writers.items():
        if p in norms:
            writer.meta["block_grad_norm"] = norms[p]
    return {key: writer.finish() for key, writer in writers.items()}


# ----------------------------------------------------------------------------- first-order signal


def block_grad(
    model: ResidualModel, block: nn.Module, x: Tensor, y: Tensor, batch_size: int, prepare_batch: PrepareBatch
) -> list[Tensor]:
    """``∇_θ L`` for the parameters ``θ`` of ``block`` (a part of ``model``), ``L`` the mean pool loss.

    Float64 accumulation over batches; the model is put in eval mode; nothing is written to ``.grad``.
    """
    model.eval()
    params = list(block.parameters())
    for p in params:
        p.requires_grad_(True)
    total = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    with torch.enable_grad():
        for xb, yb in iter_batches(x, y, batch_size, prepare_batch):
            loss = model.per_example_loss(model(xb), yb).sum()
            for acc, g in zip(total, torch.autograd.grad(loss, params, allow_unused=True)):
                if g is not None:
                    acc += g
    return [g / len(x) for g in total]


def new_blocks(model: ResidualModel, points: Sequence[str], seeds: Sequence[int]) -> dict[str, nn.Module]:
    """``{point: model.new_block(point)}`` in eval mode, block ``k``'s random weights from ``seeds[k]``
    (the global RNG state is left as it was), as ``insert_block`` draws them. Only the
    ``first_order_parameters`` require grad, so autograd keeps no activations for the others."""
    blocks = {}
    for point, seed in zip(points, seeds, strict=True):
        with seeded(seed):
            block = model.new_block(point).eval().requires_grad_(False)
        for param in model.first_order_parameters(block):
            param.requires_grad_(True)
        blocks[point] = block
    return blocks


class BlockGradSums:
    """``Σ_batches ∇_θ Σ_b ℓ_b`` of each new block (``one_pass``'s second output), in float64."""

    def __init__(self, model: ResidualModel, blocks: dict[str, nn.Module]):
        self.totals = [
            [torch.zeros_like(p, dtype=torch.float64) for p in model.first_order_parameters(block)]
            for block in blocks.values()
        ]

    def add(self, block_grads: list[list[Tensor]]) -> None:
        for total, grads in zip(self.totals, block_grads):
            for acc, g in zip(total, grads):
                acc += g

    def norms(self, n: int) -> list[float]:
        """``‖(1/n) Σ_i ∇_θ ℓ_i‖`` of each block."""
        return [math.sqrt(sum(float((g**2).sum()) for g in total)) / n for total in self.totals]


def block_grad_norms(
    model: ResidualModel,
    points: Sequence[str],
    x: Tensor,
    y: Tensor,
    batch_size: int,
    prepare_batch: PrepareBatch,
    seeds: Sequence[int],
) -> list[float]:
    """``‖∇_θ L(f_new)‖`` at ``θ = 0`` for the block ``model.insert_block(point)`` inserts at each of
    ``points`` (Condition 1), with one forward and backward of ``model`` per batch.

    With ``f_new = f_top ∘ b_θ ∘ f_bot`` and ``b_0(z) = z``, the stream and its gradient at the
    point are those of ``model``: ``∇_θ L = (1/n) Σ_i J_θ b(z_i)ᵀ q_i`` with ``z_i`` the stream and
    ``q_i = ∂ℓ_i/∂z_i``; every block runs beside the model as ``FirstOrder`` in the same pass.
    Block ``k``'s random weights come from ``seeds[k]`` (``new_blocks``).
    """
    model.eval()
    blocks = new_blocks(model, points, seeds)
    sums = BlockGradSums(model, blocks)
    for xb, yb in iter_batches(x, y, batch_size, prepare_batch):
        sums.add(one_pass(model, xb, yb, [], (), blocks)[1])
    return sums.norms(len(x))
