"""Rule train_model → scalemech.pipeline.train_model."""
from pathlib import Path

from scalemech.pipeline import job_context, train_model

with job_context(snakemake.log[0], snakemake.threads):
    train_model(snakemake.params.spec, snakemake.params.recipe, snakemake.params.seed, snakemake.input.data,
                str(Path(snakemake.output.model).parent), snakemake.params.checkpoints, snakemake.params.model_keys,
                snakemake.config["device"], snakemake.config["train"]["checkpoint_every"], snakemake.params.compile)
