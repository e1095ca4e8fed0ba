"""The per-model steps of the workflow: one declaration each, for its job in ``pipeline.jobs``.

A ``Step`` says which rule (and job function) it is, which experiment of the config plans it,
which models it runs on, its files by name and its params. Everything else that lists steps
derives from ``STEPS``: the per-model rules themselves (``workflow/rules/models.smk``), the CLI's
model commands, the config's ``experiments`` (allowed values and default), the per-model tables
that ``collect_table`` gathers and the models each comes from, the tables each experiment
writes, the experiments that need another's outputs (a config check), the cluster checks' rule
lists, and the steps whose benchmark records make the ``runtime`` table. It lives in ``core``,
beside ``layout``, so that the config's checks may read it, and imports nothing heavy: the CLI
builds its commands from ``STEPS`` before any torch. A ``job`` below is the model's
``config.ModelJob`` (typed ``Any``: core imports nothing above it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .layout import Layout

MODEL_FILES = {"model": "model.pt", "metrics": "metrics.json", "curve": "curve.csv"}  # in the model's directory
DIRECTORIES = {"pools"}  # outputs that are directories
# the early-training regime's tables (the tables schema's ``early`` list, ``tables.early_tables``; core.tables
# loads pandas, which this module does not)
EARLY_OUTPUTS = tuple(f"early_{name}" for name in ("covariance", "signal", "dalign", "misalignment", "intervention"))


def file(name: str, layout: Layout, dataset: str, model: str) -> str:
    """One model's file ``name``: its dataset's prepared ``data``, a file of its model directory
    (``MODEL_FILES``), its gradient ``pools``, or else its rows of the table ``name``."""
    if name == "data":
        return layout.data(dataset)
    if name == "pools":
        return layout.pools(dataset, model)
    if name in MODEL_FILES:
        return layout.model(dataset, model, MODEL_FILES[name])
    return layout.per_model(name, dataset, model)


@dataclass(frozen=True, kw_only=True)
class Step:
    """Rule ``rule`` runs ``jobs.JOBS[rule]`` once for each model that ``runs_on`` names.

    ``workflow/rules/models.smk`` writes the rule from this declaration alone."""

    rule: str  # the Snakemake rule and its job function in ``pipeline.jobs``
    command: str  # its directory under logs/ and benchmarks/; its CLI command, ``scalemech <command>``, with ``help``
    planned_by: str  # the entry of the config's ``experiments`` that plans it ("train": every run)
    runs_on: str  # the models: "all", "trained", "pretrained", "grown" (grow.grids) or "adapted" (adapt.grids)
    inputs: tuple[str, ...]  # its input files, by name (``file``)
    outputs: tuple[str, ...]  # its output files, by name; those not in MODEL_FILES nor pools are tables
    params: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None  # from the config and a model job
    section: str | None = None  # the config section passed whole (params None: the model's keys and this section)
    computes: str | None = None  # "<module>:<function>" of ``experiments``: its one table is the generic job's
    derived: tuple[str, ...] = ()  # the run's tables that rules of their own make from its outputs
    device: bool = True  # its job takes a device and its cluster job the grid's GPU (when the grid asks for one)
    cluster: str = "grid"  # its cluster request: "grid" (the grid's resources), "cpu" (``config.cluster_requests``)
    help: str | None = None  # the help of its CLI command; None: no command
    trained_only: tuple[str, ...] = ()  # inputs only a trained model has (a pretrained one's job gets None)
    config_inputs: Callable[[dict[str, Any]], dict[str, str]] | None = None  # named inputs the config picks

    def __post_init__(self) -> None:
        if self.params is None:
            object.__setattr__(self, "params", _section(self.section))

    @property
    def tables(self) -> tuple[str, ...]:
        """The per-model tables it writes, which ``collect_table`` gathers into the run's tables."""
        return tuple(name for name in self.outputs if name not in MODEL_FILES and name not in DIRECTORIES)


def _keys(config: dict[str, Any], job: Any) -> dict[str, Any]:
    return {"model_keys": job.keys(config["run"])}


def _section(name: str | None) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The params of a step that takes its config section ``name`` whole (None: the model's keys only)."""
    return lambda config, job: {**_keys(config, job), **({name: config[name]} if name else {})}


def _train_params(config: dict[str, Any], job: Any) -> dict[str, Any]:
    layout = Layout(config["run"])
    return {
        "spec": job.spec,
        "recipe": job.recipe,
        "seed": job.seed,
        **_keys(config, job),
        "compile": config["train"]["compile"],
        "checkpoints": layout.checkpoints(job.dataset, job.name),
        "snapshots": config["train"]["snapshots"],
        "snapshot_dir": layout.snapshots(job.dataset, job.name),
        "criterion": config["train"]["criterion"],
        "continue_rounds": config["train"]["continue_rounds"],
        "continue_fraction": config["train"]["continue_fraction"],
    }


def _misalign_params(config: dict[str, Any], job: Any) -> dict[str, Any]:
    return {**_keys(config, job), "misalign": config["misalign"], "interval_level": config["measure"]["interval_level"]}


def _placement_params(config: dict[str, Any], job: Any) -> dict[str, Any]:
    layout = Layout(config["run"])
    return {
        **_keys(config, job),
        "snapshot_dir": layout.snapshots(job.dataset, job.name),
        "checkpoints": f"{layout.checkpoints(job.dataset, job.name)}/growth",
        "grow": config["grow"],
        "measure": config["measure"],
    }


def _adapt_params(config: dict[str, Any], job: Any) -> dict[str, Any]:
    return {
        **_keys(config, job),
        "adapt": {key: value for key, value in config["adapt"].items() if key not in ("grids", "domain")},
        "out": Layout(config["run"]).adapted(job.dataset, job.name),
    }


def _domain(config: dict[str, Any]) -> dict[str, str]:
    """E12's domain B: the prepared data set ``adapt.domain``."""
    return {"domain": Layout(config["run"]).data(config["adapt"]["domain"])}


def _trajectory_params(config: dict[str, Any], job: Any) -> dict[str, Any]:
    return {
        **_keys(config, job),
        "snapshot_dir": Layout(config["run"]).snapshots(job.dataset, job.name),
        "measure": config["measure"],
        "pool": config["trajectory"]["pool"],
        "splits": config["trajectory"]["splits"],
    }


def _early_params(config: dict[str, Any], job: Any) -> dict[str, Any]:
    return {
        **_keys(config, job),
        "snapshot_dir": Layout(config["run"]).snapshots(job.dataset, job.name),
        "early": config["early"],
        **{section: config[section] for section in ("measure", "misalign", "intervene")},
    }


STEPS = {
    step.rule: step
    for step in (
        Step(
            rule="train_model",
            command="train",
            planned_by="train",
            runs_on="trained",
            inputs=("data",),
            outputs=("model", "metrics", "curve"),
            params=_train_params,
            derived=("training", "powerlaw", "runtime"),  # runtime: the job times of every run
            help="train one model",
        ),
        Step(
            rule="pin_pretrained",
            command="pretrained",
            planned_by="train",
            runs_on="pretrained",
            inputs=(),
            outputs=("model",),
            params=lambda config, job: {"spec": job.spec},
            device=False,
        ),
        Step(
            rule="measure_model",
            command="measure",
            planned_by="measure",
            runs_on="all",
            inputs=("data", "model"),
            outputs=("covariance", "covmats", "signal", "dalign", "pools"),
            section="measure",
            derived=("benchmarks",),  # W5's cost at the measured dims
            help="gradient statistics of one model (E2, E3, E5)",
        ),
        Step(
            rule="misalign_model",
            command="misalign",
            planned_by="misalign",
            runs_on="all",
            inputs=("dalign", "pools"),
            outputs=("misalignment",),
            params=_misalign_params,
            device=False,  # E6 works on the stored pools, on the CPU
            cluster="cpu",  # its memory and time follow misalign.draws, not the grid
            help="misalignment probability and certificates (E6)",
        ),
        Step(
            rule="intervene_model",
            command="intervene",
            planned_by="intervene",
            runs_on="all",
            inputs=("data", "model", "pools"),
            outputs=("intervention",),
            section="intervene",
            computes="intervene:intervene",
            help="zero-init residual parameter intervention (E7)",
        ),
        Step(
            rule="trajectory_model",
            command="trajectory",
            planned_by="trajectory",
            runs_on="trained",
            inputs=("data", "model"),
            outputs=("trajectory",),
            params=_trajectory_params,
        ),
        Step(
            rule="early_model",
            command="early",
            planned_by="early",
            runs_on="trained",
            inputs=("data", "model"),
            outputs=tuple(
                f"early_{name}" for name in ("covariance", "signal", "dalign", "misalignment", "intervention")
            ),
            params=_early_params,
            help="E2, E3, E5-E7 at an early weight snapshot (the early-training regime)",
        ),
        Step(
            rule="placement_model",
            command="placement",
            planned_by="grow",
            runs_on="grown",
            inputs=("data", "model", "pools", "trajectory"),  # pools: the final weights' certificate is measure's
            outputs=("growth",),
            params=_placement_params,
            trained_only=("trajectory",),  # E10 runs on trained models: a pretrained one grows at its weights
            help="growth at every insertion point against the certificate and equal-compute controls (E11, E8)",
        ),
        Step(
            rule="adapt_model",
            command="adapt",
            planned_by="adapt",
            runs_on="adapted",
            inputs=("data", "model"),  # data: domain A, the base's own; domain B is the config's (config_inputs)
            outputs=("adaptation",),
            params=_adapt_params,
            config_inputs=_domain,
            help="growth into a new domain, every placement rule x every arm: gain and forgetting (E12)",
        ),
    )
}

EXPERIMENTS = tuple(dict.fromkeys(step.planned_by for step in STEPS.values() if step.planned_by != "train"))
"""The entries the config's ``experiments`` allows, in the order the steps run (its default: all)."""
PER_MODEL_TABLES = tuple(table for step in STEPS.values() for table in step.tables)
# The tables each experiment of the config's ``experiments`` writes; training's are in every run.
EXPERIMENT_TABLES = {
    experiment: tuple(
        table for step in STEPS.values() if step.planned_by == experiment for table in (*step.tables, *step.derived)
    )
    for experiment in ("train", *EXPERIMENTS)
}


def run_tables(experiments: Iterable[str]) -> set[str]:
    """The tables a run doing ``experiments`` (the config's list) writes: training's and theirs."""
    return {name for step in ("train", *experiments) for name in EXPERIMENT_TABLES[step]}


def inputs(rule: str, layout: Layout, dataset: str, model: str) -> dict[str, str]:
    """The named inputs of per-model ``rule`` for ``dataset``/``model`` (names or wildcard patterns)."""
    return {name: file(name, layout, dataset, model) for name in STEPS[rule].inputs}


def outputs(rule: str, layout: Layout, dataset: str, model: str) -> dict[str, str]:
    """The named outputs of per-model ``rule``."""
    return {name: file(name, layout, dataset, model) for name in STEPS[rule].outputs}


def params(rule: str, config: dict[str, Any], model_job: Any) -> dict[str, Any]:
    """The params of per-model ``rule`` for ``model_job``."""
    return STEPS[rule].params(config, model_job)


def arguments(rule: str, config: dict[str, Any], model_job: Any) -> dict[str, Any]:
    """The job arguments of per-model ``rule`` for ``model_job``: its named inputs, outputs and params."""
    where = (Layout(config["run"]), model_job.dataset, model_job.name)
    named = inputs(rule, *where)
    if STEPS[rule].config_inputs is not None:
        named.update(STEPS[rule].config_inputs(config))
    if model_job.recipe is None:
        named.update(dict.fromkeys(STEPS[rule].trained_only))
    return {**named, **outputs(rule, *where), **params(rule, config, model_job)}
