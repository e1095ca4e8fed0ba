"""The grown checkpoint's ``README.md``: a Hugging Face model card (``huggingface_hub.ModelCard``).

Its metadata (``ModelCardData``) names the ``base_model`` by its Hub id when the checkpoint came from
the Hub or its cache (a local directory is named by its path in the text, said to be local); its text
holds the inserted layers, the placement rule and its source, the certificate rows behind each choice,
every model's held-out losses and gains (and, under ``--retain``, forgetting), the decision and the
command. ``growth.json`` holds the rest.

No string a user controls (a path, the command line, a name from the checkpoint's config) can add markup
to the card, rendered as CommonMark with HTML on: paths are code spans (``code``), names escaped text
(``text``), the command a fenced block it cannot close (``fence``); none of them breaks a line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..experiments.decision import GAIN_SE

CARD = "README.md"
SOURCES = {
    "auto": "the expansion certificate (Paper D, arXiv 2605.08297; `scalemech certify`)",
    "best": "the expansion certificate's whole ranking, grown where it is only weak too (`scalemech certify`)",
    "pareto": "the expansion certificate's gain under its predicted forgetting (`scalemech certify --retain`)",
    "every": "LLaMA-Pro's stride (arXiv 2401.02415)",
    "adept": "ADEPT's least important layers, Σ|g·W| on the retain data (arXiv 2510.10071)",
    "bi": "ShortGPT's block influence, 1 − cos(h_in, h_out) on the retain data (arXiv 2403.03853)",
    "top": "after the last layer",
}
CERTIFICATE_COLUMNS = ("point", "mu_sq", "d_align", "b_exact", "block_grad_norm", "mu_cross", "forget", "verdict")


PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
"""Every ASCII punctuation character: CommonMark lets each be backslash-escaped (spec 2.4)."""


def visible(value: Any) -> str:
    """``str(value)`` with every character that is not printable (newline, tab, escape, line separator)
    written as Python writes it in a string literal (``\\n``): a user's string never breaks a line."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in str(value))


def text(value: Any) -> str:
    """``value`` as literal Markdown text (``visible``, every ASCII punctuation character backslash-escaped):
    it opens no tag, entity, link, autolink, emphasis, code span or table cell."""
    return PUNCTUATION.sub(r"\\\1", visible(value))


def _longest_run(value: str) -> int:
    return max((len(run) for run in re.findall("`+", value)), default=0)


def code(value: Any) -> str:
    """``value`` as an inline code span, rendered literally (no HTML, entity or link inside): ``visible``,
    between one backtick more than its longest run of backticks (a space inside where it starts or ends
    with one, which CommonMark strips)."""
    shown = visible(value)
    ticks = "`" * (_longest_run(shown) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{ticks}{pad}{shown}{pad}{ticks}"


def fence(value: str) -> list[str]:
    """``value`` (several lines allowed) as a fenced code block that none of its lines can close: fenced by
    one backtick more than its longest run of backticks, at least three."""
    ticks = "`" * max(3, _longest_run(value) + 1)
    return [ticks, value, ticks]


def placement_source(at: str) -> str:
    """Where the ``--at`` rule comes from (explicit points: the user)."""
    return SOURCES.get(at.split(":")[0], "points given by the user (`--at`)")


def _cell(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]


ARM_HEADER = [
    "model",
    "new-domain loss",
    "gain over old ± SE",
    "grown's gain ± SE",
    "retain loss",
    "forgetting ± SE",
    f"forgetting + {GAIN_SE:g} SE",
    "trainable params",
    "tokens",
    "FLOPs",
]
RETAIN_COLUMNS = ("retain loss", "forgetting ± SE", f"forgetting + {GAIN_SE:g} SE")


def _pm(row: dict[str, Any], key: str) -> str:
    return f"{row[key]:+.4f} ± {row[key + '_se']:.4f}" if key in row else "-"


def arm_rows(record: dict[str, Any]) -> list[list[Any]]:
    """Per model (``ARM_HEADER``, ``growth.json``'s ``held_out.arms``): held-out new-domain loss, its paired
    gain over the old model, the grown model's paired gain over it, retain loss, forgetting (± paired SE)
    and the upper end the budget is tested on when measured, trainable parameters, tokens and FLOPs."""
    rows = []
    for name, row in record["held_out"]["arms"].items():
        arm = record["arms"].get(name, {})
        rows.append(
            [
                name,
                row["new_loss"],
                _pm(row, "gain"),
                _pm(row, "grown_gain"),
                row.get("retain_loss", "-"),
                _pm(row, "forgetting"),
                row.get("forgetting_hi", "-"),
                arm.get("trainable_parameters", "-"),
                arm.get("tokens", "-"),
                arm.get("flops", "-"),
            ]
        )
    return rows


def arm_table(record: dict[str, Any]) -> str:
    """``arm_rows`` as an aligned text table for the terminal (without ``--retain``, its forgetting columns
    left out), with the Pareto front and what forgetting is."""
    keep = [i for i, column in enumerate(ARM_HEADER) if record["retain"] or column not in RETAIN_COLUMNS]
    rows = [[ARM_HEADER[i] for i in keep], *([_cell(row[i]) for i in keep] for row in arm_rows(record))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    windows = record["held_out"]["windows"]
    lines.insert(0, f"held-out loss per token on {windows} windows of --data; gains paired over them")
    retain = record["retain"]
    if retain:
        lines.append(f"forgetting = retain loss - the old model's on the same {retain['windows']} windows of --retain")
    if retain and retain["pareto_front"] is not None:
        front = ", ".join(retain["pareto_front"])
        lines.append(f"Pareto front of (new-domain loss, forgetting) at {GAIN_SE:g} paired SE: {front}")
    return "\n".join(lines)


def card_text(record: dict[str, Any]) -> str:
    """The card's markdown body (module doc)."""
    at, decision, source = record["placement"]["at"], record["decision"], record["source"]
    verdict = "recommended" if decision["recommended"] else "not recommended"
    lines = [
        f"# {code(source['hub_id'] or Path(source['checkpoint']).name)}, grown by scalemech",
        "",
        f"- base model: {base_model_text(source)} ({text(source['model_type'])}, {source['layers']} layers) -> "
        f"{record['layers']} layers",
        f"- inserted layers (indices in this model): {record['inserted_layers']}",
        f"- placement: {code(f'--at {at}')}: {placement_source(at)}",
        f"- decision: **{verdict}**: {decision['why']} (rule: {decision['rule']}); "
        f"written: {text(decision['written'])}",
        "",
        "## Certificate behind the placement",
    ]
    for step in record["decisions"]:
        lines += ["", f"Round {step['round']}: chosen {text(step['chosen'])}", ""]
        rows = [[_named(row.get(col, "-")) for col in CERTIFICATE_COLUMNS] for row in step["certificate"]]
        lines += _table(list(CERTIFICATE_COLUMNS), rows)
    lines += ["", f"## Held-out losses ({record['held_out']['windows']} windows, nats/token)", ""]
    lines += _table(ARM_HEADER, [[text(name), *rest] for name, *rest in arm_rows(record)])
    lines += ["", "## Command", "", *fence(record["command"]), ""]
    return "\n".join(lines)


def _named(value: Any) -> Any:
    """A certificate cell: a number as it is, a name (the point, the verdict) as ``text``."""
    return text(value) if isinstance(value, str) else value


def base_model_text(source: dict[str, Any]) -> str:
    """The base model as the card names it: its Hub id, or its local path said to be local."""
    if source["hub_id"]:
        return f"{code(source['hub_id'])} on the Hugging Face Hub"
    return f"{code(Path(source['checkpoint']).resolve())}, a local directory (not from the Hugging Face Hub)"


def write_card(directory: Path, record: dict[str, Any]) -> Path:
    """``directory/README.md``: ``ModelCardData(base_model=…)``, the Hub id (none for a local checkpoint:
    the Hub takes only ids there), and ``card_text``."""
    from huggingface_hub import ModelCard, ModelCardData

    base = record["source"]["hub_id"]
    data = ModelCardData(base_model=base, library_name="transformers", tags=["scalemech"])
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n{card_text(record)}")
    card.save(directory / CARD)
    return directory / CARD
