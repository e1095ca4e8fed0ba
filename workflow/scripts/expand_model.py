"""Rule expand_model → scalemech.pipeline.expand_model."""
from scalemech.pipeline import expand_model, job_context

with job_context(snakemake.log[0], snakemake.threads):
    expand_model(snakemake.input.model, snakemake.input.data, snakemake.params.model_keys, snakemake.params.settings,
                 snakemake.params.measure, snakemake.params.device, snakemake.output[0])
