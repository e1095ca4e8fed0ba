# The per-model rules, one for each step that scalemech.core.steps.STEPS declares: E1 training
# (pretrained checkpoints are pinned instead), E2/E3/E5 measure, E6 misalign, E7 intervene, E10
# trajectory, E11 placement. A step's declaration names its files (`scalemech rules` and
# docs/rules.md print them per rule), its params, the models it runs on and what its cluster job
# asks for: the grid's GPU, memory and time (`resources` of the grid), or on CPUs what
# scalemech.config.cluster_requests computes (misalign_model). The per-model tables are collected
# by collect_table (measure.smk).
#
# Checkpoints live in results/<run>/checkpoints/ (not declared), so a killed or failed job resumes
# and a rerun never deletes them; a forced or changed run starts afresh and moves the old checkpoints
# aside (scalemech.training.checkpoints). How a job runs (device, checkpoint_every:
# scalemech.pipeline.jobs.execution) is read from the config at run time, not passed as params:
# changing it does not retrain a finished model. Each job reads which points were measured, and on
# which examples, from the gradient pools themselves.


def grid_request(key):
    """A resource function: ``key`` (gpu, mem_mb, runtime) of the model's grid."""
    return lambda wc: model_resources(wc)[key]


def whole_gpus(wc):
    """The GPUs a job asks for whole: its grid's gpu, or none where it asks for GRES shards instead."""
    return 0 if gpu_share(config, model_resources(wc))["shards"] else model_resources(wc)["gpu"]


def shard_request(wc):
    """sbatch --gres=shard:k of a job that shares its GPU on SLURM (scalemech.config.gpu_share); else unset."""
    shards = gpu_share(config, model_resources(wc))["shards"]
    return f"--gres=shard:{shards}" if shards else None


def model_requests(step):
    """What the cluster job of ``step`` asks for (Step.device, Step.cluster)."""
    if step.cluster == "cpu":
        return {
            "mem_mb": cluster_request(step.rule, "mem_mb"),
            "runtime": cluster_request(step.rule, "runtime"),
            "slurm_partition": cpu_partition,
        }
    gpu = (
        {
            "gpu": whole_gpus,
            "gpu_shards": lambda wc: gpu_share(config, model_resources(wc))["shards"] or 0,
            "gpu_mem_mb": lambda wc: gpu_share(config, model_resources(wc))["gpu_mem_mb"],
            "slurm_extra": shard_request,
        }
        if step.device
        else {}
    )
    return {
        **gpu,
        "mem_mb": grid_request("mem_mb"),
        "runtime": grid_request("runtime"),
        "slurm_partition": model_partition if step.device else cpu_partition,
    }


for step in STEPS.values():

    rule:
        name:
            step.rule
        input:
            **model_inputs(step.rule),
        output:
            **model_outputs(step.rule),
        log:
            log_of(step.rule),
        benchmark:
            benchmark_of(step.rule)
        wildcard_constraints:
            model=regex(MODELS[step.runs_on]),
        conda:
            "../../environment.yml"
        # pinning a checkpoint computes nothing: one thread
        threads: config["threads"] if step.device or step.cluster == "cpu" else 1
        resources:
            **model_requests(step),
            slurm_account=slurm_account,
        params:
            **model_params(step.rule),
        script:
            JOB_SCRIPT
