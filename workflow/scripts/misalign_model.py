"""Rule misalign_model → scalemech.pipeline.misalign_model."""
from scalemech.pipeline import job_context, misalign_model

with job_context(snakemake.log[0], snakemake.threads):
    misalign_model(snakemake.input.stats, snakemake.input.pools, snakemake.params.settings, snakemake.output[0])
