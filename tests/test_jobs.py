"""Job functions that only move tables: the runtime table from Snakemake's benchmark records."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

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
        "benchmarks/quick/train/mnist5k/resnet-d8-w1-s0.tsv": (12.5, 300.0, 24.0),
        "benchmarks/quick/measure/mnist5k/resnet-d8-w1-s0.tsv": (3.0, 100.0, 5.5),
        "benchmarks/quick/data/mnist5k.tsv": (1.0, "-", 0.9),
    }
    for path, (seconds, rss, cpu) in records.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(RECORD.format(s=seconds, rss=rss, cpu=cpu))
    jobs.runtime_table(records=list(records), table="runtime.csv")
    table = read_table("runtime.csv", "runtime")
    assert table[["step", "job"]].values.tolist() == [
        ["train", "mnist5k/resnet-d8-w1-s0"],
        ["measure", "mnist5k/resnet-d8-w1-s0"],
        ["data", "mnist5k"],
    ]
    assert table["wall_seconds"].sum() == pytest.approx(16.5) and table["cpu_seconds"].sum() == pytest.approx(30.4)
    assert pd.isna(table["max_rss_mb"].iloc[2])  # "-": not measured
    section = "\n".join(runtime_section(table, top=2))
    assert "3 jobs: 16 s of job wall time, 30 s of CPU time" in section
    assert section.index("| train |") < section.index("| measure |") and "| data |" not in section
