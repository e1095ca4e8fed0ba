"""The script of every rule: run the scalemech job named like the rule (scalemech.pipeline.jobs), then end
the process without the interpreter's teardown (jobs.exit_now)."""

from scalemech.pipeline.jobs import exit_now, run

run(snakemake)  # noqa: F821 (Snakemake defines it)
exit_now()
