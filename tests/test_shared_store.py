"""A results store a team shares: what gpubench writes into it (modes), what it trusts (a job's
outcome is the exit code its run recorded there, the user's own file only; submitit's pickles stay
in the user's own jobs folder and the fleet loads none), and what another member of the store's
group can and cannot do to it. The second member is a child process given another uid and gid (root
only); no account is created."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpubench.harness.commands.cli import main
from gpubench.harness.commands.fleet import DONE, FAILED, FleetJob, settle
from gpubench.harness.commands.fleet import Target
from gpubench.harness.core.exits import UsageError
from gpubench.harness.records.safe_files import make_folder, open_new, replace_bytes

# nobody, and a group number no account is in
SECOND_UID, STORE_GID = 65534, 65533
AS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: files of another owner are made with os.chown"
)


class Payload:
    """A pickle that runs code when loaded: it writes a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return exec, (f"open({str(self.marker)!r}, 'w').write('ran')",)


def submitit_job(folder: Path, job_id: str = "7"):
    """submitit's own job object over `folder`, as the fleet holds one."""
    from submitit.local.local import LocalJob

    return LocalJob(folder, job_id)


def jobs_folder(tmp_path: Path) -> Path:
    """A fleet's jobs folder as it makes one: the user's, 0700."""
    folder = tmp_path / "jobs" / "f"
    folder.mkdir(parents=True, mode=0o700)
    return folder


def store_with_exit(tmp_path: Path, run_id: str, code: int) -> Path:
    """A store where run `run_id` recorded `code` in its machine's folder, as gpubench run does."""
    from gpubench.harness.records.store import write_exit

    machine = tmp_path / "store" / "host-1234abcd"
    machine.mkdir(parents=True)
    assert write_exit(machine, run_id, code) is None
    return tmp_path / "store"


def test_the_fleet_loads_no_result_pickle_and_reads_the_outcome_from_the_store(tmp_path):
    # submitit's result file says success and would run code when loaded; the run recorded exit 1
    folder = jobs_folder(tmp_path)
    store = store_with_exit(tmp_path, "r", 1)
    job = FleetJob(Target("t"), "r", job=submitit_job(folder))
    job.job.paths.result_pickle.write_bytes(pickle.dumps(("success", Payload(tmp_path / "ran"))))
    settle(job, None, store, now=0.0, grace_s=0.0)
    assert not (tmp_path / "ran").exists()
    assert job.state == FAILED and job.reason == "gpubench run exited 1 (a case failed)"


@AS_ROOT
def test_an_exit_record_of_another_owner_is_not_trusted(tmp_path):
    # another member of the team store planted "exit 0" for a run that recorded nothing
    store = store_with_exit(tmp_path, "r", 0)
    record = next(store.glob("*/r.exit.json"))
    os.chown(record, SECOND_UID, SECOND_UID)
    job = FleetJob(Target("t"), "r", job=submitit_job(jobs_folder(tmp_path)))
    settle(job, None, store, now=0.0, grace_s=0.0)
    assert job.state == FAILED and job.reason.startswith("ended without a result"), job.reason
    os.chown(record, 0, 0)
    job.state = "running"
    settle(job, None, store, now=0.0, grace_s=0.0)
    # the same record, the user's own: trusted
    assert job.state == DONE


@pytest.mark.parametrize(
    "text", ['{"exit_code": true}', '{"exit_code": "0"}', '{"exit_code": 300}', "[0]", "not json"]
)
def test_an_exit_record_that_holds_no_exit_code_is_no_outcome(tmp_path, text):
    store = store_with_exit(tmp_path, "r", 0)
    next(store.glob("*/r.exit.json")).write_text(text)
    job = FleetJob(Target("t"), "r", job=submitit_job(jobs_folder(tmp_path)))
    settle(job, None, store, now=0.0, grace_s=0.0)
    assert job.state == FAILED and job.reason.startswith("ended without a result"), job.reason


def test_a_jobs_folder_others_can_write_is_refused_naming_it(tmp_path):
    from gpubench.harness.records.job_files import check_folder, owner_name, private_folder

    folder = private_folder(tmp_path / "jobs" / "f")
    os.chmod(folder, 0o770)
    me = owner_name(os.geteuid())
    with pytest.raises(UsageError, match=rf"\(owner {me}, mode 0770\) is open to other users"):
        check_folder(folder)
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o777)
    # the umask narrowed mkdir's mode
    open_folder.chmod(0o777)
    with pytest.raises(
        UsageError, match=rf"{open_folder} \(owner {me}, mode 0777\), above the jobs folder .* lets"
    ):
        private_folder(open_folder / "jobs" / "f")


@AS_ROOT
def test_a_folder_writable_by_its_owners_own_group_alone_is_trusted(tmp_path):
    # a user private group (named as the user, no other member), as Debian gives each account:
    # root's here
    from gpubench.harness.records.job_files import private_folder

    above = tmp_path / "home"
    above.mkdir()
    above.chmod(0o775)
    private_folder(above / "jobs" / "f")
    # a group no account is in, by name or by number: not the owner's own
    os.chown(above, 0, STORE_GID)
    with pytest.raises(UsageError, match="lets another user replace"):
        private_folder(above / "jobs" / "g")


def test_the_fleet_refuses_a_jobs_dir_others_can_write_before_any_job(tmp_path, capsys):
    from gpubench.harness.records.job_files import owner_name

    shared = tmp_path / "shared"
    shared.mkdir()
    # a team folder without the sticky bit: a member could swap jobs/ for their own
    shared.chmod(0o777)
    # what a job would run, were it started
    tiny = ["--profile", "smoke", "--device", "cpu", "-k", "matmul and fp32"]
    assert (
        main(
            [
                "fleet",
                "--store",
                str(tmp_path / "S"),
                "--jobs-dir",
                str(shared / "jobs"),
                "--target",
                "name=x",
                *tiny,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jobs-dir" in err
    assert f"{shared} (owner {owner_name(os.geteuid())}, mode 0777), above the jobs folder" in err
    assert not (shared / "jobs").exists() or not any((shared / "jobs").rglob("*.pkl"))


def test_what_gpubench_writes_into_a_team_store_is_never_world_writable_nor_executable(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    # a team's store: setgid (the group goes down) and sticky (no one removes another's files)
    store.chmod(0o3775)
    # the loosest umask: what stays out is gpubench's doing
    old = os.umask(0)
    try:
        make_folder(store / "m" / "deeper", "results directory", "fix")
        os.close(open_new(store / "m" / "deeper" / "r.csv", "results directory", "fix"))
        replace_bytes(store / "m", "r.env.json", b"{}\n", "results directory", "fix")
    finally:
        os.umask(old)
    for folder in (store / "m", store / "m" / "deeper"):
        mode = folder.stat().st_mode
        assert mode & stat.S_ISGID and mode & stat.S_ISVTX and not mode & stat.S_IWOTH, (
            f"{folder}: {mode:o}"
        )
    for file in (store / "m" / "deeper" / "r.csv", store / "m" / "r.env.json"):
        assert stat.S_IMODE(file.stat().st_mode) == 0o644, file


def second_member(script: str, env: dict[str, str]) -> dict[str, str]:
    """`script` run by another user (uid nobody) in the store's group; what it printed (JSON)."""

    def become() -> None:
        os.setgroups([STORE_GID])
        os.setgid(STORE_GID)
        os.setuid(SECOND_UID)

    # this venv's may sit under a home only root can enter
    for python in ("/usr/bin/python3", sys.executable):
        if not Path(python).exists():
            continue
        done = subprocess.run(
            [python, "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            preexec_fn=become,
            check=False,
        )
        if done.returncode == 0:
            return json.loads(done.stdout)
    pytest.skip(f"no python the second user can start: {done.stderr.strip()[-200:]}")


MEMBER = """import json, os
store, jobs = os.environ["STORE"], os.environ["JOBS"]
def attempt(act):
    try:
        act()
        return "done"
    except PermissionError:
        return "denied"
said = {"add": attempt(lambda: open(store + "/m/theirs.csv", "x").close()),
        "replace": attempt(lambda: os.replace(store + "/m/theirs.csv", store + "/m/mine.csv")),
        "append": attempt(lambda: open(store + "/m/mine.csv", "a").close()),
        "plant": attempt(lambda: open(jobs + "/1_0_result.pkl", "wb").close())}
print(json.dumps(said))
"""


@pytest.mark.process
@AS_ROOT
def test_a_member_of_the_group_adds_runs_but_replaces_no_one_elses_nor_reaches_the_job_files():
    # a child process as uid nobody in the store's group (no account made); a folder in /tmp it can
    # reach
    base = Path(tempfile.mkdtemp(prefix="gpubench-team-"))
    try:
        base.chmod(0o755)
        store = base / "store"
        store.mkdir()
        os.chown(store, 0, STORE_GID)
        store.chmod(0o3775)
        # the team's umask (docs/usage.md)
        old = os.umask(0o002)
        try:
            make_folder(store / "m", "results directory", "fix")
            os.close(open_new(store / "m" / "mine.csv", "results directory", "fix"))
        finally:
            os.umask(old)
        from gpubench.harness.records.job_files import private_folder

        jobs = private_folder(base / "jobs" / "f")
        said = second_member(MEMBER, dict(os.environ, STORE=str(store), JOBS=str(jobs)))
        assert said == {
            "add": "done",
            "replace": "denied",
            "append": "denied",
            "plant": "denied",
        }, said
    finally:
        shutil.rmtree(base)


def test_a_group_another_account_has_as_its_primary_group_is_not_the_owners_own(
    tmp_path, monkeypatch
):
    # /etc/group lists no such member: only /etc/passwd says the account's group is the owner's
    import pwd

    from gpubench.harness.records.job_files import own_group, private_folder

    above = tmp_path / "home"
    above.mkdir()
    above.chmod(0o775)
    if not own_group(above, above.stat()):
        pytest.skip("this account's group is not a private one: nothing to tell apart")
    private_folder(above / "jobs" / "f")
    bob = pwd.struct_passwd(("bob", "x", 4242, above.stat().st_gid, "", "/", "/bin/sh"))
    accounts = pwd.getpwall()
    monkeypatch.setattr(pwd, "getpwall", lambda: [*accounts, bob])
    with pytest.raises(
        UsageError, match=rf"{above} \(owner .*, mode 0775\), above the jobs folder .* lets another"
    ):
        private_folder(above / "jobs" / "g")


def access_acl(user_id: int) -> bytes:
    """A POSIX access ACL in the kernel's form (what setfacl writes): the owner rwx, `user_id` rwx,
    group r-x, mask rwx, others r-x."""
    import struct

    anyone = 0xFFFFFFFF
    entries = [
        (0x01, 7, anyone),
        (0x02, 7, user_id),
        (0x04, 5, anyone),
        (0x10, 7, anyone),
        (0x20, 5, anyone),
    ]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)


def test_a_folder_an_acl_opens_to_another_user_is_not_trusted(tmp_path):
    # with an ACL the group bits are its mask: 0775 of the owner's own group let user 4242 rename
    # the jobs folder
    from gpubench.harness.records.job_files import own_group, private_folder

    above = tmp_path / "home"
    above.mkdir()
    above.chmod(0o755)
    try:
        os.setxattr(above, "system.posix_acl_access", access_acl(4242))
    except (OSError, AttributeError) as error:
        pytest.skip(f"no POSIX ACLs here: {error}")
    if not own_group(tmp_path, tmp_path.stat()):
        pytest.skip("this account's group is not a private one: the group bits refuse it anyway")
    with pytest.raises(UsageError, match="lets another user replace"):
        private_folder(above / "jobs" / "f")


def test_the_jobs_folder_is_checked_again_before_each_job(tmp_path, capsys):
    # a folder above it made world-writable after the fleet began: a later job's command went there
    # all the same
    from gpubench.harness.commands.fleet_command import submit
    from gpubench.harness.records.job_files import private_folder

    folder = private_folder(tmp_path / "home" / "jobs" / "f")
    (tmp_path / "home").chmod(0o777)
    job = FleetJob(Target("b"), "r")
    # refused before any process starts
    submit(job, "local", folder, [sys.executable, "-c", "pass"])
    assert job.state == FAILED and job.reason.startswith("not submitted: ")
    assert "lets another user replace" in job.reason
    assert not list(folder.glob("*submitted.pkl"))


def test_a_team_store_folder_made_under_umask_077_still_takes_the_groups_runs(tmp_path):
    # the first member to run on a machine had umask 077: its folder, 0700, refused every other
    # member
    store = tmp_path / "store"
    store.mkdir()
    store.chmod(0o3770)
    old = os.umask(0o077)
    try:
        make_folder(store / "m", "results directory", "fix")
        os.close(open_new(store / "m" / "r.csv", "results directory", "fix"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((store / "m").stat().st_mode) == 0o3770
    # the member's own file: the umask's
    assert stat.S_IMODE((store / "m" / "r.csv").stat().st_mode) == 0o600


def test_a_machine_folder_others_can_empty_is_refused_or_named_before_the_run(
    tmp_path, capsys, monkeypatch
):
    # made by hand, 0777 and not sticky: any user could remove or replace the run's files, unsaid
    import argparse

    import gpubench.harness.records.job_files
    from gpubench.harness.commands.common import resolve_store
    from gpubench.harness.core.exits import UsageError
    from gpubench.harness.core.options import RunOptions
    from gpubench.harness.devices.env import machine_identity
    from gpubench.harness.records.store import machine_folder_name

    # a group of other members
    monkeypatch.setattr(gpubench.harness.records.job_files, "own_group", lambda path, info: False)
    folder = tmp_path / "S" / machine_folder_name(machine_identity())
    folder.mkdir(parents=True)
    said = (
        "lets users other than its owner remove or replace this run's files — have its owner chmod"
    )
    for mode, refused, warned in (
        (0o777, True, False),
        (0o775, False, True),
        (0o1777, False, False),
        (0o755, False, False),
    ):
        folder.chmod(mode)
        try:
            resolve_store(argparse.Namespace(run=RunOptions(store=str(tmp_path / "S"))))
            problem = None
        except UsageError as refusal:
            problem = str(refusal)
        err = capsys.readouterr().err
        assert (
            problem is not None and said in problem and "or pass another --store" in problem
        ) == refused, mode
        assert (said in err) == warned and err.count("\n") == warned, mode


def test_a_reports_folder_that_is_a_link_is_refused_before_and_after_the_jobs(tmp_path, capsys):
    # a member of the store pointed STORE/reports at a folder of theirs: the fleet's report went
    # there
    from gpubench.harness.commands.fleet_command import summary_and_report

    store, theirs = tmp_path / "S", tmp_path / "theirs"
    store.mkdir()
    theirs.mkdir()
    (store / "reports").symlink_to(theirs)
    # what a job would run, were one started
    nothing = ["--profile", "smoke", "--device", "cpu", "-k", "no_such_case"]
    jobs = tmp_path / "jobs"
    assert (
        main(
            [
                "fleet",
                "--store",
                str(store),
                "--jobs-dir",
                str(jobs),
                "--target",
                "name=x",
                *nothing,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and f"the store's reports folder {store / 'reports'} is a symbolic link" in err
    )
    assert not (tmp_path / "jobs").exists()
    done = FleetJob(Target("x"), "r", state=DONE, csv=tmp_path / "r.csv")
    assert summary_and_report([done], store, store / "reports" / "f") == 1
    assert "report not built: the store's reports folder" in capsys.readouterr().out
    assert list(theirs.iterdir()) == []


@AS_ROOT
def test_a_csv_another_member_planted_under_the_run_id_is_not_the_fleets(tmp_path, capsys):
    # a member made a machine folder that sorts first and wrote <the job's run id>.csv there: it was
    # merged into the fleet's report, and the job's own CSV ignored
    from gpubench.harness.commands.fleet_command import find_csv

    store = store_with_exit(tmp_path, "F-t", 0)
    mine = store / "host-1234abcd" / "F-t.csv"
    mine.write_text("x\n")
    theirs = store / "0-theirs"
    theirs.mkdir()
    (theirs / "F-t.csv").write_text("x\n")
    os.chown(theirs / "F-t.csv", SECOND_UID, SECOND_UID)
    os.chown(theirs, SECOND_UID, SECOND_UID)
    job = FleetJob(Target("t"), "F-t", state=DONE)
    find_csv(job, store)
    assert job.csv == mine and job.state == DONE
    out = capsys.readouterr().out
    assert f"{theirs / 'F-t.csv'}: owned by uid {SECOND_UID}" in out and out.count("\n") == 1
