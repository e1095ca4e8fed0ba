"""``scalemech certify``: where growing a user's own checkpoint can pay off.

Per insertion point of a scalemech ``model.pt`` or a Hugging Face decoder LM, on a prepared
dataset, a text file or token ids: the alignment statistics of the train pool with intervals,
the two-sample certificate ``B_exact`` from the train × test cross-Gram at the user's ``(M, K)``
(beside the one-sample ``B_exact_common``, ``B_align``), the first-order gain of a
zero-initialized block inserted there (docs/science.md §3, §5), and a verdict per point
(``verdict``, the rule below) with a one-line recommendation.

Verdict rule (``verdict``), per point, from the numbers in its row:

- ``"grow here"``: the ``‖μ‖²`` interval lies above 0 (a mean gradient is detected,
  ``mu_sq_lo > 0``), the two-sample certificate bounds the misalignment probability at
  ``(M, K)`` below ``B_GROW`` (``b_exact < 0.5``: a step along the mean gradient of ``M`` train
  examples lowers the loss of ``K`` test examples, to first order, more often than not) and a
  zero-initialized block there gets a gradient (``block_grad_norm > 0``, Paper D's Condition 1);
- ``"weak"``: only the ``‖μ‖²`` interval or only the certificate holds;
- ``"no detectable signal"``: neither.

The recommendation names the "grow here" points, ranked by ``block_grad_norm`` (the largest
first-order gain first), or says that no point has a detectable signal.
"""

from __future__ import annotations

import codecs
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from .. import stats
from ..core.device import resolve_device
from ..data import Prepared, load_prepared, prepare_dataset
from ..data.prepared import SPLITS
from ..data.tokenized import TokenIds, is_token_ids, load_token_ids, prepared_text_tokens, text_file_tokens
from ..experiments.measure import capture_split, ready_pools, select_points
from ..gradients.capture import GradientPool, view_of
from ..models import LanguageModel, ResidualModel, build_model, load_model

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
    "b_exact",
    "b_exact_ucb",
    "b_exact_common",
    "b_align",
    "block_grad_norm",
    "verdict",
]
"""The full table (``--wide``, ``--out``): ``b_exact`` is the two-sample certificate (train and test
pools, ``stats.two_sample_certificate``) and ``b_exact_ucb`` its one-sided 95 % upper confidence bound
(``stats.TwoSampleBounds.certificate_ucb``), ``b_exact_common``/``b_align`` the one-sample ones of the
train pool (``stats.certificates``); ``mu_cross`` estimates ``μ_trᵀμ_te``."""
VIEWS = ("full", "pooled")
INTERVAL_LEVEL = 0.9
WIDE_COLUMNS = 120
"""Line width of ``--wide``."""
"""Two-sided level of the jackknife intervals."""
B_GROW = 0.5
""""grow here" needs ``b_exact < B_GROW``: misalignment at ``(M, K)`` certified less likely than not."""
GROW, WEAK, NO_SIGNAL = "grow here", "weak", "no detectable signal"
VERDICTS = (GROW, WEAK, NO_SIGNAL)
HF_BLOCK_SIZE = 1024
"""Tokens per example of a Hugging Face model when ``--block-size`` is not given: at most this
(``max_position_embeddings`` can be 32k or more, far beyond what a pool of examples needs)."""


def verdict(mu_sq_lo: float, b_exact: float, block_grad_norm: float) -> str:
    """The verdict of one point (module doc): ``GROW``, ``WEAK`` or ``NO_SIGNAL``; NaN counts as not met."""
    detected = mu_sq_lo > 0
    certified = b_exact < B_GROW
    if detected and certified and block_grad_norm > 0:
        return GROW
    return WEAK if detected or certified else NO_SIGNAL


def _hf_spec(
    checkpoint: str, family: str | None, block_size: int | None, tokenizer: str | None
) -> dict[str, Any] | None:
    """The ``hf`` model spec of ``checkpoint``, None for a scalemech ``model.pt``. Reads only its
    ``config.json`` (``models.hub.decoder_config``): a missing path or a model that is not a
    decoder-only causal LM is refused here, before the data and the weights are loaded. The
    weights load in their own dtype; ``block_size`` defaults to ``min(max_position_embeddings,
    HF_BLOCK_SIZE)``."""
    from ..models.hub import decoder_config, hub_unreachable

    path = Path(checkpoint)
    if path.suffix == ".pt" and family in (None, "resnet", "llama", "tvresnet"):
        return None
    if family not in (None, "hf"):
        raise ValueError(f"--family {family} needs a scalemech model.pt, got {checkpoint!r}")
    config = decoder_config(checkpoint, None, path.is_dir())  # an uncached name without network: refused here
    local = path.is_dir() or hub_unreachable() is not None  # from the cache, with no download to wait for
    positions = config.get("max_position_embeddings") or config.get("n_positions") or HF_BLOCK_SIZE
    return {
        "family": "hf",
        "checkpoint": checkpoint,
        "local_files_only": local,
        "dtype": "auto",
        "block_size": block_size or min(positions, HF_BLOCK_SIZE),
        "tokenizer": tokenizer or checkpoint,
    }


DATA_FORMS = (
    "a prepared dataset directory (with manifest.json), a UTF-8 text file, a .npy of token ids "
    "(1-D integer array) or nanoGPT's train.bin/val.bin (their directory, or train.bin with val.bin "
    "beside it)"
)


def _local(hf_spec: dict[str, Any]) -> bool:
    """Whether the tokenizer is read from disk only: a directory, or a hub name with no download possible."""
    from ..models.hub import hub_unreachable

    return Path(hf_spec["tokenizer"]).is_dir() or hub_unreachable() is not None


def _certify_data(data: str, scratch: Path, hf_spec: dict[str, Any] | None, pool: int):
    """A prepared dataset directory (for a Hugging Face model, a text one becomes the head of each
    split that ``pool`` windows need, in the tokenizer's ids: ``data.tokenized.prepared_text_tokens``);
    token ids (``data.tokenized.load_token_ids``: a ``.npy`` or nanoGPT's ``train.bin``/``val.bin``);
    or a UTF-8 text file (judged by its first MiB): for a Hugging Face model, the head of it that
    ``pool`` windows per split need (``data.tokenized.text_file_tokens``), else prepared here as a
    byte-level corpus. Any other binary file is refused."""
    path = Path(data)
    if (path / "manifest.json").is_file():
        prepared = load_prepared(path)
        if hf_spec is not None and prepared.kind == "text":
            tokenizer, local = hf_spec["tokenizer"], _local(hf_spec)
            return prepared_text_tokens(prepared, pool, hf_spec["block_size"], tokenizer, None, local)
        return prepared
    if is_token_ids(path):
        return load_token_ids(path)
    if path.is_file():
        with path.open("rb") as f:
            head = f.read(1 << 20)
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head)  # not final: a character cut at 1 MiB is fine
            binary = b"\0" in head
        except UnicodeDecodeError:
            binary = True
        if binary:
            raise ValueError(
                f"--data {data!r} is a binary file, not UTF-8 text, a .npy of token ids or nanoGPT's "
                f"train.bin/val.bin; give {DATA_FORMS}"
            )
        if hf_spec is not None:
            tokenizer, local = hf_spec["tokenizer"], _local(hf_spec)
            return text_file_tokens(path, pool, hf_spec["block_size"], tokenizer, None, local)
        prepare_dataset("corpus", {"path": str(path)}, scratch / "corpus")
        return load_prepared(scratch / "corpus")
    raise FileNotFoundError(f"--data {data!r} does not exist or is none of: {DATA_FORMS}")


def ran_on(model: ResidualModel, checkpoint: str, device: torch.device) -> str:
    """One line naming the model and the dtype its forward pass ran in."""
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    kind = getattr(getattr(model, "config", None), "model_type", model.family)
    tokens = f", {model.block_size} tokens per example" if hasattr(model, "block_size") else ""
    return f"model: {checkpoint} ({kind}, {len(model.insertion_points())} points{tokens}), {dtype} on {device}"


def point_row(train: GradientPool, test: GradientPool, M: int, K: int, device: torch.device) -> dict[str, Any]:
    """The row of one point from its train and test pools (one view): ``‖μ‖²``, ``d_∥``, ``d_2``,
    ``d_align`` with jackknife intervals from the train Gram matrix, the two-sample certificate from
    the train × test cross-Gram (both from one pass over the pools), the one-sample ones at
    ``(M, K)``, the train pool's ``block_grad_norm`` and the verdict."""
    block_grad_norm = train.meta["block_grad_norm"]
    G, C = train.grams([None, test], device=device)
    estimate = stats.stats_from_gram(G, train.dim)
    intervals = stats.alignment_intervals(G, train.dim, INTERVAL_LEVEL)
    jackknife = stats.TwoSampleBounds.from_cross(C)
    common = stats.certificates(estimate, M, K)
    b_exact = stats.two_sample_certificate(jackknife.stats, M, K)
    return {
        "point": train.meta["point"],
        "point_index": train.meta["point_index"],
        "view": train.meta["view"],
        **stats.table_row(estimate, intervals),
        "n_test": test.n,
        "M": M,
        "K": K,
        "mu_cross": jackknife.stats.mu_cross,
        "b_exact": b_exact,
        "b_exact_ucb": jackknife.certificate_ucb(M, K),
        "b_exact_common": common.b_exact,
        "b_align": common.b_align,
        "block_grad_norm": block_grad_norm,
        "verdict": verdict(intervals["mu_sq"][0], b_exact, block_grad_norm),
    }


POOL_BYTES = 4
"""Bytes per stored gradient entry: certify's pools are float32."""


def _bytes(size: int) -> str:
    """``size`` bytes in kB, MB, GB or TB (powers of 1000), three significant digits."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size / 1e3:.3g} kB"


def check_scratch_space(
    model: ResidualModel, example: Tensor, points: list[str], view: str, rows: int, pool_dir: Path
) -> None:
    """Refuse, before any gradient is captured, pools of ``rows`` rows per point that the disk under
    ``pool_dir`` cannot hold: their size (``POOL_BYTES`` per entry of each point's ``view`` of the
    stream, from one no-grad forward of ``example``) against its free space, with what to change."""
    with torch.no_grad():
        streams = model.forward_streams(example, points)[1]
    needed = rows * POOL_BYTES * sum(view_of(streams[p], view).shape[1] for p in points)
    pool_dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(pool_dir).free
    if needed > free:
        raise OSError(
            f"certify's gradient pools need {_bytes(needed)} under {pool_dir.parent} (TMPDIR), which has "
            f"{_bytes(free)} free; point TMPDIR to a larger disk, or measure fewer --points, a smaller "
            "--pool or --block-size, or --view pooled"
        )


def measure_points(
    model: ResidualModel,
    prepared: Prepared | TokenIds,
    identity: str,
    points: list[str],
    pool_dir: Path,
    *,
    pool: int,
    M: int,
    K: int,
    batch_size: int,
    view: str,
    seed: int,
    device: torch.device,
) -> list[dict[str, Any]]:
    """``point_row`` of each of ``points``: train and test pools of ``pool`` examples drawn and
    captured as ``experiments.measure`` does (the same seeds, so the same numbers), in ``view``
    only, as scratch pools under ``pool_dir``; the new blocks run on the train pool only. Memory:
    the model, one batch, and one point's pools while its statistics are computed."""
    model, examples = ready_pools(model, prepared, {split: pool for split in SPLITS}, seed, identity, device)
    check_scratch_space(model, examples["train"].x[:1].to(device), points, view, 2 * pool, pool_dir)
    paths = {
        (split, point): captured.path
        for split in SPLITS
        for (point, _), captured in capture_split(
            model,
            examples[split],
            points,
            pool_dir,
            identity=identity,
            batch_size=batch_size,
            pool_dtype="float32",
            views=(view,),
            seed=seed,
            device=device,
            new_blocks=split == "train",
            checksum=False,
        ).items()
    }
    rows = []
    for point in tqdm(points, desc="statistics"):  # one point's pools mapped at a time
        train, test = (GradientPool(paths[split, point], verify=False) for split in SPLITS)
        rows.append(point_row(train, test, M, K, device))
    return rows


def certify(
    checkpoint: str,
    data: str,
    family: str | None = None,
    points: str = "all",
    pool: int = 256,
    M: int = 16,
    K: int = 16,
    batch_size: int = 16,
    device: str = "auto",
    block_size: int | None = None,
    seed: int = 0,
    view: str = "full",
    tokenizer: str | None = None,
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
    HF_BLOCK_SIZE)``, its tokenizer (for text data) to its checkpoint's. ``frame.attrs["ran"]``
    names the model and the dtype it ran in (``ran_on``)."""
    problems = [
        f"{name} = {value} must be at least {low}"
        for name, value, low in (("pool", pool, 5), ("M", M, 1), ("K", K, 1), ("batch_size", batch_size, 1))
        if value < low
    ]
    problems += [
        f"{name} = {value} is more than the {pool} examples of each pool measured; allowed: 1 <= {name} <= {pool}"
        for name, value in (("M", M), ("K", K))
        if value > pool
    ]
    if block_size is not None and block_size < 2:
        problems.append(f"block_size = {block_size} must be at least 2")
    if view not in VIEWS:
        problems.append(f"view = {view!r} must be one of {', '.join(VIEWS)}")
    if problems:
        raise ValueError("certify: " + "; ".join(problems))
    if not Path(data).exists():
        raise FileNotFoundError(f"--data {data!r} does not exist; give {DATA_FORMS}")
    torch_device = resolve_device(device)
    hf_spec = _hf_spec(checkpoint, family, block_size, tokenizer)
    rule: str | int | list[str] = points
    if points != "all":
        rule = int(points) if points.isdigit() else points.split(",")
    with tempfile.TemporaryDirectory() as scratch:
        prepared = _certify_data(data, Path(scratch), hf_spec, pool)
        if prepared.kind == "image" and pool > min(len(prepared.train_x), len(prepared.test_x)):
            raise ValueError(
                f"certify: pool = {pool} is larger than the splits of {data!r} "
                f"({len(prepared.train_x)} train, {len(prepared.test_x)} test examples)"
            )
        if hf_spec is None:  # a user's own model.pt: weights only, its checksum checked when it has one
            model = load_model(checkpoint, map_location=torch_device, checksum_required=False)[0]
            if block_size and not isinstance(model, LanguageModel):
                raise ValueError(f"--block-size {block_size} is for language models; {checkpoint} is an image model")
        else:
            model = build_model(hf_spec).to(torch_device)
        if prepared.kind == "tokens" and getattr(model, "family", None) != "hf":
            raise ValueError(
                f"--data {data!r} holds token ids, which only a Hugging Face causal LM takes; "
                f"{checkpoint!r} is a {getattr(model, 'family', type(model).__name__)} model"
            )
        if isinstance(rule, int) and rule > len(model.insertion_points()):
            raise ValueError(
                f"--points {rule}: the model has {len(model.insertion_points())} insertion points; "
                f"allowed: 'all', 1..{len(model.insertion_points())}, or names"
            )
        rows = measure_points(
            model,
            prepared,
            checkpoint,
            select_points(model, rule),
            Path(scratch) / "pools",
            pool=pool,
            M=M,
            K=K,
            batch_size=batch_size,
            view=view,
            seed=seed,
            device=torch_device,
        )
    frame = pd.DataFrame(rows, columns=CERTIFICATE_COLUMNS)
    frame.attrs["ran"] = ran_on(model, checkpoint, torch_device)
    return frame


# ----------------------------------------------------------------------------- text for the terminal


def _number(value: float, digits: int = 3) -> str:
    return "nan" if math.isnan(value) else ("inf" if math.isinf(value) else f"{value:.{digits}g}")


def _interval(value: float, lo: float, hi: float) -> str:
    """``value [lo, hi]`` of a quantity >= 0 whose unbiased estimate can dip below: a negative estimate
    reads ``< 0``, bounds are clipped at 0, and an interval the data do not give (nan) is left out."""
    shown = "< 0" if value < 0 else _number(value)
    if math.isnan(lo) or math.isnan(hi):
        return shown
    return f"{shown} [{_number(max(lo, 0.0))}, {_number(max(hi, 0.0))}]"


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [header, *rows]]


def _cell(value: object) -> str:
    return _number(value, 4) if isinstance(value, float) else str(value)


def wide_table(frame: pd.DataFrame, width: int = WIDE_COLUMNS) -> list[str]:
    """Every column, one block per point: the point's name, then ``column=value`` pairs filled into
    lines of at most ``width`` characters (a pair is never split)."""
    lines = []
    for row in frame.to_dict("records"):
        lines.append(f"{row['point']}:")
        line = ""
        for pair in (f"{column}={_cell(value)}" for column, value in row.items() if column != "point"):
            if line and len(line) + 2 + len(pair) > width:
                lines.append(line)
                line = ""
            line = f"{line}  {pair}" if line else f"    {pair}"
        lines.append(line)
    return lines


def compact_table(frame: pd.DataFrame) -> list[str]:
    """The default table: point, ``‖μ‖²`` and ``d_align`` with intervals, ``B_exact``, ``B_align``,
    the block gradient norm and the verdict."""
    header = ["point", "mu_sq [lo, hi]", "d_align [lo, hi]", "b_exact", "b_align", "block_grad_norm", "verdict"]
    rows = [
        [
            str(r["point"]),
            _interval(r["mu_sq"], r["mu_sq_lo"], r["mu_sq_hi"]),
            _interval(r["d_align"], r["d_align_lo"], r["d_align_hi"]),
            _number(r["b_exact"], 2),
            _number(r["b_align"], 2),
            _number(r["block_grad_norm"]),
            r["verdict"],
        ]
        for r in frame.to_dict("records")
    ]
    return _aligned(header, rows)


def _larger_sizes(frame: pd.DataFrame, M: int, K: int) -> str:
    """What to ask for next: a larger ``--pool``, and larger ``--M/--K`` only up to the pools measured."""
    room = int(min(frame["n"].min(), frame["n_test"].min()))
    if max(M, K) < room:
        return f"measure a larger --pool, or ask for larger --M/--K (at most {room}, the pools measured)"
    return f"measure a larger --pool (--M/--K are already at the {room} examples the pools hold)"


def recommendation(frame: pd.DataFrame) -> str:
    """One line: the "grow here" points ranked by ``block_grad_norm``, else why there are none."""
    if frame.empty:
        return "recommendation: no insertion point was measured"
    M, K = int(frame["M"].iloc[0]), int(frame["K"].iloc[0])
    grow = frame[frame["verdict"] == GROW].sort_values("block_grad_norm", ascending=False)
    if len(grow):
        best = grow.iloc[0]
        then = f" (then {', '.join(grow['point'].iloc[1:])})" if len(grow) > 1 else ""
        return (
            f"recommendation: grow at {best['point']}{then}: mean gradient detected, B_exact = "
            f"{_number(best['b_exact'], 2)} < {B_GROW} at M = {M}, K = {K}, largest block_grad_norm "
            f"({_number(best['block_grad_norm'])})"
        )
    weak = frame[frame["verdict"] == WEAK]
    if len(weak):
        return (
            f"recommendation: no point is certified at M = {M}, K = {K}; the signal is weak at "
            f"{', '.join(weak['point'])}: {_larger_sizes(frame, M, K)} before growing"
        )
    return (
        f"recommendation: no point has a detectable signal (every mu_sq interval reaches 0 and no B_exact is "
        f"below {B_GROW} at M = {M}, K = {K}): these data give no reason to grow this model here"
    )


def legend(frame: pd.DataFrame, wide: bool = False) -> list[str]:
    """What the verdicts, the columns, ``inf`` and ``nan`` mean (short lines)."""
    first = frame.iloc[0] if len(frame) else {"n": 0, "n_test": 0, "view": "full", "M": 0, "K": 0}
    clipped = "raw" if wide else "< 0: estimate below 0 (signal below noise); bounds clipped at 0; raw in --wide/--out"
    lines = [
        (
            f"verdict: {GROW} = mu_sq interval above 0 and b_exact < {B_GROW} (and block_grad_norm > 0); "
            f"{WEAK} = only one of the two; {NO_SIGNAL} = neither"
        ),
        (
            f"legend:  {first['view']} view, train pool of {int(first['n'])}, test pool of {int(first['n_test'])}; "
            f"mu_sq = ||mu||^2; [lo, hi] = {INTERVAL_LEVEL:.0%} jackknife interval ({clipped})"
        ),
        (
            f"b_exact = two-sample bound on P(misalign) for M = {int(first['M'])} train, K = {int(first['K'])} "
            "test examples; b_align = one-sample bound from d_align"
        ),
        "block_grad_norm = first-order gain of a zero-initialized block inserted after the point",
        "inf = a spread estimated <= 0 (d_par = inf: mu'Sigma mu estimated <= 0; d_2 = inf: tr Sigma^2 estimated <= 0)",
        "nan = the data do not bound it (no mean detected above noise, or a leave-one-out estimate is inf/nan)",
        "b_exact = nan: no certificate (mu_tr'mu_te, its square or the variance estimated <= 0)",
    ]
    return lines[:2] + [" " * len("legend:  ") + line for line in lines[2:]]


def format_certificate(frame: pd.DataFrame, wide: bool = False) -> str:
    """The certificate for the terminal: the compact table (``wide``: every column of
    ``CERTIFICATE_COLUMNS``, ``wide_table``), then the recommendation and the legend."""
    table = wide_table(frame) if wide else compact_table(frame)
    return "\n".join([*table, "", recommendation(frame), *legend(frame, wide)])
