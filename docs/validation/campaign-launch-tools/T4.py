"""NUL and other values no shell can pass, through the command's own entry point (argv cannot hold a NUL)."""
import sys, tempfile
from gpubench.harness.commands.cli import main
store = tempfile.mkdtemp(prefix="cl-t4-")
for text in ["partition=a\x00b", "name=a\x00b", "partition=a\tb", "constraint=a\u202eb", "time=\uff13\uff10"]:
    code = main(["fleet", "--store", store, "--jobs-dir", store + "/jobs", "--target", text])
    print(f"{text!r}: exit {code}", file=sys.stderr)
code = main(["fleet", "--store", store, "--jobs-dir", store + "/jobs", "--target", "name=gpu\u2010a", "--target", "name=gpu_a"])
print(f"two names gpu\u2010a and gpu_a: exit {code}", file=sys.stderr)
