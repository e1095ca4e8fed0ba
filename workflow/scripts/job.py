"""The script of every rule: run the scalemech job named like the rule (scalemech.jobs)."""

from scalemech.jobs import run

run(snakemake)  # noqa: F821 (Snakemake defines it)
