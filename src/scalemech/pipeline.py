"""Job-level functions: what one Snakemake rule (or one CLI command) does, end to end.

Each takes explicit paths and settings, loads what it needs through the library, and
writes its outputs; ``workflow/scripts/*.py`` and ``scalemech.cli`` are thin callers.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import sys
import traceback
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd
import torch

from . import tables
from .data import load_prepared, prepare_dataset
from .device import resolve_device
from .models import ResidualModel, build_model, load_model
from .seeding import model_identity

log = logging.getLogger("scalemech")


@contextlib.contextmanager
def job_context(log_path: str | None, threads: int) -> Iterator[None]:
    """Send progress bars and log records to ``log_path`` and use ``threads`` torch threads.

    An exception leaving the block is written to ``log_path`` (a one-line summary, then the
    traceback) before it propagates, so the log a failed job points to says why it failed.
    """
    torch.set_num_threads(threads)
    stream = open(log_path, "a", buffering=1) if log_path else sys.stderr
    handler = logging.StreamHandler(stream)
    logging.basicConfig(handlers=[handler], level=logging.INFO, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        with contextlib.redirect_stderr(stream):
            yield
    except Exception as err:
        if log_path:
            summary = " ".join(str(err).split()) or "(no message)"
            stream.write(f"job failed: {type(err).__name__}: {summary}\n{''.join(traceback.format_exception(err))}")
        raise
    finally:
        if log_path:
            logging.getLogger().removeHandler(handler)  # no records to a closed file
            stream.close()


def complete_spec(spec: dict[str, Any], data) -> dict[str, Any]:
    """Add what the data decide (input channels, classes, vocabulary) to a grid's model spec."""
    if data.kind == "image":
        return {**spec, "in_channels": data.in_channels, "num_classes": data.num_classes}
    return {**spec, "vocab_size": data.vocab_size}


def model_keys(base_keys: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Table keys of a model: the job's keys with depth and width as the model's spec states them."""
    return {**base_keys, "depth": spec["depth"], "width": spec["width"]}


# -- data and training --------------------------------------------------------------------
def prepare(dataset: str, cfg: dict[str, Any], out_dir: str, offline: bool) -> None:
    manifest = prepare_dataset(dataset, cfg, out_dir, offline=offline)
    log.info("prepared %s: %s", dataset, json.dumps(manifest.get("shapes", {})))


def train_model(spec: dict[str, Any], recipe: dict[str, Any], seed: int, data_dir: str, out_dir: str,
                checkpoint_dir: str, keys: dict[str, Any], device: str, checkpoint_every: int,
                compile: bool) -> dict[str, Any]:
    """Train one grid model; ``metrics.json`` also carries the model's table keys."""
    from .train import Recipe, train

    data = load_prepared(data_dir)
    full_spec = complete_spec(spec, data)
    metrics = train(full_spec, Recipe.from_dict(recipe), data, Path(out_dir), Path(checkpoint_dir), seed=seed,
                    device=device, checkpoint_every=checkpoint_every, compile=compile)
    metrics = {**model_keys(keys, full_spec), **metrics}
    (Path(out_dir) / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


def pin_pretrained(spec: dict[str, Any], out: str) -> None:
    """Record a pretrained checkpoint as ``model.pt`` (its spec only; weights stay in the hub cache)."""
    model = build_model(spec)
    full_spec = {**spec, "depth": model.depth, "width": model.width}
    torch.save({"spec": full_spec}, out)
    log.info("pinned %s at revision %s: depth %d, width %d", spec["checkpoint"], spec.get("revision"),
             model.depth, model.width)


def training_table(metrics_paths: Sequence[str], out: str) -> None:
    rows = [json.loads(Path(p).read_text()) for p in metrics_paths]
    tables.write_table(pd.DataFrame(rows), out, "training")


# -- measurement and experiments ----------------------------------------------------------
def _loaded(model_path: str, data_dir: str, base_keys: dict[str, Any], device: str):
    """``(model, data, keys, device)`` for a model job: the model in eval mode on its device."""
    torch_device = resolve_device(device)
    model, payload = load_model(model_path, map_location=torch_device)
    return model, load_prepared(data_dir), model_keys(base_keys, payload["spec"]), torch_device


def measure_model(model_path: str, data_dir: str, base_keys: dict[str, Any], settings: dict[str, Any], device: str,
                  stats_out: str, covmats_out: str, pools_dir: str) -> None:
    """E2/E3/E5 of one model: ``stats_out`` holds the covariance, signal and dalign rows
    (column ``table`` says which), ``covmats_out`` the heat-map matrices, ``pools_dir`` the gradients."""
    from .experiments import measure, select_points

    model, data, keys, torch_device = _loaded(model_path, data_dir, base_keys, device)
    points = select_points(model, settings["points"])
    covmat_points = select_points(model, min(settings["covmat_points"], len(points))) if settings["covmat_points"] else []
    frames = measure(model, data, points, settings["train_pool"], settings["test_pool"], settings["batch_size"],
                     torch_device, keys, covmat_points=[p for p in covmat_points if p in points], pool_dir=pools_dir,
                     dtype=settings["pool_dtype"], pool_seed=settings["seed"], null_draws=settings["null_draws"],
                     level=settings["interval_level"])
    combined = pd.concat([frame.assign(table=name) for name, frame in frames.items() if name != "covmats"],
                         ignore_index=True)
    Path(stats_out).parent.mkdir(parents=True, exist_ok=True)
    combined.to_parquet(stats_out, index=False)
    tables.write_table(frames["covmats"], covmats_out, "covmats")


def stats_tables(stats_paths: Sequence[str], covmat_paths: Sequence[str], outputs: dict[str, str]) -> None:
    """Split the per-model measurement files into the covariance, signal and dalign tables."""
    combined = pd.concat([pd.read_parquet(p) for p in stats_paths], ignore_index=True)
    for name in ("covariance", "signal", "dalign"):
        rows = combined[combined["table"] == name]
        tables.write_table(rows[tables.columns(name)], outputs[name], name)
    covmats = pd.concat([pd.read_parquet(p) for p in covmat_paths], ignore_index=True)
    tables.write_table(covmats, outputs["covmats"], "covmats")


def misalign_model(stats_path: str, pools_dir: str, settings: dict[str, Any], out: str) -> None:
    """E6 at every measured point, over the (M, K) grid of ``settings['sizes']``."""
    from .experiments import misalignment

    from .stats import AlignmentStats

    measured = pd.read_parquet(stats_path)
    dalign = measured[measured["table"] == "dalign"].sort_values("point_index")
    keys = dalign.iloc[0][tables.model_keys()].to_dict()
    moments = {(row["point"], row["view"], row["split"]): AlignmentStats.from_moments(
        row["n"], row["dim"], row["mu_sq"], row["mu_four"], row["mu_sigma_mu"], row["tr_sigma_sq"])
        for row in dalign.to_dict("records")}
    grid = [(M, K) for M in settings["sizes"] for K in settings["sizes"]]
    frame = misalignment(pools_dir, list(dict.fromkeys(dalign["point"])), grid, keys, moments,
                         draws=settings["draws"], seed=settings["seed"])
    tables.write_table(frame, out, "misalignment")


def intervene_model(model_path: str, data_dir: str, pools_dir: str, base_keys: dict[str, Any],
                    settings: dict[str, Any], measure_settings: dict[str, Any], device: str, out: str) -> None:
    """E7 at every measured point and view, on the very pools ``measure_model`` stored."""
    from .experiments import draw_pools, intervene, select_points
    from .grads import to_device

    model, data, keys, torch_device = _loaded(model_path, data_dir, base_keys, device)
    pools = draw_pools(model, data, measure_settings["train_pool"], measure_settings["test_pool"],
                       measure_settings["seed"], model_identity(keys))
    frames = [intervene(model, point, view, pools["train"], pools["test"], pools_dir, measure_settings["batch_size"],
                        to_device(torch_device), keys, step_fractions=settings["step_fractions"])
              for point in select_points(model, measure_settings["points"]) for view in settings["views"]]
    tables.write_table(pd.concat(frames, ignore_index=True), out, "intervention")


def expand_model(model_path: str, data_dir: str, base_keys: dict[str, Any], settings: dict[str, Any],
                 measure_settings: dict[str, Any], device: str, out: str) -> None:
    """E8 at every measured point: insert, jumpboard, train, fall back, against a control."""
    from .experiments import ExpandConfig, draw_pools, expand, select_points
    from .grads import to_device

    model, data, keys, torch_device = _loaded(model_path, data_dir, base_keys, device)
    pools = draw_pools(model, data, settings["pool"], settings["pool"], settings["seed"], model_identity(keys))
    config = ExpandConfig(steps=settings["steps"], train_mode=settings["train_mode"], optimizer=settings["optimizer"],
                          lr=settings["lr"], batch_size=settings["batch_size"], seed=settings["seed"])
    points = select_points(model, settings.get("points", measure_settings["points"]))
    frames = [expand(model, point, pools["train"], pools["train"], pools["test"], config, to_device(torch_device), keys)
              for point in points]
    tables.write_table(pd.concat(frames, ignore_index=True), out, "expansion")


def cost(settings: dict[str, Any], out: str) -> None:
    """W5: time the Gram U-statistics against the covariance at each configured D."""
    from .cost import cost_table

    tables.write_table(cost_table(settings["dims"], settings["n"]), out, "benchmarks")


def concat_table(paths: Sequence[str], out: str, table: str) -> None:
    """One table from the per-model files of an experiment."""
    tables.write_table(pd.concat([tables.read_table(p, table) for p in paths], ignore_index=True), out, table)


# -- certify a user's own checkpoint ------------------------------------------------------
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
    from .experiments import measure, select_points

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
        chosen = select_points(model, rule)
        frames = measure(model, prepared, chosen, pool, pool, batch_size, torch_device, {"model": checkpoint},
                         pool_dir=Path(scratch) / "pools", dtype="float32", pool_seed=seed, null_draws=2)
    dalign = frames["dalign"].query("split == 'train' and view == 'full'")
    signal = frames["signal"].query("split == 'train'")[["point", "block_grad_norm"]]
    rows = []
    for row in dalign.to_dict("records"):
        moments = stats.AlignmentStats.from_moments(row["n"], row["dim"], row["mu_sq"], row["mu_four"],
                                                    row["mu_sigma_mu"], row["tr_sigma_sq"])
        bound = stats.certificates(moments, M, K)
        rows.append({**row, "M": M, "K": K, "b_exact": bound.b_exact, "b_align": bound.b_align})
    return pd.DataFrame(rows).merge(signal, on="point")[CERTIFICATE_COLUMNS]


def format_certificate(frame: pd.DataFrame) -> str:
    """The certificate table as aligned text for the terminal."""
    return frame.to_string(index=False, float_format=lambda v: f"{v:.4g}")
