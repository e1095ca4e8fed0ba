"""``scalemech certify``: ``d_align`` and the expansion certificate of a user's own checkpoint.

Per insertion point of a scalemech ``model.pt`` or a Hugging Face causal LM, on a prepared
dataset or a text file: the alignment statistics with intervals, ``B_exact``/``B_align`` at the
user's ``(M, K)`` and the first-order gain of a zero-initialized block inserted there
(docs/science.md §3, §5): where growing the model can pay off.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import pandas as pd
import torch

from .data import load_prepared, prepare_dataset
from .device import resolve_device
from .models import ResidualModel, build_model, load_model

CERTIFICATE_COLUMNS = ["point", "point_index", "n", "dim", "mu_sq", "d_par", "d_par_lo", "d_par_hi", "d_2", "d_2_lo",
                       "d_2_hi", "d_align", "d_align_lo", "d_align_hi", "M", "K", "b_exact", "b_align",
                       "block_grad_norm"]


def _certify_model(checkpoint: str, family: str | None, block_size: int | None,
                   device: torch.device) -> ResidualModel:
    """A scalemech ``model.pt``, or a Hugging Face hub name / local directory (``family`` hf)."""
    path = Path(checkpoint)
    if path.suffix == ".pt" and family in (None, "resnet", "llama", "tvresnet"):
        return load_model(path, map_location=device)[0]
    if family not in (None, "hf"):
        raise ValueError(f"--family {family} needs a scalemech model.pt, got {checkpoint!r}")
    spec = {"family": "hf", "checkpoint": checkpoint, "local_files_only": path.is_dir()}
    if block_size:
        spec["block_size"] = block_size
    return build_model(spec).to(device)


def _certify_data(data: str, scratch: Path):
    """A prepared dataset directory, or a UTF-8 text file (judged by its first MiB) prepared here
    as a byte-level corpus; a binary file is refused."""
    path = Path(data)
    if (path / "manifest.json").is_file():
        return load_prepared(path)
    if path.is_file():
        with path.open("rb") as f:
            head = f.read(1 << 20)
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head)  # not final: a character cut at 1 MiB is fine
            binary = b"\0" in head
        except UnicodeDecodeError:
            binary = True
        if binary:
            raise ValueError(f"--data {data!r} is a binary file, not UTF-8 text; give a UTF-8 text file or a "
                             "prepared dataset directory (with manifest.json)")
        prepare_dataset("corpus", {"path": str(path)}, scratch / "corpus")
        return load_prepared(scratch / "corpus")
    raise FileNotFoundError(f"--data {data!r} is neither a prepared dataset directory (with manifest.json) "
                            "nor a text file")


def certify(checkpoint: str, data: str, family: str | None = None, points: str = "all", pool: int = 256,
            M: int = 16, K: int = 16, batch_size: int = 16, device: str = "auto", block_size: int | None = None,
            seed: int = 0) -> pd.DataFrame:
    """Per insertion point of a user's model: ``‖μ‖²``, ``d_∥``, ``d_2``, ``d_align`` with jackknife
    intervals (train pool), ``B_exact``/``B_align`` at ``(M, K)`` and the first-order gain
    ``‖∇_θ L‖`` of a zero-initialized block inserted there (Paper W, Theorem 1; Paper D, Condition 1).
    A point where ``B_align`` is small and the block gradient large is where growing the model can pay off.

    The sizes are checked (``ValueError``) before anything is loaded: ``pool >= 5`` (the jackknife
    intervals' minimum), ``1 <= M, K <= pool``, ``batch_size >= 1``, ``block_size >= 2`` when given;
    ``pool`` against an image dataset's splits once it is loaded (a text split's window count is
    checked when the pools are drawn, still before any gradient is captured)."""
    import tempfile

    from . import stats
    from .experiments import measure
    from .experiments.misalign import alignment_moments

    problems = [f"{name} = {value} must be at least {low}" for name, value, low in
                (("pool", pool, 5), ("M", M, 1), ("K", K, 1), ("batch_size", batch_size, 1)) if value < low]
    problems += [f"{name} = {value} must be at most pool = {pool}" for name, value in (("M", M), ("K", K))
                 if value > pool]
    if block_size is not None and block_size < 2:
        problems.append(f"block_size = {block_size} must be at least 2")
    if problems:
        raise ValueError("certify: " + "; ".join(problems))
    torch_device = resolve_device(device)
    rule: str | int | list[str] = points
    if points != "all":
        rule = int(points) if points.isdigit() else points.split(",")
    with tempfile.TemporaryDirectory() as scratch:
        prepared = _certify_data(data, Path(scratch))
        if prepared.kind == "image" and pool > min(len(prepared.train_x), len(prepared.test_x)):
            raise ValueError(f"certify: pool = {pool} is larger than the splits of {data!r} "
                             f"({len(prepared.train_x)} train, {len(prepared.test_x)} test examples)")
        model = _certify_model(checkpoint, family, block_size, torch_device)
        frames = measure(model, prepared, {"model": checkpoint}, Path(scratch) / "pools", points=rule,
                         train_pool=pool, test_pool=pool, batch_size=batch_size, covmat_points=0,
                         pool_dtype="float32", interval_level=0.9, null_draws=2, seed=seed, device=torch_device)
    dalign = frames["dalign"].query("split == 'train' and view == 'full'")
    signal = frames["signal"].query("split == 'train'")[["point", "block_grad_norm"]]
    moments = alignment_moments(dalign)
    rows = []
    for row in dalign.to_dict("records"):
        bound = stats.certificates(moments[row["point"], "full", "train"], M, K)
        rows.append({**row, "M": M, "K": K, "b_exact": bound.b_exact, "b_align": bound.b_align})
    return pd.DataFrame(rows).merge(signal, on="point")[CERTIFICATE_COLUMNS]


def format_certificate(frame: pd.DataFrame) -> str:
    """The certificate table as aligned text for the terminal."""
    return frame.to_string(index=False, float_format=lambda v: f"{v:.4g}")
