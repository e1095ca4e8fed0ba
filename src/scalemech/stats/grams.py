"""Gram matrices ``Q Qᵀ`` and cross-Grams of gradient rows, in float64 column chunks (never a D×D matrix)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import Tensor

Rows = Tensor | np.ndarray | Iterable[Tensor | np.ndarray]


_CHUNK_BYTES = 4 * 2**20
"""Float64 bytes of the column chunk buffer(s) of ``cross_gram`` (``a``'s and ``b``'s rows together)."""
_MIN_CHUNK_COLUMNS = 32  # narrower chunks make the rank-c updates slow (BLAS)


def _chunk_columns(rows: int, chunk_size: int) -> int:
    """Columns per ``cross_gram`` chunk: ``chunk_size``, fewer if ``rows`` float64 rows exceed ``_CHUNK_BYTES``."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive number of columns; got {chunk_size}")
    return min(chunk_size, max(_MIN_CHUNK_COLUMNS, _CHUNK_BYTES // (8 * max(rows, 1))))


class _ChunkReader:
    """Column chunks ``x[:, start:stop]`` as float64 on ``device``, read into one reused buffer (a numpy or
    memory-mapped ``x`` of any float dtype is converted chunk by chunk, in one read); a float64 tensor
    already on ``device`` is sliced, not copied."""

    def __init__(self, x: Tensor | np.ndarray, columns: int, device: torch.device | str):
        self.x, self.device = x, torch.device(device)
        width = min(columns, x.shape[1])
        self.view_only = isinstance(x, Tensor) and x.dtype == torch.float64 and x.device == self.device
        if isinstance(x, np.ndarray):
            self.host = np.empty((x.shape[0], width), dtype=np.float64)
        self.buffer = (
            None if self.view_only else torch.empty(x.shape[0], width, dtype=torch.float64, device=self.device)
        )

    def __call__(self, start: int, stop: int) -> Tensor:
        if self.view_only:
            return self.x[:, start:stop]
        out = self.buffer[:, : stop - start]
        if isinstance(self.x, np.ndarray):
            host = self.host[:, : stop - start]
            np.copyto(host, self.x[:, start:stop])
            return out.copy_(torch.from_numpy(host)) if self.device.type != "cpu" else torch.from_numpy(host)
        return out.copy_(self.x[:, start:stop])


@torch.no_grad()
def cross_grams(
    a: Tensor | np.ndarray,
    others: Sequence[Tensor | np.ndarray | None],
    chunk_size: int = 8192,
    device: torch.device | str = "cpu",
) -> list[Tensor]:
    """``[a bᵀ for b in others]`` (``b = a`` where None), float64, in one pass over column chunks of
    at most ``chunk_size`` features and at most ``_CHUNK_BYTES`` (4 MiB) of float64 for the rows of
    ``a`` and the ``others`` together: each chunk of each operand is read once (a numpy/memmap slice
    of any float dtype converted there) into one reused float64 buffer per operand on ``device``.
    Peak memory: the products, ``8·n_a·n_b`` each, + those buffers (+ BLAS's own)."""
    distinct = [b for b in others if b is not None]
    columns = _chunk_columns(a.shape[0] + sum(b.shape[0] for b in distinct), chunk_size)
    read_a = _ChunkReader(a, columns, device)
    readers = [read_a if b is None else _ChunkReader(b, columns, device) for b in others]
    products = [
        torch.zeros(a.shape[0], (a if b is None else b).shape[0], dtype=torch.float64, device=device) for b in others
    ]
    for start in range(0, a.shape[1], columns):
        stop = min(start + columns, a.shape[1])
        a_chunk = read_a(start, stop)  # (n_a, c)
        for product, read_b in zip(products, readers):
            product.addmm_(a_chunk, (a_chunk if read_b is read_a else read_b(start, stop)).T)
    return products


def cross_gram(
    a: Tensor | np.ndarray,
    b: Tensor | np.ndarray | None = None,
    chunk_size: int = 8192,
    device: torch.device | str = "cpu",
) -> Tensor:
    """``C = a bᵀ`` (``b = a`` when None), float64, summed over column chunks (``cross_grams``)."""
    return cross_grams(a, [b], chunk_size, device)[0]


def _flat(rows: Tensor | np.ndarray) -> Tensor | np.ndarray:
    """``(b, *shape)`` rows as ``(b, D)``."""
    if rows.ndim < 2:
        raise ValueError(f"rows must have shape (n, D) or (n, *shape); got shape {tuple(rows.shape)}")
    return rows.reshape(rows.shape[0], -1)


@torch.no_grad()
def _gram_and_dim(Q: Rows, chunk_size: int, device: torch.device | str | None) -> tuple[Tensor, int]:
    """``(G, D)``; the work of ``gram``."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive number of columns; got {chunk_size}")
    if isinstance(Q, (Tensor, np.ndarray)):
        rows = _flat(Q)
        if device is None:
            device = rows.device if isinstance(rows, Tensor) else "cpu"
        return cross_gram(rows, None, chunk_size, device), rows.shape[1]

    kept: list[Tensor | np.ndarray] = []
    pieces: list[Tensor] = []  # pieces[k]: (b_k, b_0 + ... + b_k), block k against blocks 0..k
    for block in Q:
        block = _flat(block)
        if kept and block.shape[1] != kept[0].shape[1]:
            raise ValueError(
                f"row block {len(kept)} has D = {block.shape[1]}; earlier blocks have D = {kept[0].shape[1]}"
            )
        if device is None:
            device = block.device if isinstance(block, Tensor) else "cpu"
        kept.append(block)
        pieces.append(
            torch.cat(
                [cross_gram(block, None if earlier is block else earlier, chunk_size, device) for earlier in kept],
                dim=1,
            )
        )
    if not kept:
        raise ValueError("Q is an empty iterable of row blocks; need at least 4 rows")
    n = sum(block.shape[0] for block in kept)
    G = torch.zeros(n, n, dtype=torch.float64, device=device)
    end = 0
    for piece in pieces:
        start, end = end, end + piece.shape[0]
        G[start:end, :end] = piece
        G[:end, start:end] = piece.T
    return G, kept[0].shape[1]


def gram(Q: Rows, chunk_size: int = 8192, device: torch.device | str | None = None) -> Tensor:
    """The Gram matrix ``G = Q Qᵀ`` (n×n, float64) of ``n`` rows, built in chunks.

    ``Q`` is either

    - an array: a ``(n, D)`` (or ``(n, *shape)``) Tensor, numpy array or ``np.memmap``. ``G`` is
      summed over column chunks, ``G = Σ_c Q[:, c] Q[:, c]ᵀ``, in one read of ``Q``; only a
      chunk is ever copied to ``device``. Memory: ``8·n²`` + ``8·n·chunk_size`` bytes on
      ``device``. This is the out-of-core path: rows too large for memory go to an ``np.memmap``.
    - an iterable of row blocks ``(b_k, D)`` (e.g. batches from a gradient pass), consumed once.
      Each arriving block is multiplied with itself and with every earlier block, so the blocks
      are kept as given (their dtype and device): memory ``n·D·itemsize`` + ``8·n²`` bytes.

    Neither path forms a D×D matrix. ``device`` defaults to that of the (first) tensor, else CPU.
    """
    return _gram_and_dim(Q, chunk_size, device)[0]
