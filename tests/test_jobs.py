"""Job functions that only move tables (the runtime table from Snakemake's benchmark records), and the
declarations of the per-model steps against their jobs and the config schema."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from scalemech.config import load_config, model_jobs
from scalemech.config.schema import schema
from scalemech.core.steps import STEPS
from scalemech.core.tables import read_table
from scalemech.pipeline import jobs
from scalemech.report import runtime_section

RECORD = (
    "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    "{s}\t0:00:01\t{rss}\t1\t1\t1\t0\t0\t90\t{cpu}\n"
)  # Snakemake's benchmark: format


def test_runtime_table_reads_every_record_and_the_report_names_the_longest(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    records = {
        "benchmarks/quick/train/mnist5k/resnet-d8-w0.5-s0.tsv": (12.5, 300.0, 24.0),
        "benchmarks/quick/measure/mnist5k/resnet-d8-w1-s0.tsv": (3.0, 100.0, 5.5),
        "benchmarks/quick/data/mnist5k.tsv": (1.0, "-", 0.9),
    }
    for path, (seconds, rss, cpu) in records.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(RECORD.format(s=seconds, rss=rss, cpu=cpu))
    own = jobs.cpu_record("logs/quick/train/mnist5k/resnet-d8-w0.5-s0.log")  # the train job counted its own CPU
    own.parent.mkdir(parents=True)
    own.write_text('{"cpu_seconds": 12.0}')
    jobs.runtime_table(records=list(records), table="runtime.csv")
    table = read_table("runtime.csv", "runtime")
    assert table[["step", "job", "cpu_from"]].values.tolist() == [
        ["train", "mnist5k/resnet-d8-w0.5-s0", "job"],
        ["measure", "mnist5k/resnet-d8-w1-s0", "benchmark"],
        ["data", "mnist5k", "benchmark"],
    ]
    assert table["wall_seconds"].sum() == pytest.approx(16.5) and table["cpu_seconds"].sum() == pytest.approx(18.4)
    assert pd.isna(table["max_rss_mb"].iloc[2])  # "-": not measured
    section = "\n".join(runtime_section(table, top=2))
    assert "3 jobs: 16 s of job wall time, 18 s of CPU time" in section
    assert section.index("| train |") < section.index("| measure |") and "| data |" not in section


@pytest.mark.parametrize("rule", STEPS)
def test_each_step_declares_the_arguments_of_its_job(rule: str) -> None:
    """A step's named files and params are its job's keywords (besides execution settings), and it
    takes a device exactly when its job does."""
    config = load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml")
    step, job = STEPS[rule], model_jobs(config)[0]
    taken = set(inspect.signature(jobs.JOBS[rule]).parameters) - set(jobs.execution(config))
    declared = {*step.inputs, *step.outputs, *step.params(config, job)}
    declared |= set(step.config_inputs(config)) if step.config_inputs else set()
    if step.computes:  # the generic job: data, model and the keys by name (pools if read), the rest by keyword
        assert {"data", "model", "model_keys"} <= declared and set(step.inputs) <= {"data", "model", "pools"}
        assert len(step.outputs) == 1 and declared - taken == {*step.outputs, *([step.section] if step.section else [])}
    else:
        assert declared == taken
    assert step.device == ("device" in inspect.signature(jobs.JOBS[rule]).parameters)


def test_the_schema_experiments_are_the_steps_experiments() -> None:
    """The config's ``experiments`` enum and default name the experiments of the steps beside training."""
    experiments = schema()["properties"]["experiments"]
    planned = [name for name in dict.fromkeys(step.planned_by for step in STEPS.values()) if name != "train"]
    assert experiments["items"]["enum"] == planned == experiments["default"]


def test_a_job_records_its_own_cpu_seconds_beside_its_log(tmp_path: Path) -> None:
    """``run`` writes the CPU the job's process spent (it only grows), where ``runtime_table`` reads it."""

    class Smk:  # the parts of Snakemake's ``snakemake`` object that run reads
        rule, threads, resources = "runtime_table", 1, {}
        config = {"device": "cpu", "train": {"checkpoint_every": 1}}
        input, params, output = {"records": []}, {}, {"table": str(tmp_path / "runtime.csv")}
        log = [str(tmp_path / "runtime.log")]

    before = jobs.process_cpu_seconds()
    jobs.run(Smk)
    recorded = json.loads(jobs.cpu_record(Smk.log[0]).read_text())["cpu_seconds"]
    assert before <= recorded <= jobs.process_cpu_seconds() + 0.01


def test_every_experiment_name_is_its_function_not_its_module() -> None:
    """``scalemech.experiments`` binds each name to the function (several share their module's name)."""
    import types

    import scalemech.experiments as experiments

    for name in experiments.__all__:
        assert not isinstance(getattr(experiments, name), types.ModuleType), name


def test_exit_now_ends_the_process_at_once_with_its_output_flushed():
    code = "\n".join(
        [
            "import atexit, sys",
            "from scalemech.pipeline.jobs import exit_now",
            "atexit.register(lambda: print(' torn down'))",
            "print('written', end='')",
            "sys.stderr.write('logged')",
            "exit_now()",
        ]
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "written", "logged")  # no teardown: no atexit
