"""The training criterion (docs/science.md §7.1): which of a run's models are trained reference models.

Both papers reason about a *trained* reference model ``f_old``, so every model a run trains is checked, before
any claim is judged, by a rule fixed here before results are seen (one row of ``training`` per model):

- **plateau**: over the last fifth of the steps the training loss moved, down or up, by at most
  ``PLATEAU_SHARE`` of its whole fall, from its first step ``L_first`` to its mean over the last tenth of the
  steps ``L_end``; the last fifth runs from the mean over the tenth that ends at 80 %, ``L_late``
  (``training.train.loss_windows``): ``|L_late − L_end| ≤ PLATEAU_SHARE · (L_first − L_end)``. A loss still
  falling is not at a plateau, nor is one that rose;
- **image classifiers** (no ``tokens_per_parameter``): plateau, and test accuracy at least the dataset's floor
  (``ACCURACY_FLOORS``, or a width's own measured floor in ``WIDTH_FLOORS``); a dataset without a floor is
  held to the plateau alone;
- **language models**: at least ``MIN_TOKENS_PER_PARAMETER`` tokens per non-embedding parameter, or plateau.

A model that misses it after its budget trains on (``training.train``, ``train.continue_rounds`` rounds at most,
``judged_metrics``); one that still fails is left out of every claim (``trained_only``) and named on the report's
first page. A run
declared to be about early training (``train.criterion: early-training``) holds no model to it: the table is
shown and nothing is left out. Pretrained checkpoints (no row of ``training``) are trained by their authors
and kept.
"""

from __future__ import annotations

import pandas as pd

from ..core.tables import early_tables, model_keys
from .common import Claim, Tables
from .subset import REFIT, restricted

TRAINED, EARLY = "trained", "early-training"  # train.criterion: the run's models are held to it, or not
PLATEAU_SHARE = 0.05  # a loss whose last fifth of training brought over 5 % of its whole fall is still falling
ACCURACY_FLOORS = {"mnist5k": 0.97}  # test accuracy of a trained image classifier, per dataset
# A narrower model's floor where its capacity was measured to stop short of the dataset's (docs/science.md
# §7.1): mnist5k at 14 × 14, width 0.25 (4/8/16 channels) reached 0.956–0.965 test accuracy under four
# recipes (20–30 epochs, with and without shifts), where it fits the augmented train split only to a loss of
# 0.08–0.10 and widths 0.5 and 1 fit it to 0.005 and reach 0.97.
WIDTH_FLOORS = {("mnist5k", 0.25): 0.95}
MIN_TOKENS_PER_PARAMETER = 20.0  # Chinchilla's compute-optimal ratio (Hoffmann et al. 2022)
RECORDED = [
    "steps",
    "epochs",
    "train_loss",
    "test_loss",
    "test_acc",
    "tokens_per_parameter",
    "loss_first",
    "loss_late",
    "loss_end",
]
COLUMNS = ["dataset", "model", "steps", "budget", "train_loss", "loss_decrease", "test_loss", "test_acc", "passed"]


def loss_decrease(row: pd.Series) -> float:
    """``(L_late − L_end) / L_late``: the relative fall of the training loss over the last fifth of the steps."""
    return (row["loss_late"] - row["loss_end"]) / row["loss_late"]


def tail_share(row: pd.Series) -> float:
    """``(L_late − L_end) / (L_first − L_end)``: the share of the loss's whole fall that its last fifth brought."""
    return (row["loss_late"] - row["loss_end"]) / (row["loss_first"] - row["loss_end"])


def at_plateau(row: pd.Series) -> bool:
    """``|L_late − L_end| ≤ PLATEAU_SHARE · (L_first − L_end)`` (False where a window is empty or nothing fell)."""
    return bool(row["loss_first"] > row["loss_end"] and abs(tail_share(row)) <= PLATEAU_SHARE)


def is_language_model(row: pd.Series) -> bool:
    return not pd.isna(row.get("tokens_per_parameter"))


def accuracy_floor(row: pd.Series) -> float | None:
    """The test accuracy an image classifier of ``row`` must reach, None where its dataset states none."""
    return WIDTH_FLOORS.get((row["dataset"], float(row["width"])), ACCURACY_FLOORS.get(row["dataset"]))


def judged(row: pd.Series) -> tuple[bool, str]:
    """``(passed, why)`` of one model's row of ``training`` under the criterion (module docstring)."""
    plateau = at_plateau(row)
    moved = "brought" if not row["loss_end"] > row["loss_late"] else "rose by"
    fall = (
        f"the last 20 % {moved} {abs(tail_share(row)):.1%} of the loss's fall "
        f"({abs(row['loss_late'] - row['loss_end']):.3g} of {row['loss_first'] - row['loss_end']:.3g} nats)"
    )
    if is_language_model(row):
        enough = row["tokens_per_parameter"] >= MIN_TOKENS_PER_PARAMETER
        tokens = f"{row['tokens_per_parameter']:.3g} tokens per parameter"
        if enough or plateau:
            return True, f"{tokens}" if enough else f"plateau: {fall}"
        return False, f"{tokens} < {MIN_TOKENS_PER_PARAMETER:g} and no plateau: {fall}"
    floor = accuracy_floor(row)
    reasons = [] if plateau else [f"no plateau: {fall}"]
    if floor is not None and not row["test_acc"] >= floor:
        reasons.append(f"test accuracy {row['test_acc']:.4f} < {floor:g}")
    if reasons:
        return False, "; ".join(reasons)
    return True, f"plateau, test accuracy ≥ {floor:g}" if floor is not None else "plateau (no accuracy floor)"


def judged_metrics(metrics: dict) -> tuple[bool, str]:
    """``judged`` on one model's training metrics (``training.train``'s, the model's table keys among them):
    the criterion training continues until (``train.continue_rounds``)."""
    row = pd.Series({key: float("nan") if value is None else value for key, value in metrics.items()})
    return judged(row.reindex(row.index.union(RECORDED)))


def continued(row: pd.Series) -> str:
    """`` after n round(s) of continued training`` where the model trained on past its budget, else ''."""
    rounds = row.get("continued_rounds")
    if pd.isna(rounds) or not rounds:
        return ""
    return f" after {int(rounds)} round{'s' * (rounds != 1)} of continued training"


def training_check(training: pd.DataFrame | None, criterion: str = TRAINED) -> pd.DataFrame:
    """One row per trained model (``COLUMNS`` plus ``why``): its budget, losses, accuracy and whether it meets
    the criterion (``passed``: True / False; under ``EARLY`` every model passes, ``why`` says it is not held)."""
    if criterion not in (TRAINED, EARLY):
        raise ValueError(f"training criterion {criterion!r} is not one of {[TRAINED, EARLY]}")
    rows = []
    for _, row in (training if training is not None else pd.DataFrame()).iterrows():
        row = row.reindex(row.index.union(RECORDED))  # a column a table lacks is NaN: not at a plateau
        passed, why = judged(row)
        why += continued(row)
        if criterion == EARLY:
            passed, why = True, f"not held (early-training run): {why}"
        tokens = row.get("tokens_per_parameter")
        budget = f"{row['epochs']:.3g} epochs" if pd.isna(tokens) else f"{tokens:.3g} tokens per parameter"
        rows.append(
            {
                **{key: row[key] for key in model_keys() if key in row},
                "steps": row["steps"],
                "budget": budget,
                "train_loss": row["train_loss"],
                "loss_decrease": loss_decrease(row),
                "test_loss": row["test_loss"],
                "test_acc": row["test_acc"],
                "passed": passed,
                "why": why,
            }
        )
    return pd.DataFrame(rows, columns=[*model_keys(), *COLUMNS[2:], "why"])


def failed(check: pd.DataFrame) -> list[str]:
    """``dataset/model`` of every model that fails the criterion."""
    return [f"{r.dataset}/{r.model}" for r in check.itertuples() if not r.passed]


def trained_only(tables: Tables, check: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The tables without the rows of models that fail the criterion (``subset.restricted``; a table without
    model keys passes unchanged, and so does an early snapshot's, ``early_<table>``: the early-training regime
    measures the models before they trained; the powerlaw fit is fitted again on the models kept)."""
    out = set(failed(check))
    if not out:
        return dict(tables)

    def keep(frame: pd.DataFrame) -> pd.Series | None:
        if not {"dataset", "model"} <= set(frame.columns):
            return None
        return ~(frame["dataset"].astype(str) + "/" + frame["model"].astype(str)).isin(out)

    return restricted(tables, keep, unchanged=early_tables())


def models_of(tables: Tables, claim: Claim) -> int:
    """Distinct models in the tables ``claim`` reads (a fitted table counted by its source's models)."""
    names: set[tuple[str, str]] = set()
    for name in claim.reads:
        frame = tables.get(REFIT[name][0] if name in REFIT else name)
        if frame is not None and {"dataset", "model"} <= set(frame.columns):
            names |= set(zip(frame["dataset"].astype(str), frame["model"].astype(str)))
    return len(names)


def rests_on(kept: int, measured: int) -> str:
    """The claims table's ``models`` cell: ``kept`` trained models of the ``measured`` ones (empty for none)."""
    if measured == 0:
        return ""
    return f"{kept}" if kept == measured else f"{kept} of {measured} ({measured - kept} not trained)"
