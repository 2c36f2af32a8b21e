"""Result files that are not plain files of the user's, through the fleet's settle()."""
import os, pickle, sys, time
from pathlib import Path
from submitit.local.local import LocalJob
from gpubench.harness.commands.fleet import FleetJob, Target, settle
base = Path(sys.argv[1]); base.mkdir(parents=True, exist_ok=True)
good = base / "good.pkl"; good.write_bytes(pickle.dumps(("success", "ok")))
def make(name, build):
    folder = base / name; folder.mkdir(mode=0o700)
    job = FleetJob(Target("t"), "r", job=LocalJob(folder, "7"))
    build(job.job.paths.result_pickle)
    t = time.monotonic(); settle(job, None, now=0.0, grace_s=0.0)
    print(f"{name:28s} -> {job.state:6s} {time.monotonic()-t:5.2f}s {job.reason[:170]!r}")
make("symlink to a good outcome", lambda p: p.symlink_to(good))
make("FIFO", lambda p: os.mkfifo(p))
make("folder", lambda p: p.mkdir())
make("link to dev-zero", lambda p: p.symlink_to("/dev/zero"))
def hard(p):
    os.link(good, p)
make("hard link (user's own)", hard)
def theirs(p):
    p.write_bytes(pickle.dumps(("success", "ok"))); os.chown(p, 65534, 65534)
make("nobody's file", theirs)
def unreadable(p):
    p.write_bytes(pickle.dumps(("success", "ok"))); os.chmod(p, 0)
make("mode 000 (root reads anyway)", unreadable)
