"""Rule claims_report → scalemech.report.write_report."""
from scalemech.pipeline import job_context
from scalemech.report import write_report

with job_context(snakemake.log[0], snakemake.threads):
    write_report(snakemake.params.tables_dir, snakemake.params.figures_dir, snakemake.output[0],
                 captions_dir=snakemake.params.captions_dir)
