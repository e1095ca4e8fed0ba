# The claims' verdicts (one table), F1-F11 from the tidy tables alone (each with its claims' verdicts), and
# the claims report. Figure rules list the modules of the
# figures and report packages as inputs: editing them reruns figures and the report, never training or
# measurement (whose rules do not depend on these files). Those inputs are paths relative to
# the working directory, as Snakemake records them: results/ and figures/ copied (with
# .snakemake/metadata) into another checkout see the same inputs and rerun nothing.
import os
from importlib.util import find_spec
from pathlib import Path

import scalemech.figures
import scalemech.report.rules

# The figures whose tables this run writes (config experiments, and the verdict table), and the tables they read.
WRITTEN = RUN_TABLES | {"verdicts"}
FIGURE_TABLES = {stem: names for stem, names in scalemech.figures.FIGURE_TABLES.items() if set(names) <= WRITTEN}
PLOTTING_CODE = [
    os.path.relpath(path)
    for path in [
        *sorted(str(p) for p in Path(scalemech.figures.__file__).parent.glob("*.py")),
        *sorted(str(p) for p in Path(find_spec("scalemech.report").origin).parent.rglob("*.py")),  # unloaded
    ]
]
CAPTIONS = os.path.relpath(f"{workflow.basedir}/workflow/report")  # each figure's caption, <stem>.rst
# The tables the claims read (their modules' READS, and training) that this run writes.
CLAIM_TABLES = [name for name in scalemech.report.rules.CLAIM_TABLES if name in RUN_TABLES]


rule verdict_table:
    input:
        tables=[LAYOUT.table(name) for name in CLAIM_TABLES],
        code=PLOTTING_CODE,
    output:
        table=LAYOUT.table("verdicts"),
    log:
        LAYOUT.log("tables", "verdicts"),
    benchmark:
        LAYOUT.benchmark("tables", "verdicts")
    conda:
        "../../environment.yml"
    params:
        criterion=config["train"]["criterion"],
    script:
        JOB_SCRIPT


rule figure:
    input:
        tables=figure_tables,
        code=PLOTTING_CODE,
        caption=f"{CAPTIONS}/{{stem}}.rst",
    output:
        pdf=LAYOUT.figure("{stem}", "pdf"),
        png=report(LAYOUT.figure("{stem}", "png"), caption="../report/figure.rst", category="Figures"),
    log:
        LAYOUT.log("figures", "{stem}"),
    benchmark:
        LAYOUT.benchmark("figures", "{stem}")
    wildcard_constraints:
        stem="|".join(FIGURE_TABLES),
    conda:
        "../../environment.yml"
    params:
        stem=lambda wc: wc.stem,
    script:
        JOB_SCRIPT


rule runtime_table:
    input:
        records=computing_records(),
    output:
        table=LAYOUT.table("runtime"),
    log:
        LAYOUT.log("tables", "runtime"),
    conda:
        "../../environment.yml"
    script:
        JOB_SCRIPT


rule claims_report:
    input:
        tables=[LAYOUT.table(name) for name in CLAIM_TABLES],
        verdicts=LAYOUT.table("verdicts"),
        figures=[LAYOUT.figure(stem, "png") for stem in FIGURE_TABLES],
        runtime=LAYOUT.table("runtime"),
        code=PLOTTING_CODE,
        captions=[f"{CAPTIONS}/{stem}.rst" for stem in ["claims", "workflow", *FIGURE_TABLES]],
    output:
        report=report(LAYOUT.report, caption="../report/claims.rst", category="Claims"),
        front_page=LAYOUT.front_page,
    log:
        LAYOUT.log("report", "report"),
    benchmark:
        LAYOUT.benchmark("report", "report")
    conda:
        "../../environment.yml"
    params:
        criterion=config["train"]["criterion"],
        # the report's first lines: what this design can decide at the papers' effect sizes (report.power),
        # on the noise a run measured: this run's own where make docs recorded it, else the quick run's
        design={key: config[key] for key in ("run", "grids", "measure", "early", "trajectory", "misalign", "train")},
        noise=next(
            (
                os.path.relpath(path)
                for path in (
                    f"{workflow.basedir}/docs/{config['run']}/noise.csv",
                    f"{workflow.basedir}/docs/quick/noise.csv",
                )
                if os.path.exists(path)
            ),
            "",
        ),
    script:
        JOB_SCRIPT


# -- named targets: one per experiment group ---------------------------------------------
rule covariance:
    input:
        LAYOUT.table("covariance"),
        figure_files("F1_covariance"),


rule signal:
    input:
        LAYOUT.table("signal"),
        figure_files("F2_signal_decay"),


rule rebound:
    input:
        LAYOUT.table("training"),
        figure_files("F3_rebound"),


rule dalign:
    input:
        LAYOUT.table("dalign"),
        figure_files("F4_dalign_vs_width"),


rule misalignment:
    input:
        LAYOUT.table("misalignment"),
        figure_files("F5_misalignment"),


rule interventions:
    input:
        LAYOUT.table("intervention"),
        figure_files("F6_intervention"),


rule growth:
    input:
        LAYOUT.table("growth"),
        figure_files("F7_expansion"),
        figure_files("F10_growth"),


rule trajectory:
    input:
        LAYOUT.table("trajectory"),
        figure_files("F8_dalign_over_training"),


rule tables:
    input:
        [LAYOUT.table(name) for name in sorted(RUN_TABLES)],


rule figures:
    input:
        [figure_files(stem) for stem in FIGURE_TABLES],


rule report:
    input:
        rules.claims_report.output,
