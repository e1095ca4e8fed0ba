"""Rule figure → scalemech.plots.make_figure."""
from pathlib import Path

from scalemech.pipeline import job_context
from scalemech.plots import make_figure

with job_context(snakemake.log[0], snakemake.threads):
    make_figure(snakemake.wildcards.stem, Path(snakemake.params.tables_dir), Path(snakemake.output.pdf).parent)
