"""The front page of ``snakemake --report``: the run's verdict table first, then a short description.

Snakemake shows the file named by the Snakefile's ``report:`` directive on the report's first
page, rendered as reStructuredText (after Jinja), in a narrow column beside the workflow graph,
centred vertically: a page taller than the window loses its top, out of scrolling reach.
``claims_report`` writes that file for the run: a style block that puts the page at the top, as
wide as the window with the graph below it, the verdict table (claim · regime · verdict · per seed · models ·
one model out · deciding number · figure, linking ``F4_dalign_vs_width.png_``, a link Snakemake defines for
every figure of the report), the training criterion's verdict and its table of the trained models
(``trained``), then the static description ``workflow/report/workflow.rst``. The Snakefile points
``report:`` at it once it exists, and at the static description before the run has one.
"""

from __future__ import annotations

import re

import pandas as pd

from .document import training_cells, training_summary
from .verdicts import CLAIM_FIGURES

HEADING = "Verdicts of this run"
TABLE_ID = "verdicts"  # the list-table's HTML id, which the style block keys on
_INLINE_MARKUP = re.compile(r"([\\`*_|<>\[\]])")
# Snakemake ≥ 9 (html_reporter, Tailwind): the page's scroll container centres its content
# (items-center) and the description is prose max-w-lg beside the rule graph. Only the page that
# holds the verdict table is changed (:has), so other views keep Snakemake's layout.
STYLE = f"""\
.. raw:: html

   <style>
   div.h-screen:has(#{TABLE_ID}) {{ align-items: flex-start; }}
   div.flex:has(> div > div.prose #{TABLE_ID}) {{ flex-wrap: wrap; }}
   div.prose:has(#{TABLE_ID}) {{ max-width: 64rem; }}
   </style>
"""


def rst_text(text: object) -> str:
    """``text`` as literal RST inline text: markup characters backslash-escaped, one line."""
    return _INLINE_MARKUP.sub(r"\\\1", " ".join(str(text).split()))


def verdict_table(verdicts: pd.DataFrame, figure_names: set[str]) -> str:
    """An RST ``list-table`` of ``verdicts``: claim, regime, verdict, each seed's verdict alone, the models it rests
    on, how many single-model removals change it (``removals``; empty in a table without them), deciding number
    (the statistic) and a link to the report's entry of the claim's figure, where ``figure_names`` (PNG
    names) has it."""
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 9 9 10 16 6 7 35 8",
        f"   :name: {TABLE_ID}",
        "",
        "   * - claim",
        "     - regime",
        "     - verdict",
        "     - per seed",
        "     - models",
        "     - one model out",
        "     - deciding number",
        "     - figure",
    ]
    for row in verdicts.itertuples(index=False):
        stem = CLAIM_FIGURES.get(row.claim)
        shown = stem is not None and f"{stem}.png" in figure_names
        lines += [
            f"   * - {rst_text(row.claim)}",
            f"     - {rst_text(row.regime)}",
            f"     - **{rst_text(row.verdict)}**",
            f"     - {rst_text(row.per_seed)}",
            f"     - {rst_text(row.models)}",
            f"     - {rst_text(getattr(row, 'removals', ''))}",
            f"     - {rst_text(row.statistic)}",
            f"     - `{stem.split('_')[0]} <{stem}.png_>`_" if shown else "     -",
        ]
    return "\n".join(lines)


def training_table(check: pd.DataFrame) -> str:
    """An RST ``list-table`` of ``document.training_cells``: one row per trained model, its steps, budget,
    losses, accuracy and whether it passed, and why."""
    cells = training_cells(check, no="NO")
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 22 6 14 8 9 8 8 25", ""]
    for row in [list(cells.columns), *cells.itertuples(index=False)]:
        lines += [f"   {'*' if i == 0 else ' '} - {rst_text(cell)}" for i, cell in enumerate(row)]
    return "\n".join(lines)


def front_page(
    description: str, verdicts: pd.DataFrame, figure_names: set[str], check: pd.DataFrame, criterion: str
) -> str:
    """The report's first page: the style block, the heading, the training criterion's verdict on the run,
    the verdict table, the table of the trained models (both guarded from Jinja), then ``description``
    (RST, may hold Snakemake's Jinja). Links go only to figures in ``figure_names`` (PNG names)."""
    return "\n".join(
        [
            STYLE,
            HEADING,
            "=" * len(HEADING),
            "",
            "Each claim of the two papers, the verdict of its rule (fixed in ``scalemech/report/`` before "
            "results are seen), the verdict of each seed alone (*fragile* where they disagree) and the number "
            "that decides it. ``report.md`` (category Claims) has each rule and the full statistics; a "
            "figure's link opens it with its caption.",
            "",
            "{% raw %}",
            rst_text(training_summary(check, criterion).replace("**", "")),
            "",
            verdict_table(verdicts, figure_names),
            "",
            "Trained models",
            "--------------",
            "",
            training_table(check) if len(check) else "(no model trained in this run)",
            "{% endraw %}",
            "",
            description.rstrip(),
            "",
        ]
    )
