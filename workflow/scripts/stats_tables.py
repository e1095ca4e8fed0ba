"""Rule stats_tables → scalemech.pipeline.stats_tables."""
from scalemech.pipeline import job_context, stats_tables

with job_context(snakemake.log[0], snakemake.threads):
    stats_tables(snakemake.input.stats, snakemake.input.covmats, dict(snakemake.output.items()))
