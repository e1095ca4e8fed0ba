"""``make docs``: the README's results block and ``docs/quick/`` regenerated from a finished run.

    python -m scalemech.readme --run quick

copies the run's ``report.md`` and figure PNGs into ``docs/<run>/`` and rewrites the README
between ``<!-- results:start -->`` and ``<!-- results:end -->``: the machine, date, wall time
and CPU time of ``make reproduce`` (``results/<run>/reproduce.json``, ``scalemech.runrecord``),
the claims table exactly as ``report.md`` has it, and a few figures. Nothing is typed by hand;
``tests/test_readme.py`` checks that the README's table equals ``docs/<run>/report.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

START, END = "<!-- results:start -->", "<!-- results:end -->"
SHOWN = [
    "F4_dalign_vs_width",
    "F8_dalign_over_training",
    "F5_misalignment",
    "F6_intervention",
    "F2_signal_decay",
    "F7_expansion",
]


def claims_table(report_md: str) -> list[str]:
    """The lines of the claims table of a ``report.md`` (header, rule line, one row per claim)."""
    lines = report_md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| claim |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def results_block(run: str, report_md: str, record: dict, shown: list[str]) -> str:
    """The README block: where the numbers came from, the claims table, the figures ``shown``."""
    minutes, seconds = divmod(round(record["wall_seconds"]), 60)
    caps = record.get("kernel_caps") or {}
    kernels = f", CPU kernels capped with {' '.join(f'{k}={v}' for k, v in caps.items())}" if caps else ""
    figures = [f"![{stem}](docs/{run}/{stem}.png)" for stem in shown] + [""] * (len(shown) % 2)
    grid = ["| | |", "|---|---|"] + [f"| {a} | {b} |" for a, b in zip(figures[::2], figures[1::2])]
    return "\n".join(
        [
            START,
            f"`make reproduce` on {record['cores']} cores of an {record['cpu']} (no GPU{kernels}), {record['date']}: "
            f"{minutes} min {seconds} s of wall time, {record['user_cpu_seconds']:.0f} s of user CPU "
            f"(`results/{run}/reproduce.json`; regenerate this block with `make docs`).",
            "",
            *claims_table(report_md),
            "",
            *grid,
            "",
            f"All figures and the full report with captions are in [`docs/{run}/`](docs/{run}/).",
            END,
        ]
    )


def update(readme: Path, results: Path, figures: Path, docs: Path, run: str) -> None:
    """Copy the run's report, figures and job runtimes into ``docs`` and rewrite the README's results
    block (``docs/<run>/runtime.csv`` is the reference that ``snakemake -n`` estimates from)."""
    report_md = (results / "report.md").read_text()
    record = json.loads((results / "reproduce.json").read_text())
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "report.md").write_text(report_md.replace(f"../../figures/{run}/", ""))
    for png in sorted(figures.glob("*.png")):
        shutil.copyfile(png, docs / png.name)
    shutil.copyfile(results / "tables" / "runtime.csv", docs / "runtime.csv")
    text = readme.read_text()
    if START not in text or END not in text:
        raise ValueError(f"{readme} has no {START} … {END} block to replace")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    shown = [stem for stem in SHOWN if (docs / f"{stem}.png").exists()]
    readme.write_text(head + results_block(run, report_md, record, shown) + tail)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scalemech.readme", description=__doc__.split("\n")[0])
    parser.add_argument("--run", default="quick", help="the run whose results are shown")
    parser.add_argument("--readme", default="README.md")
    args = parser.parse_args(argv)
    update(Path(args.readme), Path("results", args.run), Path("figures", args.run), Path("docs", args.run), args.run)


if __name__ == "__main__":
    main()
