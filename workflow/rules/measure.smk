# E2, E3, E5: one-pass activation-gradient capture on a train and a test pool per model,
# the alignment statistics, and the per-example gradient pools kept for E6/E7.


rule measure_model:
    input:
        data=f"{RESULTS}/data/{{dataset}}",
        model=f"{RESULTS}/models/{{dataset}}/{{model}}/model.pt",
    output:
        stats=f"{RESULTS}/stats/{{dataset}}/{{model}}.parquet",
        covmats=f"{RESULTS}/stats/{{dataset}}/{{model}}.covmats.parquet",
        pools=directory(f"{RESULTS}/pools/{{dataset}}/{{model}}"),
    params:
        model_keys=lambda wc: job(wc).keys(RUN),
        settings=config["measure"],
        device=config["device"],
    threads: config["threads"]
    resources:
        gpu=lambda wc: job(wc).resources["gpu"],
        mem_mb=lambda wc: job(wc).resources["mem_mb"],
        runtime=lambda wc: job(wc).resources["runtime"],
    log:
        f"{LOGS}/measure/{{dataset}}/{{model}}.log",
    benchmark:
        f"{BENCH}/measure/{{dataset}}/{{model}}.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/measure_model.py"


rule stats_tables:
    input:
        stats=per_model(f"{RESULTS}/stats/{{dataset}}/{{model}}.parquet", JOBS),
        covmats=per_model(f"{RESULTS}/stats/{{dataset}}/{{model}}.covmats.parquet", JOBS),
    output:
        covariance=f"{RESULTS}/tables/covariance.csv",
        covmats=f"{RESULTS}/tables/covmats.parquet",
        signal=f"{RESULTS}/tables/signal.csv",
        dalign=f"{RESULTS}/tables/dalign.csv",
    log:
        f"{LOGS}/tables/stats.log",
    benchmark:
        f"{BENCH}/tables/stats.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/stats_tables.py"


rule cost_table:
    output:
        f"{RESULTS}/tables/benchmarks.csv",
    params:
        settings=config["cost"],
    threads: config["threads"]
    log:
        f"{LOGS}/tables/benchmarks.log",
    benchmark:
        f"{BENCH}/tables/benchmarks.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/cost_table.py"
