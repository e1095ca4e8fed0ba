"""The report's first page: the verdict table renders as an HTML table with links to the figures,
and in Snakemake's own report, opened in headless Chromium at 1400×900, its heading is in view."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from docutils.core import publish_parts
from jinja2 import Environment

from scalemech.report import CLAIMS
from scalemech.report.frontpage import HEADING, front_page, rst_text
from scalemech.report.trained import TRAINED, training_check
from scalemech.report.verdicts import CLAIM_FIGURES

CAPTIONS = Path(__file__).parents[1] / "workflow" / "report"
DESCRIPTION = (CAPTIONS / "workflow.rst").read_text()
VERDICTS = pd.DataFrame(
    {
        "claim": ["D1", "W1", "W5"],
        "regime": ["trained", "early training: step 0", "none: the method's cost"],
        "statement": ["The covariance is close to diagonal.", "d_align grows with width.", "d_align is cheap."],
        "statistic": ["median r_off = 0.12 [0.1, 0.2]; *3 of 4* rows", "ρ = 0.5 {{ not jinja }} |x|_2", "x`y"],
        "rule": ["r", "r", "r"],
        "verdict": ["refuted", "fragile", "confirmed"],
        "per_seed": ["one seed (0): not checked against a reseed", "seed 0: confirmed; seed 1: *not* detectable", ""],
        "models": ["3", "2 of 3 (1 not trained)", ""],
        "removals": ["0 of 3", "1 of 2", ""],
    }
)
KEYS = {"run": "quick", "dataset": "mnist5k", "family": "resnet", "depth": 8, "seed": 0, "steps": 460, "epochs": 20}
# two digits classifiers: one trained to its plateau above 97 %, one stopped while its loss still fell
CHECK = training_check(
    pd.DataFrame(
        [
            {**KEYS, "model": "resnet-d8-w1-s0", "width": 1.0, "test_acc": 0.975, "loss_late": 0.0056},
            {**KEYS, "model": "resnet-d8-w0.5-s0", "width": 0.5, "test_acc": 0.93, "loss_late": 0.2},
        ]
    ).assign(train_loss=0.005, test_loss=0.09, loss_first=2.3, loss_end=0.005, tokens_per_parameter=float("nan")),
    TRAINED,
)


def page(verdicts: pd.DataFrame, figures: set[str]) -> str:
    return front_page(DESCRIPTION, verdicts, figures, CHECK, TRAINED)


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
    html = render(page(VERDICTS, set(figures)), figures)
    rows = cells(html)
    assert [row[0] for row in rows] == ["D1", "W1", "W5"]
    assert [row[1] for row in rows] == ["trained", "early training: step 0", "none: the method's cost"]
    rows = [row[:1] + row[2:] for row in rows]  # the regime read, the rest as before
    assert [row[1] for row in rows] == ["refuted", "fragile", "confirmed"]
    assert rows[1][2] == "seed 0: confirmed; seed 1: *not* detectable"  # each seed alone, literally
    # statistics come through literally: no RST emphasis, no Jinja expression evaluated
    assert rows[1][3] == "2 of 3 (1 not trained)"  # the models each claim rests on
    assert [row[4] for row in rows] == ["0 of 3", "1 of 2", ""]  # single-model removals that change it
    rows = [row[:4] + row[5:] for row in rows]  # the removals read, the rest as before
    assert rows[0][4] == "median r_off = 0.12 [0.1, 0.2]; *3 of 4* rows"
    assert rows[1][4] == "ρ = 0.5 {{ not jinja }} |x|_2"
    assert rows[2][4] == "x`y"
    assert "javascript:app.showResultInfo('F1_covariance.png')" in html  # D1 links to its figure
    assert "javascript:app.showResultInfo('F4_dalign_vs_width.png')" in html
    assert [row[5] for row in rows] == ["F1", "F4", ""]  # W5 has no figure
    assert html.index(HEADING) < html.index("scalemech reproduces")  # the table before the description
    assert "problematic" not in html and "System Message" not in html


def test_first_page_names_the_untrained_model_and_shows_the_training_table():
    html = render(page(VERDICTS, set()), [])
    summary = html.index("Training criterion")
    assert summary < html.index("<table")  # named above the verdicts
    assert "1 of 2 trained models meet it; left out of every claim: mnist5k/resnet-d8-w0.5-s0" in html
    training = cells(html[html.index("Trained models") :])
    assert [row[0] for row in training] == ["mnist5k/resnet-d8-w1-s0", "mnist5k/resnet-d8-w0.5-s0"]
    assert training[0][7].startswith("yes") and training[1][7].startswith("NO")
    assert "no plateau" in training[1][7] and "test accuracy 0.9300 &lt; 0.97" in training[1][7]


def test_link_only_to_figures_the_run_made():
    text = page(VERDICTS, {"F1_covariance.png"})
    assert "`F1 <F1_covariance.png_>`_" in text and "F4_dalign_vs_width.png" not in text


def test_rst_text_escapes_markup_and_joins_lines():
    assert rst_text("a*b*\n  c_ `d` |e|") == r"a\*b\* c\_ \`d\` \|e\|"


@pytest.mark.parametrize("caption", sorted(CAPTIONS.glob("[FC]*.rst")), ids=lambda path: path.stem)
def test_every_caption_renders_without_rst_errors(caption):
    """``snakemake --report`` renders each caption with docutils: a stray ``|x|`` or backquote would
    show as an error box beside the figure."""
    publish_parts(caption.read_text(), writer="html", settings_overrides={"halt_level": 2, "report_level": 2})


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WINDOW = (1400, 900)
# Appended to the report: once React and Tailwind have drawn the page, the heading's top in the window.
PROBE = """<script>
setTimeout(function () {
  var heading = Array.from(document.querySelectorAll("h1, h2")).find(function (h) {
    return h.textContent.trim() === "%s";
  });
  var out = document.createElement("output");
  out.id = "probe";
  out.textContent = heading ? "top=" + heading.getBoundingClientRect().top : "top=missing";
  document.body.appendChild(out);
}, 2000);
</script>"""


def snakemake_report(folder: Path, page: str) -> Path:
    """``snakemake --report`` of a one-rule workflow whose ``report:`` is ``page``, with every figure."""
    stems = sorted(set(CLAIM_FIGURES.values()))
    (folder / "front.rst").write_text(page)
    (folder / "config.yaml").write_text("run: quick\n")
    (folder / "Snakefile").write_text(
        f'configfile: "config.yaml"\nreport: "front.rst"\n'
        f"rule figure:\n    output: [report(f'{{s}}.png', category='Figures') for s in {stems!r}]\n"
        f"    shell: 'touch {{output}}'\n"
    )
    snakemake = [sys.executable, "-m", "snakemake", "--quiet", "all"]
    subprocess.run([*snakemake, "--cores", "1"], cwd=folder, check=True, capture_output=True, timeout=120)
    subprocess.run([*snakemake, "--report", "report.html"], cwd=folder, check=True, capture_output=True, timeout=120)
    return folder / "report.html"


def heading_top(report: Path, screenshot: Path | None = None) -> str:
    """Open ``report`` in headless Chromium at ``WINDOW`` and return where the verdict heading's top
    is (``top=<px>`` from the window's top, or ``top=missing``); optionally save a screenshot."""
    head, tail = report.read_text().rsplit("</body>", 1)  # the last one: scripts hold the string too
    probed = report.with_name("probed.html")
    probed.write_text(head + PROBE % HEADING + "</body>" + tail)
    chromium = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        f"--user-data-dir={report.parent / 'profile'}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--virtual-time-budget=10000",
    ]
    if screenshot is not None:
        subprocess.run([*chromium, f"--screenshot={screenshot}", probed.as_uri()], capture_output=True, timeout=120)
    dom = subprocess.run([*chromium, "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<output id="probe">(top=[^<]*)</output>', dom.stdout)
    return found.group(1) if found else f"no probe in the DOM ({dom.stderr[-300:]})"


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y chromium)")
def test_verdict_heading_is_in_view_at_1400x900(tmp_path):
    """Ten claims with ~200-character statistics: the heading of the table stays on screen (Snakemake
    centres the page vertically; a page taller than the window would start above its top)."""
    long = "slope of d_align per doubling of width: 0.5 [0.438, 0.561] (24 models); " * 3
    verdicts = pd.DataFrame({"claim": [claim.id for claim in CLAIMS], "verdict": "not detectable"}).assign(
        regime="early training: step 0",
        statement="s",
        rule="r",
        statistic=long[:200],
        per_seed="seed 0: not detectable; seed 1: not detectable",
        models="24",
    )
    figures = {f"{stem}.png" for stem in CLAIM_FIGURES.values()}
    report = snakemake_report(tmp_path, page(verdicts, figures))
    top = heading_top(report, tmp_path / "front.png")
    assert top.startswith("top="), top
    assert top != "top=missing" and float(top.removeprefix("top=")) >= 0, top
