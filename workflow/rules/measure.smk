# E2, E3, E5: one-pass activation-gradient capture on a train and a test pool per model,
# the alignment statistics (one file per table per model), and the per-example gradient
# pools kept for E6-E8; then one table per statistic across models.


rule measure_model:
    input:
        **model_inputs("measure_model"),
    output:
        **model_outputs("measure_model"),
    log:
        log_of("measure_model"),
    benchmark:
        benchmark_of("measure_model")
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
        **model_params("measure_model"),
    script:
        JOB_SCRIPT


rule collect_table:
    input:
        parts=table_parts,
    output:
        table=f"{LAYOUT.tables_dir}/{{name}}{{suffix}}",
    log:
        LAYOUT.log("tables", "{name}{suffix}"),
    benchmark:
        LAYOUT.benchmark("tables", "{name}{suffix}")
    wildcard_constraints:
        name="|".join(PER_MODEL_TABLES),
        suffix="|".join(sorted({re.escape(suffix(name)) for name in PER_MODEL_TABLES})),
    conda:
        "../../environment.yml"
    params:
        name=lambda wc: wc.name,
    script:
        JOB_SCRIPT


rule cost_table:
    input:
        dalign=LAYOUT.table("dalign"),
    output:
        table=LAYOUT.table("benchmarks"),
    log:
        LAYOUT.log("tables", "benchmarks"),
    benchmark:
        LAYOUT.benchmark("tables", "benchmarks")
    conda:
        "../../environment.yml"
    threads: config["threads"]
    resources:
        mem_mb=cluster_request("cost_table", "mem_mb"),
        runtime=cluster_request("cost_table", "runtime"),
        slurm_partition=cpu_partition,
        slurm_account=slurm_account,
    params:
        cost=config["cost"],
    script:
        JOB_SCRIPT
