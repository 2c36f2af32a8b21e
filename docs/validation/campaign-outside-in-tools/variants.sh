#!/bin/bash
# variants.sh [ID...]: every variant of campaign-outside-in.md (or those named), each through v.sh; its report is kept
# in /tmp/oi/res/ID.txt. Setup, once, from the checkout (as root: E5, E6 and I6 bind-mount a folder read-only):
#   mkdir -p /tmp/oi/src && git archive HEAD | tar -x -C /tmp/oi/src     # the commit measured, beside the working tree
# Single quotes keep $G, $R, $D, $Q, $RUN, $EX, $SRC for v.sh to set inside the variant's shell.
TOOLS=$(cd "$(dirname "$0")" && pwd)
export TOOLS F=/tmp/oi/files K=/tmp/oi/k4
PY=/work/main/.venv/bin/python
[ -d $F ] || $PY $TOOLS/mkfiles.py /tmp/oi/src/reports/examples/cpu-2core-quick.csv $F
[ -d $K ] || $PY $TOOLS/mkslow.py /tmp/oi/src/reports/examples/cpu-2core-quick.csv $K
mkdir -p /tmp/oi/res
declare -A V
L='--profile smoke -k matmul[fp32-n64 --budget 20s --builds 3'
QR='--profile smoke -k matmul[fp32-n64 --budget 20s'
UT='--tests $TOOLS/test_two.py --profile smoke --budget 30s --no-report'
ONE='--profile smoke --budget 20s --no-report --results-dir $R --run-id x'
INPLACE='python3 $TOOLS/inplace.py $D/screen.raw'
# option values at their edges
V[D1]='$RUN --budget 1e3'; V[D2]='$RUN --budget inf'; V[D3]='$RUN --budget nan'; V[D4]='$RUN --budget -0'
V[D5]='$RUN --budget ٣s'; V[D6]='$RUN --budget 1h1h'; V[D7]='$RUN --budget 0.01s'; V[D8]='$RUN --budget 1m30'
V[D9]='$RUN --budget " 2M "'
V[D10]='$G run $Q --results-dir $R --run-id "é-ü-テスト"'
V[D11]='$G run $Q --results-dir $R --run-id "$(printf "a%.0s" {1..120})"'
V[D12]='$G run $Q --results-dir $R --run-id "$(printf "é%.0s" {1..120})"'
V[D13]='$G run $Q --results-dir $R --run-id -'
V[D14]='$G run $Q --results-dir $R --run-id ..'
V[D15]='$G run $Q --results-dir $R --run-id "$(printf "a\nb")"'
V[D16]="\$G run $QR --results-dir \"\$D/my results é\" --run-id x"
V[D17]="\$G run $QR --results-dir \"\$D/\$(printf 'a\nb')\" --run-id x"
V[D18]='$G run $Q --results-dir -r --run-id x'
V[D19]='$G run $Q --results-dir=-r --run-id x'
V[D20]='P=$D; for i in $(seq 1 20); do P=$P/$(printf "d%.0s" {1..250}); done; $G run $Q --results-dir $P --run-id x'
V[D21]='$G run $Q --results-dir $D/$(printf "d%.0s" {1..256}) --run-id x'
V[D22]='$G run $Q --results-dir /dev/null --run-id x'
V[D23]='$G run $Q --results-dir /proc/self --run-id x'
V[D24]='$RUN -k "matmul and é"'
V[D25]='$RUN --build-seconds nan'; V[D26]='$RUN --build-seconds inf'; V[D27]='$RUN --build-seconds 0'
V[D28]='$RUN --build-seconds 1e-9'; V[D29]='$RUN --build-calls 0'
V[D30]='$RUN --target-accuracy nan -k guide-template'
V[D31]='$RUN --nproc 0 -k all_reduce-1KiB'; V[D32]='$RUN --nproc 1000000000 -k all_reduce-1KiB'
V[D33]='$RUN --wait-quiet inf'; V[D34]='$RUN --wait-quiet 0s'; V[D35]='$RUN --threads " 1"'
V[D36]='$RUN --threads ١'; V[D37]='$RUN --profile SMOKE'
V[D38]='$RUN --device meta'; V[D39]='$RUN --device cpu:1'; V[D40]='$RUN --device cuda:-1'
V[D41]='$RUN --device "cpu,cuda"'; V[D42]='$RUN --device CUDA:ALL'; V[D43]='$G env --device cpu:1'
V[D44]='$G run $Q --results-dir "" --run-id x; rc=$?; ls -a $D; exit $rc'
V[D45]='$G run $Q --results-dir "~/res" --run-id x; rc=$?; ls -a $D; exit $rc'
V[D46]='$G compare $K/base/run.csv $K/new2/run.csv --threshold nan'
V[D47]='$G compare $K/base/run.csv $K/new2/run.csv --threshold inf; $G compare $K/base/run.csv $K/new2/run.csv --threshold inf%'
V[D48]='$G compare $K/base/run.csv $K/new2/run.csv --threshold 1e3%'
V[D49]='$G compare $K/base/run.csv $K/new2/run.csv --threshold ٥%'
V[D50]='$G compare $K/base/run.csv $K/new2/run.csv --threshold 0%'
V[D51]='$G report $K/base/run.csv --out $D/o --baseline ""'
V[D52]='$G compare $K/base/run.csv $K/new2/run.csv --threshold 1e-3'
# pytest's options under gpubench run
V[B1]='$RUN -p no:gpubench'; V[B2]='$RUN -p no:benchmark'; V[B3]='$RUN --benchmark-disable'
V[B4]='$RUN --benchmark-skip'
V[B5]='$G run --profile smoke -k matmul --budget 30s --no-report --results-dir $R --run-id x -n 2'
V[B6]='$RUN --co'; V[B7]='$RUN --setup-only'
V[B8]="\$G run $UT --results-dir \$R --run-id x </dev/null"
V[B9]="\$G run $UT --results-dir \$R --run-id x --pdb </dev/null"
V[B10]="\$G run $UT --results-dir \$R --run-id x -x"
V[B11]="\$G run $UT --results-dir \$R --run-id x; \$G run $UT --results-dir \$R --run-id y --lf"
V[B12]='$RUN -q -q -q'; V[B13]='$RUN -v -v'
V[B14]='$G run --profile smoke -k matmul[fp32-n64 --budget 30s --no-report --builds 2 --results-dir $R --run-id x --basetemp=$R'
V[B15]='$G run --profile smoke -k matmul[fp32-n64 --budget 30s --no-report --builds 2 --results-dir $R --run-id x --basetemp=$D/bt'
V[B16]='$RUN -W error'
V[B17]='$RUN --junitxml=$D/j.xml; rc=$?; grep -o "tests=\"[0-9]*\"" $D/j.xml; exit $rc'
V[B18]="\$G run $ONE \$SRC/benches/bench_matmul.py::test_matmul[fp32-n64]"
V[B19]="\$G run $ONE -k 'matmul and n64' --deselect 'benches/bench_matmul.py::test_matmul[fp16-n64]'"
V[B20]="\$G run $ONE -k 'matmul and n64' -v --co"
V[B21]="\$G run $ONE 'benches/bench_matmul.py::test_matmul[fp32-n64]'"
V[B22]='$RUN --timeout=1 -k "matmul[fp32-n64 or guide-template"'
V[B23]='$RUN --color=yes'; V[B24]='$RUN -s'; V[B25]='$RUN -W error::UserWarning'
V[B26]='$RUN --import-mode=importlib'; V[B27]='$RUN --rootdir=/tmp'; V[B28]='$RUN -c /dev/null'
V[B29]='$G run --tests $TOOLS/test_outcomes.py --profile smoke --budget 20s --no-report --results-dir $R --run-id x'
# pytest's environment variables
V[C1]='PYTEST_ADDOPTS="-x -q" $RUN'; V[C2]='PYTEST_ADDOPTS="-p no:benchmark" $RUN'
V[C3]='PYTEST_ADDOPTS="-n 2" $RUN'; V[C4]='PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 $RUN'
V[C5]='PYTEST_PLUGINS=nosuchplugin $RUN'; V[C6]='PY_COLORS=1 FORCE_COLOR=1 $RUN'
V[C7]='PYTEST_ADDOPTS="--nonsense" $RUN'; V[C8]="PYTEST_ADDOPTS='\"unbalanced' \$RUN"
V[C9]='PYTEST_ADDOPTS="--benchmark-disable" $RUN'; V[C10]='PYTEST_ADDOPTS="-v" $RUN'
# how Python is started
V[A1]='PYTHONDEVMODE=1 $RUN'
V[A2]='$PY -X dev -m gpubench.harness.commands.cli run $Q --results-dir $R --run-id x'
V[A3]='$PY -W error -m gpubench.harness.commands.cli run $Q --results-dir $R --run-id x --no-fork'
V[A4]='$PY -bb -m gpubench.harness.commands.cli run $Q --results-dir $R --run-id x'
V[A5]='PYTHONDEVMODE=1 $G run --profile smoke --budget 60s -k "matmul[fp32-n64 or guide-template" --results-dir $R --run-id x'
V[A6]="PYTHONSAFEPATH=1 \$G run $QR --results-dir \$R --run-id x"
V[A7]="\$PY -I /work/main/.venv/bin/gpubench run $QR --results-dir \$R --run-id x"
V[A8]='PYTHONMALLOC=debug $RUN'; V[A9]='PYTHONPROFILEIMPORTTIME=1 $RUN'; V[A10]='PYTHONINSPECT=1 $RUN </dev/null'
V[A11]='$PY -m gpubench run $Q --results-dir $R --run-id x'; V[A12]='PYTHONPYCACHEPREFIX=/proc/nonexistent $RUN'
# the working folder
V[E1]='$RUN; rc=$?; find $D -maxdepth 1 ! -path $D ! -path $R -printf "left in the working folder: %y %P\n"; exit $rc'
V[E2]='mkdir gone && cd gone && rmdir ../gone && $G run $Q --run-id x'
V[E3]='mkdir gone && cd gone && rmdir ../gone && $G run $Q --results-dir $R --run-id x'
V[E4]='mkdir w; cd w; (sleep 4; rm -rf $D/w) & $G run --profile smoke -k "matmul and n64" --budget 30s --builds 3 --no-report --results-dir $R --run-id x'
V[E5]='mkdir ro && mount --bind ro ro && mount -o remount,ro,bind ro && cd ro && $G run $Q --results-dir $R --run-id x; rc=$?; cd $D; umount $D/ro; exit $rc'
V[E6]='mkdir ro && mount --bind ro ro && mount -o remount,ro,bind ro && cd ro && $G run $Q --run-id x; rc=$?; cd $D; umount $D/ro; exit $rc'
V[E7]='printf "[pytest]\naddopts = -x -p no:benchmark\n" > pytest.ini; printf "raise SystemExit(\"conftest of the working folder\")\n" > conftest.py; $RUN'
V[E8]='printf "raise ImportError(\"the user s own torch.py\")\n" > torch.py; $G run $Q --results-dir $R --run-id x --no-fork'
V[E9]='printf "raise ImportError(\"the user s own torch.py\")\n" > torch.py; $G run $Q --results-dir $R --run-id x'
# time zones
V[F1]='TZ=garbage $RUN; rc=$?; cut -d, -f3 $R/x.csv; exit $rc'
V[F2]='TZ=Pacific/Kiritimati $G run $Q --results-dir $R --run-id a && TZ=Pacific/Pago_Pago $G run $Q --results-dir $R --run-id b && $G report $R --out $D/rep'
# standard streams
V[G1]='$RUN 2>/dev/full'
V[G2]='$G run $Q --results-dir $R --run-id x --threads 0 2>/dev/full'
V[G3]='set -o pipefail; $RUN 2>&1 | head -1'
V[G4]='$G run $Q --results-dir $R --run-id .. 2>/dev/full'
V[G5]='$G report /nonexistent 2>/dev/full'
V[G7]='set -o pipefail; python3 $TOOLS/nonblock.py $G run --profile smoke -k "matmul or elementwise" --budget 30s -v --results-dir $R --run-id x | (sleep 8; cat > $D/console.txt); rc=$?; wc -c $D/console.txt; exit $rc'
V[G8]='set -o pipefail; python3 $TOOLS/nonblock.py $G run --profile smoke -k "matmul or elementwise or conv" --budget 30s --results-dir $R --run-id x | (sleep 8; cat > $D/console.txt); rc=$?; wc -c $D/console.txt; tail -1 $D/console.txt; exit $rc'
# the console
V[H1]='$G run --profile quick -k "matmul and n512" --budget 20s --results-dir $R --run-id x | cat > $D/console.txt; rc=${PIPESTATUS[0]}; awk "length > 150 {print length\": \"substr(\$0,1,60)}" $D/console.txt; exit $rc'
V[H2]="python3 \$TOOLS/onpty.py 20 \$D/screen.raw env -u COLUMNS \$G run --profile smoke -k 'matmul or elementwise' --budget 15s --builds 2 --no-report --results-dir \$R --run-id x; rc=\$?; $INPLACE 20; exit \$rc"
V[H3]="python3 \$TOOLS/onpty.py 60 \$D/screen.raw env -u COLUMNS \$G run --profile smoke -k 'matmul or elementwise' --budget 15s --builds 2 --no-report --results-dir \$R --run-id x; rc=\$?; $INPLACE 60; exit \$rc"
V[H4]="python3 \$TOOLS/onpty.py 100 \$D/screen.raw env -u COLUMNS \$G run --profile smoke -k 'matmul or elementwise' --budget 15s --builds 2 --no-report -v --results-dir \$R --run-id x; rc=\$?; $INPLACE 100; exit \$rc"
V[H5]="python3 \$TOOLS/onpty.py 80 \$D/screen.raw env -u COLUMNS -u TERM \$G run --profile smoke -k 'matmul or elementwise' --budget 15s --builds 2 --no-report --results-dir \$R --run-id x; rc=\$?; $INPLACE 80; exit \$rc"
# the results folder changed under a running run (6 s in: after its first builds)
V[I1]="(sleep 6; rm -rf \$R) & \$G run $L --results-dir \$R --run-id x"
V[I2]="(sleep 6; mv \$R \$D/moved) & \$G run $L --results-dir \$R --run-id x; rc=\$?; wc -l \$D/moved/x.csv; exit \$rc"
V[I3]="(sleep 6; rm -f \$R/x.csv) & \$G run $L --results-dir \$R --run-id x"
V[I4]="(sleep 6; cp \$R/x.csv \$D/c && mv \$D/c \$R/x.csv) & \$G run $L --results-dir \$R --run-id x"
V[I5]="(sleep 6; : > \$R/x.csv) & \$G run $L --results-dir \$R --run-id x"
V[I6]="mkdir \$R && mount --bind \$R \$R && (sleep 6; mount -o remount,ro,bind \$R) & \$G run $L --results-dir \$R --run-id x; rc=\$?; sleep 1; umount \$R; exit \$rc"
V[I7]="mkdir -p \$R && echo notes > \$R/x-report && \$G run $QR --results-dir \$R --run-id x"
# files round-tripped through other tools: report, then compare against the example itself
for j in J1.csv.gz J2-excel.csv J3-semicolon.csv J4-pandas-index.csv J5-columns-sorted.csv J6-rows-reversed.csv \
         J7-added-column.csv J8-column-removed.csv J9-future-schema.csv J12-cr-only.csv J13-xlsx.csv J14-tabs.csv \
         J15-renamed.csv; do
  V[${j%%[-.]*}]="\$G report \$F/$j --out \$D/o; echo report rc=\$?; \$G compare \$EX/cpu-2core-quick.csv \$F/$j"
done
V[J10]='$G report $F/J10-empty-files --out $D/o 2>&1 | grep -c "left out"; grep -a -m1 "rows from" $D/o/report.md'
V[J11]='$G report $F/J11-a $F/J11-b --out $D/o; grep -a -m1 "rows from" $D/o/report.md; $G compare $F/J11-a $F/J11-b'
V[J16]='$G report $F/J16-download-twice --out $D/o; grep -a -m1 "rows from" $D/o/report.md'
# concurrency
V[K1]='$G run --profile smoke -k "matmul and n64" --budget 20s --results-dir $R > $D/a.txt 2>&1 & $G run --profile smoke -k "matmul and n64" --budget 20s --results-dir $R > $D/b.txt 2>&1; wait; ls $R'
V[K2]='mkdir -p $R; cp $EX/cpu-2core-quick.csv $R/old.csv; $G run --profile smoke -k "matmul or elementwise" --budget 20s --builds 2 --results-dir $R --run-id x > $D/run.txt 2>&1 & p=$!; sleep 4; $G report $R; echo "report rc=$?"; wait $p; echo "run rc=$?"'
V[K3]='for s in one two; do $G run --profile smoke -k "matmul and n64" --budget 20s --no-report --results-dir $D/$s --run-id x; done; $G report $D/one $D/two --out $D/o; echo "report rc=$?"; $G compare $D/one/x.csv $D/two/x.csv'
ORDER="D1 D2 D3 D4 D5 D6 D7 D8 D9 D10 D11 D12 D13 D14 D15 D16 D17 D18 D19 D20 D21 D22 D23 D24 D25 D26 D27 D28 D29 D30
D31 D32 D33 D34 D35 D36 D37 D38 D39 D40 D41 D42 D43 D44 D45 D46 D47 D48 D49 D50 D51 D52
B1 B2 B3 B4 B5 B6 B7 B8 B9 B10 B11 B12 B13 B14 B15 B16 B17 B18 B19 B20 B21 B22 B23 B24 B25 B26 B27 B28 B29
C1 C2 C3 C4 C5 C6 C7 C8 C9 C10 A1 A2 A3 A4 A5 A6 A7 A8 A9 A10 A11 A12 E1 E2 E3 E4 E5 E6 E7 E8 E9 F1 F2
G1 G2 G3 G4 G5 G7 G8 H1 H2 H3 H4 H5 I1 I2 I3 I4 I5 I6 I7
J1 J2 J3 J4 J5 J6 J7 J8 J9 J10 J11 J12 J13 J14 J15 J16 K1 K2 K3"
for id in ${@:-$ORDER}; do
  [ -n "${V[$id]}" ] || { echo "no variant $id"; continue; }
  "$TOOLS/v.sh" "$id" "${V[$id]}" | tee /tmp/oi/res/$id.txt
done
