"""Rule prepare_data → scalemech.pipeline.prepare."""
from scalemech.pipeline import job_context, prepare

with job_context(snakemake.log[0], snakemake.threads):
    prepare(snakemake.wildcards.dataset, snakemake.params.cfg, snakemake.output[0], snakemake.params.offline)
