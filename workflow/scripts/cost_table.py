"""Rule cost_table → scalemech.pipeline.cost."""
from scalemech.pipeline import cost, job_context

with job_context(snakemake.log[0], snakemake.threads):
    cost(snakemake.params.settings, snakemake.output[0])
