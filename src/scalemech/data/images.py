"""Image datasets: one writer for every image source, plus the helpers sources share.

A source (CIFAR pickle tarball, image-folder archive, ImageNet directory, MNIST array) is an
``ImageSource``: class names, labels of both splits, and a reader that decodes the chosen
images one at a time. ``write_image_dataset`` picks the (optionally stratified-subset)
indices, streams the pixels into ``{split}_x.npy`` memmaps and records class counts and the
per-channel mean/std of the train split (on the [0, 1] scale) for ``normalize_images``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

import numpy as np
from PIL import Image

from .store import SPLITS, DataError, open_array

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")  # compared lower-case; covers ImageNet's .JPEG

# (split, sorted indices into labels[split]) -> (position in indices, (C,H,W) uint8, name)
Reader = Callable[[str, np.ndarray], Iterator[tuple[int, np.ndarray, str]]]


@dataclass
class ImageSource:
    """Everything known about an image dataset before its pixels are decoded."""

    classes: list[str]  # sorted class names; label i means classes[i]
    labels: dict[str, np.ndarray]  # "train"/"test" -> (N,) int64
    read: Reader  # decodes the selected images of a split, in any order
    info: dict  # the manifest's "source" entry (type, path, sha256, ...)


def array_source(x: dict[str, np.ndarray], y: dict[str, np.ndarray], classes: list[str], info: dict) -> ImageSource:
    """An ``ImageSource`` over in-memory arrays ``x[split]`` (N,C,H,W) uint8 and ``y[split]`` (N,)."""

    def read(split: str, indices: np.ndarray) -> Iterator[tuple[int, np.ndarray, str]]:
        for k, i in enumerate(indices):
            yield k, x[split][i], f"{split}[{i}]"

    return ImageSource(classes, {s: np.asarray(y[s], dtype=np.int64) for s in SPLITS}, read, info)


def stratified_indices(labels: np.ndarray, n: int, seed: int, what: str) -> np.ndarray:
    """Sorted indices of ``n`` of ``labels``: each class gets its share ``n * N_c / N``
    (largest remainder rounding), drawn uniformly within the class with generator ``seed``."""
    if not 0 < n <= len(labels):
        raise DataError(f"{what}: asked for {n} examples, allowed 1..{len(labels)}")
    classes, counts = np.unique(labels, return_counts=True)
    quota = n * counts / len(labels)
    take = np.floor(quota).astype(np.int64)
    take[np.argsort(-(quota - take), kind="stable")[: n - take.sum()]] += 1
    rng = np.random.default_rng(seed)
    chosen = [rng.permutation(np.flatnonzero(labels == c))[:t] for c, t in zip(classes, take)]
    return np.sort(np.concatenate(chosen))


def folder_layout(
    paths: Iterable[str], splits: tuple[str, str], where: str
) -> tuple[list[str], dict[str, list[str]], dict[str, np.ndarray]]:
    """Classes, image paths and labels of an image-folder layout ``.../{split}/<class>/<file>``.

    ``paths`` are relative POSIX paths (archive members or files under a root); files without an
    image suffix, hidden files and paths outside ``splits`` are ignored. Returns sorted class
    names and, per split, the paths sorted by (class, path) with their labels. Raises
    ``DataError`` naming ``where`` if a split is empty or the splits' class folders differ.
    """
    by_split: dict[str, list[tuple[str, str]]] = {s: [] for s in splits}
    for path in paths:
        parts = PurePosixPath(path).parts
        if (
            len(parts) >= 3
            and parts[-3] in by_split
            and not parts[-1].startswith(".")
            and PurePosixPath(path).suffix.lower() in IMAGE_SUFFIXES
        ):
            by_split[parts[-3]].append((parts[-2], path))
    train, test = ({c for c, _ in by_split[s]} for s in splits)
    if not train:
        raise DataError(f"{where}: no images under {splits[0]}/<class>/ (allowed suffixes {IMAGE_SUFFIXES})")
    if train != test:
        raise DataError(
            f"{where}: class folders differ between {splits[0]}/ and {splits[1]}/: "
            f"missing in {splits[1]}/: {sorted(train - test)}, "
            f"missing in {splits[0]}/: {sorted(test - train)}"
        )
    classes = sorted(train)
    label_of = {c: i for i, c in enumerate(classes)}
    files, labels = {}, {}
    for split, entries in by_split.items():
        entries.sort()
        files[split] = [p for _, p in entries]
        labels[split] = np.array([label_of[c] for c, _ in entries], dtype=np.int64)
    return classes, files, labels


def decode_image(file: IO[bytes], name: str, resolution: int | None = None) -> np.ndarray:
    """RGB pixels (3,H,W) uint8 of an encoded image; with ``resolution`` r, the shorter side is
    resized to r (bilinear, antialiased) and the centre r x r crop is kept."""
    try:
        with Image.open(file) as img:
            if resolution is not None:
                img.draft("RGB", (resolution, resolution))  # JPEG: decode at reduced scale when possible
                scale = resolution / min(img.size)
                w, h = max(resolution, round(img.width * scale)), max(resolution, round(img.height * scale))
                img = img.convert("RGB").resize((w, h), Image.Resampling.BILINEAR)
                left, top = (w - resolution) // 2, (h - resolution) // 2
                img = img.crop((left, top, left + resolution, top + resolution))
            pixels = np.asarray(img.convert("RGB"), dtype=np.uint8)  # (H, W, 3)
    except OSError as err:
        raise DataError(f"{name}: cannot decode image ({err})") from err
    return pixels.transpose(2, 0, 1)  # (3, H, W)


def channel_stats(x: np.ndarray, chunk: int = 2048) -> dict[str, list[float]]:
    """Per-channel mean and std (population) of uint8 images (N,C,H,W) on the [0, 1] scale,
    accumulated in float64 over chunks of ``chunk`` images."""
    total = np.zeros(x.shape[1])
    total_sq = np.zeros(x.shape[1])
    for start in range(0, len(x), chunk):
        block = x[start : start + chunk].astype(np.float64) / 255.0
        total += block.sum(axis=(0, 2, 3))
        total_sq += np.square(block).sum(axis=(0, 2, 3))
    count = x.shape[0] * x.shape[2] * x.shape[3]
    mean = total / count
    std = np.sqrt(np.maximum(total_sq / count - mean**2, 0.0))
    return {"mean": mean.tolist(), "std": std.tolist()}


def _write_split(directory, split: str, source: ImageSource, indices: np.ndarray) -> np.ndarray:
    """Stream the images ``indices`` of ``split`` into ``{split}_x.npy``/``{split}_y.npy``; return y."""
    labels = source.labels[split][indices]
    x = None
    filled = np.zeros(len(indices), dtype=bool)
    for k, pixels, name in source.read(split, indices):
        if x is None:
            x = open_array(directory, f"{split}_x", (len(indices), *pixels.shape), "uint8")  # (N, C, H, W)
        if pixels.shape != x.shape[1:]:
            raise DataError(f"{name}: image shape {pixels.shape}, expected {x.shape[1:]} like the first image")
        x[k] = pixels
        filled[k] = True
    if x is None or not filled.all():
        raise DataError(
            f"{source.info.get('path', source.info['type'])}: {int(filled.sum())} of "
            f"{len(indices)} {split} images could be read"
        )
    x.flush()
    open_array(directory, f"{split}_y", labels.shape, "int64")[:] = labels
    return labels


def write_image_dataset(directory, source: ImageSource, subset: dict | None, split_seed: int) -> dict:
    """Write both splits of ``source`` (all, or a stratified ``subset`` {split: n}) into
    ``directory``; return the manifest fields (classes, class counts, stats, sizes, source)."""
    subset = subset or {}
    unknown = set(subset) - set(SPLITS)
    if unknown:
        raise DataError(f"subset: unknown split(s) {sorted(unknown)}; allowed {list(SPLITS)}")
    counts = {}
    for split in SPLITS:
        labels = source.labels[split]
        indices = (
            stratified_indices(labels, int(subset[split]), split_seed, f"subset.{split}")
            if split in subset
            else np.arange(len(labels))
        )
        counts[split] = np.bincount(
            _write_split(directory, split, source, indices), minlength=len(source.classes)
        ).tolist()
    train_x = np.load(directory / "train_x.npy", mmap_mode="r")
    _, channels, height, width = train_x.shape
    if height != width:
        raise DataError(
            f"{source.info.get('path', source.info['type'])}: images are {height}x{width}; "
            "only square images are allowed (set a resolution to centre-crop)"
        )
    return {
        "kind": "image",
        "source": source.info,
        "split_seed": split_seed,
        "classes": source.classes,
        "num_classes": len(source.classes),
        "class_counts": counts,
        "in_channels": channels,
        "image_size": height,
        "stats": channel_stats(train_x),
    }
