"""The campaign's stores and files under ROOT (default /tmp/cts), made from the committed example runs.

    .venv/bin/python docs/validation/campaign-team-store-tools/setup.py [ROOT]

Not measurements: every row is an example run's row, its run id, host, figures or owner changed as the variant needs.
alice's run is `<store>/vm-36ac6243/alice.csv` (reports/examples/h200/headline.csv, run id alice); bob is uid 65534."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[3]
HEADLINE = REPO / "reports" / "examples" / "h200" / "headline.csv"
CPU = REPO / "reports" / "examples" / "cpu-2core-quick.csv"
SMOKE = REPO / "reports" / "examples" / "h200" / "smoke.csv"
TIMES = ["median_s", "min_s", "mean_s", "iqr_s", "stddev_s", "round_s"]
RATES = ["tflops", "gbps", "pct_of_peak", "pct_of_peak_gbps", "samples_per_s"]
BOB = 65534


def rows(run_id: str, src: Path = HEADLINE) -> pd.DataFrame:
    return pd.read_csv(src).assign(run_id=run_id)


def faster(frame: pd.DataFrame, factor: float) -> pd.DataFrame:
    out = frame.copy()
    out[TIMES] = out[TIMES] / factor
    out[[c for c in RATES if c in out]] = out[[c for c in RATES if c in out]] * factor
    return out


def store(root: Path, name: str, bob_rows: pd.DataFrame | None, bob_name: str = "bob.csv",
          bob_folder: str = "bobbox-0badc0de") -> Path:
    """alice's run, and bob's file (owned by uid 65534) holding `bob_rows` plus a run of his own."""
    top = root / name
    (top / "vm-36ac6243").mkdir(parents=True)
    rows("alice").to_csv(top / "vm-36ac6243" / "alice.csv", index=False)
    (top / bob_folder).mkdir()
    own = rows("bob").assign(hostname="bobbox", machine_id="0badc0de0000")
    frame = own if bob_rows is None else pd.concat([own, bob_rows])
    path = top / bob_folder / bob_name
    frame.to_csv(path, index=False)
    os.chown(path, BOB, BOB)
    return top


def edited(path: Path, frame: pd.DataFrame, case: str, column: str, factor: float) -> Path:
    out = frame.copy()
    at = out.index[out["case_id"].eq(case)][0]
    out.loc[at, column] = out.loc[at, column] * factor
    out.to_csv(path, index=False)
    return path


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/cts")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    alice = rows("alice")
    store(root, "t1", faster(alice, 100).assign(build=1, builds=2, tflops=alice["tflops"], gbps=alice["gbps"]))
    store(root, "t2", faster(alice, 1.02).assign(build=1, builds=2))
    store(root, "t3", None)
    shutil.copy(root / "t3" / "vm-36ac6243" / "alice.csv", root / "t3" / "bobbox-0badc0de" / "alice-copy.csv")
    store(root, "t4", faster(alice, 1.02), bob_name="alice.csv")
    t5 = store(root, "t5", faster(alice, 1.02), bob_name="alice.csv")
    (t5 / "vm-36ac6243" / "alice.exit.json").write_text('{"exit_code": 0}')
    t6 = store(root, "t6", faster(alice, 1.02), bob_name="alice.csv")
    (t6 / "vm-36ac6243" / "alice.exit.json").write_text('{"exit_code": 0}')
    (t6 / "bobbox-0badc0de" / "alice.exit.json").write_text('{"exit_code": 0}')
    os.chown(t6 / "bobbox-0badc0de" / "alice.exit.json", BOB, BOB)
    store(root, "t7", faster(alice, 1.02))
    store(root, "t8", faster(alice, 1.02).assign(machine_id="0badc0de0000", hostname="bobbox"))
    t9 = root / "t9"
    t9.mkdir()
    pd.concat([rows("twice"), faster(rows("twice").iloc[[1]], 1.02)]).to_csv(t9 / "twice.csv", index=False)
    rows("fine").to_csv(t9 / "fine.csv", index=False)
    t13 = store(root, "t13", faster(alice, 1.02))
    os.chown(t13 / "bobbox-0badc0de" / "bob.csv", 4242, 4242)
    t14 = store(root, "t14", None)
    for k in range(5):
        shutil.copy(t14 / "vm-36ac6243" / "alice.csv", t14 / "bobbox-0badc0de" / f"alice-copy{k}.csv")
    x = root / "x"
    x.mkdir()
    edited(x / "x1.csv", rows("x1"), "matmul/bf16-n8192", "median_s", 0.01)
    cpu = rows("x2", CPU)
    edited(x / "x2.csv", cpu, cpu[cpu["workload"].eq("matmul")]["case_id"].iloc[0], "tflops", 100)
    edited(x / "x3.csv", rows("x3"), "transfer/h2d-256MiB-pinned-nb", "gbps", 100)
    smoke = rows("x4", SMOKE)
    edited(x / "x4.csv", smoke, smoke[smoke["workload"].eq("inference")]["case_id"].iloc[0], "samples_per_s", 0.01)
    case = rows("x5")[lambda f: f["case_id"].eq("elementwise/add-fp32-2^24")]
    builds = pd.concat([case.assign(build=b, builds=3) for b in range(3)], ignore_index=True)
    edited(x / "x5.csv", builds, "elementwise/add-fp32-2^24", "median_s", 1)
    frame = pd.read_csv(x / "x5.csv")
    frame.loc[2, "median_s"] *= 100
    frame.to_csv(x / "x5.csv", index=False)
    edited(x / "x6.csv", rows("x6"), "matmul/fp32-n8192", "median_s", 1.5)
    edited(x / "x7.csv", rows("x7"), "matmul/fp32-n8192", "median_s", 1.05)
    rows("base").to_csv(x / "base.csv", index=False)
    edited(x / "x8.csv", rows("x8"), "matmul/bf16-n8192", "median_s", 0.01)
    huge = rows("x9").astype({"size": object})
    huge.loc[huge["case_id"].eq("matmul/fp32-n8192"), "size"] = 10**30
    huge.to_csv(x / "x9.csv", index=False)
    print(f"made {root}")


if __name__ == "__main__":
    main()
