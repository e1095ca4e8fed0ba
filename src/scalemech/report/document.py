"""``report.md``: the short verdict table (claim · regime · verdict · per seed · models · one model out ·
deciding number · figure, each claim and figure linked to its section), a paragraph per claim with its
statement, rule and detail,
every figure of ``scalemech.figures.FIGURES`` with its caption from ``workflow/report/<stem>.rst``, and
the run's job times."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from ..core.integrity import verify
from ..core.layout import table_path
from ..core.tables import check_columns, read_table
from ..figures import FIGURES
from .rules import CLAIM_TABLES
from .trained import EARLY, TRAINED, failed, training_check
from .verdicts import CLAIM_FIGURES, REMOVALS, claims

# the verdict table's columns (each cell ≤ ~200 characters)
TABLE = ["claim", "regime", "verdict", "per seed", "models", "one model out", "deciding number", "figure"]
TRAINING_HEADING = "Trained models"
_LINK = re.compile(r"\[(.*?)\]\(.*?\)")


def anchor(heading: str) -> str:
    """The anchor GitHub gives a markdown heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as hyphens (``W1 along training`` → ``w1-along-training``)."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def verdict_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The short table: each claim linked to its section, the regime it is decided in, its verdict, each seed's
    verdict alone, the models it rests on, how many single-model removals change its verdict (``REMOVALS``;
    empty where not counted), its deciding number and a link to the section of its figure (``CLAIM_FIGURES``;
    empty without one)."""
    stems = verdicts["claim"].map(CLAIM_FIGURES)
    return pd.DataFrame(
        {
            "claim": [f"[{claim}](#{anchor(claim)})" for claim in verdicts["claim"]],
            "regime": verdicts["regime"].to_list(),
            "verdict": verdicts["verdict"].to_list(),
            "per seed": verdicts["per_seed"].to_list(),
            "models": verdicts["models"].to_list(),
            "one model out": verdicts.get(REMOVALS, pd.Series("", index=verdicts.index)).to_list(),
            "deciding number": verdicts["statistic"].to_list(),
            "figure": [f"[{stem.split('_')[0]}](#{anchor(stem)})" if isinstance(stem, str) else "" for stem in stems],
        },
        columns=TABLE,
    )


def training_cells(check: pd.DataFrame, no: str = "**no**") -> pd.DataFrame:
    """The training criterion's table as display strings, one row per trained model: its steps, budget, final
    training loss, the loss's fall over the last 20 % of the steps, test loss and accuracy, and whether it
    passed (``no`` marks a failure) and why (docs/science.md §7.1)."""
    return pd.DataFrame(
        {
            "model": check["dataset"] + "/" + check["model"],
            "steps": check["steps"].map(str),
            "epochs or tokens per parameter": check["budget"],
            "train loss": check["train_loss"].map(lambda v: f"{v:.3g}"),
            "fall over the last 20 %": check["loss_decrease"].map(lambda v: f"{v:.1%}"),
            "test loss": check["test_loss"].map(lambda v: f"{v:.3g}"),
            "test accuracy": check["test_acc"].map(lambda v: f"{v:.4f}"),
            "passed": [("yes" if ok else no) + f": {why}" for ok, why in zip(check["passed"], check["why"])],
        }
    )


def training_table(check: pd.DataFrame) -> str:
    """``training_cells`` as a markdown table."""
    return _markdown(training_cells(check)) if len(check) else "(no model trained in this run)"


def training_summary(check: pd.DataFrame, criterion: str) -> str:
    """One line: how many trained models meet the criterion and which do not (every claim leaves them out),
    or, for an early-training run, that its claims are about early training."""
    if criterion == EARLY:
        return (
            f"**Training criterion**: not held. This run is about early training (`train.criterion: {EARLY}`): "
            f"its {len(check)} models are measured early in training on purpose, and every verdict below is "
            f"about models early in training, not about trained reference models."
        )
    out = failed(check)
    named = f"; left out of every claim: {', '.join(out)}" if out else ""
    return (
        f"**Training criterion** (docs/science.md §7.1): {len(check) - len(out)} of {len(check)} trained "
        f"models meet it{named}. Pretrained checkpoints are trained by their authors and kept."
    )


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _markdown(frame: pd.DataFrame) -> str:
    """A GitHub markdown table of ``frame`` (pipes in cells escaped)."""
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def _section(row: tuple) -> list[str]:
    """A claim's paragraph: its statement, verdict and statistic, each seed alone, the rule, the detail,
    its figure."""
    detail = f" {row.detail}." if row.detail else ""
    per_seed = f" Per seed: {row.per_seed}." if row.per_seed else ""
    stem = CLAIM_FIGURES.get(row.claim)
    figure = f" Figure: [{stem}](#{anchor(stem)})." if stem else ""
    return [
        f"### {row.claim}",
        "",
        f"*{row.statement}* Regime: {row.regime}. **{row.verdict}**: {row.statistic}.{per_seed}",
        "",
        f"Rule: {row.rule}.{detail}{figure}",
        "",
    ]


def link_text(cell: str) -> str:
    """Markdown with its links reduced to their text (``[D1](#d1)`` → ``D1``)."""
    return _LINK.sub(r"\1", cell)


def _caption(captions_dir: Path, stem: str) -> str:
    path = captions_dir / f"{stem}.rst"
    return path.read_text().strip() if path.exists() else f"(no caption: {path} is missing)"


def verdict_summary(report_md: str | Path, figures_dir: str | Path) -> str:
    """A few lines for the end of a run: where the report and figures are, and each claim's verdict
    (read back from the report's claims table)."""
    lines = Path(report_md).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| claim |"))
    table = itertools.takewhile(lambda line: line.startswith("| "), [lines[start], *lines[start + 2 :]])
    header, *cells = [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)] for line in table]
    verdict = header.index("verdict")
    rows = [f"  {link_text(c[1]):<18} {c[verdict]}" for c in cells]
    return "\n".join(
        [
            f"report:  {report_md}",
            f"figures: {figures_dir}/",
            "verdicts:",
            *rows,
            "HTML report: snakemake --report report.zip",
        ]
    )


def runtime_section(runtime: pd.DataFrame, top: int = 5) -> list[str]:
    """Markdown lines: the run's total wall and CPU time over its jobs and the ``top`` longest jobs."""
    longest = runtime.sort_values("wall_seconds", ascending=False).head(top)
    rows = "\n".join(
        f"| {r.step} | {r.job} | {r.wall_seconds:.1f} | {r.cpu_seconds:.1f} | {r.max_rss_mb:.0f} |"
        for r in longest.itertuples()
    )
    return [
        "## Runtime",
        "",
        f"{len(runtime)} jobs: {runtime['wall_seconds'].sum():.0f} s of job wall time, "
        f"{runtime['cpu_seconds'].sum():.0f} s of CPU time (Snakemake's benchmark records; "
        f"`tables/runtime.csv`). The longest jobs:",
        "",
        "| step | job | wall s | CPU s | max RSS MB |",
        "|---|---|---|---|---|",
        rows,
        "",
    ]


def verdict_rows(
    tables_dir: str | Path,
    benchmarks: pd.DataFrame | Mapping[str, float] | None = None,
    criterion: str = TRAINED,
    removals: bool = True,
) -> pd.DataFrame:
    """The verdict table (``tables/verdicts.csv``): ``claims`` on the tables in ``tables_dir`` (a missing
    one: not measured; ``benchmarks`` overrides the folder's; each row's single-model removals unless not
    ``removals``), each row with the ``figure`` that shows its claim (``CLAIM_FIGURES``; empty without one).
    The report and every figure's verdict read it."""
    tables_dir = Path(tables_dir)
    tables = {name: read_table(path, name) for name in CLAIM_TABLES if (path := table_path(tables_dir, name)).exists()}
    verdicts = claims(tables, benchmarks, criterion, removals=removals)
    return verdicts.assign(figure=verdicts["claim"].map(CLAIM_FIGURES).fillna(""))


def read_verdicts(path: str | Path) -> pd.DataFrame:
    """The verdict table written at ``path`` (checked against its sha256), every cell as text (an empty
    cell stays empty)."""
    verify(Path(path), required=False)
    return check_columns(pd.read_csv(path, dtype=str, keep_default_na=False), "verdicts")


def write_report(
    tables_dir: str | Path,
    figures_dir: str | Path,
    out_md: str | Path,
    *,
    captions_dir: str | Path = "workflow/report",
    benchmarks: pd.DataFrame | Mapping[str, float] | None = None,
    criterion: str = TRAINED,
    verdicts: pd.DataFrame | None = None,
    preface: Sequence[str] = (),
    removals: bool = True,
) -> pd.DataFrame:
    """Write ``out_md``: the claims table (``verdicts``, the run's verdict table; by default
    ``verdict_rows`` of the tables in ``tables_dir``: missing ones count as not measured, ``benchmarks``
    overrides the folder's), then each figure of ``figures_dir``
    (relative PNG link) with its caption ``captions_dir/<stem>.rst`` (claims table: ``claims.rst``); the
    training ``criterion``'s table of the trained models comes first (``training_lines``), and the claims rest
    on the models that meet it (``claims``, each row with its single-model removals unless not ``removals``);
    ``preface``: lines
    before everything (what the design can decide, ``power.preface``). Return the claims table."""
    tables_dir, figures_dir, out_md, captions_dir = map(Path, (tables_dir, figures_dir, out_md, captions_dir))
    if verdicts is None:
        verdicts = verdict_rows(tables_dir, benchmarks, criterion, removals=removals)
    training = table_path(tables_dir, "training")
    check = training_check(read_table(training, "training") if training.exists() else None, criterion)
    lines = [
        "# Claims report",
        "",
        *preface,
        _caption(captions_dir, "claims"),
        "",
        training_summary(check, criterion),
        "",
    ]
    lines += [_markdown(verdict_table(verdicts)), "", f"## {TRAINING_HEADING}", "", training_table(check), ""]
    lines += ["## Claims in detail", ""] + [line for row in verdicts.itertuples() for line in _section(row)]
    lines += ["## Figures", ""]
    for stem in FIGURES:
        png = figures_dir / f"{stem}.png"
        lines.append(f"### {stem}")
        lines.append("")
        lines.append(
            f"![{stem}]({Path(os.path.relpath(png, out_md.parent)).as_posix()})"
            if png.exists()
            else "(figure not produced in this run)"
        )
        lines += ["", _caption(captions_dir, stem), ""]
    if (runtime := table_path(tables_dir, "runtime")).exists():
        lines += runtime_section(read_table(runtime, "runtime"))
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text("\n".join(lines))
    return verdicts
