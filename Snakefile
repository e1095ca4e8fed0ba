# scalemech: reproduce Paper D (depth) and Paper W (width) on normalized residual networks.
#   snakemake --cores all                                   # default run "quick" (offline, CPU)
#   snakemake --cores all --configfile config/paper.yaml    # full reproduction (GPU cluster)
#   snakemake --cores all figures/quick/F4_dalign_vs_width.pdf
# Named targets: data train tables covariance signal rebound dalign misalignment interventions
# expansion figures report (and all).

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


rule all:
    input:
        rules.claims_report.output,
        rules.figures.input,
        rules.train.input,
    default_target: True
