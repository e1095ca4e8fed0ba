"""The run-time estimate: planned jobs matched to recorded ones, unmatched ones counted, never guessed."""

import pandas as pd

from scalemech.pipeline.estimate import estimate, planned_jobs, read_records

RECORDS = pd.DataFrame(
    {"step": ["data", "train", "train", "measure"], "job": ["d", "d/a", "d/b", "d/a"], "wall_seconds": [6, 120, 60, 54]}
)


def test_planned_jobs_lists_data_then_each_step_of_each_model():
    jobs = planned_jobs(["e", "d"], {"train": ["d/a"], "measure": ["d/a", "e/c"]})
    assert jobs == [("data", "d"), ("data", "e"), ("train", "d/a"), ("measure", "d/a"), ("measure", "e/c")]


def test_estimate_sums_matched_jobs_and_counts_the_rest():
    jobs = planned_jobs(["d"], {"train": ["d/a", "d/b", "d/z"], "measure": ["d/a"], "expand": ["d/a"]})
    planned = estimate(jobs, RECORDS, "records.csv")
    assert (planned.matched, planned.matched_seconds) == (4, 6 + 120 + 60 + 54)
    assert planned.unmatched == {"train": 1, "expand": 1}
    line = planned.line(cores=4, threads=2)  # two jobs at once: 240 s / 2 = 2 min
    assert line.startswith("estimated run time: 2 min on 4 cores (2 job(s) at once); 4 of 6 computing jobs")
    assert line.endswith("not counted, no record: expand 1, train 1")


def test_more_threads_than_cores_run_one_job_at_a_time():
    planned = estimate(planned_jobs(["d"], {"train": ["d/a"]}), RECORDS, "r")
    assert "2 min on 2 cores (1 job(s) at once" in planned.line(cores=2, threads=8)


def test_read_records_takes_the_first_file_that_exists(tmp_path):
    (tmp_path / "b.csv").write_text(RECORDS.to_csv(index=False))
    records, source = read_records([tmp_path / "a.csv", tmp_path / "b.csv"])
    assert source == str(tmp_path / "b.csv") and len(records) == 4
    empty, none = read_records([tmp_path / "a.csv"])
    assert none == "no records" and estimate(planned_jobs(["d"], {}), empty, none).matched == 0


def test_nothing_recorded_says_it_cannot_estimate():
    planned = estimate(planned_jobs(["d"], {"train": ["d/a"]}), RECORDS.iloc[:0], "no records")
    line = planned.line(cores=2, threads=1)
    assert "cannot estimate" in line and "0 min" not in line and "none of the 2 computing jobs" in line


def test_a_cluster_runs_its_jobs_at_once_whatever_the_local_cores():
    planned = estimate(planned_jobs(["d"], {"train": ["d/a", "d/b"]}), RECORDS, "r")  # 186 s of job time
    line = planned.line(cores=1, threads=8, cluster_jobs=64)
    assert line.startswith("estimated run time: 0 min with 64 cluster jobs at once; 3 of 3") and "cores" not in line
