"""``make docs``: the README's results block and ``docs/quick/`` regenerated from a finished run,
and (``--tests``) the test suite's times from ``make test``'s records; each block is written to its
page (``PAGES``: the README, ``docs/grow.md`` or ``docs/cluster.md``), its links relative to that page.

    python -m scalemech.pipeline.readme --run quick

copies the run's ``report.md``, run record and figure PNGs into ``docs/<run>/`` and rewrites the
README between ``<!-- results:<run>:start -->`` and ``<!-- results:<run>:end -->``: the machine, date,
wall time and CPU time of the command that made it (``results/<run>/reproduce.json``,
``scalemech.pipeline.runrecord``),
the verdict table as ``report.md`` has it (its links pointed into ``docs/<run>/``), how many verdicts
and numbers moved since the run shown before (``docs/<run>/report.md`` and ``reproduce.json`` before
they are replaced; the full comparison in ``docs/<run>/between-runs.md``), and a few figures. With
``--not-run-ok`` a run without a report gets a block saying it has not been made. Nothing is typed by
hand; ``tests/test_readme.py`` checks that the README's table is ``docs/<run>/report.md``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..report.document import link_text


@dataclass(frozen=True)
class RunDocs:
    """How a run is made (``command``, from ``config``), which of its figures the README shows, which claims
    (all: empty) and which of its tables it summarizes (``summaries``: table → a function of the table's path
    returning lines); ``design``: its block shows the power table of its design (``report.power``)."""

    command: str
    config: str
    shown: list[str]
    claims: tuple[str, ...] = ()
    summaries: tuple[str, ...] = ()
    design: bool = False


RUNS = {
    "quick": RunDocs(
        "make reproduce",
        "config/config.yaml",
        [
            "F4_dalign_vs_width",
            "F8_dalign_over_training",
            "F5_misalignment",
            "F6_intervention",
            "F2_signal_decay",
            "F7_expansion",
            "F10_growth",
        ],
    ),
    "paper-widths": RunDocs(
        "make paper-widths", "config/paper-widths.yaml", ["F9_dalign_at_paper_widths", "F8_dalign_over_training"]
    ),
    "growth": RunDocs(
        "make growth", "config/growth.yaml", ["F11_adaptation"], claims=("G4", "G5", "G6"), summaries=("adaptation",)
    ),
    "standard": RunDocs(
        "make standard",
        "config/standard.yaml",
        ["F3_rebound", "F2_signal_decay", "F4_dalign_vs_width", "F8_dalign_over_training"],
        design=True,
    ),
}
DESIGNED = ("quick", "standard")  # the runs whose design tables docs/science.md shows (make docs --design)


def adaptation_summary(path: Path) -> list[str]:
    """F11's points as a table: per placement × arm the mean over bases of the new-domain gain and the
    forgetting (± SE across bases), and how often grow recommended the grown model there."""
    import pandas as pd

    from ..figures.f11_adaptation import over_bases, rule_rows

    frame = rule_rows(pd.read_csv(path))  # F11 (a)'s: the rules, not the single points grown for G6
    points = over_bases(frame)
    recommended = frame[frame["arm"] == "grown"].groupby("placement")["recommended"].mean()
    lines = [
        f"F11's points, mean over {int(points['bases'].max())} bases ± SE across them (nats; gain on held-out B, "
        "forgetting on held-out A):",
        "",
        "| placement | arm | gain on B | forgetting of A |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {row.placement} | {row.arm} | {row.gain:.3f} ± {row.gain_se:.3f} | {row.forgetting:.3f} ± "
        f"{row.forgetting_se:.3f} |"
        for row in points.itertuples()
    ]
    shares = ", ".join(f"{placement} {share:.0%}" for placement, share in recommended.items())
    return lines + ["", f"grow recommended the grown model (its --retain decision) at: {shares} of the bases."]


SUMMARIES = {"adaptation": adaptation_summary}
BETWEEN = "between-runs.md"  # docs/<run>/'s full comparison with the run shown before


PAGES = {
    **dict.fromkeys([*RUNS, "tests"], "README.md"),
    **dict.fromkeys(["growth", "growing-7b", "bench-certify", "bench-grow"], "docs/grow.md"),
    "gpu-hours": "docs/cluster.md",
    "gpu-hours-total": "README.md",
}


def page(block: str) -> Path:
    """The file ``block`` is written to, relative to the repository (``PAGES``; another run's: the README)."""
    return Path(PAGES.get(block, "README.md"))


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


def training_line(report_md: str) -> list[str]:
    """The design's line (what the run can decide at the papers' effect sizes) and the training criterion's line
    of a ``report.md``, each with a blank line (none in a report written before them)."""
    starts = ("This run is", "**At the papers' effect sizes**", "**Training criterion**")
    return [part for line in report_md.splitlines() if line.startswith(starts) for part in (line, "")]


def linked_from(folder: str, lines: list[str]) -> list[str]:
    """``lines`` of ``folder/report.md`` with their relative links pointed into ``folder``
    (``(#d1)`` → ``(folder/report.md#d1)``, ``(F4.png)`` → ``(folder/F4.png)``)."""
    relative = re.compile(r"\]\((?![a-z]+:|/)(#?)([^)]*)\)")
    return [relative.sub(lambda m: f"]({folder}/{'report.md#' if m[1] else ''}{m[2]})", line) for line in lines]


def deciding_numbers(report_md: str) -> dict[str, tuple[str, str]]:
    """claim → (verdict, deciding number) from a ``report.md``'s verdict table; empty for a table
    without a ``deciding number`` column (written before issue 23)."""
    header, _, *rows = [
        [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in claims_table(report_md)
    ]
    if "deciding number" not in header:
        return {}
    claim, verdict, number = (header.index(name) for name in ("claim", "verdict", "deciding number"))
    return {link_text(row[claim]): (row[verdict], row[number]) for row in rows}


def _machine(record: dict) -> str:
    caps = record.get("kernel_caps") or {}
    kernels = f", CPU kernels capped with {' '.join(f'{k}={v}' for k, v in caps.items())}" if caps else ""
    return f"{record['cores']} cores of an {record['cpu']} (no GPU{kernels}), {record['date']}"


def why_moved(docs: Path) -> list[str]:
    """``docs/<run>/why-moved.md``: why the verdicts that moved moved (a change of a rule, not of the models),
    written beside the run that moved them; none without one."""
    path = docs / "why-moved.md"
    return ["", *path.read_text().strip().splitlines()] if path.exists() else []


def write_between_runs(docs: Path, run: str, moved: list[str]) -> list[str]:
    """``docs/<run>/between-runs.md``: the comparison ``moved`` (``between_runs``) and ``why_moved``; returns
    the block's lines: its first line, with a link to the file where anything moved (``BETWEEN``)."""
    page = [f"# Between runs: {run}", "", *moved, *why_moved(docs)]
    (docs / BETWEEN).write_text("\n".join(page) + "\n")
    return [moved[0].removesuffix(":") + (f": [what moved, and why]({BETWEEN})." if len(moved) > 1 else "")]


def between_runs(previous_md: str | None, previous: dict | None, report_md: str) -> list[str]:
    """What moved between the run shown before and this one, measured from their verdict tables; a
    placeholder saying what is missing where there is no earlier table of this form."""
    before, now = deciding_numbers(previous_md) if previous_md else {}, deciding_numbers(report_md)
    if not before:
        return [
            "**Between runs** (filled by `make docs`): not measured yet. It needs the previous run's "
            "`docs/<run>/report.md` with a *deciding number* column; the next "
            "`make reproduce` + `make docs` compares the two and lists every number that moved."
        ]
    moved = [claim for claim in now if claim in before and before[claim] != now[claim]]
    verdicts = sum(before[claim][0] != now[claim][0] for claim in moved)
    lines = [
        f"**Between runs**: against the run shown before ({_machine(previous) if previous else 'no record'}), "
        f"{verdicts} of {len(now)} "
        f"verdicts changed and {len(moved)} deciding numbers moved"
        + (":" if moved else "; every number came out the same."),
    ]
    if moved:
        lines += ["", "| claim | run before | this run |", "|---|---|---|"]
        lines += [
            f"| {claim} | {before[claim][0]}: {before[claim][1]} | {now[claim][0]}: {now[claim][1]} |"
            for claim in moved
        ]
    return lines


def folder(run: str, page_path: Path) -> str:
    """``docs/<run>`` as a link from ``page_path`` (the README: ``docs/quick``; docs/grow.md: ``growth``)."""
    return Path(os.path.relpath(Path("docs", run), Path(page_path).parent)).as_posix()


def results_block(
    run: str,
    report_md: str,
    record: dict,
    shown: list[str],
    moved: list[str],
    summary: list[str] = (),
    design: list[str] = (),
    page_path: Path = Path("README.md"),
) -> str:
    """The block of ``page_path`` (relative to the repository): where the numbers came from, the verdict table
    (the run's claims), what ``moved`` since the run shown before, the ``summary`` of its tables, its ``design``
    table, the figures ``shown``; every link relative to ``page_path``."""
    start, end = markers(run)
    here = folder(run, page_path)
    table = claims_table(report_md)
    wanted = run_docs(run).claims
    if wanted:
        table = table[:2] + [line for line in table[2:] if any(f"[{claim}]" in line for claim in wanted)]
    figures = [f"![{stem}]({here}/{stem}.png)" for stem in shown] + [""] * (len(shown) % 2)
    grid = ["| | |", "|---|---|"] + [f"| {a} | {b} |" for a, b in zip(figures[::2], figures[1::2])]
    return "\n".join(
        [
            start,
            f"`{run_docs(run).command}` on {_machine(record)}: "
            f"{_duration(record['wall_seconds'])} of wall time, {record['user_cpu_seconds']:.0f} s of user CPU "
            f"(`results/{run}/reproduce.json`; regenerate this block with `make docs`). Claims and figures "
            f"link to their sections of [`docs/{run}/report.md`]({here}/report.md): rule, full statistics.",
            "",
            *training_line(report_md),
            *linked_from(here, table),
            "",
            *linked_from(here, moved),
            "",
            *([*summary, ""] if summary else []),
            *([*design, ""] if design else []),
            *grid,
            "",
            f"All figures and the full report with captions are in [`docs/{run}/`]({here}/).",
            end,
        ]
    )


def not_run_block(run: str) -> str:
    """The README block of a run not made yet (with the design table its run is planned from, ``design``)."""
    start, end = markers(run)
    design = ["", *design_lines(run)] if run_docs(run).design else []
    return "\n".join(
        [
            start,
            f"Not run yet: `{run_docs(run).command}` then `make docs` write this block from `results/{run}/`.",
            *design,
            end,
        ]
    )


def replace_block(readme: Path, run: str, block: str, kind: str = "results") -> None:
    """Rewrite ``run``'s block of ``readme`` (between ``markers(run)``, or the ``kind`` of block named) with
    ``block``."""
    start, end = markers(run) if kind == "results" else (f"<!-- {kind}:{run}:{e} -->" for e in ("start", "end"))
    text = readme.read_text()
    if start not in text or end not in text:
        raise ValueError(f"{readme} has no {start} … {end} block to replace")
    head, rest = text.split(start, 1)
    readme.write_text(head + block + rest.split(end, 1)[1])


def previous_run(docs: Path, record: dict) -> Path:
    """``docs/previous/``: the report and run record of the run shown before this one. A new run (its
    record differs from ``docs/reproduce.json``) moves the one shown so far there; ``make docs`` again
    on the same run keeps the comparison it made the first time."""
    previous, shown = docs / "previous", docs / "reproduce.json"
    if shown.exists() and json.loads(shown.read_text()) != record:
        previous.mkdir(parents=True, exist_ok=True)
        for name in ("report.md", "reproduce.json", "runtime.csv"):
            if (docs / name).exists():
                shutil.copyfile(docs / name, previous / name)
    return previous


def update(readme: Path, results: Path, figures: Path, docs: Path, run: str) -> None:
    """Copy the run's report, run record, figures and job runtimes into ``docs`` and rewrite the results block
    of ``readme`` (``docs/<run>/runtime.csv`` is the reference that ``snakemake -n`` estimates from)."""
    report_md = (results / "report.md").read_text().replace(f"../../figures/{run}/", "")
    record = json.loads((results / "reproduce.json").read_text())
    baseline = previous_run(docs, record)
    docs.mkdir(parents=True, exist_ok=True)
    moved = write_between_runs(
        docs,
        run,
        between_runs(
            (baseline / "report.md").read_text() if (baseline / "report.md").exists() else None,
            json.loads((baseline / "reproduce.json").read_text()) if (baseline / "reproduce.json").exists() else None,
            report_md,
        ),
    )
    (docs / "report.md").write_text(report_md)
    shutil.copyfile(results / "reproduce.json", docs / "reproduce.json")
    for png in sorted(figures.glob("*.png")):
        shutil.copyfile(png, docs / png.name)
    shutil.copyfile(results / "tables" / "runtime.csv", docs / "runtime.csv")
    shown = [stem for stem in run_docs(run).shown if (docs / f"{stem}.png").exists()]
    summary = [line for name in run_docs(run).summaries for line in SUMMARIES[name](results / "tables" / f"{name}.csv")]
    write_noise(results / "tables", run)
    design = design_lines(run) if run_docs(run).design else []
    block = results_block(run, report_md, record, shown, moved, summary, design, page(run))
    replace_block(readme, run, block)


def noise_path(run: str) -> Path:
    """``docs/<run>/noise.csv``: the noise its claims measured (``report.power``), the design tables' source."""
    return Path("docs", run, "noise.csv")


def write_noise(tables: Path, run: str) -> None:
    """``noise_path(run)`` from the run's tables (nothing where they hold no claim the power table sizes)."""
    from ..config import load_config
    from ..core.tables import read_table
    from ..report.power import measured_noise
    from ..report.rules import CLAIM_TABLES

    read = {name: read_table(path, name) for name in CLAIM_TABLES if (path := tables / f"{name}.csv").exists()}
    frame = measured_noise(read, load_config(run_docs(run).config))
    if len(frame):
        frame.to_csv(noise_path(run), index=False)


def design_source(run: str) -> tuple[Path, str]:
    """The noise a run's design table rests on: the run's own (``docs/<run>/noise.csv``), else the quick run's."""
    own = noise_path(run)
    return (
        (own, f"this run ({own})") if own.exists() else (noise_path("quick"), f"the quick run ({noise_path('quick')})")
    )


def design_lines(run: str) -> list[str]:
    """The markdown design table of ``run``'s config (``report.power.design_table``), or a line saying why none."""
    import pandas as pd

    from ..config import load_config
    from ..report.power import design_table, markdown

    path, source = design_source(run)
    if not path.exists():
        return [f"No design table yet: `make reproduce` then `make docs` measure the noise it rests on ({path})."]
    table = design_table(load_config(run_docs(run).config), pd.read_csv(path), source)
    return [
        f'Design of `{run_docs(run).config}` against the papers\' effects (docs/science.md §6, "Design"):',
        "",
    ] + markdown(table)


def design_block(run: str) -> str:
    """The block of docs/science.md between ``<!-- design:<run>:start -->`` and its end: ``design_lines``."""
    start, end = (f"<!-- design:{run}:{edge} -->" for edge in ("start", "end"))
    return "\n".join([start, *design_lines(run), end])


def suite_block(records: dict[str, dict]) -> str:
    """The README block of the test suite's times: one line per record of ``make test`` (``name``:
    its file under ``results/test/``, e.g. one run on native kernels and one capped at AVX2)."""
    start, end = markers("tests")
    lines = []
    for name, record in sorted(records.items()):
        status = "" if record["returncode"] == 0 else f", exit status {record['returncode']}"
        user, system = record["user_cpu_seconds"], record["system_cpu_seconds"]
        lines.append(
            f"- `make test` on {_machine(record)}: {_duration(record['wall_seconds'])} of wall time, "
            f"{user + system:.0f} s of CPU ({user:.0f} s user, {system:.0f} s system; `results/test/{name}`{status})"
        )
    body = lines or ["Not measured yet: `make test` then `make docs` write this block from `results/test/`."]
    return "\n".join([start, *body, end])


def memory_block() -> str:
    """The block of "Growing a 7B model" (``docs/grow.md``): ``training.footprint``'s tables of the arms and of certify,
    and what the host holds."""
    from ..training.footprint import activation_lines, certify_table, host_lines, table

    start, end = markers("growing-7b")
    note = "Computed by `training/footprint.py` (`make docs`); weights, gradients, AdamW states; no activations."
    certify, host = "certify, on the device and on disk:", "The host, per process:"
    activations = "Activations, on top of the tables (the estimate `grow` checks before it loads, `grow.checks`):"
    return "\n".join(
        [start, note, "", *table(), "", activations, "", *activation_lines(), "", certify, "", *certify_table(), "",
         host, "", *host_lines(), end]
    )  # fmt: skip


def gpu_hours_blocks(config: str = "config/paper.yaml") -> dict[str, str]:
    """The blocks of the paper config's GPU-hours (``pipeline.gpu_cost``, counted once): per grid and step
    (``gpu-hours``, docs/cluster.md) and its total line (``gpu-hours-total``, the README)."""
    from ..config import load_config
    from .gpu_cost import gpu_hours, line, markdown

    frame = gpu_hours(load_config(config))
    table = [*markdown(frame), "", line(frame, config)]
    blocks = {"gpu-hours": table, "gpu-hours-total": [line(frame, config)]}
    return {block: "\n".join([markers(block)[0], *lines, markers(block)[1]]) for block, lines in blocks.items()}


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scalemech.pipeline.readme", description=__doc__.split("\n")[0])
    parser.add_argument("--run", default="quick", help="the run whose results are shown")
    parser.add_argument("--readme", type=Path, help="the file to write the block to (default: its page, PAGES)")
    parser.add_argument(
        "--not-run-ok", action="store_true",
        help="a run without a report: keep the block of the one recorded in docs/<run>/, else say it was not run",
    )  # fmt: skip
    parser.add_argument("--tests", action="store_true", help="write the test suite's times (results/test/*.json)")
    parser.add_argument("--memory", action="store_true", help="write the memory arithmetic of growing a 7B model")
    parser.add_argument("--gpu-hours", action="store_true", help="write the paper config's GPU-hours")
    parser.add_argument("--design", action="store_true", help="write the design tables of docs/science.md")
    args = parser.parse_args(argv)
    if args.design:
        for run in DESIGNED:
            replace_block(Path("docs", "science.md"), run, design_block(run), kind="design")
        return
    block = "gpu-hours" if args.gpu_hours else "growing-7b" if args.memory else "tests" if args.tests else args.run
    target = args.readme or page(block)
    if args.gpu_hours:
        for name, text in gpu_hours_blocks().items():
            replace_block(args.readme or page(name), name, text)
        return
    if args.memory:
        replace_block(target, block, memory_block())
        return
    if args.tests:
        records = {path.name: json.loads(path.read_text()) for path in Path("results", "test").glob("*.json")}
        replace_block(target, block, suite_block(records))
        return
    results = Path("results", args.run)
    if args.not_run_ok and not (results / "report.md").exists():
        if not Path("docs", args.run, "report.md").exists():  # a run recorded before (docs/<run>/) keeps its block
            replace_block(target, block, not_run_block(args.run))
        return
    update(target, results, Path("figures", args.run), Path("docs", args.run), args.run)


if __name__ == "__main__":
    main()
