# E1: one training job per (dataset, family, depth, width, seed); pretrained checkpoints
# are pinned instead. Checkpoints live in results/<run>/checkpoints/ (not declared), so a
# killed or failed job resumes and a rerun never deletes them; a forced or changed run starts
# afresh and moves the old checkpoints aside (scalemech.training.checkpoints). How a job runs
# (device, checkpoint_every: scalemech.pipeline.jobs.execution) is read from the config at run time,
# not passed as params: changing it does not retrain a finished model.


rule train_model:
    input:
        **model_inputs("train_model"),
    output:
        **model_outputs("train_model"),
    log:
        log_of("train_model"),
    benchmark:
        benchmark_of("train_model")
    wildcard_constraints:
        model=regex(TRAINED),
    conda:
        "../../environment.yml"
    threads: config["threads"]
    resources:
        gpu=lambda wc: model_resources(wc)["gpu"],
        mem_mb=lambda wc: model_resources(wc)["mem_mb"],
        runtime=lambda wc: model_resources(wc)["runtime"],
        slurm_partition=model_partition,
        slurm_account=slurm_account,
    params:
        **model_params("train_model"),
    script:
        JOB_SCRIPT


rule pin_pretrained:
    output:
        **model_outputs("pin_pretrained"),
    log:
        log_of("pin_pretrained"),
    benchmark:
        benchmark_of("pin_pretrained")
    wildcard_constraints:
        model=regex(PRETRAINED),
    conda:
        "../../environment.yml"
    resources:
        mem_mb=lambda wc: model_resources(wc)["mem_mb"],
        runtime=lambda wc: model_resources(wc)["runtime"],
        slurm_partition=cpu_partition,
        slurm_account=slurm_account,
    params:
        **model_params("pin_pretrained"),
    script:
        JOB_SCRIPT


rule training_table:
    input:
        metrics=per_model(LAYOUT.model("{dataset}", "{model}", "metrics.json"), TRAINED),
    output:
        table=LAYOUT.table("training"),
    log:
        LAYOUT.log("tables", "training"),
    benchmark:
        LAYOUT.benchmark("tables", "training")
    conda:
        "../../environment.yml"
    script:
        JOB_SCRIPT


# D4: Paper D's power law of test loss in depth and width, fitted over each trained grid.
rule powerlaw_table:
    input:
        training=LAYOUT.table("training"),
    output:
        table=LAYOUT.table("powerlaw"),
    log:
        LAYOUT.log("tables", "powerlaw"),
    benchmark:
        LAYOUT.benchmark("tables", "powerlaw")
    conda:
        "../../environment.yml"
    script:
        JOB_SCRIPT


rule train:
    input:
        rules.training_table.output,
        per_model(LAYOUT.model("{dataset}", "{model}"), JOBS),
