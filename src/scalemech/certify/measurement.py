"""``certify``: the sizes checked, the inputs read (``inputs``), then per insertion point the train and
test pools captured as ``experiments.measure`` does and one row of statistics, certificates and the
verdict (``point_row``); beside the rows, a language model's mean loss on its train-pool windows and
``ln(vocab_size)``, the loss of a uniform guess (``loss_attrs``)."""

from __future__ import annotations

import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from .. import stats
from ..core.device import resolve_device
from ..core.integrity import file_size_limit, room, size_text
from ..data import Prepared
from ..data.store import SPLITS
from ..data.tokenized import TokenIds
from ..experiments.measure import capture_split, ready_pools, select_points
from ..gradients.pools import GradientPool, pool_path, remove_pool
from ..gradients.views import VIEWS, view_of
from ..models import build_model, load_model
from ..models.base import LanguageModel, ResidualModel
from ..stats import sizes
from ..stats.sizes import MIN_BLOCK_SIZE, certificate_size_problems
from .forgetting import FORGETTING_COLUMNS, RETAIN, forgetting_row, retain_pool
from .inputs import DATA_FORMS, checkpoint_name, checkpoint_spec, read_data
from .output import check_out, write_out
from .verdict import verdict

CERTIFICATE_COLUMNS = [
    "point",
    "point_index",
    "view",
    "n",
    "n_test",
    "dim",
    "mu_sq",
    "mu_sq_lo",
    "mu_sq_hi",
    "d_par",
    "d_par_lo",
    "d_par_hi",
    "d_2",
    "d_2_lo",
    "d_2_hi",
    "d_align",
    "d_align_lo",
    "d_align_hi",
    "M",
    "K",
    "mu_cross",
    "mu_cross_lo",
    "mu_cross_hi",
    "b_exact",
    "b_exact_ucb",
    "b_exact_common",
    "b_align",
    "block_grad_norm",
    "verdict",
    *FORGETTING_COLUMNS,
]
"""The full table (``--wide``, ``--out``): ``b_exact`` is the two-sample certificate (train and test
pools, ``stats.two_sample_certificate``) and ``b_exact_ucb`` its one-sided 95 % upper confidence bound
(``stats.TwoSampleBounds.certificate_ucb``), ``b_exact_common``/``b_align`` the one-sample ones of the
train pool (``stats.certificates``); ``mu_cross`` estimates ``μ_trᵀμ_te`` (the first-order gain on the
test pool of a step along ``−μ_tr``) with its jackknife interval; with a retain pool, the predicted
forgetting (``forgetting``)."""
INTERVAL_LEVEL = 0.9
"""Two-sided level of the jackknife intervals."""


@dataclass(frozen=True)
class Sampling:
    """How a certificate is measured: ``pool`` examples per split (train and test), the ``(M, K)`` of
    its two-sample bound, the capture's ``batch_size``, the gradient ``view``, and the ``seed`` of the
    pools' draw (with the model's identity). ``points_per_pass`` bounds how many points one capture pass
    carries (``measure_points``; None: all of them): the same numbers, in more passes over the pools."""

    pool: int = sizes.POOL
    M: int = sizes.M
    K: int = sizes.K
    batch_size: int = 16
    view: str = "full"
    seed: int = 0
    points_per_pass: int | None = None


def ran_on(model: ResidualModel, checkpoint: str, device: torch.device) -> str:
    """One line naming the model, the dtype its forward pass ran in and, on the CPU, torch's threads."""
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    kind = getattr(getattr(model, "config", None), "model_type", model.family)
    tokens = f", {model.block_size} tokens per example" if hasattr(model, "block_size") else ""
    threads = torch.get_num_threads()
    where = f"{device}, {threads} torch thread{'s' * (threads > 1)}" if device.type == "cpu" else str(device)
    return f"model: {checkpoint} ({kind}, {len(model.insertion_points())} points{tokens}), {dtype} on {where}"


def point_row(
    train: GradientPool,
    test: GradientPool,
    M: int,
    K: int,
    device: torch.device,
    retain: GradientPool | None = None,
) -> dict[str, Any]:
    """The row of one point from its train and test pools (one view): ``‖μ‖²``, ``d_∥``, ``d_2``,
    ``d_align`` with jackknife intervals from the train Gram matrix, the two-sample certificate from
    the train × test cross-Gram, the one-sample ones at ``(M, K)``, the train pool's ``block_grad_norm``
    and the verdict; with a ``retain`` pool (the old domain), the predicted forgetting from the train ×
    retain cross-Gram (``forgetting.forgetting_row``). Every Gram from one pass over the pools."""
    block_grad_norm = train.meta["block_grad_norm"]
    G, C, *C_retain = train.grams([None, test, *([retain] if retain is not None else [])], device=device)
    estimate = stats.stats_from_gram(G, train.dim)
    intervals = stats.alignment_intervals(G, train.dim, INTERVAL_LEVEL)
    jackknife = stats.TwoSampleBounds.from_cross(C)
    common = stats.certificates(estimate, M, K)
    b_exact = stats.two_sample_certificate(jackknife.stats, M, K)
    _, gain_lo, gain_hi = jackknife.mu_cross_interval(INTERVAL_LEVEL)
    return {
        "point": train.meta["point"],
        "point_index": train.meta["point_index"],
        "view": train.meta["view"],
        **stats.table_row(estimate, intervals),
        "n_test": test.n,
        "M": M,
        "K": K,
        "mu_cross": jackknife.stats.mu_cross,
        "mu_cross_lo": gain_lo,
        "mu_cross_hi": gain_hi,
        "b_exact": b_exact,
        "b_exact_ucb": jackknife.certificate_ucb(M, K),
        "b_exact_common": common.b_exact,
        "b_align": common.b_align,
        "block_grad_norm": block_grad_norm,
        "verdict": verdict(intervals["mu_sq"][0], b_exact, block_grad_norm),
        **forgetting_row(jackknife.stats.mu_cross, C_retain[0] if C_retain else None, INTERVAL_LEVEL),
    }


def vocab_size(model: ResidualModel) -> int | None:
    """The vocabulary of a language model (a Hugging Face model's text config, a scalemech model's
    ``vocab_size`` or its config's), None for an image model."""
    if not isinstance(model, LanguageModel):
        return None
    config = getattr(model, "config", None)
    if hasattr(config, "get_text_config"):
        return int(config.get_text_config().vocab_size)
    size = getattr(model, "vocab_size", None) or getattr(config, "vocab_size", None)
    return None if size is None else int(size)


def loss_attrs(model: ResidualModel, mean_loss: float, documents: bool = False) -> dict[str, Any] | None:
    """``frame.attrs["loss"]`` of a language model: ``loss``, its mean per-token loss (nats) on the
    train-pool windows, beside ``ln_vocab = ln(vocab_size)``, the loss of a uniform guess, and whether
    the windows are ``documents``' starts (a 2-D ``.npy``); None for an image model."""
    size = vocab_size(model)
    if size is None:
        return None
    return {"loss": mean_loss, "ln_vocab": math.log(size), "vocab_size": size, "documents": documents}


POOL_BYTES = 4
"""Bytes per stored gradient entry: certify's pools are float32."""


def check_scratch_space(
    model: ResidualModel, example: Tensor, points: list[str], view: str, rows: int, pool_dir: Path
) -> int:
    """Refuse, before any gradient is captured, pools of ``rows`` rows per point that the disk under
    ``pool_dir`` cannot hold: their size (``POOL_BYTES`` per entry of each point's ``view`` of the
    stream, from one no-grad forward of ``example``) against its free space, and the largest pool file
    (one split's rows of one point) against the file-size limit (``ulimit -f``), with what to change;
    returns the size."""
    with torch.no_grad():
        streams = model.forward_streams(example, points)[1]
    widths = [view_of(streams[p], view).shape[1] for p in points]
    needed, largest = rows * POOL_BYTES * sum(widths), rows // 2 * POOL_BYTES * max(widths)
    pool_dir.mkdir(parents=True, exist_ok=True)
    free, limit = shutil.disk_usage(pool_dir).free, file_size_limit()
    if needed > free:
        raise OSError(
            f"certify's gradient pools need {size_text(needed)} under {pool_dir.parent} (TMPDIR), which has "
            f"{size_text(free)} free; point TMPDIR to a larger disk, or capture fewer points per pass "
            "(--points-per-pass), a smaller --pool or --block-size, or certify's --view pooled"
        )
    if limit is not None and largest > limit:
        raise OSError(
            f"certify's gradient pools need files of {size_text(largest)}, beyond this shell's file-size limit "
            f"(ulimit -f) of {size_text(limit)}; raise the limit (ulimit -f unlimited), or give a smaller --pool or "
            "--block-size, or certify's --view pooled"
        )
    return needed


def measure_points(
    model: ResidualModel,
    prepared: Prepared | TokenIds,
    identity: str,
    points: list[str],
    pool_dir: Path,
    sampling: Sampling,
    device: torch.device,
    retain: Prepared | TokenIds | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[int]], float]:
    """``point_row`` of each of ``points``, ``{split: the pool's example index}`` and the model's mean
    per-example loss on the train pool (``capture_pools``' ``mean_loss``, from the capture passes):
    train and test pools of ``sampling.pool`` examples drawn and captured as ``experiments.measure`` does
    (the same seeds, so the same numbers), in ``sampling.view`` only, as scratch pools under ``pool_dir``; the new
    blocks run on the train pool only. With ``retain`` (the old domain's data), a third pool of as many of
    its train windows (``forgetting.retain_pool``) is captured beside them, for the predicted forgetting.
    A non-finite loss or gradient (NaN weights, say) is refused in
    one ``ValueError`` at the first batch that has one (``gradients.capture.check_finite``), where the
    pipeline's own measurement leaves the numbers as they come. Memory: the model, one batch, a new
    block per point of the pass, and one point's pools while its statistics are computed.

    With ``sampling.points_per_pass``, the points are captured in groups of that many, one pair of
    passes over the pools each (a point's numbers do not depend on the others in its pass: its new
    block is seeded by its name, and the others' add exact zeros), and each group's pools are deleted
    once its rows are computed: the device holds one group's new blocks, the disk one group's pools."""
    pool, view, step = sampling.pool, sampling.view, sampling.points_per_pass or len(points)
    model, examples = ready_pools(model, prepared, {split: pool for split in SPLITS}, sampling.seed, identity, device)
    if retain is not None:
        examples[RETAIN] = retain_pool(model, retain, pool, sampling.seed, identity)
    rows_per_point = len(examples) * pool
    needed = check_scratch_space(model, examples["train"].x[:1].to(device), points[:step], view, rows_per_point,
                                 pool_dir)  # fmt: skip
    rows, mean_loss = [], math.nan
    for first in range(0, len(points), step):
        group = points[first : first + step]
        with room(pool_dir, "certify's gradient pools", needed):  # the disk may fill meanwhile
            paths = {
                (split, point): captured.path
                for split in examples
                for (point, _), captured in capture_split(
                    model,
                    examples[split],
                    group,
                    pool_dir,
                    identity=identity,
                    batch_size=sampling.batch_size,
                    pool_dtype="float32",
                    views=(view,),
                    seed=sampling.seed,
                    device=device,
                    new_blocks=split == "train",
                    checksum=False,
                    require_finite=True,
                ).items()
            }
        group_rows, mean_loss = pool_rows(paths, group, sampling.M, sampling.K, device, verify=False)
        rows += group_rows
        if step < len(points):
            for path in paths.values():
                remove_pool(path)
    return rows, {split: pool_examples.index.tolist() for split, pool_examples in examples.items()}, mean_loss


def pool_rows(
    paths: dict[tuple[str, str], Path], points: list[str], M: int, K: int, device: torch.device, verify: bool
) -> tuple[list[dict[str, Any]], float]:
    """``point_row`` of each of ``points`` from the pools at ``paths[split, point]`` (a ``RETAIN`` pool
    too, when there is one), and the model's mean per-example loss on the train pool (the capture
    passes'); one point's pools mapped at a time."""
    rows, mean_loss = [], math.nan
    for point in tqdm(points, desc="statistics"):
        train, test = (GradientPool(paths[split, point], verify=verify) for split in SPLITS)
        retain = GradientPool(paths[RETAIN, point], verify=verify) if (RETAIN, point) in paths else None
        rows.append(point_row(train, test, M, K, device, retain))
        mean_loss = train.meta["mean_loss"]  # the same at every point: one pool, one model
    return rows, mean_loss


def stored_certificate(
    model: ResidualModel,
    pool_dir: Path,
    points: list[str],
    sampling: Sampling,
    device: torch.device,
) -> pd.DataFrame | None:
    """``certify_model``'s table from gradient pools ``measure`` stored in ``pool_dir`` (both splits, the
    new blocks captured), none captured again: the same examples and seeds, so the same rows up to
    the pools' storage dtype; None unless it holds every one of ``points`` in ``sampling.view`` with
    ``sampling.pool`` examples per split (its batch size and seed are measure's own). ``attrs["pools"]``:
    each split's example index (the pools' provenance)."""
    pool, M, K = sampling.pool, sampling.M, sampling.K
    check_sizes(pool, M, K)
    paths = {(split, point): pool_path(pool_dir, split, point, sampling.view) for split in SPLITS for point in points}
    if not all(path.with_suffix(".json").is_file() for path in paths.values()):
        return None
    metas = {key: GradientPool(path, verify=False).meta for key, path in paths.items()}
    if any(meta["n"] != pool for meta in metas.values()):
        return None
    rows, mean_loss = pool_rows(paths, points, M, K, device, verify=True)
    return certificate_frame(model, rows, {split: metas[split, points[0]]["examples"] for split in SPLITS}, mean_loss)


def certificate_frame(
    model: ResidualModel,
    rows: list[dict[str, Any]],
    pools: dict[str, list[int]],
    mean_loss: float,
    documents: bool = False,
) -> pd.DataFrame:
    """certify's table of ``rows``: ``attrs["pools"]`` each split's example index, and for a language
    model ``attrs["loss"]`` its mean per-token loss on the train pool (``loss_attrs``)."""
    frame = pd.DataFrame(rows, columns=CERTIFICATE_COLUMNS)
    frame.attrs["pools"] = pools
    loss = loss_attrs(model, mean_loss, documents)
    if loss is not None:
        frame.attrs["loss"] = loss
    return frame


def size_problems(
    pool: int, M: int, K: int, batch_size: int, block_size: int | None, view: str, points_per_pass: int | None = None
) -> list[str]:
    """What is wrong with certify's sizes, each naming the value and what is allowed (``certify``'s doc;
    the pool and ``(M, K)``: ``stats.certificate_size_problems``)."""
    problems = certificate_size_problems(pool, M, K)
    if points_per_pass is not None and points_per_pass < 1:
        problems.append(f"points_per_pass = {points_per_pass} must be at least 1 (or none: every point in one pass)")
    if batch_size < 1:
        problems.append(f"batch_size = {batch_size} must be at least 1")
    if block_size is not None and block_size < MIN_BLOCK_SIZE:
        problems.append(f"block_size = {block_size} must be at least {MIN_BLOCK_SIZE}")
    if view not in VIEWS:
        problems.append(f"view = {view!r} must be one of {', '.join(VIEWS)}")
    return problems


def check_sizes(pool: int, M: int, K: int) -> None:
    """``ValueError`` naming each of ``pool``, ``M``, ``K`` a certificate cannot take."""
    problems = certificate_size_problems(pool, M, K)
    if problems:
        raise ValueError("certificate: " + "; ".join(problems))


def certify(
    checkpoint: str,
    data: str,
    family: str | None = None,
    points: str = "all",
    pool: int = sizes.POOL,
    M: int = sizes.M,
    K: int = sizes.K,
    batch_size: int = 16,
    device: str = "auto",
    block_size: int | None = None,
    seed: int = 0,
    view: str = "full",
    tokenizer: str | None = None,
    out: str | None = None,
    points_per_pass: int | None = None,
    retain: str | None = None,
) -> pd.DataFrame:
    """Per insertion point of a user's model (``CERTIFICATE_COLUMNS``): ``‖μ‖²``, ``d_∥``, ``d_2``,
    ``d_align`` with jackknife intervals (train pool, ``view``), the two-sample ``B_exact`` from the
    cross-Gram of the train and test pools, the one-sample ``B_exact_common`` and ``B_align`` at
    ``(M, K)``, the first-order gain ``‖∇_θ L‖`` of a zero-initialized block inserted there (Paper W,
    Theorem 1; Paper D, Condition 1) and the ``verdict`` (module doc).

    The sizes are checked (``ValueError``) before anything is loaded: ``pool >= 5`` (the jackknife
    intervals' minimum), ``1 <= M, K <= pool``, ``batch_size >= 1``, ``block_size >= 2`` when given,
    ``view`` in ``VIEWS``; ``pool`` against an image dataset's splits once it is loaded (a text or
    token split's window count is checked when the pools are drawn, still before any gradient is
    captured). A Hugging Face model's ``block_size`` defaults to ``min(max_position_embeddings,
    HF_BLOCK_SIZE)`` (on documents of ``T`` tokens, a 2-D ``.npy``: at most ``T - 1``), its tokenizer
    (for text data) to its checkpoint's. ``frame.attrs["ran"]`` names the model and the dtype it ran
    in (``ran_on``); for a language model, ``frame.attrs["loss"]`` holds its mean per-token loss on
    the train-pool windows beside ``ln(vocab_size)`` (``loss_attrs``; ``text.loss_line`` says it).

    With ``out``, the table is also written there as CSV (``output.write_out``: whole or not at all),
    and ``out`` is checked writable before anything else is done (``output.check_out``). A ``family``
    given for a ``model.pt`` must be the family its spec says; a non-finite loss or gradient is refused
    (``measure_points``). ``points_per_pass`` bounds the points one capture pass carries (``Sampling``).
    With ``retain`` (the old domain, ``data``'s formats and kind), each point also gets the forgetting a
    step along the gain direction predicts (``forgetting``)."""
    problems = size_problems(pool, M, K, batch_size, block_size, view, points_per_pass)
    if problems:
        raise ValueError("certify: " + "; ".join(problems))
    if out is not None:
        check_out(out)
    for option, path in (("--data", data), ("--retain", retain)):
        if path is not None and not Path(path).exists():
            raise FileNotFoundError(f"{option} {path!r} does not exist; give {DATA_FORMS}")
    torch_device = resolve_device(device)
    hf_spec = checkpoint_spec(checkpoint, family, block_size, tokenizer, data)
    rule: str | int | list[str] = points
    if points != "all":
        rule = int(points) if points.isdigit() else points.split(",")
    with tempfile.TemporaryDirectory() as scratch:
        prepared = read_data(data, Path(scratch), hf_spec, pool)
        if prepared.kind == "image" and pool > min(len(prepared.train_x), len(prepared.test_x)):
            raise ValueError(
                f"certify: pool = {pool} is larger than the splits of {data!r} "
                f"({len(prepared.train_x)} train, {len(prepared.test_x)} test examples)"
            )
        if hf_spec is None:  # a user's own model.pt: weights only, its checksum checked when it has one
            model = load_model(checkpoint, map_location=torch_device, checksum_required=False)[0]
            if family is not None and family != model.family:
                raise ValueError(
                    f"--family {family}: {checkpoint} holds a {model.family} model (its spec's family); "
                    f"give --family {model.family} or none"
                )
            if block_size and not isinstance(model, LanguageModel):
                raise ValueError(f"--block-size {block_size} is for language models; {checkpoint} is an image model")
        else:
            model = build_model(hf_spec).to(torch_device)
        if prepared.kind == "tokens" and getattr(model, "family", None) != "hf":
            raise ValueError(
                f"--data {data!r} holds token ids, which only a Hugging Face causal LM takes; "
                f"{checkpoint!r} is a {getattr(model, 'family', type(model).__name__)} model"
            )
        old_domain = None
        if retain is not None:
            (Path(scratch) / RETAIN).mkdir()
            old_domain = read_data(retain, Path(scratch) / RETAIN, hf_spec, pool)
            if old_domain.kind != prepared.kind:
                raise ValueError(f"--retain {retain!r} holds {old_domain.kind} data, --data {prepared.kind} data")
        sampling = Sampling(pool, M, K, batch_size, view, seed, points_per_pass)
        frame = certify_model(model, prepared, checkpoint_name(checkpoint), rule, Path(scratch) / "pools", sampling,
                              device=torch_device, retain=old_domain)  # fmt: skip
    frame.attrs["ran"] = ran_on(model, checkpoint, torch_device)
    if out is not None:
        write_out(frame, out)
    return frame


def certify_model(
    model: ResidualModel,
    prepared: Prepared | TokenIds,
    identity: str,
    rule: str | int | list[str],
    pool_dir: Path,
    sampling: Sampling,
    *,
    device: torch.device,
    retain: Prepared | TokenIds | None = None,
) -> pd.DataFrame:
    """``certify``'s table of a model already loaded, at the points ``rule`` picks
    (``experiments.measure.select_points``), its pools drawn for ``identity``, with the predicted
    forgetting of the old domain ``retain`` when given (``forgetting``);
    ``frame.attrs["pools"]`` holds each split's pool as window starts (or rows), and for a language
    model ``frame.attrs["loss"]`` its mean per-token loss on the train pool (``loss_attrs``); sizes a
    certificate cannot take are refused first (``check_sizes``)."""
    check_sizes(sampling.pool, sampling.M, sampling.K)
    if isinstance(rule, int) and rule > len(model.insertion_points()):
        raise ValueError(
            f"--points {rule}: the model has {len(model.insertion_points())} insertion points; "
            f"allowed: 'all', 1..{len(model.insertion_points())}, or names"
        )
    rows, pools, mean_loss = measure_points(model, prepared, identity, select_points(model, rule), pool_dir, sampling,
                                            device, retain)  # fmt: skip
    return certificate_frame(model, rows, pools, mean_loss, bool(getattr(prepared, "documents", False)))
