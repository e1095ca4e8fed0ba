# scalemech: reproduce Paper D (depth) and Paper W (width) on normalized residual networks.
#   snakemake --cores all                                   # default run "quick" (offline, CPU)
#   snakemake --cores all --configfile config/paper.yaml    # full reproduction (GPU cluster)
#   snakemake --cores all figures/quick/F4_dalign_vs_width.pdf
# Named targets: data train tables covariance signal rebound dalign misalignment interventions
# expansion trajectory figures report (and all).

from snakemake.utils import min_version

from scalemech.config import ConfigError, read_yaml

min_version("9.0")


# The default run; --configfile replaces it rather than merging grids into it. It is read
# strictly first, as Snakemake reports a YAML syntax error without file or line.
if not config:
    try:
        read_yaml("config/config.yaml")
    except ConfigError as error:
        raise WorkflowError(str(error)) from None
    except OSError:
        pass  # missing: the configfile directive says so

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/experiments.smk"
include: "workflow/rules/figures.smk"


report: "workflow/report/workflow.rst"

# On a cluster (--profile workflow/profiles/slurm) these run on the submit host, not as SLURM
# jobs: they read tables and draw figures in seconds. Rules without a script (all and the named
# targets data, train, tables, figures, report, covariance, ...) are never submitted either.
# Everything else is a SLURM job: prepare_data, pin_pretrained, misalign_model and cost_table on
# CPUs, the model jobs that can use a GPU when their grid's gpu > 0 (workflow/rules/common.smk).
localrules:
    figure,
    claims_report,
    collect_table,
    training_table,


rule all:
    input:
        rules.claims_report.output,
        rules.figures.input,
        rules.train.input,
        rules.trajectory.input,
    default_target: True
