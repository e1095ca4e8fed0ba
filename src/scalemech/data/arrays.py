"""images: a user's own classified images, one ``.npz`` file of arrays (``numpy.savez``), under a name of
their own (``datasets: {<name>: {source: images, path: <file>.npz}}``).

The file holds, read without pickle (no code runs from it):

- ``train_x``, ``test_x``: the pixels, ``uint8`` of shape ``(N, H, W)`` (one channel) or ``(N, C, H, W)``,
  square (``H = W``), every image of one shape;
- ``train_y``, ``test_y``: integer labels ``0 … K-1``, shape ``(N,)``;
- or, instead of the four, ``x`` and ``y``, split by a stratified, seeded draw of ``test_fraction`` of each
  class (default 0.2, ``split_seed`` default 0) into the test split;
- optionally ``classes``: the ``K`` class names (strings), label ``i`` meaning ``classes[i]``.

Config keys: ``path`` (required), ``test_fraction``, ``split_seed``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .images import array_source, stratified_indices, write_image_dataset
from .store import SPLITS, DataError, file_digest

KIND = "image"
CONFIG_KEYS = ("path", "test_fraction", "split_seed")
REQUIRED = ("path",)
SPLIT_ARRAYS = ("train_x", "train_y", "test_x", "test_y")


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path``, loaded without pickle; ``DataError`` naming the file when
    it is missing or not an ``.npz`` of plain arrays."""
    if not path.is_file():
        raise DataError(f"images: {path} {'is a directory' if path.is_dir() else 'does not exist'}; set `path:` "
                        "to an .npz of train_x, train_y, test_x, test_y (or x, y)")  # fmt: skip
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    except (OSError, ValueError) as err:  # not a zip of .npy, or an object array (pickle refused)
        raise DataError(f"images: {path} is not an .npz of plain arrays ({err})") from None


def _images(x: np.ndarray, where: str) -> np.ndarray:
    """``x`` as ``(N, C, H, W)`` uint8 (a channel axis added to ``(N, H, W)``)."""
    if x.dtype != np.uint8 or x.ndim not in (3, 4):
        raise DataError(f"{where}: {x.dtype} of shape {x.shape}; allowed: uint8 of shape (N, H, W) or (N, C, H, W)")
    return x[:, None] if x.ndim == 3 else x


def _labels(y: np.ndarray, n: int, where: str) -> np.ndarray:
    if not np.issubdtype(y.dtype, np.integer) or y.shape != (n,):
        raise DataError(f"{where}: {y.dtype} of shape {y.shape}; allowed: integer labels of shape ({n},)")
    return y.astype(np.int64)


def _splits(arrays: dict[str, np.ndarray], cfg: dict, where: str) -> tuple[dict, dict]:
    """``(x, y)`` per split: the file's own splits, or ``x``/``y`` split by ``test_fraction``."""
    if set(SPLIT_ARRAYS) <= set(arrays):
        x = {s: _images(arrays[f"{s}_x"], f"{where}: {s}_x") for s in SPLITS}
        return x, {s: _labels(arrays[f"{s}_y"], len(x[s]), f"{where}: {s}_y") for s in SPLITS}
    if not {"x", "y"} <= set(arrays):
        raise DataError(f"{where}: holds {sorted(arrays)}; allowed: train_x, train_y, test_x, test_y, or x and y")
    x, y = _images(arrays["x"], f"{where}: x"), _labels(arrays["y"], len(arrays["x"]), f"{where}: y")
    fraction = float(cfg.get("test_fraction", 0.2))
    if not 0.0 < fraction < 1.0:
        raise DataError(f"{where}: test_fraction {fraction} must lie strictly between 0 and 1")
    test = np.zeros(len(y), dtype=bool)
    test[stratified_indices(y, max(1, round(fraction * len(y))), int(cfg.get("split_seed", 0)), where)] = True
    return {"train": x[~test], "test": x[test]}, {"train": y[~test], "test": y[test]}


def prepare(name: str, cfg: dict, directory: Path, offline: bool) -> dict:
    """Write the images of ``cfg['path']`` into ``directory``; return the manifest fields."""
    path = Path(cfg["path"])
    arrays = read_npz(path)
    x, y = _splits(arrays, cfg, str(path))
    labels = np.concatenate([y["train"], y["test"]])
    classes = [str(c) for c in arrays["classes"]] if "classes" in arrays else [str(k) for k in range(labels.max() + 1)]
    if labels.min() < 0 or labels.max() >= len(classes) or not all(len(x[s]) for s in SPLITS):
        raise DataError(
            f"{path}: labels {labels.min()}..{labels.max()} for {len(classes)} classes, splits of "
            f"{[len(x[s]) for s in SPLITS]} images; allowed: labels 0..{len(classes) - 1}, both splits non-empty"
        )
    if x["train"].shape[1:] != x["test"].shape[1:]:
        shapes = f"train images {x['train'].shape[1:]}, test images {x['test'].shape[1:]}"
        raise DataError(f"{path}: {shapes}; allowed: one shape")
    info = {"type": "npz", "path": str(path), "sha256": file_digest(path)}
    return write_image_dataset(directory, array_source(x, y, classes, info), None, int(cfg.get("split_seed", 0)))
