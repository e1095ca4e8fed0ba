"""Rule measure_model → scalemech.pipeline.measure_model."""
from scalemech.pipeline import job_context, measure_model

with job_context(snakemake.log[0], snakemake.threads):
    measure_model(snakemake.input.model, snakemake.input.data, snakemake.params.model_keys, snakemake.params.settings,
                  snakemake.params.device, snakemake.output.stats, snakemake.output.covmats, snakemake.output.pools)
