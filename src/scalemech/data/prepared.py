"""A prepared dataset as tensors: loading (checked against the manifest), pools, text
windows (nanoGPT's ``get_batch``) and image normalization with the stored train statistics."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from .store import SPLITS, DataError, load_array, read_manifest

ARRAYS = {"image": ("train_x", "train_y", "test_x", "test_y"), "text": ("train_x", "test_x")}


@dataclass
class Prepared:
    """Train/test tensors of one dataset (memory-mapped, on the CPU) and its manifest."""

    name: str
    kind: str  # "image" | "text"
    train_x: torch.Tensor  # image: (N, C, H, W) uint8; text: (L,) uint8
    train_y: torch.Tensor | None  # image: (N,) int64; text: None
    test_x: torch.Tensor
    test_y: torch.Tensor | None
    manifest: dict
    num_classes: int | None = None  # image only
    in_channels: int | None = None  # image only
    image_size: int | None = None  # image only (square images)
    vocab_size: int | None = None  # text only: 256 (bytes)

    @property
    def fingerprint(self) -> str:
        """sha256 over the manifest's ``(file, sha256)`` records: changes whenever a stored array does
        (a new split seed, subset or source), not when only a source path moves."""
        records = sorted((name, record["sha256"]) for name, record in self.manifest.get("files", {}).items())
        return hashlib.sha256(repr(records).encode()).hexdigest()

    def draw(self, split: str, n: int, seed: int, block_size: int | None = None) -> torch.Tensor:
        """The index of ``n`` examples of ``split`` drawn with generator ``seed`` (same seed, same draw).

        Images: ``n`` distinct positions in the split. Text: the starts of ``n`` non-overlapping
        windows of ``block_size + 1`` bytes (the windows tile the stream from a random shift).
        """
        if split not in SPLITS:
            raise ValueError(f"split {split!r}; allowed {SPLITS}")
        x = getattr(self, f"{split}_x")
        generator = torch.Generator().manual_seed(seed)
        if self.kind == "image":
            if n > len(x):
                raise DataError(f"{self.name}: pool of {n} {split} images, the split holds {len(x)}")
            return torch.randperm(len(x), generator=generator)[:n]
        if block_size is None or block_size < 1:
            raise ValueError(f"{self.name}: text pools need a positive block_size, got {block_size}")
        window = block_size + 1
        slots = len(x) // window
        if n > slots:
            raise DataError(
                f"{self.name}: pool of {n} windows of {window} bytes, the {split} split "
                f"({len(x)} bytes) holds {slots} non-overlapping ones"
            )
        shift = torch.randint(len(x) - slots * window + 1, (), generator=generator)
        return shift + window * torch.randperm(slots, generator=generator)[:n]

    def take(self, split: str, index: torch.Tensor, block_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The examples at ``index`` (from ``draw``): images ``(x (n,C,H,W) uint8, y (n,) int64)``;
        text ``text_windows`` of ``block_size`` at the starts ``index``, int64 (n, block_size)."""
        x, y = getattr(self, f"{split}_x"), getattr(self, f"{split}_y")
        if self.kind == "image":
            return x[index], y[index]
        return text_windows(x, index, block_size)

    def pool(self, split: str, n: int, seed: int, block_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``take(split, draw(split, n, seed, block_size), block_size)``: ``n`` fixed examples."""
        return self.take(split, self.draw(split, n, seed, block_size), block_size)


def text_windows(stream: torch.Tensor, starts: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-byte targets at ``starts``: ``x[b, t] = stream[starts[b] + t]``,
    ``y[b, t] = stream[starts[b] + t + 1]``, both int64 (B, block_size), on ``stream.device``.

    ``starts`` given on the CPU are range-checked (``ValueError``) before moving to the stream's
    device; starts already on an accelerator are not, since the check would synchronize every batch.
    """
    checkable = starts.device.type == "cpu" and len(starts) > 0
    if checkable and (starts.min() < 0 or starts.max() + block_size + 1 > len(stream)):
        raise ValueError(
            f"window starts must lie in [0, {len(stream) - block_size - 1}] for a stream of "
            f"{len(stream)} and block_size {block_size}; got [{starts.min()}, {starts.max()}]"
        )
    starts = starts.to(device=stream.device, dtype=torch.long)
    offsets = torch.arange(block_size + 1, device=stream.device)
    windows = stream[starts[:, None] + offsets].long()  # (B, T+1)
    return windows[:, :-1], windows[:, 1:]  # (B, T), (B, T)


def token_starts(n_tokens: int, n: int, block_size: int, seed: int) -> torch.Tensor:
    """Starts of ``n`` windows of ``block_size + 1`` tokens at random non-overlapping offsets.

    Offsets ``s_k = k·(block_size + 1) + u_(k)`` with ``u`` sorted uniform draws from
    ``[0, N − n·(block_size + 1)]``, so consecutive windows never overlap; returned in a seeded
    random order, shape ``(n,)``.
    """
    window = block_size + 1
    slack = n_tokens - n * window
    if n < 1 or block_size < 1 or slack < 0:
        raise ValueError(
            f"cannot cut n={n} windows of block_size+1={window} tokens from a stream of "
            f"{n_tokens} tokens; need n >= 1, block_size >= 1 and n*(block_size+1) <= N"
        )
    generator = torch.Generator().manual_seed(seed)
    shifts = torch.randint(0, slack + 1, (n,), generator=generator).sort().values  # (n,)
    starts = torch.arange(n) * window + shifts
    return starts[torch.randperm(n, generator=generator)]


def normalize_images(x_uint8: torch.Tensor, manifest_or_stats: dict) -> torch.Tensor:
    """``(x / 255 - mean_c) / std_c`` as float32 for uint8 images (..., C, H, W), with the
    per-channel train statistics of a manifest (its ``stats``) or a ``{"mean", "std"}`` dict (lists, or
    float32 tensors already on the images' device: no copy)."""
    if x_uint8.dtype != torch.uint8:
        raise ValueError(f"normalize_images expects uint8 pixels, got {x_uint8.dtype}")
    stats = manifest_or_stats.get("stats", manifest_or_stats)
    mean = torch.as_tensor(stats["mean"], dtype=torch.float32, device=x_uint8.device)[:, None, None]  # (C, 1, 1)
    std = torch.as_tensor(stats["std"], dtype=torch.float32, device=x_uint8.device)[:, None, None]
    if x_uint8.dim() < 3 or x_uint8.shape[-3] != len(mean):
        raise ValueError(f"images of shape {tuple(x_uint8.shape)} do not have the {len(mean)} channels of the stats")
    return (x_uint8.float() / 255.0 - mean) / std


def load_prepared(out_dir: str | Path) -> Prepared:
    """The dataset prepared in ``out_dir``, every file checked against ``manifest.json``
    (``DataError`` naming the file on a mismatch)."""
    manifest = read_manifest(out_dir)
    if manifest.get("kind") not in ARRAYS:
        raise DataError(f"{Path(out_dir) / 'manifest.json'}: kind {manifest.get('kind')!r}; allowed {sorted(ARRAYS)}")
    arrays = {name: torch.from_numpy(load_array(out_dir, name, manifest)) for name in ARRAYS[manifest["kind"]]}
    if manifest["kind"] == "image":
        return Prepared(
            manifest["name"],
            "image",
            arrays["train_x"],
            arrays["train_y"],
            arrays["test_x"],
            arrays["test_y"],
            manifest,
            num_classes=manifest["num_classes"],
            in_channels=manifest["in_channels"],
            image_size=manifest["image_size"],
        )
    return Prepared(
        manifest["name"],
        "text",
        arrays["train_x"],
        None,
        arrays["test_x"],
        None,
        manifest,
        vocab_size=manifest["vocab_size"],
    )
