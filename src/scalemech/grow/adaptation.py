"""E12: growth for domain adaptation, one base model through ``grow`` at every placement rule.

A llama trained on domain A (the base) is exported to ``transformers`` (``models.hf_export.save_hf``:
the same function, a byte-level tokenizer) and grown into domain B by the very ``grow`` users run
(``run.grown``), with ``--retain A``, once per placement rule of ``--at``. Each run trains the same
arms on the same batches: ``grown`` (new layers only), ``control_tokens``, ``control_flops``,
``inplace`` and ``lora``, and scores every model on the same held-out windows of B (``eval_windows``
of B's test split, disjoint from the certificate's pool; every seed named by the base's identity, so the
numbers do not depend on where the results lie) and of A (its test split, which the base
never trained on). Each row of the ``adaptation`` table is one placement × arm, with paired
differences over those windows (``stats.paired_difference``, mean and SE):

- ``gain = L_old(B) − L_arm(B)`` and ``forgetting = L_arm(A) − L_old(A)``;
- ``vs_grown_new = L_arm(B) − L_grown(B)``, ``vs_grown_forgetting = L_arm(A) − L_grown(A)``
  (``= F_arm − F_grown``), within the placement;
- ``vs_best_new = L_arm(B) − L_arm,best(B)`` and ``vs_best_forgetting`` likewise, the same arm across
  placements: every run scores the same windows (checked), as they are drawn from the seed and the
  checkpoint alone; ``vs_equal_*`` likewise against the certificate's placement with as many new layers
  (``best`` for one, ``best:K`` for ``K``: ``equal_reference``, when it ran), and ``vs_pareto_*`` against
  the forgetting-aware ``pareto`` (when it ran);
- ``predicted_gain`` (``block_grad_norm``), ``predicted_gain_b`` (``mu_cross``) and ``predicted_forgetting``
  (``forget = −μ_Bᵀμ_A``): what the base's certificate predicted at the points grown, summed over them.

A placement ``layer.i`` grows one layer after layer ``i``, so that every point has a realized forgetting
beside its predicted one (G6).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .. import stats
from ..core.seeding import model_identity
from ..core.tables import columns
from ..experiments.decision import ARMS
from ..models.hf_export import save_hf
from ..models.llama import Llama
from .run import Grower, GrowSettings, grown

REFERENCE = "best"  # the certificate's placement, every other is paired against it (vs_best_*)
FORGETTING_AWARE = "pareto"  # the certificate under its predicted forgetting (vs_pareto_*, G6)
POINT = re.compile(r"layer\.(0|[1-9][0-9]*)")


def run_directory(placement: str) -> str:
    """The directory name of one placement's ``grow`` output (``every:2`` → ``every-2``)."""
    return placement.replace(":", "-")


def equal_reference(new_layers: int) -> str:
    """The certificate's placement with ``new_layers`` new layers: ``best``, or ``best:K`` (the rival's
    new parameters, for a ``K``-layer rule)."""
    return REFERENCE if new_layers == 1 else f"{REFERENCE}:{new_layers}"


def _paired(name: str, a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """``{name: mean(a − b), name_se: its SE}`` over the same windows."""
    difference = stats.paired_difference(a, b)
    return {name: difference.mean, f"{name}_se": difference.se}


def _against(name: str, run: Grower, other: Grower | None, arm: str) -> dict[str, float]:
    """``vs_<name>_new`` and ``vs_<name>_forgetting`` of ``arm`` against the same arm of ``other`` (NaN
    without it)."""
    if other is None:
        return dict.fromkeys([f"vs_{name}_{axis}{se}" for axis in ("new", "forgetting") for se in ("", "_se")], np.nan)
    return {
        **_paired(f"vs_{name}_new", run.new_losses[arm], other.new_losses[arm]),
        **_paired(f"vs_{name}_forgetting", run.retain_losses[arm], other.retain_losses[arm]),
    }


def predicted(run: Grower) -> dict[str, float]:
    """What the first certificate predicted at the points the run grew, summed over them (first order is
    additive): ``predicted_gain`` (``block_grad_norm``), ``predicted_gain_b`` (``mu_cross``) and
    ``predicted_forgetting`` (``forget``, ``certify.forgetting``)."""
    first = [row for row in run.result["predicted_first_order_gain"] if row["round"] == 1]
    sums = {"predicted_gain": "block_grad_norm", "predicted_gain_b": "mu_cross", "predicted_forgetting": "forget"}
    value = {name: [np.nan if row[key] is None else row[key] for row in first] for name, key in sums.items()}
    return {name: float(sum(values)) if values else np.nan for name, values in value.items()}


def _check_same_windows(runs: dict[str, Grower]) -> None:
    """Every run scored the held-out windows of the ``REFERENCE`` run (``ValueError`` naming the run)."""
    reference = runs[REFERENCE]
    for placement, run in runs.items():
        same = torch.equal(run.eval_x, reference.eval_x) and torch.equal(run.retained.x, reference.retained.x)
        if not same:
            raise ValueError(f"E12: grow --at {placement} scored other held-out windows than --at {REFERENCE}")


def rows(runs: dict[str, Grower], keys: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``adaptation`` rows of finished ``grow`` runs by placement (module doc)."""
    _check_same_windows(runs)
    out = []
    for placement, run in runs.items():
        new, retain, arms = run.new_losses, run.retain_losses, run.result["arms"]
        equal = equal_reference(len(run.inserted))
        for arm in ARMS:
            out.append(
                {
                    **keys,
                    "placement": placement,
                    "inserted": ",".join(map(str, run.inserted)),
                    "copied": ",".join(map(str, run.copied)),
                    "arm": arm,
                    **{key: arms[arm][key] for key in ("trainable_parameters", "steps", "tokens", "flops")},
                    "n_new": len(new["old"]),
                    "n_retain": len(retain["old"]),
                    "new_loss_old": float(new["old"].mean()),
                    "retain_loss_old": float(retain["old"].mean()),
                    "new_loss": float(new[arm].mean()),
                    "retain_loss": float(retain[arm].mean()),
                    **_paired("gain", new["old"], new[arm]),
                    **_paired("forgetting", retain[arm], retain["old"]),
                    **_paired("vs_grown_new", new[arm], new["grown"]),
                    **_paired("vs_grown_forgetting", retain[arm], retain["grown"]),
                    **_against("best", run, runs[REFERENCE], arm),
                    "equal_reference": equal if equal in runs else None,
                    **_against("equal", run, runs.get(equal), arm),
                    **_against("pareto", run, runs.get(FORGETTING_AWARE), arm),
                    **predicted(run),
                    "recommended": run.result["decision"]["recommended"],
                    "winner": run.result["decision"]["winner"],
                }
            )
    return out


def grown_after(runs: dict[str, Grower], point: int) -> Grower | None:
    """A finished run that grew one layer, after layer ``point`` of the base (a rule's, say), if any."""
    return next((run for run in runs.values() if run.copied == [point] and len(run.inserted) == 1), None)


def adaptation(
    base: Llama,
    domain_a: str,
    domain_b: str,
    out: Path,
    keys: dict[str, Any],
    *,
    placements: Sequence[str],
    device: torch.device | str,
    **options: Any,
) -> pd.DataFrame:
    """The ``adaptation`` table of ``base`` (module doc): exported into ``out/base``, grown into the data
    ``domain_b`` with ``--retain domain_a`` once per placement into ``out/<placement>`` (each resumable
    by ``grow``'s own states); ``options``: ``GrowSettings`` fields (steps, lr, batch_size, eval_windows,
    pool, M, K, seed). A point placement ``layer.i`` that an earlier run already grew (one layer after
    layer ``i``) is that run's: the same seeds and batches give the same models, so it is not grown again."""
    if REFERENCE not in placements:
        raise ValueError(f"E12 pairs every placement against {REFERENCE!r}; placements {list(placements)} lack it")
    checkpoint = save_hf(base, Path(out) / "base")
    name = model_identity(keys)  # the seeds' name of the base: the same wherever the results lie
    kind = torch.device(device).type
    runs: dict[str, Grower] = {}
    for placement in tqdm(placements, desc="adapt"):
        point = POINT.fullmatch(placement)
        if point and (done := grown_after(runs, int(point.group(1)))) is not None:
            runs[placement] = done
            continue
        settings = GrowSettings(at=placement, retain=domain_a, device=kind, seed_name=name, **options)
        settings.command = f"E12: grow {checkpoint} {domain_b} --retain {domain_a} --at {placement}"
        runs[placement] = grown(str(checkpoint), domain_b, Path(out) / run_directory(placement), settings)
    return pd.DataFrame(rows(runs, keys)).reindex(columns=columns("adaptation"))
