"""``make docs``: a run's README results block and ``docs/<run>/`` regenerated from the finished run.

    python -m scalemech.readme --run quick
    python -m scalemech.readme --run paper-widths --not-run-ok

copies the run's ``report.md`` and figure PNGs into ``docs/<run>/`` and rewrites the README
between ``<!-- results:<run>:start -->`` and ``<!-- results:<run>:end -->``: the machine, date, wall
time and CPU time of the command that made it (``results/<run>/reproduce.json``,
``scalemech.runrecord``), the claims table exactly as ``report.md`` has it, and a few figures. With
``--not-run-ok`` a run without a report gets a block saying it has not been made. Nothing is typed by
hand; ``tests/test_readme.py`` checks that the README's table equals ``docs/quick/report.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunDocs:
    """How a run is made and which of its figures the README shows."""

    command: str
    shown: list[str]


RUNS = {
    "quick": RunDocs(
        "make reproduce",
        [
            "F4_dalign_vs_width",
            "F8_dalign_over_training",
            "F5_misalignment",
            "F6_intervention",
            "F2_signal_decay",
            "F7_expansion",
        ],
    ),
    "paper-widths": RunDocs("make paper-widths", ["F9_dalign_at_paper_widths", "F8_dalign_over_training"]),
}


def run_docs(run: str) -> RunDocs:
    """``RUNS[run]``; another run is documented like quick."""
    return RUNS.get(run, RUNS["quick"])


def markers(run: str) -> tuple[str, str]:
    """The README comments around ``run``'s block."""
    return f"<!-- results:{run}:start -->", f"<!-- results:{run}:end -->"


def claims_table(report_md: str) -> list[str]:
    """The lines of the claims table of a ``report.md`` (header, rule line, one row per claim)."""
    lines = report_md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| claim |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def results_block(run: str, report_md: str, record: dict, shown: list[str]) -> str:
    """The README block: where the numbers came from, the claims table, the figures ``shown``."""
    start, end = markers(run)
    minutes, seconds = divmod(round(record["wall_seconds"]), 60)
    caps = record.get("kernel_caps") or {}
    kernels = f", CPU kernels capped with {' '.join(f'{k}={v}' for k, v in caps.items())}" if caps else ""
    figures = [f"![{stem}](docs/{run}/{stem}.png)" for stem in shown] + [""] * (len(shown) % 2)
    grid = ["| | |", "|---|---|"] + [f"| {a} | {b} |" for a, b in zip(figures[::2], figures[1::2])]
    return "\n".join(
        [
            start,
            f"`{run_docs(run).command}` on {record['cores']} cores of an {record['cpu']} (no GPU{kernels}), "
            f"{record['date']}: "
            f"{minutes} min {seconds} s of wall time, {record['user_cpu_seconds']:.0f} s of user CPU "
            f"(`results/{run}/reproduce.json`; regenerate this block with `make docs`).",
            "",
            *claims_table(report_md),
            "",
            *grid,
            "",
            f"All figures and the full report with captions are in [`docs/{run}/`](docs/{run}/).",
            end,
        ]
    )


def not_run_block(run: str) -> str:
    """The README block of a run not made yet."""
    start, end = markers(run)
    return "\n".join(
        [
            start,
            f"Not run yet: `{run_docs(run).command}` then `make docs` write this block from `results/{run}/`.",
            end,
        ]
    )


def replace_block(readme: Path, run: str, block: str) -> None:
    """Rewrite ``run``'s block of ``readme`` (between ``markers(run)``) with ``block``."""
    start, end = markers(run)
    text = readme.read_text()
    if start not in text or end not in text:
        raise ValueError(f"{readme} has no {start} … {end} block to replace")
    head, rest = text.split(start, 1)
    readme.write_text(head + block + rest.split(end, 1)[1])


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
    shown = [stem for stem in run_docs(run).shown if (docs / f"{stem}.png").exists()]
    replace_block(readme, run, results_block(run, report_md, record, shown))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scalemech.readme", description=__doc__.split("\n")[0])
    parser.add_argument("--run", default="quick", help="the run whose results are shown")
    parser.add_argument("--readme", default="README.md")
    parser.add_argument("--not-run-ok", action="store_true", help="a run without a report: say so in its block")
    args = parser.parse_args(argv)
    results = Path("results", args.run)
    if args.not_run_ok and not (results / "report.md").exists():
        replace_block(Path(args.readme), args.run, not_run_block(args.run))
        return
    update(Path(args.readme), results, Path("figures", args.run), Path("docs", args.run), args.run)


if __name__ == "__main__":
    main()
