# E6 misalignment (from the stored pools), E7 the zero-init residual parameter, E8 depth
# expansion with jumpboard and fallback. One job per model, then one table per experiment.

EXPERIMENT_DIRS = {"misalignment": "misalign", "intervention": "intervene", "expansion": "expand"}


rule misalign_model:
    input:
        stats=f"{RESULTS}/stats/{{dataset}}/{{model}}.parquet",
        pools=f"{RESULTS}/pools/{{dataset}}/{{model}}",
    output:
        f"{RESULTS}/misalign/{{dataset}}/{{model}}.csv",
    params:
        settings=config["misalign"],
    threads: config["threads"]
    resources:
        mem_mb=lambda wc: job(wc).resources["mem_mb"],
        runtime=lambda wc: job(wc).resources["runtime"],
    log:
        f"{LOGS}/misalign/{{dataset}}/{{model}}.log",
    benchmark:
        f"{BENCH}/misalign/{{dataset}}/{{model}}.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/misalign_model.py"


rule intervene_model:
    input:
        data=f"{RESULTS}/data/{{dataset}}",
        model=f"{RESULTS}/models/{{dataset}}/{{model}}/model.pt",
        pools=f"{RESULTS}/pools/{{dataset}}/{{model}}",
    output:
        f"{RESULTS}/intervene/{{dataset}}/{{model}}.csv",
    params:
        model_keys=lambda wc: job(wc).keys(RUN),
        settings=config["intervene"],
        measure=config["measure"],
        device=config["device"],
    threads: config["threads"]
    resources:
        gpu=lambda wc: job(wc).resources["gpu"],
        mem_mb=lambda wc: job(wc).resources["mem_mb"],
        runtime=lambda wc: job(wc).resources["runtime"],
    log:
        f"{LOGS}/intervene/{{dataset}}/{{model}}.log",
    benchmark:
        f"{BENCH}/intervene/{{dataset}}/{{model}}.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/intervene_model.py"


rule expand_model:
    input:
        data=f"{RESULTS}/data/{{dataset}}",
        model=f"{RESULTS}/models/{{dataset}}/{{model}}/model.pt",
    output:
        f"{RESULTS}/expand/{{dataset}}/{{model}}.csv",
    params:
        model_keys=lambda wc: job(wc).keys(RUN),
        settings=config["expand"],
        measure=config["measure"],
        device=config["device"],
    threads: config["threads"]
    resources:
        gpu=lambda wc: job(wc).resources["gpu"],
        mem_mb=lambda wc: job(wc).resources["mem_mb"],
        runtime=lambda wc: job(wc).resources["runtime"],
    log:
        f"{LOGS}/expand/{{dataset}}/{{model}}.log",
    benchmark:
        f"{BENCH}/expand/{{dataset}}/{{model}}.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/expand_model.py"


rule experiment_table:
    input:
        lambda wc: per_model(
            f"{RESULTS}/{EXPERIMENT_DIRS[wc.table]}/{{dataset}}/{{model}}.csv",
            EXPANDED if wc.table == "expansion" else JOBS,
        ),
    output:
        f"{RESULTS}/tables/{{table}}.csv",
    wildcard_constraints:
        table="misalignment|intervention|expansion",
    log:
        f"{LOGS}/tables/{{table}}.log",
    benchmark:
        f"{BENCH}/tables/{{table}}.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/concat_table.py"

