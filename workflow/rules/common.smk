# Config validation (before any job is planned), the model jobs, and input functions.
import re

from scalemech.config import ConfigError, model_jobs, validate_config

try:
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


def regex(keys, part):
    """A wildcard constraint matching exactly the dataset or model parts of ``keys``."""
    index = 0 if part == "dataset" else 1
    names = sorted({key.split("/")[index] for key in keys}) or ["__none__"]
    return "|".join(map(re.escape, names))


def job(wildcards):
    return JOBS[f"{wildcards.dataset}/{wildcards.model}"]


def per_model(pattern, keys):
    """``pattern`` (with {dataset} and {model}) for every model key in ``keys``."""
    return [pattern.format(dataset=key.split("/")[0], model=key.split("/")[1]) for key in keys]


wildcard_constraints:
    dataset="|".join(sorted(config["datasets"])),
