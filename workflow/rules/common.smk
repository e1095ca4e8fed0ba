# Config validation (before any job is planned), the model jobs, the run's layout, and the
# named inputs/outputs/params of the per-model rules (from their declarations in
# scalemech.core.steps, which the CLI uses too).
import re
import sys
from pathlib import Path

from scalemech.config import ConfigError, gpu_share, model_jobs, read_config, validate_config
from scalemech.core import steps
from scalemech.core.layout import Layout, suffix
from scalemech.core.steps import PER_MODEL_TABLES, STEPS, run_tables

# Snakemake reads --configfile (and the Snakefile's configfile:) itself, keeping the last of
# two equal keys without a word; each file is read again strictly (workflow.configfiles lists
# them, CLI ones first) so that a duplicated key fails here with its file and line, and so does
# a __use_yte__ or an alias bomb of lists. For a --configfile that is after Snakemake's command
# line has loaded it, before any workflow code: it has evaluated its YTE expressions (and drops
# __use_yte__ from the config, so only the file shows it), expanded an alias bomb of mappings
# (snakemake.utils.update_config copies every mapping), and refused itself a file that is not
# UTF-8 or holds no mapping. `scalemech check` first is the guard (docs/running.md). The config validated
# is still Snakemake's own (with any --config overrides).
try:
    for path in workflow.configfiles:
        read_config(path)
    validate_config(config)
except ConfigError as error:
    raise WorkflowError(str(error)) from None

RUN = config["run"]
LAYOUT = Layout(RUN)
JOB_SCRIPT = "../scripts/job.py"  # every rule: scalemech.pipeline.jobs.run(snakemake)

JOBS = {job.key: job for job in model_jobs(config)}
TRAINED = [key for key, job in JOBS.items() if job.recipe is not None]
PRETRAINED = [key for key, job in JOBS.items() if job.recipe is None]
GROW_GRIDS = config["grow"].get("grids", sorted(config["grids"]))
GROWN = [key for key in JOBS if JOBS[key].grid in GROW_GRIDS]  # grow.grids: trained grids, pretrained groups
ADAPTED = [key for key in TRAINED if JOBS[key].grid in config["adapt"]["grids"]]  # E12's bases
# The models of each kind a step runs on (scalemech.core.steps.Step.runs_on).
MODELS = {"all": list(JOBS), "trained": TRAINED, "pretrained": PRETRAINED, "grown": GROWN, "adapted": ADAPTED}
# Beside training, the experiments of the config that have models to run on (adapt: adapt.grids' only);
# the others' rules, tables and figures are not planned.
EXPERIMENTS = [
    name
    for name in config["experiments"]
    if any(MODELS[step.runs_on] for step in STEPS.values() if step.planned_by == name)
]
RUN_TABLES = run_tables(EXPERIMENTS)


def regex(keys):
    """A wildcard constraint matching exactly the model names of ``keys``."""
    names = sorted({JOBS[key].name for key in keys}) or ["__none__"]
    return "|".join(map(re.escape, names))


def job(wildcards):
    return JOBS[f"{wildcards.dataset}/{wildcards.model}"]


def per_model(pattern, keys):
    """``pattern`` (with {dataset} and {model}) for every model key in ``keys``."""
    return [pattern.format(dataset=JOBS[key].dataset, model=JOBS[key].name) for key in keys]


def model_inputs(rule):
    """The rule's named inputs; those only a trained model has (``Step.trained_only``) are none for a
    pretrained one."""
    named = steps.inputs(rule, LAYOUT, "{dataset}", "{model}")
    if STEPS[rule].config_inputs is not None:
        named.update(STEPS[rule].config_inputs(config))
    for name in STEPS[rule].trained_only:
        named[name] = lambda wc, path=named[name]: path if job(wc).recipe is not None else []
    return named


def model_outputs(rule):
    outputs = steps.outputs(rule, LAYOUT, "{dataset}", "{model}")
    return {name: directory(path) if name in steps.DIRECTORIES else path for name, path in outputs.items()}


def model_params(rule):
    """The rule's params, each a function of the wildcards (``steps.params`` of the model's job)."""
    names = steps.params(rule, config, next(iter(JOBS.values())))
    return {name: (lambda wc, name=name: steps.params(rule, config, job(wc))[name]) for name in names}


def model_resources(wc):
    return job(wc).resources


def log_of(rule):
    return LAYOUT.log(STEPS[rule].command, "{dataset}/{model}")


def benchmark_of(rule):
    return LAYOUT.benchmark(STEPS[rule].command, "{dataset}/{model}")


wildcard_constraints:
    dataset="|".join(sorted(config["datasets"])),


def figure_files(stem):
    return [LAYOUT.figure(stem, "pdf"), LAYOUT.figure(stem, "png")]


def figure_tables(wc):
    """The tables figure ``{stem}`` reads (``FIGURE_TABLES`` of figures.smk, from ``scalemech.figures.FIGURES``)."""
    return [LAYOUT.table(name) for name in FIGURE_TABLES[wc.stem]]


# -- cluster resources (--profile workflow/profiles/slurm) ---------------------------------------
# Each cluster job takes its partition and account from the config's `cluster` section, its CPUs
# from its threads (the plugin's --cpus-per-task), its gpu, mem_mb and runtime from its grid
# (model jobs) or from scalemech.config.cluster_requests (prepare_data, cost_table). A helper
# returning None leaves the resource unset (the cluster's default partition, no -A). Nothing in
# the profile's default-resources is needed, so a user changes one value in one place.
def model_partition(wc):
    """slurm_partition of a job that can use a GPU: gpu_partition when its grid asks for one."""
    return config["cluster"].get("gpu_partition" if job(wc).resources["gpu"] > 0 else "cpu_partition")


def cpu_partition(wc):
    """slurm_partition of a CPU-only job."""
    return config["cluster"].get("cpu_partition")


def slurm_account(wc):
    return config["cluster"].get("account")


def cluster_request(rule, key):
    """A resource function: ``key`` (cpus, mem_mb, runtime) of ``rule``'s job (prepare_data, cost_table
    and the steps whose ``cluster`` is "cpu")."""
    from scalemech.config import cluster_requests

    def request(wc):
        return cluster_requests(config)[f"prepare_data:{wc.dataset}" if rule == "prepare_data" else rule][key]

    return request


# The per-model steps that compute and their models (besides data, one job per dataset), those of
# experiments this run leaves out dropped; and the models each per-model table is collected from.
COMPUTING_STEPS = {
    step.command: MODELS[step.runs_on] for step in STEPS.values() if step.planned_by in ("train", *EXPERIMENTS)
}
TABLE_MODELS = {table: MODELS[step.runs_on] for step in STEPS.values() for table in step.tables}


def table_parts(wc):
    """The per-model files of table ``{name}``, one for each model its step runs on."""
    return per_model(LAYOUT.per_model(wc.name, "{dataset}", "{model}"), TABLE_MODELS[wc.name])


def computing_records():
    """Snakemake's benchmark records of every job that computes (data, models, measurements)."""
    records = [LAYOUT.benchmark("data", dataset) for dataset in sorted(config["datasets"])]
    for step, keys in COMPUTING_STEPS.items():
        records += per_model(LAYOUT.benchmark(step, "{dataset}/{model}"), keys)
    return records


def planned_cores():
    """The cores Snakemake plans with; None for invocations that plan no jobs (--report)."""
    try:
        return workflow.cores
    except WorkflowError:
        return None


def print_estimate():
    """Print how long the whole run takes from scratch, from recorded job times (scalemech.pipeline.estimate)."""
    from scalemech.pipeline.estimate import estimate, planned_jobs, read_records
    from scalemech.pipeline.gpu_cost import planned_line

    if planned_cores():
        records, source = read_records(
            [LAYOUT.table("runtime"), f"{workflow.basedir}/docs/{config['run']}/runtime.csv"]
        )
        planned = estimate(planned_jobs(config["datasets"], COMPUTING_STEPS), records, source)
        cluster_jobs = None if workflow.local_exec else workflow.nodes  # --jobs of a cluster executor
        print(planned.line(planned_cores(), config["threads"], cluster_jobs), file=sys.stderr)
        gpu_hours = planned_line(config, Path(".snakemake", "gpu-hours"))  # a config asking for GPUs
        if gpu_hours:
            print(gpu_hours, file=sys.stderr)
