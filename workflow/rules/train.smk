# E1: one training job per (dataset, family, depth, width, seed); pretrained checkpoints
# are pinned instead. Checkpoints live in results/<run>/checkpoints/ (not declared), so a
# killed or failed job resumes and a rerun never deletes them; a forced or changed run starts
# afresh and moves the old checkpoints aside (scalemech.checkpoints). How a job runs
# (device, checkpoint_every) is read from the config in the script, not passed as params:
# changing it does not retrain a finished model.


rule train_model:
    input:
        data=f"{RESULTS}/data/{{dataset}}",
    output:
        model=f"{RESULTS}/models/{{dataset}}/{{model}}/model.pt",
        metrics=f"{RESULTS}/models/{{dataset}}/{{model}}/metrics.json",
        curve=f"{RESULTS}/models/{{dataset}}/{{model}}/curve.csv",
    wildcard_constraints:
        model=regex(TRAINED),
    params:
        spec=lambda wc: job(wc).spec,
        recipe=lambda wc: job(wc).recipe,
        seed=lambda wc: job(wc).seed,
        model_keys=lambda wc: job(wc).keys(RUN),
        compile=config["train"]["compile"],
        checkpoints=lambda wc: f"{RESULTS}/checkpoints/{wc.dataset}/{wc.model}",
    threads: config["threads"]
    resources:
        gpu=lambda wc: job(wc).resources["gpu"],
        mem_mb=lambda wc: job(wc).resources["mem_mb"],
        runtime=lambda wc: job(wc).resources["runtime"],
    log:
        f"{LOGS}/train/{{dataset}}/{{model}}.log",
    benchmark:
        f"{BENCH}/train/{{dataset}}/{{model}}.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/train_model.py"


rule pin_pretrained:
    output:
        model=f"{RESULTS}/models/{{dataset}}/{{model}}/model.pt",
    wildcard_constraints:
        model=regex(PRETRAINED),
    params:
        spec=lambda wc: job(wc).spec,
    resources:
        gpu=lambda wc: job(wc).resources["gpu"],
        mem_mb=lambda wc: job(wc).resources["mem_mb"],
        runtime=lambda wc: job(wc).resources["runtime"],
    log:
        f"{LOGS}/pretrained/{{dataset}}/{{model}}.log",
    benchmark:
        f"{BENCH}/pretrained/{{dataset}}/{{model}}.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/pin_pretrained.py"


rule training_table:
    input:
        per_model(f"{RESULTS}/models/{{dataset}}/{{model}}/metrics.json", TRAINED),
    output:
        f"{RESULTS}/tables/training.csv",
    log:
        f"{LOGS}/tables/training.log",
    benchmark:
        f"{BENCH}/tables/training.tsv"
    conda:
        "../../environment.yml"
    script:
        "../scripts/training_table.py"


rule train:
    input:
        rules.training_table.output,
        per_model(f"{RESULTS}/models/{{dataset}}/{{model}}/model.pt", JOBS),
