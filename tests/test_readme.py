"""The README's results come from a run: its claims table is docs/quick/report.md's, and
``make docs`` (scalemech.readme) rewrites the block from a run's files."""

from __future__ import annotations

import json
from pathlib import Path

from scalemech.readme import claims_table, main, markers, update

ROOT = Path(__file__).resolve().parents[1]


def test_readme_table_equals_the_committed_report():
    readme = (ROOT / "README.md").read_text()
    start, end = markers("quick")
    block = readme.split(start, 1)[1].split(end, 1)[0]
    assert claims_table(block) == claims_table((ROOT / "docs" / "quick" / "report.md").read_text())


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


def test_a_run_not_made_yet_says_so_and_keeps_the_other_blocks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    quick, widths = markers("quick"), markers("paper-widths")
    (tmp_path / "README.md").write_text(f"{quick[0]}\nquick table\n{quick[1]}\n{widths[0]}\nold\n{widths[1]}\n")
    main(["--run", "paper-widths", "--not-run-ok"])
    text = (tmp_path / "README.md").read_text()
    assert "quick table" in text and "old" not in text
    assert "Not run yet: `make paper-widths` then `make docs` write this block from `results/paper-widths/`." in text
