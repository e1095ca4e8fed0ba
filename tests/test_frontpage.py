"""The report's first page: the verdict table renders as an HTML table with links to the figures."""

import re
from pathlib import Path

import pandas as pd
import pytest
from docutils.core import publish_parts
from jinja2 import Environment

from scalemech.frontpage import CLAIM_FIGURES, front_page, rst_text

CAPTIONS = Path(__file__).parents[1] / "workflow" / "report"
DESCRIPTION = (CAPTIONS / "workflow.rst").read_text()
VERDICTS = pd.DataFrame(
    {
        "claim": ["D1", "W1", "W5"],
        "statement": ["The covariance is close to diagonal.", "d_align grows with width.", "d_align is cheap."],
        "statistic": ["median r_off = 0.12 [0.1, 0.2]; *3 of 4* rows", "ρ = 0.5 {{ not jinja }} |x|_2", "x`y"],
        "rule": ["r", "r", "r"],
        "verdict": ["refuted", "not detectable", "confirmed"],
    }
)


def render(text: str, figures: list[str]) -> str:
    """``text`` as Snakemake renders the workflow description: Jinja, figure link targets, docutils."""
    links = "".join(f"\n.. _{name}: javascript:app.showResultInfo('{name}')\n" for name in figures)

    class Snakemake:
        config = {"run": "quick"}

    jinja = Environment(trim_blocks=True, lstrip_blocks=True).from_string(text + links)
    return publish_parts(jinja.render(snakemake=Snakemake), writer="html")["html_body"]


def cells(html: str) -> list[list[str]]:
    """The text of each body row's cells of the first table in ``html``."""
    body = re.search(r"<tbody.*?>(.*?)</tbody>", html, flags=re.S).group(1)
    rows = re.findall(r"<tr.*?>(.*?)</tr>", body, flags=re.S)
    return [
        [re.sub(r"<.*?>|&nbsp;", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row, flags=re.S)] for row in rows
    ]


def test_first_page_shows_every_verdict_in_an_html_table_with_figure_links():
    figures = [f"{CLAIM_FIGURES['D1']}.png", f"{CLAIM_FIGURES['W1']}.png"]  # F4 missing from the run
    html = render(front_page(DESCRIPTION, VERDICTS, set(figures)), figures)
    rows = cells(html)
    assert [row[0] for row in rows] == ["D1", "W1", "W5"]
    assert [row[1] for row in rows] == ["refuted", "not detectable", "confirmed"]
    # statistics come through literally: no RST emphasis, no Jinja expression evaluated
    assert rows[0][4] == "median r_off = 0.12 [0.1, 0.2]; *3 of 4* rows"
    assert rows[1][4] == "ρ = 0.5 {{ not jinja }} |x|_2"
    assert rows[2][4] == "x`y"
    assert "javascript:app.showResultInfo('F1_covariance.png')" in html  # D1 links to its figure
    assert "javascript:app.showResultInfo('F4_dalign_vs_width.png')" in html
    assert rows[2][2] == ""  # W5 has no figure
    assert "problematic" not in html and "System Message" not in html


def test_link_only_to_figures_the_run_made():
    page = front_page(DESCRIPTION, VERDICTS, {"F1_covariance.png"})
    assert "`F1_covariance.png`_" in page and "F4_dalign_vs_width.png" not in page


def test_rst_text_escapes_markup_and_joins_lines():
    assert rst_text("a*b*\n  c_ `d` |e|") == r"a\*b\* c\_ \`d\` \|e\|"


@pytest.mark.parametrize("caption", sorted(CAPTIONS.glob("[FC]*.rst")), ids=lambda path: path.stem)
def test_every_caption_renders_without_rst_errors(caption):
    """``snakemake --report`` renders each caption with docutils: a stray ``|x|`` or backquote would
    show as an error box beside the figure."""
    publish_parts(caption.read_text(), writer="html", settings_overrides={"halt_level": 2, "report_level": 2})
