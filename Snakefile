# scalemech: reproduce Paper D (depth) and Paper W (width) on normalized residual networks.
#   snakemake --cores all                                   # default run "quick" (offline, CPU)
#   snakemake --cores all --configfile config/paper.yaml    # full reproduction (GPU cluster)
#   snakemake --cores all figures/quick/F4_dalign_vs_width.pdf
# Named targets: data train tables covariance signal rebound dalign misalignment interventions
# trajectory growth figures report (and all).

import sys
from pathlib import Path

from snakemake.utils import min_version

from scalemech.config import ConfigError, read_config

min_version("9.0")


# The default run unless a --configfile is given (which replaces it rather than merging grids
# into it); --config key=value overrides apply on top of either. It is read strictly first, as
# Snakemake reports a YAML syntax error without file or line and a file holding no mapping
# without the file, and so that a __use_yte__ in it (a YTE template, whose expressions
# Snakemake's loader would evaluate) or an alias bomb is refused before Snakemake loads it. A
# --configfile is loaded by Snakemake's command line before this file runs: workflow/rules/
# common.smk refuses the same there, but only after the fact, and what Snakemake's loader fails
# on first it reports itself (docs/running.md, "A config from someone else").
if not workflow.configfiles:
    try:
        read_config("config/config.yaml")
    except ConfigError as error:
        raise WorkflowError(str(error)) from None
    except OSError:
        pass  # missing: the configfile directive says so

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/figures.smk"


# The report's first page: the description and this run's verdicts once claims_report wrote them.
report: str(Path(LAYOUT.front_page).resolve()) if Path(LAYOUT.front_page).exists() else "workflow/report/workflow.rst"


# On a cluster (--profile workflow/profiles/slurm) these run on the submit host, not as SLURM
# jobs: they read tables and draw figures in seconds. Rules without a script (all and the named
# targets data, train, tables, figures, report, covariance, ...) are never submitted either.
# Every other rule is a SLURM job and sets its own slurm_partition (workflow/rules/common.smk):
# prepare_data, pin_pretrained, misalign_model and cost_table on CPUs, the model jobs that can
# use a GPU on one when their grid's gpu > 0. A new rule belongs in one of the two groups
# (make test-slurm fails on a SLURM job outside the partition the config names).
localrules:
    figure,
    claims_report,
    collect_table,
    training_table,
    powerlaw_table,
    runtime_table,


rule all:
    default_target: True
    input:
        rules.claims_report.output,
        rules.figures.input,
        rules.train.input,
        rules.tables.input,
        rules.trajectory.input if "trajectory" in EXPERIMENTS else [],


# Before planning a run (snakemake -n too): how long the whole run takes from scratch.
if workflow.is_main_process:
    print_estimate()


onsuccess:
    if Path(LAYOUT.report).exists():  # a run that made no report (snakemake train) loads no report code
        from scalemech.report import verdict_summary

        print(verdict_summary(LAYOUT.report, LAYOUT.figures), file=sys.stderr)
