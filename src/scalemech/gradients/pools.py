"""On-disk gradient pools: the rows ``Q`` (n×D) of one split × point × view, memory-mapped and checked on
every open (``PoolError``), written batch by batch (``PoolWriter``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..data.store import DataError, checked_npy, file_record
from ..stats import cross_grams

POOL_DTYPES = ("float16", "float32")
HOST_ROWS = 1024  # rows of a kept pool copied to the host at a time, on the way to its file
TORCH_DTYPES = {"float16": torch.float16, "float32": torch.float32}


def to_half(x: Tensor) -> Tensor:
    """float64 ``x`` rounded once to float16 (to nearest, ties to even), on ``x``'s device.

    torch converts float64 to float16 through float32, rounding twice; rounding to float32 *to odd* first
    (toward zero, then the last bit set when inexact) keeps the 13 extra bits honest, so the second rounding
    gives the float64 value's own nearest float16 (Boldo & Melquiond 2008)."""
    single = x.float()
    away = single.double().abs() > x.abs()  # rounded away from zero: step back one ulp toward it
    single = torch.where(away, torch.nextafter(single, torch.zeros_like(single)), single)
    inexact = single.double() != x
    odd = (single.view(torch.int32) | 1).view(torch.float32)
    return torch.where(inexact & torch.isfinite(single), odd, single).half()


def pool_path(pool_dir: str | Path, split: str, point: str, view: str) -> Path:
    """Where the pool of ``split`` × ``point`` × ``view`` lives under ``pool_dir`` (no suffix)."""
    return Path(pool_dir) / split / point / view


def remove_pool(path: Path) -> None:
    """Delete the pool at ``path`` (``pool_path``): its rows, their scales and its metadata."""
    for suffix in (".npy", ".scale.npy", ".json"):
        path.with_suffix(suffix).unlink(missing_ok=True)


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
        self.kept: tuple[Tensor, Tensor] | None = None  # the stored rows and scales, still on the device

    @staticmethod
    def create(
        path: str | Path, n: int, dim: int, dtype: str, checksum: bool = True, keep: bool = False, **labels
    ) -> PoolWriter:
        """A ``PoolWriter`` for ``n`` rows of length ``dim`` stored in ``dtype`` (float16 | float32);
        without ``checksum`` no sha256 is computed (a scratch pool, opened only with ``verify=False``); with
        ``keep`` the rows stay on their device too (``PoolWriter``)."""
        return PoolWriter(Path(path), n, dim, dtype, labels, checksum, keep)

    @property
    def n(self) -> int:
        return int(self.meta["n"])

    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    def rows(self, start: int = 0, stop: int | None = None, device: torch.device | str = "cpu") -> Tensor:
        """Rows ``q_start … q_stop-1`` as float64 (b, D) on ``device``."""
        stop = self.n if stop is None else stop
        scaled, scale = self.stored(device)
        part = scaled[start:stop]
        part = torch.from_numpy(np.array(part)) if isinstance(part, np.ndarray) else part
        return part.to(device, torch.float64) * scale[start:stop].to(device)[:, None]

    def stored(self, device: torch.device | str) -> tuple[Tensor | np.ndarray, Tensor]:
        """The stored rows ``q_i / s_i`` (n, D) and scales ``s_i`` (n,): the copy kept on ``device`` as it was
        written (``PoolWriter(keep=True)``), else the memory-mapped file and its scales."""
        if self.kept is not None and self.kept[0].device == torch.device(device):
            return self.kept
        return self.scaled, torch.from_numpy(self.scale)

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

        ``G_ij = s_i t_j Σ_k Q̃_ik R̃_jk`` from the stored scaled rows: the copies kept on ``device``
        where there are, with no trip through the host, else the files, of which only a column chunk of each
        pool is in memory at a time (docs/science.md §4). The same numbers either way.
        """
        pools = [self if other is None else other for other in others]
        for b in pools:
            if b.dim != self.dim:
                raise ValueError(
                    f"pools of different lengths: {self.path} has D = {self.dim}, {b.path} has D = {b.dim}"
                )
        (a_rows, a_scale), stored = self.stored(device), [b.stored(device) for b in pools]
        others_rows = [None if o is None else rows for o, (rows, _) in zip(others, stored)]
        crosses = cross_grams(a_rows, others_rows, chunk_cols, device)
        a_scale = a_scale.to(device)
        return [cross * a_scale[:, None] * scale.to(device)[None, :] for cross, (_, scale) in zip(crosses, stored)]


class PoolWriter:
    """Fills a ``GradientPool`` batch by batch (``write``, appended to the ``.npy`` file, which is
    not memory-mapped: written rows leave the process), then ``finish`` makes it readable.

    With ``keep``, the stored rows stay where they were computed instead (no copy to the host per batch)
    and go to the file in ``finish``, which returns the pool with that copy (``GradientPool.kept``): its
    statistics are computed there, and the file holds the same bytes."""

    def __init__(
        self, path: Path, n: int, dim: int, dtype: str, labels: dict, checksum: bool = True, keep: bool = False
    ):
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
        self.kept: list[tuple[Tensor, Tensor]] | None = [] if keep else None  # (stored rows, scales) per batch

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
        # float32 quotient of float32 rows can land on a float16 midpoint and round the other way),
        # rounded once to float16 on the rows' device (``to_half``): the host receives float16.
        wide = rows.dtype == torch.float64 or self.dtype == np.float16
        rows = rows.detach().double() if wide else rows.detach().float()
        scale = rows.abs().amax(dim=1)
        scale = torch.where(scale > 0, scale, 1.0)  # (b,), exact
        quotient = rows / scale[:, None]
        stored = to_half(quotient) if self.dtype == np.float16 else quotient.to(TORCH_DTYPES[self.dtype.name])
        if self.kept is not None:
            self.kept.append((stored, scale.double()))
        else:
            self._write_host(stored, scale, self.filled)
        self.filled = stop

    def _write_host(self, stored: Tensor, scale: Tensor, start: int) -> None:
        self.file.write(stored.cpu().numpy().tobytes())
        self.scale[start : start + len(scale)] = scale.double().cpu().numpy()

    def finish(self) -> GradientPool:
        """Flush; write the scales, then the metadata with each file's record; return the pool for reading."""
        if self.filled != self.shape[0]:
            raise ValueError(f"pool {self.path} got {self.filled} of its {self.shape[0]} rows")
        kept = None
        if self.kept is not None:
            kept = tuple(torch.cat(parts) for parts in zip(*self.kept))
            for start in range(0, self.shape[0], HOST_ROWS):  # the host holds HOST_ROWS rows at a time
                self._write_host(kept[0][start : start + HOST_ROWS], kept[1][start : start + HOST_ROWS], start)
        self.file.close()
        np.save(self.path.with_suffix(".scale.npy"), self.scale)
        files = {
            p.name: file_record(p, self.checksum)
            for p in (self.path.with_suffix(suffix) for suffix in (".npy", ".scale.npy"))
        }
        self.path.with_suffix(".json").write_text(json.dumps({**self.meta, "files": files}, indent=1))
        pool = GradientPool(self.path, verify=False)  # just written
        pool.kept = kept
        return pool
