"""Rule training_table → scalemech.pipeline.training_table."""
from scalemech.pipeline import job_context, training_table

with job_context(snakemake.log[0], snakemake.threads):
    training_table(snakemake.input, snakemake.output[0])
