"""What each rule of the workflow (or each CLI command) does: one function per rule.

Every job function takes keyword-only arguments named exactly like its rule's ``input``,
``output`` and ``params``, so every rule runs the one script ``workflow/scripts/job.py``::

    jobs.run(snakemake)  ==  JOBS[rule](**input, **output, **params, **execution settings)

Execution settings (``execution``: the device, how often training checkpoints) say how a job
runs, not what it computes; they come from the config at run time, not as params, so changing
them reruns nothing. Per-model rules take their paths and params from their declaration in
``core.steps`` (``steps.inputs``, ``outputs`` and ``params``), which the rules
(``workflow/rules/models.smk``) and the CLI both use; a step that ``computes`` one table with an
``experiments`` function gets its job from ``experiment_job``, none written here.
Config sections travel whole (``measure=config["measure"]``) into functions whose keyword
names are the section's keys: the schema is the one home of every section's defaults, except the
recipe's, which are ``Recipe``'s (``core/recipe.py``).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import logging
import os
import resource
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..core import tables
from ..core.integrity import save_torch, write_text
from ..core.layout import Layout
from ..core.steps import STEPS, Step
from ..models import build_model, fit_geometry, load_model

if TYPE_CHECKING:
    import torch

log = logging.getLogger("scalemech")

JOBS: dict[str, Callable[..., None]] = {}
TABLE_JOBS: set[str] = set()


def job(function: Callable[..., None]) -> Callable[..., None]:
    """Register ``function`` as the job of the rule of the same name."""
    JOBS[function.__name__] = function
    return function


def table_job(function: Callable[..., None]) -> Callable[..., None]:
    """Register ``function`` as a job that reads and writes tables, figures or the report only: it
    runs without loading torch (about 2 s of CPU a job) and sets no torch threads."""
    TABLE_JOBS.add(function.__name__)
    return job(function)


@contextlib.contextmanager
def job_context(log_path: str | None, threads: int | None) -> Iterator[None]:
    """Send progress bars and log records to ``log_path`` and use ``threads`` torch threads (None:
    a job that never loads torch).

    An exception leaving the block is written to ``log_path`` (a one-line summary, then the
    traceback) before it propagates, so the log a failed job points to says why it failed; the
    summary also goes to the job's own stderr (Snakemake's console), which a full disk cannot stop.
    """
    console = sys.stderr
    if threads is not None:
        import torch  # here, not above: table jobs never load it

        torch.set_num_threads(threads)
    stream = open(log_path, "a", buffering=1) if log_path else sys.stderr
    handler = logging.StreamHandler(stream)
    logging.basicConfig(
        handlers=[handler], level=logging.INFO, force=True, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        with contextlib.redirect_stderr(stream):
            yield
    except Exception as err:
        if log_path:
            summary = f"job failed: {type(err).__name__}: {' '.join(str(err).split()) or '(no message)'}"
            print(summary, file=console)
            with contextlib.suppress(OSError):  # the disk may be full
                stream.write(f"{summary}\n{''.join(traceback.format_exception(err))}")
        raise
    finally:
        if log_path:
            logging.getLogger().removeHandler(handler)  # no records to a closed file
            with contextlib.suppress(OSError):
                stream.close()


def execution(config: dict[str, Any], gpus: int = 0) -> dict[str, Any]:
    """How jobs run (not what they compute), from a validated config: passed to the jobs that take
    them. ``gpus``: the GPUs the job was given (its grid's ``resources.gpu``, or a share of one in GRES
    shards, ``config.gpu_share``); with one, the job must compute on it."""
    return {"device": config["device"], "gpus": gpus, "checkpoint_every": config["train"]["checkpoint_every"]}


def call(rule: str, arguments: dict[str, Any], settings: dict[str, Any]) -> None:
    """Run the job of ``rule`` with its named ``arguments`` and the execution ``settings`` it takes.

    A job that takes a ``device`` gets it resolved here, once, before any work: a job given a GPU
    where torch cannot use CUDA fails now, in one line (``DeviceError``), not after hours on CPUs.
    """
    function = JOBS[rule]
    taken = inspect.signature(function).parameters
    if "device" in taken:
        from ..core.device import resolve_device  # loads torch: model jobs only

        settings = {**settings, "device": resolve_device(settings["device"], gpu_required=settings["gpus"] > 0)}
    function(**arguments, **{k: v for k, v in settings.items() if k in taken})


def cpu_record(log_path: str | Path) -> Path:
    """Where a job's own CPU time goes: beside its log, ``<log stem>.cpu.json``."""
    return Path(log_path).with_suffix(".cpu.json")


def process_cpu_seconds() -> float:
    """User + system CPU seconds of this process and its waited-for children, since it started."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run(smk: Any) -> None:
    """Run the job of a Snakemake rule from its ``snakemake`` object, logging to its log file; a job
    that succeeds writes its process's CPU seconds to ``cpu_record(log)`` (Snakemake's benchmark
    samples CPU once every 30 s after the first 30, so it misses up to 30 s of a job's end)."""
    log_path = smk.log[0] if smk.log else None
    with job_context(log_path, None if smk.rule in TABLE_JOBS else smk.threads):
        call(
            smk.rule,
            {**dict(smk.input.items()), **dict(smk.output.items()), **dict(smk.params.items())},
            execution(smk.config, int(smk.resources.get("gpu", 0) or smk.resources.get("gpu_shards", 0) > 0)),
        )
    if log_path:
        cpu_record(log_path).write_text(json.dumps({"cpu_seconds": round(process_cpu_seconds(), 3)}) + "\n")


def exit_now() -> None:
    """End a job's process at once, once ``run`` returned: its outputs and log are written and closed,
    so the interpreter's teardown of torch, pandas and their modules (about 0.5 s of CPU a job,
    measured: 2.5 s in all against 2.0 s at the end of the work, a tenth of the quick run's CPU) does
    nothing a later job needs. Flushes the standard streams first."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# -- data and training -------------------------------------------------------------------------
@job
def prepare_data(*, data: str, dataset: str, settings: dict[str, Any], offline: bool) -> None:
    """Prepare ``dataset`` from its config block ``settings`` into the directory ``data``."""
    from ..data import prepare_dataset

    manifest = prepare_dataset(dataset, settings, data, offline=offline)
    log.info("prepared %s: %s", dataset, json.dumps(manifest.get("shapes", {})))


def keys_of(keys: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Table keys of a model: the job's keys with depth and width as the model's spec states them."""
    return {**keys, "depth": spec["depth"], "width": spec["width"]}


@job
def train_model(
    *,
    data: str,
    model: str,
    metrics: str,
    curve: str,
    spec: dict[str, Any],
    recipe: dict[str, Any],
    seed: int,
    model_keys: dict[str, Any],
    compile: bool,
    checkpoints: str,
    snapshots: int,
    snapshot_dir: str,
    criterion: str,
    continue_rounds: int,
    continue_fraction: float,
    device: torch.device,
    checkpoint_every: int,
) -> None:
    """Train one grid model (E1): ``train`` writes ``model``, ``metrics`` (with the model's table keys)
    and ``curve`` into the model's directory; under the ``trained`` criterion a model that misses it trains
    on, up to ``continue_rounds`` rounds of ``continue_fraction`` of its budget (docs/science.md §7.1)."""
    from ..core.recipe import Recipe
    from ..data import load_prepared
    from ..report.trained import TRAINED, judged_metrics
    from ..tasks import task_for
    from ..training.train import train

    prepared = load_prepared(data)
    full_spec = fit_geometry(spec, task_for(prepared, spec.get("block_size")).spec_keys(), prepared.name)
    train(
        full_spec,
        Recipe.from_dict(recipe),
        prepared,
        Path(model).parent,
        Path(checkpoints),
        seed=seed,
        device=device,
        checkpoint_every=checkpoint_every,
        compile=compile,
        labels=keys_of(model_keys, full_spec),
        snapshots=snapshots,
        snapshot_dir=snapshot_dir,
        criterion=judged_metrics if criterion == TRAINED else None,
        rounds=continue_rounds,
        round_fraction=continue_fraction,
    )


@job
def pin_pretrained(*, model: str, spec: dict[str, Any]) -> None:
    """Record a pretrained checkpoint as ``model`` (its spec only; weights stay in the hub cache)."""
    built = build_model(spec)
    save_torch(model, {"spec": {**spec, "depth": built.depth, "width": built.width}})
    log.info(
        "pinned %s at revision %s: depth %d, width %d",
        spec["checkpoint"],
        spec.get("revision"),
        built.depth,
        built.width,
    )


@table_job
def training_table(*, metrics: Sequence[str], table: str) -> None:
    """The ``training`` table: one row per model's ``metrics.json``."""
    tables.write_table(pd.DataFrame([json.loads(Path(p).read_text()) for p in metrics]), table, "training")


@table_job
def powerlaw_table(*, training: str, table: str) -> None:
    """D4: the ``powerlaw`` table, Paper D's law of test loss in depth and width fitted per (dataset, family)."""
    from ..stats.powerlaw import powerlaw_table as fitted

    tables.write_table(fitted(tables.read_table(training, "training")), table, "powerlaw")


# -- measurement and experiments ---------------------------------------------------------------
def _loaded(model: str, data: str, keys: dict[str, Any], device: torch.device):
    """``(model, data, keys, payload)`` for a model job: the model in eval mode on ``device``, in the
    memory layout training used there (``models.memory``: channels-last convolutions, faster), and what
    ``model.pt`` holds beside the weights."""
    from ..data import load_prepared
    from ..models.memory import memory_format_for

    loaded, payload = load_model(model, map_location=device)
    loaded = loaded.to(memory_format=memory_format_for(loaded, device))
    return loaded, load_prepared(data), keys_of(keys, payload["spec"]), payload


@job
def measure_model(
    *,
    data: str,
    model: str,
    covariance: str,
    covmats: str,
    signal: str,
    dalign: str,
    pools: str,
    model_keys: dict[str, Any],
    measure: dict[str, Any],
    device: torch.device,
) -> None:
    """E2/E3/E5 of one model: one file per table, and the gradient pools under ``pools``."""
    from ..experiments import measure as measure_tables

    loaded, prepared, keys, _ = _loaded(model, data, model_keys, device)
    frames = measure_tables(loaded, prepared, keys, pools, device=device, **measure)
    for name, path in (("covariance", covariance), ("covmats", covmats), ("signal", signal), ("dalign", dalign)):
        tables.write_table(frames[name], path, name)


@job
def misalign_model(
    *,
    dalign: str,
    pools: str,
    misalignment: str,
    model_keys: dict[str, Any],
    misalign: dict[str, Any],
    interval_level: float,
) -> None:
    """E6 at every measured point (read from the pools), over the (M, K) grid of ``misalign.sizes``;
    the interval of ``E = μ_trᵀμ_te`` at ``measure.interval_level``."""
    from ..experiments import misalignment as misalignment_table

    measured = tables.read_table(dalign, "dalign").sort_values("point_index")
    keys = measured.iloc[0][tables.model_keys()].to_dict()
    frame = misalignment_table(pools, keys, measured, interval_level=interval_level, **misalign)
    tables.write_table(frame, misalignment, "misalignment")


def experiment_job(step: Step) -> Callable[..., None]:
    """The job of a step that ``computes`` one table: ``table = f(model, data, pools, keys, device=device,
    **section)``, with ``f`` its ``experiments`` function (``pools`` None unless the step reads them,
    ``section`` its config section, none without)."""
    module, name = step.computes.split(":")
    (table,) = step.tables

    def run(
        *,
        data: str,
        model: str,
        model_keys: dict[str, Any],
        device: torch.device,
        pools: str | None = None,
        **named: Any,
    ) -> None:
        experiment = getattr(importlib.import_module(f"scalemech.experiments.{module}"), name)
        settings = named.pop(step.section) if step.section else {}
        loaded, prepared, keys, _ = _loaded(model, data, model_keys, device)
        tables.write_table(experiment(loaded, prepared, pools, keys, device=device, **settings), named[table], table)

    run.__name__ = run.__qualname__ = step.rule
    run.__doc__ = f"{step.help or step.rule}: the ``{table}`` table of ``experiments.{module}.{name}``."
    return run


@job
def trajectory_model(
    *,
    data: str,
    model: str,
    trajectory: str,
    model_keys: dict[str, Any],
    snapshot_dir: str,
    measure: dict[str, Any],
    pool: int,
    splits: Sequence[str],
    device: torch.device,
) -> None:
    """E10: the alignment statistics at every weight snapshot of this model's training run."""
    from ..experiments import trajectory as trajectory_table

    loaded, prepared, keys, payload = _loaded(model, data, model_keys, device)
    settings = {k: measure[k] for k in ("points", "batch_size", "interval_level", "seed")}
    frame = trajectory_table(
        loaded,
        prepared,
        Path(snapshot_dir) / payload["identity"],
        keys,
        pool=pool,
        splits=splits,
        device=device,
        **settings,
    )
    tables.write_table(frame, trajectory, "trajectory")


@job
def early_model(
    *,
    data: str,
    model: str,
    model_keys: dict[str, Any],
    snapshot_dir: str,
    early: dict[str, Any],
    measure: dict[str, Any],
    misalign: dict[str, Any],
    intervene: dict[str, Any],
    early_covariance: str,
    early_signal: str,
    early_dalign: str,
    early_misalignment: str,
    early_intervention: str,
    device: torch.device,
) -> None:
    """E13, E2, E3, E5–E7 at the weight snapshot of step ``early.step`` (the early-training regime): one file per
    ``early_<table>``."""
    from ..experiments.early import early as early_tables

    paths = {
        "early_covariance": early_covariance,
        "early_signal": early_signal,
        "early_dalign": early_dalign,
        "early_misalignment": early_misalignment,
        "early_intervention": early_intervention,
    }
    loaded, prepared, keys, payload = _loaded(model, data, model_keys, device)
    snapshots = Path(snapshot_dir) / payload["identity"]
    settings = {"measure": measure, "misalign": misalign, "intervene": intervene}
    for name, frame in early_tables(loaded, prepared, snapshots, keys, device=device, **early, **settings).items():
        tables.write_table(frame, paths[name], name)


@job
def placement_model(
    *,
    data: str,
    model: str,
    pools: str,
    trajectory: str | None,
    growth: str,
    model_keys: dict[str, Any],
    snapshot_dir: str,
    checkpoints: str,
    grow: dict[str, Any],
    measure: dict[str, Any],
    device: torch.device,
) -> None:
    """E11: grow one block at every chosen point of the final and the signal snapshot (a pretrained
    model, without ``trajectory`` or snapshots: its weights only), each point's certificate measured
    first: at the final weights from the gradient pools ``measure`` stored (``certify.stored_certificate``:
    the same examples and seeds, captured once) where they hold every chosen point and the pool size
    asked, else captured by ``certify.certify_model`` (measure's seed and batch size)."""
    import tempfile

    from ..certify import Sampling, certify_model, point_ranks, stored_certificate
    from ..core.seeding import model_identity
    from ..experiments import growth as growth_table

    loaded, prepared, keys, payload = _loaded(model, data, model_keys, device)
    settings = {k: v for k, v in grow.items() if k not in ("grids", "certificate")}  # grids: which models
    Path(growth).parent.mkdir(parents=True, exist_ok=True)  # by hand (scalemech placement) as under Snakemake
    with tempfile.TemporaryDirectory(prefix=".growth-pools-", dir=Path(growth).parent) as scratch:
        sampling = Sampling(**grow["certificate"], batch_size=measure["batch_size"], seed=measure["seed"])

        def certificate(at: Any, points: list[str], snapshot: str) -> pd.DataFrame:
            frame = None
            if snapshot == "final":  # measure's pools hold the final weights' gradients
                frame = stored_certificate(at, Path(pools), points, sampling, device)
            if frame is None:
                captured = Path(tempfile.mkdtemp(dir=scratch))
                frame = certify_model(at, prepared, model_identity(keys), points, captured, sampling, device=device)
            frame["certify_rank"] = point_ranks(frame)
            return frame

        frame = growth_table(
            loaded,
            prepared,
            Path(snapshot_dir) / payload["identity"] if "identity" in payload else None,
            tables.read_table(trajectory, "trajectory") if trajectory else None,
            keys,
            certificate,
            device=device,
            checkpoint_dir=checkpoints,  # each arm kept as it finishes: a killed job resumes at the next
            **settings,
        )
    tables.write_table(frame, growth, "growth")


@job
def adapt_model(
    *,
    data: str,
    model: str,
    domain: str,
    adaptation: str,
    model_keys: dict[str, Any],
    adapt: dict[str, Any],
    out: str,
    device: torch.device,
) -> None:
    """E12: the base ``model`` (trained on ``data``, domain A) grown into ``domain`` (B) by ``grow`` at
    every placement rule, its arms scored on both (``grow.adaptation``); grow's report goes to the log."""
    from ..grow.adaptation import adaptation as adaptation_table

    loaded, payload = load_model(model, map_location="cpu")
    with contextlib.redirect_stdout(sys.stderr):  # the job's stderr is its log (job_context)
        frame = adaptation_table(loaded, data, domain, Path(out), keys_of(model_keys, payload["spec"]), device=device,
                                 **adapt)  # fmt: skip
    tables.write_table(frame, adaptation, "adaptation")


@job
def cost_table(*, dalign: str, table: str, cost: dict[str, Any]) -> None:
    """W5: time the Gram U-statistics against the covariance at every D measured in this run."""
    from ..stats.cost import cost_table as timings

    dims = tables.read_table(dalign, "dalign")["dim"].astype(int).tolist()
    tables.write_table(timings(dims, **cost), table, "benchmarks")


@table_job
def runtime_table(*, records: Sequence[str], table: str) -> None:
    """The ``runtime`` table: one row per benchmark record ``benchmarks/<run>/<step>/<job>.tsv``
    (Snakemake's ``benchmark:`` files: wall seconds ``s``, ``max_rss`` in MB). CPU seconds are the
    job's own count (``cpu_record`` of ``logs/<run>/<step>/<job>.log``, ``cpu_from`` "job"), else
    Snakemake's sampled ``cpu_time`` (``cpu_from`` "benchmark", a lower bound)."""
    rows = []
    for path in map(Path, records):
        record = pd.read_csv(path, sep="\t").iloc[-1]
        run_name, step, *name = path.with_suffix("").parts[1:]
        own = cpu_record(Layout(run_name).log(step, "/".join(name)))
        cpu, cpu_from = (
            (json.loads(own.read_text())["cpu_seconds"], "job") if own.is_file() else (record["cpu_time"], "benchmark")
        )
        rows.append(
            {
                "step": step,
                "job": "/".join(name),
                "wall_seconds": float(record["s"]),
                "cpu_seconds": float(cpu),
                "cpu_from": cpu_from,
                "max_rss_mb": float(pd.to_numeric(record["max_rss"], errors="coerce")),
            }
        )
    tables.write_table(pd.DataFrame(rows, columns=tables.columns("runtime")), table, "runtime")


@table_job
def collect_table(*, parts: Sequence[str], table: str, name: str) -> None:
    """The table ``name`` from its per-model files."""
    tables.write_table(pd.concat([tables.read_table(p, name) for p in parts], ignore_index=True), table, name)


# -- figures and report --------------------------------------------------------------------------
@table_job
def figure(*, tables: Sequence[str], code: Sequence[str], caption: str, pdf: str, png: str, stem: str) -> None:
    """Figure ``stem`` from the run's tables. ``code`` (the plotting modules) is an input so that
    editing them reruns the figures; ``snakemake --report`` shows ``caption`` beside it."""
    from ..figures import make_figure

    make_figure(stem, Path(tables[0]).parent, Path(pdf).parent)  # writes <stem>.pdf and <stem>.png


@table_job
def verdict_table(*, tables: Sequence[str], code: Sequence[str], table: str, criterion: str) -> None:
    """The ``verdicts`` table: each claim's verdict on the run's ``tables`` under the training ``criterion``,
    and the figure that shows it (``report.verdict_rows``); ``code`` (the report's modules) is an input, so
    that editing a rule decides again."""
    from ..core.tables import write_table
    from ..report import verdict_rows

    write_table(verdict_rows(Path(tables[0]).parent, criterion=criterion), table, "verdicts")


@table_job
def claims_report(
    *,
    tables: Sequence[str],
    verdicts: str,
    figures: Sequence[str],
    runtime: str,
    code: Sequence[str],
    captions: Sequence[str],
    report: str,
    front_page: str,
    criterion: str,
    design: dict[str, Any],
    noise: str,
) -> None:
    """``report.md``: first what the run's ``design`` (its config's sections) can decide at the papers' effect
    sizes on the measured ``noise`` (``report.power``; nothing without one), the claims table with the run's
    ``verdicts`` (the verdict table), every figure with its caption (``captions``: ``workflow/report/*.rst``)
    and the runtime of the run's jobs (``runtime`` is read from the tables directory); ``front_page``: the
    description, the training ``criterion``'s table and the verdicts for the first page of ``snakemake
    --report``."""
    from ..core.layout import table_path
    from ..core.tables import read_table
    from ..report import read_verdicts, write_report
    from ..report.frontpage import front_page as first_page
    from ..report.power import design_table, preface
    from ..report.trained import training_check

    captions_dir, tables_dir, figures_dir = Path(captions[0]).parent, Path(tables[0]).parent, Path(figures[0]).parent
    lines = preface(design_table(design, pd.read_csv(noise), noise), noise, design["run"]) if noise else []
    decided = read_verdicts(verdicts)
    write_report(tables_dir, figures_dir, report, captions_dir=captions_dir, criterion=criterion, verdicts=decided,
                 preface=lines)  # fmt: skip
    training = table_path(tables_dir, "training")
    check = training_check(read_table(training, "training") if training.exists() else None, criterion)
    description = (captions_dir / "workflow.rst").read_text()
    write_text(front_page, first_page(description, decided, {Path(f).name for f in figures}, check, criterion))


JOBS.update({rule: experiment_job(step) for rule, step in STEPS.items() if step.computes})
