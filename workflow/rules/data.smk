# E0: one prepare job per dataset of the config -> results/<run>/data/<name>/ (+ manifest.json).


rule prepare_data:
    output:
        directory(f"{RESULTS}/data/{{dataset}}"),
    params:
        cfg=lambda wc: config["datasets"][wc.dataset],
        offline=config["offline"],
    log:
        f"{LOGS}/data/{{dataset}}.log",
    benchmark:
        f"{BENCH}/data/{{dataset}}.tsv"
    resources:
        mem_mb=8000,
        runtime=120,
    conda:
        "../../environment.yml"
    script:
        "../scripts/prepare_data.py"


rule data:
    input:
        expand(f"{RESULTS}/data/{{dataset}}", dataset=sorted(config["datasets"])),
