"""The cluster: what each job asks for, against the limits the config's ``cluster`` section declares."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from ..core.steps import STEPS
from .checks import grown_grids
from .errors import ConfigError
from .grids import model_jobs


def cluster_requests(config: dict[str, Any]) -> dict[str, dict[str, int]]:
    """What the cluster jobs that do not use their grid's resources ask for: ``{"prepare_data:<dataset>"
    | "misalign_model" | "cost_table": {"cpus", "mem_mb", "runtime"}}`` (workflow/rules/common.smk
    passes them to the rules; the other model jobs ask for their grid's ``resources`` and ``threads``
    CPUs).

    ``prepare_data`` takes one CPU per ``workers`` of its dataset (1 without), 8000 MB and
    120 minutes; ``misalign_model`` (E6 on the memory-mapped pools, one cross-Gram at a time, on
    the CPU) ``threads`` CPUs, 8000 MB and 120 minutes; ``cost_table`` takes ``threads`` CPUs,
    three ``cost.max_covariance_mb`` covariances' worth of memory plus 1000 MB, and 60 minutes.
    The rule's own fixed numbers are capped at the ``cluster`` section's ``max_mem_mb`` and
    ``max_runtime`` (a smaller node still runs them); what the config chose (workers, threads,
    max_covariance_mb) is checked by ``check_cluster_limits`` instead.
    """
    limits = config.get("cluster", {})

    def capped(value: int, key: str) -> int:
        return min(value, limits.get(key, value))

    requests = {
        f"prepare_data:{name}": {
            "cpus": int(settings.get("workers", 1)),
            "mem_mb": capped(8000, "max_mem_mb"),
            "runtime": capped(120, "max_runtime"),
        }
        for name, settings in config["datasets"].items()
    }
    requests["misalign_model"] = {  # memory-mapped pools and one cross-Gram at a time, on the CPU
        "cpus": config["threads"],
        "mem_mb": capped(8000, "max_mem_mb"),
        "runtime": capped(120, "max_runtime"),
    }
    requests["cost_table"] = {
        "cpus": config["threads"],
        "mem_mb": 3 * config["cost"]["max_covariance_mb"] + 1000,
        "runtime": capped(60, "max_runtime"),
    }
    return requests


def gpu_share(config: dict[str, Any], resources: dict[str, Any]) -> dict[str, int | None]:
    """A GPU job's share of its GPU, from its grid's ``resources`` and the ``cluster`` section:
    ``gpu_mem_mb`` (the grid's, else the whole GPU's ``gpu_memory_mb``, else None: no limit) and, where the
    cluster has GRES shards and the grid names its memory, ``shards`` = ⌈S · gpu_mem_mb / gpu_memory_mb⌉
    of the GPU's S (else None: a whole GPU). Nothing for a grid with ``gpu`` 0."""
    if not resources.get("gpu", 0):
        return {"gpu_mem_mb": None, "shards": None}
    cluster = config.get("cluster", {})
    whole, own, shards = cluster.get("gpu_memory_mb"), resources.get("gpu_mem_mb"), cluster.get("gpu_shards")
    share = min(shards, math.ceil(shards * own / whole)) if shards and own and whole else None
    return {"gpu_mem_mb": own or whole, "shards": share}


def check_gpu_share(config: dict[str, Any]) -> Iterator[str]:
    """``cluster.gpu_shards`` needs ``cluster.gpu_memory_mb``; a grid's ``resources.gpu_mem_mb`` needs
    ``gpu`` 1 and fits one GPU."""
    cluster = config.get("cluster", {})
    whole = cluster.get("gpu_memory_mb")
    if cluster.get("gpu_shards") and not whole:
        yield "cluster.gpu_shards needs cluster.gpu_memory_mb (the MB of one GPU) to size each job's shards"
    groups = {**config["grids"], **config.get("pretrained", {})}
    for name, group in groups.items():
        resources = group.get("resources", {})
        own = resources.get("gpu_mem_mb")
        if own is not None and not resources.get("gpu", 0):
            yield f"{name}: resources.gpu_mem_mb {own} needs resources.gpu: 1 (a share of a GPU the job does not get)"
        elif own is not None and whole and own > whole:
            yield f"{name}: resources.gpu_mem_mb {own} is more than one GPU's cluster.gpu_memory_mb {whole}"


def check_cluster_limits(config: dict[str, Any]) -> Iterator[str]:
    """Every cluster job fits the nodes that the ``cluster`` section declares (``max_cpus``,
    ``max_mem_mb``, ``max_gpus``, ``max_runtime``; unset ones are not checked). A job asking
    for more would wait in the SLURM queue forever (or be refused at submission), so it is
    refused here, naming the key to change, the rules and the models."""
    limits = config.get("cluster", {})
    if not any(key.startswith("max_") for key in limits):
        return
    max_cpus, max_mem = limits.get("max_cpus"), limits.get("max_mem_mb")
    if max_cpus is not None and config["threads"] > max_cpus:
        yield (
            f"threads: {config['threads']} is more than cluster.max_cpus {max_cpus}: every model job "
            f"(train_model, measure_model, misalign_model, ...) and cost_table asks for `threads` CPUs "
            f"(--cpus-per-task) and could never start; allowed: at most {max_cpus}"
        )
    for name, settings in config["datasets"].items():
        workers = settings.get("workers")
        if max_cpus is not None and workers is not None and workers > max_cpus:
            yield (
                f"datasets.{name}.workers: {workers} is more than cluster.max_cpus {max_cpus}: prepare_data of "
                f"{name} asks for one CPU per worker and could never start; allowed: at most {max_cpus}"
            )
    cost_mem = cluster_requests(config)["cost_table"]["mem_mb"]
    if max_mem is not None and cost_mem > max_mem:
        room = (max_mem - 1000) // 3
        yield (
            f"cost.max_covariance_mb: {config['cost']['max_covariance_mb']} makes cost_table ask for {cost_mem} MB "
            f"(3 x cost.max_covariance_mb + 1000), more than cluster.max_mem_mb {max_mem}; allowed: "
            + (f"at most {room}" if room >= 1 else "none (cluster.max_mem_mb below 1003 leaves cost_table no room)")
        )
    try:
        jobs = model_jobs(config)
    except ConfigError:  # two grids making one model: reported when the jobs are planned
        jobs = []
    grown, adapted = set(grown_grids(config)), set(config["adapt"]["grids"])
    gpu_rules = [step.rule for step in STEPS.values() if step.device]
    checks = (("max_mem_mb", "mem_mb", " MB"), ("max_runtime", "runtime", " minutes"), ("max_gpus", "gpu", ""))
    for section in ("grids", "pretrained"):
        kind = "trained" if section == "grids" else "pretrained"
        for name, group in config.get(section, {}).items():
            runs_on = {"all", kind, *(["grown"] if name in grown else []), *(["adapted"] if name in adapted else [])}
            rules = [step.rule for step in STEPS.values() if step.runs_on in runs_on and step.cluster == "grid"]
            models = [job.key for job in jobs if job.grid == name and (job.recipe is None) == (section == "pretrained")]
            named = ", ".join(models[:3]) + (f" and {len(models) - 3} more" if len(models) > 3 else "")
            for limit_key, key, unit in checks:
                limit, asked = limits.get(limit_key), group["resources"][key]
                if limit is None or asked <= limit:
                    continue
                asking = [rule for rule in rules if rule in gpu_rules] if key == "gpu" else rules
                hint = " (gpu: 0 runs them on CPUs, in cluster.cpu_partition)" if key == "gpu" and limit == 0 else ""
                yield (
                    f"{section}.{name}.resources.{key}: {asked} is more than cluster.{limit_key} {limit}: the "
                    f"{', '.join(asking)} jobs of {named or 'its models'} could never start; allowed: at most "
                    f"{limit}{unit}{hint}"
                )
