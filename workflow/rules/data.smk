# E0: one prepare job per dataset of the config -> results/<run>/data/<name>/ (+ manifest.json).


rule prepare_data:
    output:
        data=directory(LAYOUT.data("{dataset}")),
    log:
        LAYOUT.log("data", "{dataset}"),
    benchmark:
        LAYOUT.benchmark("data", "{dataset}")
    conda:
        "../../environment.yml"
    threads: cluster_request("prepare_data", "cpus")
    resources:
        mem_mb=cluster_request("prepare_data", "mem_mb"),
        runtime=cluster_request("prepare_data", "runtime"),
        slurm_partition=cpu_partition,
        slurm_account=slurm_account,
    params:
        dataset=lambda wc: wc.dataset,
        settings=lambda wc: config["datasets"][wc.dataset],
        offline=config["offline"],
    script:
        JOB_SCRIPT


rule data:
    input:
        [LAYOUT.data(dataset) for dataset in sorted(config["datasets"])],
