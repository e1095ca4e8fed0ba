"""Growth at every insertion point, set against the certificate's prediction (E11; E8's arms).

At each chosen snapshot of a trained model (``final``: its last weights; ``signal``: the earliest E10
snapshot after step 0 whose ``‖μ‖²`` interval lies above 0 at some point, where the certificate has
something to rank), and at each insertion point:

1. the certificate is measured before growth (``certificate``: certify's columns, its verdict
   and ``certify_rank``, given by the caller, who sits above this layer);
2. one zero-initialized block is inserted there (``insert_block``: ``f_new = f_old``, checked), set
   to the training-set jumpboard and trained for ``steps`` optimizer steps (the new block only, or
   every weight), with the fallback rule: E8's arm (``experiments.arms``);
3. two controls per snapshot, trained from ``f_old`` on every weight with the same optimizer and
   the same batches: ``control_tokens`` for the same ``steps`` (equal examples), ``control_flops`` for
   ``round(FLOPs(grown) / FLOPs(control step))`` steps, at least 1 once the grown arm trained (equal
   compute, FLOPs counted by ``torch.utils.flop_counter``), each at the best learning rate of the same
   grid: the arms and budgets of ``experiments.decision``, the engine ``scalemech grow`` shares.

Every arm of a snapshot sees the same batches in the same order (one order seed per model and
snapshot). Held-out losses are taken on ``heldout`` test examples disjoint from the certificate's
test pool (training draws from the train split only); each gain is a paired difference over them
(``stats.paired_difference``): ``gain_old = L(old) − L(grown)``, ``gain_tokens = L(control_tokens) −
L(grown)``, ``gain_flops`` likewise, ``control_change = L(control_tokens) − L(old)``; ``recommended`` is
``grow``'s decision on those losses (``decision.decide``: both controls beaten by more than 2 paired SE).
The predicted gain is the certificate's ``block_grad_norm``: the first-order loss decrease per unit step of the
new block's parameters along steepest descent.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from .. import stats
from ..core.integrity import atomic_write
from ..core.seeding import derive_seed, model_identity, seeded
from ..core.tables import columns
from ..data import Prepared
from ..gradients.batches import PrepareBatch, mean_loss, per_example_losses, to_device
from ..gradients.norms import recalibrate_batch_norm
from ..models.base import ResidualModel, check_preserved
from ..tasks import Task
from ..tasks.base import draw_disjoint, draw_examples
from ..training.checkpoints import identity_hash, snapshot_paths
from ..training.continued import ArmDiverged, step_flops
from . import arms
from .arms import ArmConfig, ArmData
from .decision import CONTROLS, control_steps, decide, gains_over
from .measure import select_points

CERTIFICATE = ["n", "mu_sq", "mu_sq_lo", "mu_sq_hi", "d_align", "d_align_lo", "d_align_hi", "b_exact", "b_exact_ucb"]
CERTIFICATE += ["block_grad_norm", "verdict", "certify_rank"]


def signal_step(trajectory: pd.DataFrame, final_step: int) -> int | None:
    """The earliest E10 snapshot step in ``(0, final_step)`` at which the train split's ``‖μ‖²``
    interval lies above 0 at some point (either view), or None."""
    rows = trajectory[(trajectory["split"] == "train") & (trajectory["mu_sq_lo"] > 0)]
    steps = sorted(int(s) for s in rows["step"].unique() if 0 < s < final_step)
    return steps[0] if steps else None


def _new_block(model: ResidualModel, name: str, train_mode: str) -> list[torch.nn.Parameter]:
    """The parameters the grown arm trains: the new block ``name``'s (``"block"``), else every one."""
    return list(model.blocks[model.index(name)].parameters() if train_mode == "block" else model.parameters())


def _flops_per_step(model: ResidualModel, params: list[torch.nn.Parameter], probe: tuple[Tensor, Tensor]) -> int:
    """FLOPs of one step of ``model`` training ``params`` alone on the batch ``probe``, in eval mode."""
    arms.train_only(model, params)
    model.eval()
    return step_flops(model, lambda: model.per_example_loss(model(probe[0]), probe[1]).mean())


def controls(
    model: ResidualModel,
    data: ArmData,
    config: ArmConfig,
    counts: Sequence[int],
    old: tuple[float, Tensor],
    directory: Path | None = None,
) -> dict[int, tuple[Tensor, float]]:
    """``{steps: (held-out losses, lr)}`` of ``f_old`` trained on every weight for each of ``counts``
    steps at the learning rate of the grid whose train-pool loss is lowest there (diverged or non-finite:
    worst; ties: the first factor). Each learning rate trains once, to the most steps: the learning rate
    is constant and the batches one order, so ``k`` steps are the first ``k`` of that run. ``old``:
    ``f_old``'s train-pool loss and held-out losses, which a learning rate of 0 keeps. With ``directory``,
    the ``i``-th learning rate keeps its resume states in ``lr-<i>`` and its scores at each count there
    as they are taken (``kept``), so a rerun after a kill resumes mid-run."""
    wanted = sorted(set(counts))
    scores: dict[int, list[tuple[float, Tensor, float]]] = {count: [] for count in wanted}  # in the grid's order
    for i, factor in enumerate(config.lr_factors):
        lr = config.lr * factor
        if lr == 0:  # the model as it started, at every count
            scored = {count: (arms.ranked(old[0]), old[1], lr) for count in wanted}
        else:
            scored = _control_scores(model, data, config, lr, wanted, directory and directory / f"lr-{i}")
        for count in wanted:
            scores[count].append(scored[count])
    best = {count: min(scored, key=lambda s: s[0]) for count, scored in scores.items()}  # the first of the lowest
    return {count: (losses, lr) for count, (_, losses, lr) in best.items()}


def _control_scores(
    model: ResidualModel, data: ArmData, config: ArmConfig, lr: float, counts: Sequence[int], at: Path | None
) -> dict[int, tuple[float, Tensor, float]]:
    """``{count: (train-pool loss, held-out losses, lr)}`` of one run of ``f_old`` on every weight at ``lr``
    to the most ``counts`` steps, scored as it passes each count (``inf``: a count it did not reach before
    diverging), each score kept in ``at`` as it is taken: a run loaded finished from ``at`` visits none."""
    candidate, taken, prepare_batch = copy.deepcopy(model), {}, data.prepare_batch

    def score(diverged: bool = False) -> tuple[float, Tensor, float]:
        loss = math.inf if diverged else arms.train_loss(candidate, data.train_pool, config, prepare_batch)
        return loss, per_example_losses(candidate, *data.heldout_pool, config.eval_batch_size, prepare_batch), lr

    def visit(done: int) -> None:
        if done in counts:
            taken[done] = kept(at and at / f"at-{done}.pt", score)

    try:
        arms.train_params(candidate, candidate.parameters(), data, config, lr, max(counts), at, visit)
        diverged = False
    except ArmDiverged:
        diverged = True
    return {
        count: taken[count] if count in taken else kept(at and at / f"at-{count}.pt", lambda: score(diverged))
        for count in counts
    }


def _numpy(losses: Tensor) -> np.ndarray:
    return losses.cpu().double().numpy()


def kept(path: Path | None, compute: Callable[[], Any]) -> Any:
    """``compute()``'s value (tensors, numbers, strings in dicts and tuples), written to ``path`` atomically
    once computed and read from there when it exists: E11 resumes point by point after a kill."""
    if path is not None and path.exists():
        return torch.load(path, weights_only=True)
    value = compute()
    if path is not None:
        with atomic_write(path) as tmp:
            torch.save(value, tmp)
    return value


@dataclasses.dataclass
class Grown:
    """One point's grown arm: its table columns, its held-out losses (jumpboard and grown) and the
    steps of the equal-FLOPs control."""

    columns: dict[str, Any]
    jump: Tensor
    grown: Tensor
    steps_flops: int


def grow_at(
    model: ResidualModel,
    point: str,
    data: ArmData,
    config: ArmConfig,
    seed: int,
    control_step_flops: int,
    directory: Path | None = None,
) -> Grown:
    """The grown arm at ``point`` (module doc): insert (the output unchanged, checked), jumpboard,
    train on ``data``'s batches (resume states in ``directory``, ``arms.best_trained``), fall back; its
    FLOPs against ``control_step_flops`` (one step of the controls)."""
    train_pool, heldout_pool, prepare_batch = data.train_pool, data.heldout_pool, data.prepare_batch
    model.eval()
    with seeded(derive_seed(seed, "new_block")):
        expanded, block = model.insert_block(point)
    probe = prepare_batch(*(t[: config.batch_size] for t in train_pool))
    with torch.no_grad():
        check_preserved(model(probe[0]), expanded.eval()(probe[0]), f"inserting a block at {point!r}")
    new_name = f"{point}+new"
    jump_model = copy.deepcopy(expanded)
    jump_step, jump_train, jump_interior = arms.jumpboard(
        jump_model, jump_model.blocks[jump_model.index(new_name)], train_pool, config, prepare_batch
    )
    trained, lr_selected, train_grown = arms.best_trained(
        expanded, lambda m: _new_block(m, new_name, config.train_mode), data, config, directory
    )
    fallback = not train_grown <= jump_train  # also when the trained loss is nan
    grown_flops = config.steps * _flops_per_step(expanded, _new_block(expanded, new_name, config.train_mode), probe)
    steps_flops = control_steps(config.steps, grown_flops, control_step_flops)["control_flops"]
    jump = per_example_losses(jump_model, *heldout_pool, config.eval_batch_size, prepare_batch)
    grown = jump if fallback else per_example_losses(trained, *heldout_pool, config.eval_batch_size, prepare_batch)
    columns = {
        "point": point,
        "point_index": model.index(point),
        "steps": config.steps,
        "train_mode": config.train_mode,
        "jump_step": jump_step,
        "jump_interior": jump_interior,
        "fallback": fallback,
        "lr_selected": lr_selected,
        "steps_control_flops": steps_flops,
        "flops_grown": grown_flops,
        "flops_control_tokens": config.steps * control_step_flops,
        "flops_control_flops": steps_flops * control_step_flops,
        "train_loss_jump": jump_train,
        "train_loss_grown": jump_train if fallback else train_grown,
    }
    return Grown(columns, jump, grown, steps_flops)


def grow_points(
    model: ResidualModel,
    points: Sequence[str],
    data: ArmData,
    old: tuple[float, Tensor],
    config: ArmConfig,
    seed: int,
    saved: Path | None = None,
) -> list[dict[str, Any]]:
    """``grow_at`` every point, then the controls at equal steps and at each point's equal FLOPs
    (``controls``), every arm on ``data``'s one batch order; the arms' columns, held-out losses and
    paired gains. ``old``: ``f_old``'s train-pool loss and held-out losses. With ``saved``, each point's
    grown arm and the controls are kept there as they finish (``kept``), and a rerun reads them back; an arm
    cut short resumes from its last state in ``saved/arms/<point>/lr-<i>`` (the controls': ``controls/lr-<i>``).
    """
    old_heldout = old[1]
    probe = data.prepare_batch(*(t[: config.batch_size] for t in data.train_pool))
    control_step = _flops_per_step(model, list(model.parameters()), probe)  # f_old: the same at every point
    arms_at = [
        Grown(**kept(saved and saved / f"{point}.pt",
                     lambda point=point: dataclasses.asdict(grow_at(model, point, data, config,
                                                                    derive_seed(seed, point), control_step,
                                                                    saved and saved / "arms" / point))))
        for point in tqdm(points, desc="growth")
    ]  # fmt: skip
    counts = [config.steps, *(arm.steps_flops for arm in arms_at)]
    at = saved and saved / "arms" / "controls"
    trained = kept(saved and saved / "controls.pt", lambda: controls(model, data, config, counts, old, at))
    rows = []
    for arm in arms_at:
        (tokens, lr_tokens), (flops, lr_flops) = trained[config.steps], trained[arm.steps_flops]
        losses = {"jump": arm.jump, "grown": arm.grown, "control_tokens": tokens, "control_flops": flops}
        scored = {name: _numpy(values) for name, values in {**losses, "old": old_heldout}.items()}
        over = gains_over(scored, ("old", *CONTROLS))
        gains = {
            "gain_old": over["old"],
            "gain_tokens": over["control_tokens"],
            "gain_flops": over["control_flops"],
            "control_change": stats.paired_difference(scored["control_tokens"], scored["old"]),
        }
        rows.append(
            {
                **arm.columns,
                "lr_control_tokens": lr_tokens,
                "lr_control_flops": lr_flops,
                **{f"test_loss_{name}": float(values.mean()) for name, values in losses.items()},
                "n_heldout": len(old_heldout),
                **{name: g.mean for name, g in gains.items()},
                **{f"{name}_se": g.se for name, g in gains.items()},
                "recommended": decide(scored, trained=True, inserted=True)["recommended"],
            }
        )
    return rows


def growth(
    model: ResidualModel,
    data: Prepared,
    snapshot_dir: str | Path | None,
    trajectory: pd.DataFrame | None,
    keys: dict[str, Any],
    certificate: Callable[[ResidualModel, list[str], str], pd.DataFrame],
    *,
    points: str | int | Sequence[str],
    snapshots: Sequence[str],
    pool: int,
    heldout: int,
    device: torch.device | str,
    checkpoint_dir: str | Path | None = None,
    **config: Any,
) -> pd.DataFrame:
    """The ``growth`` table of ``model`` (module doc): one row per snapshot × point of ``points``.

    ``snapshot_dir`` holds training's weight snapshots (``signal``); ``trajectory`` is the model's E10
    table (either None: no ``signal`` snapshot, as for a pretrained model). ``certificate(model, names,
    snapshot)`` returns certify's table of a model at those points (``CERTIFICATE`` columns) with
    ``attrs["pools"]["test"]``, its test pool's index. The jumpboard and the fallback use a train pool
    of ``pool`` examples. ``config`` holds the ``ArmConfig`` fields. With ``checkpoint_dir``, every arm is kept
    there as it finishes, under a name that changes with the model, snapshot, points and settings, and a rerun
    after a kill resumes at the first arm not kept."""
    settings = ArmConfig(**config)
    identity, prepare_batch = model_identity(keys), to_device(device)
    model = model.to(device).eval()
    task = model.task(data)
    kept = snapshot_paths(Path(snapshot_dir)) if snapshot_dir is not None else {}
    final_step = max(kept, default=None)
    weights = {"final": (final_step, None)}  # the model as given: its final weights
    if "signal" in snapshots and trajectory is not None and final_step is not None:
        step = signal_step(trajectory, final_step)
        if step is not None:
            weights["signal"] = (step, kept[step])
    rows = []
    for snapshot, (step, path) in weights.items():
        if snapshot not in snapshots:
            continue
        grown_from = copy.deepcopy(model)
        if path is not None:
            grown_from.load_state_dict(torch.load(path, map_location=device, weights_only=True))
        recalibrate_batch_norm(grown_from, task, identity, device)
        saved = None
        if checkpoint_dir is not None:
            kept_as = {"model": identity, "snapshot": snapshot, "step": step, "points": points, "pool": pool,
                       "heldout": heldout, **dataclasses.asdict(settings)}  # fmt: skip
            del kept_as["activation_checkpointing"]  # the same steps either way: arms kept without it are read back
            saved = Path(checkpoint_dir) / identity_hash(kept_as)
        rows += _snapshot_rows(grown_from, snapshot, step, task, points, certificate, pool, heldout, settings,
                               prepare_batch, identity, saved)  # fmt: skip
    frame = pd.DataFrame([{**keys, **row} for row in rows])
    return frame.reindex(columns=columns("growth"))


def _snapshot_rows(
    model: ResidualModel,
    snapshot: str,
    step: int | None,
    task: Task,
    points: str | int | Sequence[str],
    certificate: Callable[[ResidualModel, list[str], str], pd.DataFrame],
    pool: int,
    heldout: int,
    config: ArmConfig,
    prepare_batch: PrepareBatch,
    identity: str,
    saved: Path | None = None,
) -> list[dict[str, Any]]:
    """The rows of one snapshot: its certificate, then ``grow_points`` at every chosen point (its arms kept in
    ``saved``)."""
    seed = derive_seed(config.seed, identity, snapshot)
    chosen = select_points(model, points)
    certified = certificate(model, chosen, snapshot).set_index("point")
    exclude = torch.as_tensor(certified.attrs["pools"]["test"], dtype=torch.int64)
    held = draw_disjoint(task, "test", min(heldout, task.count("test") - len(exclude)), derive_seed(seed, "heldout"),
                         exclude)  # fmt: skip
    train = draw_examples(task, "train", pool, derive_seed(seed, "pool"))
    train_pool, heldout_pool = (train.x, train.y), (held.x, held.y)
    old_heldout = per_example_losses(model, *heldout_pool, config.eval_batch_size, prepare_batch)
    old_train = mean_loss(model, *train_pool, config.eval_batch_size, prepare_batch)
    data = ArmData(task, train_pool, heldout_pool, prepare_batch, derive_seed(seed, "order"))
    grown = grow_points(model, chosen, data, (old_train, old_heldout), config, seed, saved)
    return [
        {
            "snapshot": snapshot,
            "snapshot_step": step,
            **{name: certified.loc[row["point"], name] for name in CERTIFICATE},
            "predicted_gain": certified.loc[row["point"], "block_grad_norm"],
            "train_loss_old": old_train,
            "test_loss_old": float(old_heldout.mean()),
            **row,
        }
        for row in grown
    ]
