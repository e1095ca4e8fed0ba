# F1-F7 from the tidy tables alone, and the claims report. Figure rules list the plotting
# modules as inputs: editing them reruns figures and the report, never training or
# measurement (whose rules do not depend on these files).
import os
from pathlib import Path

import scalemech.plots
import scalemech.report

FIGURE_TABLES = {stem: names for stem, (_, names) in scalemech.plots.FIGURES.items()}
PLOTTING_CODE = [scalemech.plots.__file__, scalemech.report.__file__]


rule figure:
    input:
        tables=lambda wc: [table_path(name) for name in FIGURE_TABLES[wc.stem]],
        code=PLOTTING_CODE,
    output:
        pdf=f"{FIGURES}/{{stem}}.pdf",
        png=report(f"{FIGURES}/{{stem}}.png", caption="../report/figure.rst", category="Figures"),
    wildcard_constraints:
        stem="|".join(FIGURE_TABLES),
    params:
        tables_dir=lambda wc, input: os.path.dirname(input.tables[0]),
        caption=lambda wc: Path(workflow.basedir, "workflow", "report", f"{wc.stem}.rst").read_text(),
    log:
        f"{LOGS}/figures/{{stem}}.log",
    benchmark:
        f"{BENCH}/figures/{{stem}}.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/figure.py"


rule claims_report:
    input:
        tables=[table_path(name) for name in sorted({t for names in FIGURE_TABLES.values() for t in names})],
        figures=[f"{FIGURES}/{stem}.png" for stem in FIGURE_TABLES],
        cost=rules.cost_table.output,
        code=PLOTTING_CODE,
    output:
        report(f"{RESULTS}/report.md", caption="../report/claims.rst", category="Claims"),
    params:
        tables_dir=lambda wc, input: os.path.dirname(input.tables[0]),
        figures_dir=lambda wc, input: os.path.dirname(input.figures[0]),
        captions_dir=f"{workflow.basedir}/workflow/report",
    log:
        f"{LOGS}/report.log",
    benchmark:
        f"{BENCH}/report.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/claims_report.py"


# -- named targets: one per experiment group ---------------------------------------------
rule covariance:
    input:
        table_path("covariance"),
        figure_files("F1_covariance"),


rule signal:
    input:
        table_path("signal"),
        figure_files("F2_signal_decay"),


rule rebound:
    input:
        table_path("training"),
        figure_files("F3_rebound"),


rule dalign:
    input:
        table_path("dalign"),
        figure_files("F4_dalign_vs_width"),


rule misalignment:
    input:
        table_path("misalignment"),
        figure_files("F5_misalignment"),


rule interventions:
    input:
        table_path("intervention"),
        figure_files("F6_intervention"),


rule expansion:
    input:
        table_path("expansion"),
        figure_files("F7_expansion"),


rule figures:
    input:
        [figure_files(stem) for stem in FIGURE_TABLES],


rule report:
    input:
        rules.claims_report.output,
