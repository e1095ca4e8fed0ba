"""The checks of tests/slurm/run.sh after the tiny run through the SLURM profile.

    check.py SNAKEMAKE_LOG WORKDIR CONFIG SLURMCTLD_LOG NODE_CPUS

What is checked, and how (there is no slurmdbd, so no sacct):
- the plan: the "Job stats" table snakemake prints before it starts;
- the SLURM jobs: every "Job N has been submitted with SLURM jobid M" line of snakemake's log;
  each job id is looked up with `scontrol show job -o` (slurmctld keeps finished jobs for
  MinJobAge = 1800 s): its rule (from the plugin's --comment rule_<rule>_wildcards_...), state
  COMPLETED, exit code 0:0, partition, CPUs, memory and whether it had a GPU;
- independently, slurmctld's own log must show each job id submitted, allocated in that
  partition, and completed with exit status 0;
- every rule of the plan that is not a localrule ran as exactly as many SLURM jobs as planned,
  and no localrule ran as a SLURM job (snakemake's log shows them as "localrule <name>:");
- every figure the figure jobs were to make (their "output:" lines in snakemake's log; one job per
  stem of scalemech.figures.FIGURES that the workflow plans) and the report exist, not empty.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

from scalemech.config import cluster_requests, validate_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the job-stats reader
from jobstats import planned  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# The Snakefile's localrules: they must run on the host, every other rule as a SLURM job.
LOCAL = set(
    re.findall(
        r"\w+", re.search(r"^localrules:\n((?:[ \t]+\w+,?\n)+)", (ROOT / "Snakefile").read_text(), re.M).group(1)
    )
)
TARGETS = {"all"}  # rules without a script: nothing runs


def slurm_time(minutes: int) -> str:
    """``minutes`` as scontrol prints a time limit: ``[D-]HH:MM:SS``."""
    days, rest = divmod(minutes, 24 * 60)
    return f"{f'{days}-' if days else ''}{rest // 60:02d}:{rest % 60:02d}:00"


def show_job(slurm_id: str) -> dict[str, str]:
    line = subprocess.run(
        ["scontrol", "show", "job", "-o", slurm_id], capture_output=True, text=True, check=True
    ).stdout
    return dict(re.findall(r"(\w+)=(\S*)", line))


def main(log_path: str, workdir: str, config_path: str, ctld_log_path: str, node_cpus: str) -> int:
    log = Path(log_path).read_text()
    ctld_log = Path(ctld_log_path).read_text()
    config = validate_config(yaml.safe_load(Path(config_path).read_text()))
    run, cluster, problems = config["run"], config["cluster"], []
    plan = planned(log)
    if not plan:
        print("no job stats table in snakemake's log")
        return 1

    submitted = re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", log)
    jobs = {}
    for _, slurm_id in submitted:
        info = show_job(slurm_id)
        comment = info.get("Comment", "")
        rule = comment[len("rule_") :].split("_wildcards_")[0] if comment.startswith("rule_") else "?"
        wildcards = comment.split("_wildcards_")[1] if "_wildcards_" in comment else ""
        jobs[slurm_id] = (rule, wildcards, info)

    requests = cluster_requests(config)
    grid_resources = next(iter(config["grids"].values()))["resources"]
    print(
        f"{'slurm id':>8}  {'rule':16} {'state':10} {'exit':5} {'partition':9} {'cpus':>4} {'mem':>7}  gpu  wildcards"
    )
    for slurm_id, (rule, wildcards, info) in sorted(jobs.items(), key=lambda item: int(item[0])):
        tres = info.get("TRES", "")
        gpu = "gres/gpu" in tres
        print(
            f"{slurm_id:>8}  {rule:16} {info.get('JobState', '?'):10} {info.get('ExitCode', '?'):5} "
            f"{info.get('Partition', '?'):9} {info.get('NumCPUs', '?'):>4} {info.get('MinMemoryNode', '?'):>7}  "
            f"{'yes' if gpu else 'no':3}  {wildcards}"
        )
        if rule in ("prepare_data", "misalign_model", "cost_table"):  # prepare_data's wildcards: its dataset
            request = requests[f"prepare_data:{wildcards}" if rule == "prepare_data" else rule]
            cpus, mem, minutes = request["cpus"], request["mem_mb"], request["runtime"]
        else:
            cpus, mem, minutes = config["threads"], grid_resources["mem_mb"], grid_resources["runtime"]
        expected = {
            "JobState": "COMPLETED",
            "ExitCode": "0:0",
            "Partition": cluster["cpu_partition"],
            "NumCPUs": str(cpus),
            "MinMemoryNode": f"{mem}M",
            "TimeLimit": slurm_time(minutes),
        }
        for key, value in expected.items():
            if info.get(key) != value:
                problems.append(f"SLURM job {slurm_id} ({rule} {wildcards}): {key}={info.get(key)}, expected {value}")
        if gpu:
            problems.append(f"SLURM job {slurm_id} ({rule}) asked for a GPU (TRES {tres}); the grid's gpu is 0")
        partition = re.escape(cluster["cpu_partition"])
        for event in (
            rf"_slurm_rpc_submit_batch_job: JobId={slurm_id} ",
            rf"sched: Allocate JobId={slurm_id} NodeList=\S+ #CPUs=\d+ Partition={partition}\b",
            rf"_job_complete: JobId={slurm_id} WEXITSTATUS 0\b",
            rf"_job_complete: JobId={slurm_id} done",
        ):
            if not re.search(event, ctld_log):
                problems.append(f"slurmctld's log lacks /{event}/ for SLURM job {slurm_id} ({rule})")
    if len(jobs) != len(submitted):
        problems.append(f"{len(submitted)} submissions in snakemake's log but {len(jobs)} distinct SLURM job ids")

    ran = Counter(rule for rule, _, _ in jobs.values())
    print(f"\n{'rule':16} {'planned':>7} {'SLURM jobs':>10}  where")
    for rule, count in sorted(plan.items()):
        if rule in LOCAL or rule in TARGETS:
            where = "localrule (this host)" if rule in LOCAL else "target (no job)"
            if ran[rule]:
                problems.append(f"{rule}: {ran[rule]} SLURM jobs, expected none ({where})")
            local_runs = log.count(f"localrule {rule}:")
            if rule in LOCAL and local_runs != count:
                problems.append(f"{rule}: {local_runs} local runs in snakemake's log, planned {count}")
        else:
            where = "SLURM"
            if ran[rule] != count:
                problems.append(f"{rule}: {ran[rule]} SLURM jobs, planned {count}")
        print(f"{rule:16} {count:>7} {ran[rule]:>10}  {where}")
    for rule in sorted(set(ran) - set(plan)):
        problems.append(f"{rule}: {ran[rule]} SLURM jobs, not in the plan")
    computing = ("train_model", "measure_model", "misalign_model", "intervene_model", "placement_model", "prepare_data")
    for rule in computing:
        if not ran[rule]:
            problems.append(f"{rule}: no SLURM job")

    root = Path(workdir)
    made = re.findall(r"localrule figure:\n\s+input: .*\n\s+output: (.*)\n", log)
    if len(made) != plan.get("figure") or not made:
        problems.append(f"{len(made)} figure jobs in snakemake's log, planned {plan.get('figure')}")
    outputs = [root / name for line in made for name in line.split(", ")]
    outputs.append(root / "results" / run / "report.md")
    missing = [str(path.relative_to(root)) for path in outputs if not path.is_file() or path.stat().st_size == 0]
    if missing:
        problems.append(f"missing or empty: {missing}")
    print(
        f"\n{len(jobs)} SLURM jobs COMPLETED with exit code 0:0 in partition {cluster['cpu_partition']!r} "
        f"(the cluster's default is 'debug') on a {node_cpus}-CPU node; "
        f"{sum(plan.get(rule, 0) for rule in LOCAL)} localrule jobs on the host; "
        f"{len(outputs) - len(missing)}/{len(outputs)} figure files and the report present"
    )
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
