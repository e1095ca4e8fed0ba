"""The grown checkpoint's ``README.md``: a Hugging Face model card (``huggingface_hub.ModelCard``).

Its metadata (``ModelCardData``) names the ``base_model``; its text holds the inserted layers, the
placement rule and its source, the certificate rows behind each choice, every arm's held-out losses
(and, under ``--retain``, forgetting), the decision and the command. ``growth.json`` holds the rest.

No string a user controls (a path, the command line, a name from the checkpoint's config) can add markup
to the card, rendered as CommonMark with HTML on: paths are code spans (``code``), names escaped text
(``text``), the command a fenced block it cannot close (``fence``); none of them breaks a line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

CARD = "README.md"
SOURCES = {
    "auto": "the expansion certificate (Paper D, arXiv 2605.08297; `scalemech certify`)",
    "every": "LLaMA-Pro's stride (arXiv 2401.02415)",
    "adept": "ADEPT's least important layers, Σ|g·W| on the retain data (arXiv 2510.10071)",
    "bi": "ShortGPT's block influence, 1 − cos(h_in, h_out) on the retain data (arXiv 2403.03853)",
    "top": "after the last layer",
}
CERTIFICATE_COLUMNS = ("point", "mu_sq", "d_align", "b_exact", "block_grad_norm", "verdict")


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
    "grown's gain ± SE",
    "retain loss",
    "forgetting ± SE",
    "trainable params",
    "tokens",
    "FLOPs",
]


def _pm(row: dict[str, Any] | None, key: str) -> str:
    return f"{row[key]:+.4f} ± {row[key + '_se']:.4f}" if row and key in row else "-"


def arm_rows(record: dict[str, Any]) -> list[list[Any]]:
    """Per model (``ARM_HEADER``): held-out new-domain loss, the grown model's paired gain over it, retain
    loss and forgetting (± paired SE) when measured, trainable parameters, tokens and FLOPs."""
    retain = (record.get("retain") or {}).get("arms", {})
    rows = []
    for name, loss in record["held_out"]["mean_loss"].items():
        arm, kept = record["arms"].get(name, {}), retain.get(name)
        rows.append(
            [
                name,
                loss,
                _pm(kept, "grown_gain"),
                kept["retain_loss"] if kept else "-",
                _pm(kept, "forgetting"),
                arm.get("trainable_parameters", "-"),
                arm.get("tokens", "-"),
                arm.get("flops", "-"),
            ]
        )
    return rows


def arm_table(record: dict[str, Any]) -> str:
    """``arm_rows`` as an aligned text table for the terminal, with the Pareto front and the rule."""
    rows = [ARM_HEADER, *([_cell(v) for v in row] for row in arm_rows(record))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(ARM_HEADER))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    retain = record["retain"]
    lines.append(f"forgetting = retain loss - the old model's on the same {retain['windows']} windows of --retain")
    if retain["pareto_front"] is not None:
        lines.append(f"Pareto front of (new-domain loss, forgetting): {', '.join(retain['pareto_front'])}")
    return "\n".join(lines)


def card_text(record: dict[str, Any]) -> str:
    """The card's markdown body (module doc)."""
    at, decision, source = record["placement"]["at"], record["decision"], record["source"]
    verdict = "recommended" if decision["recommended"] else "not recommended"
    lines = [
        f"# {code(source['checkpoint'])}, grown by scalemech",
        "",
        f"- base model: {code(source['checkpoint'])} ({text(source['model_type'])}, {source['layers']} layers) "
        f"-> {record['layers']} layers",
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


def write_card(directory: Path, record: dict[str, Any]) -> Path:
    """``directory/README.md``: ``ModelCardData(base_model=…)`` and ``card_text``."""
    from huggingface_hub import ModelCard, ModelCardData

    data = ModelCardData(base_model=record["source"]["checkpoint"], library_name="transformers", tags=["scalemech"])
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n{card_text(record)}")
    card.save(directory / CARD)
    return directory / CARD
