"""Rule experiment_table → scalemech.pipeline.concat_table."""
from scalemech.pipeline import concat_table, job_context

with job_context(snakemake.log[0], snakemake.threads):
    concat_table(snakemake.input, snakemake.output[0], snakemake.wildcards.table)
