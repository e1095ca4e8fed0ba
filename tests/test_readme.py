"""The README's results come from a run: its claims table is docs/quick/report.md's, and
``make docs`` (scalemech.pipeline.readme) rewrites the block from a run's files."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from scalemech.pipeline import runrecord
from scalemech.pipeline.readme import (
    PAGES,
    between_runs,
    claims_table,
    gpu_hours_blocks,
    linked_from,
    main,
    markers,
    page,
    results_block,
    suite_block,
    update,
)

ROOT = Path(__file__).resolve().parents[1]
README_BLOCK = (ROOT / "README.md").read_text().split(markers("quick")[0], 1)[1].split(markers("quick")[1], 1)[0]
REPORT = "# Claims report\n\n| claim | verdict | deciding number | figure |\n|---|---|---|---|\n{rows}\n\n## Claims\n"


def cells(table: list[str]) -> list[str]:
    return [cell.strip() for line in table for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


def test_readme_table_equals_the_committed_report():
    committed = claims_table((ROOT / "docs" / "quick" / "report.md").read_text())
    assert claims_table(README_BLOCK) == linked_from("docs/quick", committed)


@pytest.mark.xfail(
    "| claim | statement |" in README_BLOCK, reason="README block written before issue 23's table: run make docs"
)
def test_readme_cells_are_short():
    assert max(map(len, cells(claims_table(README_BLOCK)))) <= 200


def test_links_point_into_the_docs_folder():
    line = "| [W1 along training](#w1-along-training) | confirmed | 0.5 [0.4, 0.6] | [F8](#f8_x) | [a](https://x.org) |"
    assert linked_from("docs/quick", [line]) == [
        "| [W1 along training](docs/quick/report.md#w1-along-training) | confirmed | 0.5 [0.4, 0.6] "
        "| [F8](docs/quick/report.md#f8_x) | [a](https://x.org) |"
    ]


def test_between_runs_lists_what_moved_or_says_what_is_missing():
    before = REPORT.format(rows="| [D3](#d3) | confirmed | best width 1.5 | |\n| [W5](#w5) | confirmed | 0.2 | |")
    after = REPORT.format(rows="| [D3](#d3) | not confirmed | best width 1 | |\n| [W5](#w5) | confirmed | 0.2 | |")
    record = {"cores": 2, "cpu": "Old CPU", "date": "2026-11-30"}
    moved = "\n".join(between_runs(before, record, after))
    assert "1 of 2 verdicts changed and 1 deciding numbers moved" in moved and "Old CPU" in moved
    assert "| D3 | confirmed: best width 1.5 | not confirmed: best width 1 |" in moved and "| W5 |" not in moved
    assert "every number came out the same" in "\n".join(between_runs(after, record, after))
    old_format = (
        "| claim | statement | statistic | rule | verdict |\n|---|---|---|---|---|\n| D1 | s | x | r | refuted |"
    )
    for previous in (None, old_format):
        assert "not measured yet" in between_runs(previous, None, after)[0]


def test_update_rewrites_only_the_results_block(tmp_path):
    results, figures, docs = tmp_path / "results" / "r", tmp_path / "figures" / "r", tmp_path / "docs" / "r"
    results.mkdir(parents=True)
    figures.mkdir(parents=True)
    (results / "report.md").write_text(
        "# Claims report\n\ntext\n\n| claim | verdict |\n|---|---|\n| D1 | refuted |\n\n"
        "![F4](../../figures/r/F4_dalign_vs_width.png)\n"
    )
    (results / "reproduce.json").write_text(
        json.dumps(
            {
                "cores": 2,
                "cpu": "Test CPU",
                "date": "2026-11-30",
                "wall_seconds": 754.2,
                "user_cpu_seconds": 1400.0,
                "kernel_caps": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
            }
        )
    )
    (figures / "F4_dalign_vs_width.png").write_bytes(b"png")
    (results / "tables").mkdir()
    (results / "tables" / "runtime.csv").write_text("step,job,wall_seconds\ntrain,d/m,1.5\n")
    readme = tmp_path / "README.md"
    start, end = markers("r")
    readme.write_text(f"# title\n\nbefore\n{start}\nold table\n{end}\nafter\n")
    update(readme, results, figures, docs, "r")
    text = readme.read_text()
    assert text.startswith("# title\n\nbefore\n") and text.endswith("\nafter\n") and "old table" not in text
    assert "12 min 34 s of wall time, 1400 s of user CPU" in text and "Test CPU" in text
    assert "CPU kernels capped with ONEDNN_MAX_CPU_ISA=AVX2" in text
    assert "| D1 | refuted |" in text and "| ![F4_dalign_vs_width](docs/r/F4_dalign_vs_width.png) |  |" in text
    assert (docs / "F4_dalign_vs_width.png").read_bytes() == b"png"
    assert (docs / "runtime.csv").read_text() == "step,job,wall_seconds\ntrain,d/m,1.5\n"
    assert "](F4_dalign_vs_width.png)" in (docs / "report.md").read_text()
    assert json.loads((docs / "reproduce.json").read_text())["cpu"] == "Test CPU"  # the next update compares
    assert "**Between runs** (filled by `make docs`): not measured yet" in text
    update(readme, results, figures, docs, "r")  # make docs twice on one run: still nothing to compare
    assert "not measured yet" in readme.read_text() and not (docs / "previous").exists()
    table = "| claim | verdict | deciding number | figure |\n|---|---|---|---|\n"
    (docs / "report.md").write_text(f"{table}| [D1](#d1) | refuted | 0.2 | |\n")  # as a run shown before wrote it
    (results / "report.md").write_text(f"{table}| [D1](#d1) | refuted | 0.3 | |\n")
    (results / "reproduce.json").write_text(
        json.dumps({**json.loads((docs / "reproduce.json").read_text()), "cpu": "New"})
    )
    for _ in range(2):  # a new run is compared with the one shown before, again after a second make docs
        update(readme, results, figures, docs, "r")
        assert "| D1 | refuted: 0.2 | refuted: 0.3 |" in (docs / "between-runs.md").read_text()
        assert "1 deciding numbers moved: [what moved, and why](docs/r/between-runs.md)." in readme.read_text()


def test_a_block_on_a_page_in_docs_links_relative_to_it(tmp_path, monkeypatch):
    """growth's block lives in docs/grow.md (``PAGES``): its links lead into docs/growth/ from there."""
    monkeypatch.chdir(tmp_path)
    record = {"cores": 2, "cpu": "C", "date": "d", "wall_seconds": 1.0, "user_cpu_seconds": 1.0}
    report = "| claim | verdict | deciding number | figure |\n|---|---|---|---|\n| [G4](#g4) | refuted | 0.1 | |\n"
    block = results_block("growth", report, record, ["F11_adaptation"], ["moved"], page_path=page("growth"))
    assert page("growth") == Path("docs/grow.md")
    assert "| [G4](growth/report.md#g4) |" in block and "(growth/F11_adaptation.png)" in block
    assert "docs/growth/report.md`](growth/report.md)" in block


def test_citation_names_this_project_and_both_papers():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["title"].startswith("scalemech")
    papers = {reference["title"]: reference for reference in citation["references"]}
    assert "arXiv:2605.08297" in papers[
        "A qualitative test-risk mechanism for scaling behaviour in normalized residual networks"
    ]["url"].replace("https://arxiv.org/abs/", "arXiv:")
    width = papers["Mechanisms of width scaling in normalized residual networks: the effective alignment dimension"]
    assert [a["family-names"] for a in width["authors"]] == ["Zhang", "Liu", "Yan", "Zhang", "Tan", "Liu", "Cheng"]


def test_a_run_not_made_yet_says_so_and_keeps_the_other_blocks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    quick, widths = markers("quick"), markers("paper-widths")
    (tmp_path / "README.md").write_text(f"{quick[0]}\nquick table\n{quick[1]}\n{widths[0]}\nold\n{widths[1]}\n")
    main(["--run", "paper-widths", "--not-run-ok"])
    text = (tmp_path / "README.md").read_text()
    assert "quick table" in text and "old" not in text
    assert "Not run yet: `make paper-widths` then `make docs` write this block from `results/paper-widths/`." in text


def test_suite_block_states_each_record_of_make_test(tmp_path, monkeypatch):
    """The README's test times come from runrecord's files: machine, kernels, wall and CPU time."""
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert runrecord.main([str(tmp_path / "avx2.json"), "--", sys.executable, "-c", "sum(range(10**6))"]) == 0
    record = json.loads((tmp_path / "avx2.json").read_text())
    block = suite_block({"avx2.json": record, "failed.json": {**record, "returncode": 1}})
    start, end = markers("tests")
    assert block.startswith(start) and block.endswith(end) and block.count("\n- `make test` on ") == 2
    assert f"of an {record['cpu']} (no GPU, CPU kernels capped with ATEN_CPU_CAPABILITY=avx2)" in block
    assert "`results/test/failed.json`, exit status 1)" in block and "`results/test/avx2.json`)" in block
    assert "Not measured yet" in suite_block({})


def test_a_run_recorded_before_keeps_its_block_when_its_results_are_gone(tmp_path, monkeypatch):
    """``make docs`` on a clone that never ran paper-widths keeps the block its docs/paper-widths/ backs."""
    monkeypatch.chdir(tmp_path)
    widths = markers("paper-widths")
    (tmp_path / "README.md").write_text(f"{widths[0]}\nrecorded table\n{widths[1]}\n")
    (tmp_path / "docs" / "paper-widths").mkdir(parents=True)
    (tmp_path / "docs" / "paper-widths" / "report.md").write_text("# Claims report\n")
    main(["--run", "paper-widths", "--not-run-ok"])
    assert "recorded table" in (tmp_path / "README.md").read_text()


def test_the_memory_block_is_the_arithmetic_of_training_footprint():
    """The tables of "Growing a 7B model" are ``training.footprint``'s, as ``make docs`` writes them."""
    from scalemech.pipeline.readme import memory_block

    start, end = markers("growing-7b")
    text = (ROOT / page("growing-7b")).read_text()
    assert text[text.index(start) : text.index(end) + len(end)] == memory_block()


def test_the_readme_is_read_in_two_minutes():
    """At most 250 lines: the rest lives in docs/ (issue 60)."""
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines; move a section into docs/ and link it"


def test_every_block_is_once_in_its_page_and_nowhere_else():
    """Each block ``make docs`` (or a benchmark) writes has its two markers once, in order, in the file
    ``PAGES`` names for it, and in no other page of the repository's docs."""
    pages = {
        path.relative_to(ROOT).as_posix(): path.read_text() for path in [ROOT / "README.md", *ROOT.glob("docs/*.md")]
    }
    for block in PAGES:
        start, end = markers(block)
        home = page(block).as_posix()
        text = pages[home]
        assert text.count(start) == 1 and text.count(end) == 1, (block, home)
        assert text.index(start) < text.index(end), (block, home)
        elsewhere = [name for name, other in pages.items() if name != home and start in other]
        assert not elsewhere, f"{block}'s block is in {elsewhere} as well as {home}"


def test_make_docs_writes_a_block_to_its_page(tmp_path, monkeypatch):
    """``--gpu-hours`` writes docs/cluster.md's table and the README's total line, each to its page
    (``--readme`` overrides)."""
    monkeypatch.chdir(tmp_path)
    start, end = markers("gpu-hours")
    total = markers("gpu-hours-total")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cluster.md").write_text(f"# cluster\n{start}\nold\n{end}\n")
    (tmp_path / "README.md").write_text(f"# readme\n{total[0]}\nold\n{total[1]}\n")
    blocks = {"gpu-hours": f"{start}\nnew\n{end}", "gpu-hours-total": f"{total[0]}\n366\n{total[1]}"}
    monkeypatch.setattr("scalemech.pipeline.readme.gpu_hours_blocks", lambda: blocks)
    main(["--gpu-hours"])
    assert (tmp_path / "docs" / "cluster.md").read_text() == f"# cluster\n{start}\nnew\n{end}\n"
    assert (tmp_path / "README.md").read_text() == f"# readme\n{total[0]}\n366\n{total[1]}\n"
    (tmp_path / "README.md").write_text("# no block here\n")
    with pytest.raises(ValueError, match="README.md has no"):
        main(["--gpu-hours", "--readme", "README.md"])


def test_the_gpu_hours_blocks_share_one_count(monkeypatch):
    """The README's total line is the last line of docs/cluster.md's table block, from one count."""
    import pandas as pd

    monkeypatch.chdir(ROOT)
    calls = []
    frame = pd.DataFrame({"grid": ["g", "g"], "step": ["train", "growth"], "hours": [300.0, 66.0]})
    monkeypatch.setattr("scalemech.pipeline.gpu_cost.gpu_hours", lambda config: calls.append(1) or frame)
    blocks = gpu_hours_blocks()
    total = blocks["gpu-hours-total"].splitlines()[1]
    assert len(calls) == 1 and total.startswith("config/paper.yaml: 366 H200-hours (train 300, growth 66)")
    assert blocks["gpu-hours"].splitlines()[-2] == total


def test_every_relative_link_of_the_docs_resolves():
    """Every relative link of the README, config/README.md and docs/ (blocks moved between pages included)
    leads to a file of the checkout; the reports kept in docs/<run>/previous/ only for the comparison aside."""
    kept = sorted(path for path in (ROOT / "docs").rglob("*.md") if "previous" not in path.parts)
    pages = [ROOT / "README.md", ROOT / "config" / "README.md", *kept]
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in pages
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text())
        if not re.match(r"[a-z]+:|#", target) and not (page.parent / target.split("#")[0]).exists()
    ]
    assert not broken, broken
