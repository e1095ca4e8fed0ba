# The run's tables from the per-model rules' files (models.smk): each per-model table collected
# across the models its step ran on, and W5's cost table at the dims measure measured.


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
