# Config validation (before any job is planned), the model jobs, and input functions.
import re

from scalemech.config import ConfigError, model_jobs, read_yaml, validate_config

# Snakemake reads --configfile (and the Snakefile's configfile:) itself, keeping the last of
# two equal keys without a word; each file is read again strictly (workflow.configfiles lists
# them, CLI ones first) so that a duplicated key fails here with its file and line. The
# config validated is still Snakemake's own (with any --config overrides).
try:
    for path in workflow.configfiles:
        read_yaml(path)
    validate_config(config)
except ConfigError as error:
    raise WorkflowError(str(error)) from None

RUN = config["run"]
RESULTS = f"results/{RUN}"
FIGURES = f"figures/{RUN}"
LOGS = f"logs/{RUN}"
BENCH = f"benchmarks/{RUN}"

JOBS = {job.key: job for job in model_jobs(config)}
TRAINED = [key for key, job in JOBS.items() if job.recipe is not None]
PRETRAINED = [key for key, job in JOBS.items() if job.recipe is None]
EXPAND_GRIDS = config["expand"].get("grids", sorted(config["grids"]))
EXPANDED = [key for key in TRAINED if JOBS[key].grid in EXPAND_GRIDS]


def regex(keys):
    """A wildcard constraint matching exactly the model names of ``keys``."""
    names = sorted({JOBS[key].name for key in keys}) or ["__none__"]
    return "|".join(map(re.escape, names))


def job(wildcards):
    return JOBS[f"{wildcards.dataset}/{wildcards.model}"]


def per_model(pattern, keys):
    """``pattern`` (with {dataset} and {model}) for every model key in ``keys``."""
    return [pattern.format(dataset=JOBS[key].dataset, model=JOBS[key].name) for key in keys]


wildcard_constraints:
    dataset="|".join(sorted(config["datasets"])),


def table_path(name):
    suffix = "parquet" if name == "covmats" else "csv"
    return f"{RESULTS}/tables/{name}.{suffix}"


def figure_files(stem):
    return [f"{FIGURES}/{stem}.pdf", f"{FIGURES}/{stem}.png"]
