"""The front page of ``snakemake --report``: the workflow description and the run's verdicts.

Snakemake shows the file named by the Snakefile's ``report:`` directive on the report's first
page, rendered as reStructuredText (after Jinja). ``claims_report`` writes that file for the run:
the static description ``workflow/report/workflow.rst``, then the claims table as an RST
``list-table`` whose last column links each claim to its figure (``F4_dalign_vs_width.png_``, a
link Snakemake defines for every figure in the report). The Snakefile points ``report:`` at it
once it exists, and at the static description before the run has one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import pandas as pd

CLAIM_FIGURES = {
    "D1": "F1_covariance",
    "D2": "F2_signal_decay",
    "D3": "F3_rebound",
    "W1": "F4_dalign_vs_width",
    "W1 along training": "F8_dalign_over_training",
    "W2": "F5_misalignment",
    "W3": "F5_misalignment",
    "W4": "F6_intervention",
    "E8": "F7_expansion",
}
"""The figure that shows each claim's statistic (W5 has none: its numbers are the cost table's)."""

_INLINE_MARKUP = re.compile(r"([\\`*_|<>\[\]])")


def rst_text(text: object) -> str:
    """``text`` as literal RST inline text: markup characters backslash-escaped, one line."""
    return _INLINE_MARKUP.sub(r"\\\1", " ".join(str(text).split()))


def verdict_table(verdicts: pd.DataFrame, figures: Mapping[str, str], title: str = "Verdicts") -> str:
    """An RST ``list-table`` of ``verdicts``: claim, verdict, a link to the report's entry of the
    claim's figure (``figures``: claim → PNG name), statement and statistic."""
    lines = [
        f".. list-table:: {title}",
        "   :header-rows: 1",
        "   :widths: 8 10 10 24 48",
        "",
        "   * - claim",
        "     - verdict",
        "     - figure",
        "     - statement",
        "     - statistic",
    ]
    for row in verdicts.itertuples(index=False):
        figure = f"`{figures[row.claim]}`_" if row.claim in figures else ""
        lines += [
            f"   * - {rst_text(row.claim)}",
            f"     - **{rst_text(row.verdict)}**",
            f"     - {figure}",
            f"     - {rst_text(row.statement)}",
            f"     - {rst_text(row.statistic)}",
        ]
    return "\n".join(lines)


def front_page(description: str, verdicts: pd.DataFrame, figure_names: set[str]) -> str:
    """The report's first page: ``description`` (RST, may hold Snakemake's Jinja), a heading and the
    verdict table, guarded from Jinja. Links go only to figures in ``figure_names`` (PNG names)."""
    figures = {claim: f"{stem}.png" for claim, stem in CLAIM_FIGURES.items() if f"{stem}.png" in figure_names}
    heading = "Verdicts of this run"
    return "\n".join(
        [
            description.rstrip(),
            "",
            heading,
            "-" * len(heading),
            "",
            "Each claim of the two papers beside the statistic this run measured and the verdict of the "
            "rule in ``scalemech/report/`` (``report.md`` in the Claims category has the rules and "
            "the captions).",
            "",
            "{% raw %}",
            verdict_table(verdicts, figures),
            "{% endraw %}",
            "",
        ]
    )
