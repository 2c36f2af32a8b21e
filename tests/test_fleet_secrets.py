"""A local fleet's job files hold no secret once its jobs have ended: submitit pickles a job's
command with the environment it runs in (tokens, a proxy password), and that pickle is removed as
soon as the job ends."""

from __future__ import annotations

import sys

import pytest

from gpubench.harness.commands.fleet import FleetJob, Target
from gpubench.harness.commands.fleet_command import drive, submit
from gpubench.harness.records.job_files import private_folder

SECRET = "hunter2-proxy-password"


@pytest.mark.process
def test_a_local_jobs_environment_is_not_left_in_its_job_files(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUBENCH_TEST_TOKEN", SECRET)
    jobs_folder = private_folder(tmp_path / "jobs")
    job = FleetJob(Target("one"), "r1")
    drive(
        [job],
        "local",
        tmp_path / "store",
        lambda fleet_job: submit(fleet_job, "local", jobs_folder, [sys.executable, "-c", "pass"]),
        poll_s=0.1,
    )
    assert job.finished and job.job is not None
    left = [path for path in jobs_folder.rglob("*") if path.is_file()]
    assert left and not [path.name for path in left if path.name.endswith("_submitted.pkl")]
    assert not [path.name for path in left if SECRET.encode() in path.read_bytes()]
