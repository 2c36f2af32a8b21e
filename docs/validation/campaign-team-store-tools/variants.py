"""Runs the campaign's variants and prints the table's rows: id, class, what was done, expected, observed, verdict.

    .venv/bin/python docs/validation/campaign-team-store-tools/setup.py /tmp/cts
    .venv/bin/python docs/validation/campaign-team-store-tools/variants.py /tmp/cts [ID...]

Each variant is a bash command run in the repository root with G=.venv/bin/gpubench, C=ROOT (the stores of
setup.py), O=ROOT/out-<id> (its report folder, absent first), a 300 s timeout; its verdict is computed: the exit
code among those expected, each expected text in stdout+stderr, no Python traceback, and the variant's own check
(a bash command that must exit 0). 'pass' or 'fail' here; a 'weak' is given by hand in the page."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TOOLS = Path(__file__).resolve().parent
MODELS = "tests.model_factories"
SMALL = "--profile smoke --budget 60s --no-report --device cpu"


@dataclass(frozen=True)
class Variant:
    id: str
    cls: str
    what: str
    command: str
    codes: tuple[int, ...]
    texts: tuple[str, ...] = ()
    check: str = ""
    expected: str = ""


V = Variant
VARIANTS = [
    # --- a team store: whose rows a run's are
    V("T1", "team", "bob's file holds an extra build of alice's run, medians x0.01, rates kept",
      "$G report $C/t1 --out $O", (0,), ("contradicts", "bob.csv"),
      "grep -q 'alice' $O/merged.csv && test $(grep -c ',alice,' $O/merged.csv) -eq 50",
      "exit 0, alice's 50 rows alone, bob's rows refused (their medians contradict their rates), named"),
    V("T2", "team", "bob's extra build of alice's run, every figure 2% faster (self-consistent)",
      "$G report $C/t2 --out $O", (0,), ("naming run alice", "not merged"),
      "test $(grep -c ',alice,' $O/merged.csv) -eq 50", "exit 0, not merged, named"),
    V("T3", "team", "an exact copy of alice's file in bob's folder", "$G report $C/t3 --out $O", (0,),
      (), "grep -q 'counted once' $O/report.md && ! grep -q 'not merged' $O/report.md && test $(grep -c ',alice,' $O/merged.csv) -eq 50",
      "counted once, no ownership note"),
    V("T4", "team", "bob's own alice.csv (other figures) in his folder, no exit record anywhere",
      "$G report $C/t4 --out $O", (0,), ("run alice is in 2 files", "alice@1", "alice@2"),
      "grep -q 'alice@2' $O/merged.csv", "read as two runs, named"),
    V("T5", "team", "as T4, alice's folder holds her exit record", "$G report $C/t5 --out $O", (0,),
      ("owner nobody", "not merged"), "test $(grep -c ',alice,' $O/merged.csv) -eq 50",
      "alice's file is the writer; bob's left out, owner named"),
    V("T6", "team", "as T5, bob plants alice.exit.json of his own beside his alice.csv",
      "$G report $C/t6 --out $O", (0,), ("run alice is in 2 files",), "grep -q 'alice@1' $O/merged.csv",
      "no writer told: two runs, named"),
    V("T7", "team", "a conflicting copy: alice's builds again in bob's file, other figures (exit 2 before)",
      "$G report $C/t7 --out $O", (0,), ("not merged",), "test -f $O/report.md", "exit 0, the rest reported"),
    V("T8", "team", "bob's file: alice's run id on his machine id", "$G report $C/t8 --out $O", (0,), (),
      "grep -q bobbox $O/report.md", "another machine's run, no merge"),
    V("T9", "team", "a file holding one case's build twice with other figures, in a store",
      "$G report $C/t9 --out $O", (0,), ("twice with different figures", "left out"),
      "! grep -q ',twice,' $O/merged.csv && grep -q ',fine,' $O/merged.csv", "that run out, named, rest reported"),
    V("T10", "team", "the same file named on the command line", "$G report $C/t9/twice.csv --out $O", (2,),
      ("twice with different figures",), "test ! -e $O", "one line, exit 2, nothing written"),
    V("T11", "team", "compare alice's file with bob's reusing her run id, medians x1.02",
      "$G compare $C/t5/vm-36ac6243/alice.csv $C/t5/bobbox-0badc0de/alice.csv", (0, 1, 2, 6), (),
      "true", "not 'the same run(s)'; a side of two machines is one line"),
    V("T12", "team", "a file and its folder both named", "$G report $C/t3/vm-36ac6243 "
      "$C/t3/vm-36ac6243/alice.csv --out $O", (0,), (), "grep -q 'counted once' $O/report.md", "counted once"),
    V("T13", "team", "bob's file owned by a uid with no account", "$G report $C/t13 --out $O", (0,),
      ("owner uid 4242",), "", "owner named as uid 4242"),
    V("T14", "team", "five members' copies of alice's run", "$G report $C/t14 --out $O", (0,), (),
      "grep -q 'counted once' $O/report.md && test $(grep -c ',alice,' $O/merged.csv) -eq 50", "counted once"),
    V("T15", "team", "bob's folder alone reported (his file holds alice's run id)",
      "$G report $C/t1/bobbox-0badc0de --out $O", (0,), (), "test -f $O/report.md",
      "his file's rows as its own, exit 0"),
    # --- rows that contradict themselves
    V("X1", "rows", "matmul median x0.01, tflops kept", "$G report $C/x/x1.csv --out $O", (0,),
      ("contradicts its own tflops",), "! grep -q 'matmul/bf16-n8192' $O/merged.csv", "refused, named"),
    V("X2", "rows", "CPU matmul tflops x100 (no datasheet peak to catch it)", "$G report $C/x/x2.csv --out $O",
      (0,), ("contradicts its own tflops",), "", "refused, named"),
    V("X3", "rows", "transfer gbps x100", "$G report $C/x/x3.csv --out $O", (0,), ("contradicts its own gbps",),
      "", "refused"),
    V("X4", "rows", "inference samples/s x0.01", "$G report $C/x/x4.csv --out $O", (0,),
      ("contradicts its own samples_per_s",), "", "refused"),
    V("X5", "rows", "one of three elementwise builds, median x100", "$G report $C/x/x5.csv --out $O", (0,),
      ("contradicts its own gbps",), "", "refused by its case's other builds"),
    V("X6", "rows", "matmul median x1.5, tflops kept", "$G report $C/x/x6.csv --out $O", (0,),
      ("contradicts its own tflops",), "", "refused (past 10%)"),
    V("X7", "rows", "matmul median x1.05, tflops kept (within the 10% band)", "$G report $C/x/x7.csv --out $O",
      (0,), (), "! grep -q contradicts $O/report.md", "kept: within the band the docs name"),
    V("X8", "rows", "compare against a side whose median contradicts its tflops",
      "$G compare $C/x/base.csv $C/x/x8.csv", (2,), ("contradicts its own tflops",), "", "one line, exit 2"),
    V("X9", "rows", "a matmul row of size 10^30", "$G report $C/x/x9.csv --out $O", (0, 2), (), "",
      "refused in one line (row or file)"),
    V("X10", "rows", "compare with the contradicting file as BASE",
      "$G compare $C/x/x8.csv $C/x/base.csv", (2,), ("contradicts",), "", "one line, exit 2"),
]
VARIANTS += [
    # --- large inputs: memory in proportion
    V("L1", "large", "a 200 MB results CSV (make_big_csv.py), peak RSS",
      "test -f /tmp/big60.csv || .venv/bin/python docs/validation/report-memory-tools/make_big_csv.py /tmp/big60.csv "
      "200 >/dev/null; /usr/bin/time -f 'maxrss_kb=%M' $G report /tmp/big60.csv --out $O", (0,), ("maxrss_kb=",),
      "", "exit 0, peak RSS well under 2.6 GB"),
    V("L2", "large", "a raw-samples cell of 2 MB in one row",
      ".venv/bin/python -c \"import pandas as p;f=p.read_csv('reports/examples/h200/headline.csv');"
      "f.loc[0,'samples_s']='['+','.join(['0.001']*300000)+']';f.to_csv('$C/l2.csv',index=False)\"; "
      "$G report $C/l2.csv --out $O", (0,), (), "", "exit 0"),
    V("L3", "large", "tflops 1e300 on a CPU row", ".venv/bin/python -c \"import pandas as p;"
      "f=p.read_csv('reports/examples/cpu-2core-quick.csv');i=f.index[f.workload.eq('matmul')][0];"
      "f.loc[i,'tflops']=1e300;f.to_csv('$C/l3.csv',index=False)\"; $G report $C/l3.csv --out $O", (0,),
      ("contradicts",), "", "refused, named"),
    V("L4", "large", "build = 10^30", ".venv/bin/python -c \"import pandas as p;"
      "f=p.read_csv('reports/examples/h200/headline.csv').astype({'build':object});f.loc[0,'build']=10**30;"
      "f.to_csv('$C/l4.csv',index=False)\"; $G report $C/l4.csv --out $O", (0, 2), (), "", "one line or kept"),
    # --- interrupted or cut off outputs of report and compare
    V("P1", "signal", "report | head -c 20 (stdout closed early)", "$G report $C/t3 --out $O | head -c 20; "
      "exit ${PIPESTATUS[0]}", (0, 1, 141), (), "test -f $O/report.md", "no traceback; report whole"),
    V("P2", "signal", "compare | head -1", "$G compare $C/x/base.csv $C/t3/vm-36ac6243/alice.csv | head -1; "
      "exit ${PIPESTATUS[0]}", (0, 1, 6, 141), (), "", "no traceback"),
    V("P3", "signal", "env | head -1", "$G env | head -1; exit ${PIPESTATUS[0]}", (0, 141), (), "", "no traceback"),
    V("P4", "signal", "report with stdout closed", "$G report $C/t3 --out $O >&-", (0, 1, 2, 120), (),
      "test -f $O/report.md || true", "exit code, no traceback"),
    V("P5", "signal", "report with stderr closed, notes to say", "$G report $C/t1 --out $O 2>&-", (0, 1, 2, 120),
      (), "", "no hang"),
    V("P6", "signal", "SIGTERM 5 s into the 200 MB report", "$G report /tmp/big60.csv --out $O & p=$!; sleep 5; "
      "kill -TERM $p; wait $p", (143,), (), "test ! -e $O && ! ls -a $(dirname $O) | grep -q 'out-P6.*partial'",
      "143, no report and no partial folder"),
    V("P7", "signal", "SIGINT 5 s into the 200 MB report", "set -m; $G report /tmp/big60.csv --out $O & p=$!; sleep 5; "
      "kill -INT $p; wait $p", (130,), (), "test ! -e $O", "130, nothing written"),
    V("P8", "signal", "SIGQUIT 5 s into the 200 MB report", "set -m; $G report /tmp/big60.csv --out $O & p=$!; sleep 5; "
      "kill -QUIT $p; wait $p", (131,), (), "test ! -e $O", "131, nothing written"),
    V("P9", "signal", "SIGUSR1 5 s into the 200 MB report", "$G report /tmp/big60.csv --out $O & p=$!; sleep 5; "
      "kill -USR1 $p; wait $p", (138,), (), "test ! -e $O", "138, nothing written"),
    V("P10", "signal", "SIGTERM 3 s into compare of the 200 MB file", "$G compare /tmp/big60.csv "
      "$C/x/base.csv & p=$!; sleep 3; kill -TERM $p; wait $p", (143,), (), "", "143, no traceback"),
    V("P11", "signal", "SIGTERM during a report over a previous report: the old one stays",
      "$G report $C/t3 --out $O >/dev/null 2>&1; $G report /tmp/big60.csv --out $O & p=$!; sleep 5; "
      "kill -TERM $p; wait $p", (143,), (), "test -f $O/report.md && grep -q alice $O/merged.csv",
      "old report whole"),
    V("P12", "signal", "SIGHUP to a report's process group (terminal closed)",
      "setsid bash -c '$G report /tmp/big60.csv --out $O' & p=$!; sleep 5; kill -HUP -- -$p; wait $p",
      (129,), (), "test ! -e $O", "129, nothing written"),
]
VARIANTS += [
    # --- odd --model specifications
    V("M1", "model", "--model with no colon", f"$G run --model torch.nn.Linear --input 4 {SMALL}", (4,),
      ("--model",), "", "one line, exit 4"),
    V("M2", "model", "--model ':'", f"$G run --model : --input 4 {SMALL}", (4,), ("--model",), "", "exit 4"),
    V("M3", "model", "--model a:b:c", f"$G run --model a:b:c --input 4 {SMALL}", (4,), ("--model",), "", "exit 4"),
    V("M4", "model", "a factory needing arguments (torch.nn:Linear)",
      f"$G run --model torch.nn:Linear --input 4 {SMALL}", (4,), ("torch.nn:Linear",), "", "one line naming it"),
    V("M5", "model", "a factory returning text (os:getcwd)", f"$G run --model os:getcwd --input 4 {SMALL}", (4,),
      ("os:getcwd",), "", "one line naming it"),
    V("M6", "model", "a module that is not there", f"$G run --model nosuchmod:f --input 4 {SMALL}", (4,),
      ("nosuchmod",), "", "one line"),
    V("M7", "model", "a unicode module name", f"$G run --model 'módulo_ñ:f' --input 4 {SMALL}", (4,),
      ("cannot be imported",), "", "read as a name; the module not found, one line"),
    V("M8", "model", "--input 0x4", f"$G run --model {MODELS}:tiny_mlp --input 0x4 {SMALL}", (4,), ("--input",),
      "", "exit 4"),
    V("M9", "model", "--input 3x-1", f"$G run --model {MODELS}:tiny_mlp --input 3x-1 {SMALL}", (4,),
      ("--input",), "", "exit 4"),
    V("M10", "model", "--input 3xax4", f"$G run --model {MODELS}:tiny_mlp --input 3xax4 {SMALL}", (4,),
      ("--input",), "", "exit 4"),
    V("M11", "model", "--input a billion elements", f"$G run --model {MODELS}:tiny_mlp --input 1000000000 {SMALL}",
      (0, 1, 4, 7), (), "", "one line or rows, no traceback"),
    V("M12", "model", "--input of the wrong shape for the model",
      f"$G run --model {MODELS}:tiny_cnn --input 7 {SMALL}", (4, 1), ("--input 7",), "",
      "one line naming the input"),
    V("M13", "model", "--model without --input", f"$G run --model {MODELS}:tiny_mlp {SMALL}", (4,), ("--input",),
      "", "exit 4"),
    V("M14", "model", "--model with a leading dot", f"$G run --model .model_factories:tiny_mlp --input 4 {SMALL}",
      (4,), ("--model",), "", "one line"),
]
VARIANTS += [
    # --- what surrounds report and compare
    V("E1", "env", "MPLBACKEND=nonsense", "MPLBACKEND=nonsense $G report $C/t3 --out $O", (0,), (),
      "test -f $O/report.md", "report written"),
    V("E2", "env", "MPLBACKEND=TkAgg, no display", "env -u DISPLAY MPLBACKEND=TkAgg $G report $C/t3 --out $O", (0,),
      (), "test -f $O/report.md", "report written"),
    V("E3", "env", "CUDA_VISIBLE_DEVICES='' report", "CUDA_VISIBLE_DEVICES= $G report $C/t3 --out $O", (0,), (),
      "", "exit 0"),
    V("E4", "env", "OMP_NUM_THREADS=0 report", "OMP_NUM_THREADS=0 $G report $C/t3 --out $O", (0,), (), "",
      "exit 0"),
    V("E5", "env", "the working folder deleted, absolute paths",
      "d=$(mktemp -d); cd $d; rmdir $d; $REPO/.venv/bin/gpubench report $C/t3 --out $O", (0, 2), (), "",
      "report or one line"),
    V("E6", "env", "a read-only working folder and HOME, --out elsewhere",
      "d=$(mktemp -d); chmod 555 $d; cd $d; HOME=$d $REPO/.venv/bin/gpubench report $C/t3 --out $O", (0,), (),
      "test -f $O/report.md", "report written"),
    V("E7", "env", "umask 0777 (as root)", "umask 0777; $G report $C/t3 --out $O", (0, 2), (), "",
      "report or one line"),
    V("E8", "env", "a store path with unicode and spaces", "mkdir -p \"$C/ñ ☃/m\"; cp $C/t3/vm-36ac6243/alice.csv "
      "\"$C/ñ ☃/m/\"; $G report \"$C/ñ ☃\" --out $O", (0,), (), "test -f $O/report.md", "report written"),
    V("E9", "env", "a store path holding non-UTF-8 bytes", "mkdir -p $C/$'n\\xffd'/m; cp $C/t3/vm-36ac6243/alice.csv "
      "$C/$'n\\xffd'/m/; $G report $C/$'n\\xffd' --out $O", (0,), (), "test -f $O/report.md", "report written"),
    V("E10", "env", "TMPDIR a folder that is not there", "TMPDIR=/nonexistent $G report $C/t3 --out $O", (0,), (),
      "test -f $O/report.md", "report written"),
    V("E11", "env", "--out on a full tmpfs", "mkdir -p /tmp/cts-full && (mountpoint -q /tmp/cts-full || mount -t "
      "tmpfs -o size=64k tmpfs /tmp/cts-full) && dd if=/dev/zero of=/tmp/cts-full/fill bs=4k 2>/dev/null; "
      "$G report $C/t3 --out /tmp/cts-full/out; rc=$?; test ! -e /tmp/cts-full/out; t=$?; rm -f /tmp/cts-full/fill; "
      "umount /tmp/cts-full; [ $t -eq 0 ] && exit $rc || exit 99", (2,), ("pass --out",), "",
      "one line, exit 2, nothing left"),
    V("E12", "env", "the store replaced by another during a report (mv + mkdir)",
      "cp -r $C/t3 $C/e12; $G report $C/e12 --out $O & p=$!; sleep 1.5; mv $C/e12 $C/e12-old; "
      "mkdir $C/e12; wait $p", (0, 2), (), "", "a report of what was read, or one line"),
    V("E13", "env", "TZ=Pacific/Kiritimati and LC_ALL=tr_TR.UTF-8", "TZ=Pacific/Kiritimati LC_ALL=tr_TR.UTF-8 "
      "$G report $C/t3 --out $O", (0,), (), "test -f $O/report.md", "report written"),
    V("E14", "env", "a CSV with a BOM and CRLF lines in a team store", ".venv/bin/python -c \"import sys;"
      "d=open('$C/t3/vm-36ac6243/alice.csv','rb').read();open('$C/t3/bobbox-0badc0de/crlf.csv','wb').write("
      "b'\\\\xef\\\\xbb\\\\xbf'+d.replace(b'\\\\n',b'\\\\r\\\\n'))\"; $G report $C/t3 --out $O", (0,),
      (), "grep -q 'counted once' $O/report.md", "read as a copy, counted once"),
]


def run(variant: Variant, root: Path) -> tuple[int, str, float, int]:
    out = root / f"out-{variant.id}"
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, G=str(REPO / ".venv" / "bin" / "gpubench"), C=str(root), O=str(out), REPO=str(REPO),
               MPLCONFIGDIR="/tmp/cts-mpl", PYTHONPATH=str(REPO))
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", variant.command], cwd=REPO, env=env, capture_output=True, text=True,
                          errors="replace", timeout=300)
    text = done.stdout + done.stderr
    checked = subprocess.run(["bash", "-c", variant.check or "true"], cwd=REPO, env=env).returncode == 0
    ok = done.returncode in variant.codes and all(t in text for t in variant.texts) and checked
    ok = ok and "Traceback" not in text
    return (0 if ok else 1), text, time.monotonic() - started, done.returncode


def main() -> None:
    root = Path(sys.argv[1])
    only = set(sys.argv[2:])
    for variant in VARIANTS:
        if only and variant.id not in only:
            continue
        bad, text, wall_s, code = run(variant, root)
        lines = [line for line in text.splitlines() if line.strip()]
        shown = " / ".join(lines[-2:])[:300].replace("|", "\\|")
        verdict = "pass" if not bad else "FAIL"
        print(f"| {variant.id} | {variant.cls} | {variant.what} | {variant.expected} | exit {code}, {wall_s:.0f} s: "
              f"{shown} | {verdict} |", flush=True)
        (root / f"log-{variant.id}.txt").write_text(text)


if __name__ == "__main__":
    main()
