# E1's tables: the training table from every trained model's metrics (the models themselves:
# train_model and pin_pretrained, models.smk), and D4's power law fitted over it.


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
