"""Rule intervene_model → scalemech.pipeline.intervene_model."""
from scalemech.pipeline import intervene_model, job_context

with job_context(snakemake.log[0], snakemake.threads):
    intervene_model(snakemake.input.model, snakemake.input.data, snakemake.input.pools, snakemake.params.model_keys,
                    snakemake.params.settings, snakemake.params.measure, snakemake.params.device,
                    snakemake.output[0])
