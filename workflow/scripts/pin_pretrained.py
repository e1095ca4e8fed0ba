"""Rule pin_pretrained → scalemech.pipeline.pin_pretrained."""
from scalemech.pipeline import job_context, pin_pretrained

with job_context(snakemake.log[0], snakemake.threads):
    pin_pretrained(snakemake.params.spec, snakemake.output.model)
