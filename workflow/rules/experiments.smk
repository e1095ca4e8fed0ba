# E6 misalignment (from the stored pools), E7 the zero-init residual parameter, E10 alignment along
# training (weight snapshots), E11 growth at every point against the certificate (E8's jumpboard,
# fallback and control are its arms). One job per model; the tables are collected by
# collect_table (measure.smk). Each job reads which points were measured, and on which
# examples, from the gradient pools themselves.


rule misalign_model:
    input:
        **model_inputs("misalign_model"),
    output:
        **model_outputs("misalign_model"),
    log:
        log_of("misalign_model"),
    benchmark:
        benchmark_of("misalign_model")
    conda:
        "../../environment.yml"
    threads: config["threads"]
    resources:
        mem_mb=cluster_request("misalign_model", "mem_mb"),
        runtime=cluster_request("misalign_model", "runtime"),
        slurm_partition=cpu_partition,
        slurm_account=slurm_account,
    params:
        **model_params("misalign_model"),
    script:
        JOB_SCRIPT


rule intervene_model:
    input:
        **model_inputs("intervene_model"),
    output:
        **model_outputs("intervene_model"),
    log:
        log_of("intervene_model"),
    benchmark:
        benchmark_of("intervene_model")
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
        **model_params("intervene_model"),
    script:
        JOB_SCRIPT


rule trajectory_model:
    input:
        **model_inputs("trajectory_model"),
    output:
        **model_outputs("trajectory_model"),
    log:
        log_of("trajectory_model"),
    benchmark:
        benchmark_of("trajectory_model")
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
        **model_params("trajectory_model"),
    script:
        JOB_SCRIPT


rule growth_model:
    input:
        **model_inputs("growth_model"),
    output:
        **model_outputs("growth_model"),
    log:
        log_of("growth_model"),
    benchmark:
        benchmark_of("growth_model")
    wildcard_constraints:
        model=regex(GROWN),
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
        **model_params("growth_model"),
    script:
        JOB_SCRIPT
