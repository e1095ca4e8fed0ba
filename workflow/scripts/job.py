"""The script of every rule: run the scalemech job named like the rule (scalemech.pipeline.jobs)."""

from scalemech.pipeline.jobs import run

run(snakemake)  # noqa: F821 (Snakemake defines it)
