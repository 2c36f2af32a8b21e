"""Health against references (reports/judge/health.py, reports/judge/references.py) and --device
cuda:all (harness/commands/cli.py), on synthetic copies of the committed H200 run: figures
scaled, hostnames, machines, devices and telemetry changed."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gpubench.harness.commands import cli, run_command
from gpubench.harness.commands.common import read_options
from gpubench.harness.core.exits import UsageError
from gpubench.reports.judge import health
from gpubench.reports.render import health as health_report
from gpubench.reports.judge.aggregate import per_case
from gpubench.reports.render.build import build_report
from gpubench.reports.judge.intervals import steady_best
from gpubench.reports.judge.load import (
    load_env_sidecars,
    load_results,
    machine_labels,
    write_merged,
)
from gpubench.reports.judge.references import (
    DEFAULT_PATH,
    FIGURES,
    load_references,
    parse_references,
)

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "reports" / "examples" / "h200-quick.csv"


@pytest.fixture(scope="module")
def h200() -> pd.DataFrame:
    return load_results([H200])


def copy_of(
    frame: pd.DataFrame,
    hostname: str = "vm",
    machine_id: str = "8f9f0ab5b928",
    device: str = "cuda:0",
    run_id: str | None = None,
    **scales: float,
) -> pd.DataFrame:
    """A copy of the run as another machine/GPU; `scales` by headline: matmul_bf16=0.8 scales the
    bf16 matmul TFLOP/s (and times the other way), h2d=0.75 the host->device GB/s, epoch=1.2 the
    epoch time."""
    out = frame.copy()
    out["hostname"], out["machine_id"], out["device"] = hostname, machine_id, device
    out["run_id"] = run_id or f"{hostname}-{machine_id}-{device}"
    masks = {
        "matmul_bf16": (out["workload"] == "matmul") & (out["dtype"] == "bf16"),
        "matmul": out["workload"] == "matmul",
        "h2d": (out["workload"] == "transfer") & (out["direction"] == "h2d"),
    }
    for name, factor in scales.items():
        if name == "epoch":
            out.loc[out["workload"] == "mnist_epoch", "epoch_s"] *= factor
            continue
        out.loc[masks[name], ["tflops", "gbps"]] *= factor
        out.loc[masks[name], "median_s"] /= factor
    return out


def together(*frames: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    frame = pd.concat(frames, ignore_index=True)
    frame["machine"] = machine_labels(frame)
    return frame, per_case(frame)


def table_of(*frames: pd.DataFrame) -> pd.DataFrame:
    frame, cases = together(*frames)
    return health.health_table(frame, cases, load_references())


def health_of(table: pd.DataFrame, host: str, key: str) -> pd.Series:
    return table[table["machine"].str.startswith(host + " ") & (table["key"] == key)].iloc[0]


# ---- references ---------------------------------------------------------------------------------


def test_committed_references_load_and_every_entry_names_its_source():
    refs = load_references()
    assert refs.for_device("NVIDIA H200", "gpubench") and refs.for_device(
        "NVIDIA H200", "published"
    )
    assert all(len(r.source) > 20 for r in refs.figures)
    bf16 = [
        r for r in refs.for_device("NVIDIA H200", "published") if r.figure == "matmul_bf16_tflops"
    ]
    assert bf16[0].value == 794.5 and "mamf-finder" in bf16[0].source


@pytest.mark.parametrize(
    "entry, words",
    [
        (
            {"figure": "matmul_bf16_tflops", "value": 1.0, "kind": "guess", "source": "x"},
            "kind 'guess'",
        ),
        (
            {"figure": "matmul_bf16_tflops", "value": 1.0, "kind": "published", "source": " "},
            "no source",
        ),
        (
            {"figure": "matmul_int8_tops", "value": 1.0, "kind": "published", "source": "x"},
            "unknown figure",
        ),
        (
            {"figure": "matmul_bf16_tflops", "value": -3, "kind": "published", "source": "x"},
            "not a positive number",
        ),
        (
            {"figure": "matmul_bf16_tflops", "value": True, "kind": "published", "source": "x"},
            "not a positive number",
        ),
    ],
)
def test_a_bad_reference_is_one_line_naming_the_entry(entry, words):
    with pytest.raises(UsageError) as error:
        parse_references({"version": 1, "devices": {"GPU X": {"figures": [entry]}}}, "refs.json")
    assert (
        words in str(error.value)
        and "devices['GPU X'].figures[0]" in str(error.value)
        and "\n" not in str(error.value)
    )


def test_a_damaged_references_file_is_one_line(tmp_path):
    bad = tmp_path / "references.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(UsageError, match="not JSON"):
        load_references(bad)
    with pytest.raises(UsageError, match="version"):
        parse_references({"devices": {}}, "refs.json")


# ---- ratios and flags ---------------------------------------------------------------------------


def test_the_reference_run_sits_at_its_own_reference(h200):
    table = table_of(h200)
    gpubench = table[table["reference"].notna()]
    # every headline the H200 measured has a reference
    assert set(gpubench["key"]) == set(FIGURES)
    assert (gpubench["ratio"].sub(1).abs() < 0.005).all() and (gpubench["health"] == "ok").all()


@pytest.mark.parametrize(
    "factor, flagged", [(0.89, True), (0.91, False), (0.75, True), (1.05, False)]
)
def test_a_figure_ten_percent_below_its_reference_is_flagged(h200, factor, flagged):
    row = health_of(
        table_of(copy_of(h200, "slow", "aaaaaaaaaaaa", matmul_bf16=factor)),
        "slow",
        "matmul_bf16_tflops",
    )
    assert row["ratio"] == pytest.approx(factor, rel=0.01)
    assert (row["health"] != "ok") is flagged


@pytest.mark.parametrize("factor, flagged", [(1.2, True), (0.8, False)])
def test_a_time_is_flagged_when_slower_not_when_faster(h200, factor, flagged):
    row = health_of(
        table_of(copy_of(h200, "epochs", "bbbbbbbbbbbb", epoch=factor)),
        "epochs",
        "template_epoch_s",
    )
    assert row["ratio"] == pytest.approx(1 / factor, rel=0.01)
    assert (row["health"] != "ok") is flagged


def test_a_published_maximum_is_shown_never_flagged(h200):
    h100 = copy_of(h200, "h100box", "cccccccccccc", matmul_bf16=0.5).assign(
        device_name="NVIDIA H100 80GB HBM3"
    )
    row = health_of(table_of(h100), "h100box", "matmul_bf16_tflops")
    assert row["of published"] == pytest.approx(778.0 * 0.5 / 794.5, rel=0.01)
    assert row["health"] == "" and pd.isna(row["reference"])


def test_dram_figure_skips_cache_resident_rows(h200):
    tiered = h200.assign(memory_tier=None)
    # pretend a huge cache
    tiered.loc[
        (tiered["workload"] == "elementwise") & (tiered["size"] == 268435456), "memory_tier"
    ] = "cache"
    assert "dram_gbps" not in set(table_of(tiered)["key"])
    assert health_of(table_of(h200), "vm", "dram_gbps")["measured"] == pytest.approx(
        4343, rel=0.001
    )


# ---- causes -------------------------------------------------------------------------------------


def write_run(
    frame: pd.DataFrame, folder: Path, name: str, power_limit_w: float | None = None
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_merged(frame, folder / f"{name}.csv")
    if power_limit_w is not None:
        reading = {"gpu_sm_clock_mhz": 1980, "gpu_power_limit_w": power_limit_w}
        (folder / f"{name}.env.json").write_text(
            json.dumps({"gpu_telemetry_start": reading, "gpu_telemetry_end": reading}),
            encoding="utf-8",
        )
    return folder / f"{name}.csv"


def causes_text(tmp_path: Path, frame: pd.DataFrame, power_limit_w: float | None) -> str:
    path = write_run(frame, tmp_path, "run", power_limit_w)
    loaded = load_results([path])
    _, power_caps_w = load_env_sidecars([path])
    return "\n".join(
        health.causes(loaded, loaded["machine"].iloc[0], load_references(), power_caps_w)
    )


def test_causes_name_a_lower_power_cap_and_clock_from_the_fingerprint(h200, tmp_path):
    slow = copy_of(h200, "capped", "dddddddddddd", matmul=0.7).assign(gpu_sm_clock_mhz=1500)
    text = causes_text(tmp_path, slow, power_limit_w=450.0)
    assert "power cap: 450 W (reference run 700 W) ← below the reference: likely cause" in text
    assert (
        "SM clock median 1500 MHz" in text
        and "(reference run 1980 MHz) ← below the reference: likely cause" in text
    )
    assert (
        "PCIe link width and generation: not recorded by gpubench — to check: `nvidia-smi -q -d "
        "PCI`" in text
    )


def test_causes_without_telemetry_are_listed_to_check(h200, tmp_path):
    bare = copy_of(h200, "bare", "eeeeeeeeeeee").assign(gpu_sm_clock_mhz=None, gpu_temp_c=None)
    text = causes_text(tmp_path, bare, power_limit_w=None)
    assert "power cap: not recorded — to check: `nvidia-smi -q -d POWER`" in text
    assert "clocks: not recorded — to check" in text
    assert "thermal throttling: throttle reasons not recorded — to check" in text


def test_causes_at_the_reference_are_not_called_likely(h200, tmp_path):
    text = causes_text(
        tmp_path,
        copy_of(h200, "fine", "ffffffffffff").assign(gpu_throttle="software power cap"),
        power_limit_w=700.0,
    )
    assert "likely cause" not in text
    assert (
        "no thermal or hardware slowdown in 81 rows, hottest 53 °C (software power cap in 81)"
        in text
    )


def test_thermal_slowdown_in_the_rows_is_a_likely_cause(h200, tmp_path):
    hot = copy_of(h200, "hot", "abababababab")
    hot["gpu_throttle"] = ""
    hot.loc[hot["workload"] == "matmul", "gpu_throttle"] = (
        "software power cap;hardware thermal slowdown"
    )
    text = causes_text(tmp_path, hot, power_limit_w=700.0)
    assert "thermal/hardware slowdown in 16 of 81 rows" in text and text.rstrip().endswith(
        "← likely cause"
    )


def test_flagged_machine_gets_its_causes_and_labels_are_escaped(h200):
    frame, cases = together(h200, copy_of(h200, "bad|host\nx", "acacacacacac", h2d=0.75))
    text = health_report.render(frame, cases, {})
    flagged = [line for line in text.splitlines() if line.startswith("- **")]
    assert (
        len(flagged) == 1
        and "bad\\|host x" in flagged[0]
        and "host→device, pinned at 75%" in flagged[0]
    )
    assert "  - PCIe link width" in text
    # a row per figure, a column per machine
    table_lines = [line for line in text.splitlines() if line.startswith("| ") and "vs" in line]
    header = next(line for line in text.splitlines() if line.startswith("| figure"))
    # 3 cells: the | in the name is escaped
    assert "bad\\|host x" in header and header.count(" | ") == 2
    assert table_lines and all(line.count(" | ") == 2 for line in table_lines)


# ---- GPUs of one node ---------------------------------------------------------------------------


def node(
    h200: pd.DataFrame, slow_gpu: int, factor: float, gpus: int = 4
) -> tuple[pd.DataFrame, pd.DataFrame]:
    micro = h200[h200["workload"].isin(["matmul", "transfer", "elementwise"])]
    return together(
        *[
            copy_of(
                micro,
                "node1",
                "abcabcabcabc",
                f"cuda:{i}",
                **({"matmul": factor} if i == slow_gpu else {}),
            )
            for i in range(gpus)
        ]
    )


@pytest.mark.parametrize("factor, outlier", [(0.94, True), (0.96, False), (1.06, True)])
def test_the_gpu_five_percent_off_its_node_is_the_outlier(h200, factor, outlier):
    frame, cases = node(h200, slow_gpu=2, factor=factor)
    table = health.outlier_table(frame, cases)
    bf16 = table[table["figure"] == FIGURES["matmul_bf16_tflops"].label]
    assert list(bf16["device"]) == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    flagged = set(table[table["gpu"] != "ok"]["device"])
    assert flagged == ({"cuda:2"} if outlier else set())
    # an unscaled headline
    assert set(table[table["figure"] == FIGURES["h2d_pinned_gbps"].label]["gpu"]) == {"ok"}


def test_single_gpu_machines_have_no_node_table(h200):
    # one GPU, two torch versions: two labels, one device
    upgraded = copy_of(h200).assign(torch_version="2.12.0+cu130", run_id="upgraded")
    frame, cases = together(h200, upgraded, copy_of(h200, "other", "bcbcbcbcbcbc"))
    assert frame["machine"].nunique() == 3
    assert health.outlier_table(frame, cases).empty
    assert "GPUs within a node" not in health_report.render(frame, cases, {})


# ---- --device cuda:all --------------------------------------------------------------------------


def test_cuda_all_expands_into_one_micro_run_per_gpu():
    args = cli.build_parser().parse_known_args(
        ["run", "--device", "cuda:all", "--run-id", "R", "--profile", "smoke"]
    )[0]
    args.run = read_options(args)
    runs = run_command.per_gpu_runs(args, ["-k", "matmul", "-m", "not gpu"], 3)
    assert [
        (a.run.device, a.run.run_id, a.no_report, a.run.profile, a.micro_only) for a, _ in runs
    ] == [(f"cuda:{i}", f"R-cuda{i}", True, "smoke", True) for i in range(3)]
    # the user's, untouched: each build ands its -m with the micro markers
    assert runs[0][1] == ["-k", "matmul", "-m", "not gpu"]
    plan = run_command.build_plan(runs[0][0], runs[0][1], Path("scratch"), 0, None)
    assert plan.micro_only and plan.pytest_args == ["-k", "matmul", "-m", "not gpu"]


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_cuda_all_runs_each_gpu_and_reports_the_outlier(h200, tmp_path, monkeypatch, capsys):
    import gpubench.harness.devices.device

    micro = h200[h200["workload"].isin(["matmul", "transfer"])]
    launched = []

    # what one GPU's pytest processes would write
    def fake_builds(args, extra):
        index = int(args.run.device.split(":")[1])
        launched.append((args.run.device, extra))
        assert args.micro_only
        write_run(
            copy_of(
                micro,
                "node1",
                "abcabcabcabc",
                args.run.device,
                args.run.run_id,
                **({"matmul": 0.9} if index == 1 else {}),
            ),
            Path(args.run.results_dir),
            args.run.run_id,
        )
        return 0

    monkeypatch.setattr(gpubench.harness.devices.device, "cuda_device_count", lambda: 3)
    monkeypatch.setattr(run_command, "run_builds", fake_builds)
    code = cli.main(
        ["run", "--device", "cuda:all", "--run-id", "node", "--results-dir", str(tmp_path)]
    )
    assert code == 0 and [d for d, _ in launched] == ["cuda:0", "cuda:1", "cuda:2"]
    assert all(extra == [] for _, extra in launched)
    report = (tmp_path / "node-report" / "report.md").read_text(encoding="utf-8")
    section = report.split("## GPUs within a node")[1].split("\n## ")[0]
    outliers = [line for line in section.splitlines() if "outlier (≥5% off)" in line]
    assert outliers and all("| cuda:1 |" in line for line in outliers)


def test_cuda_all_without_a_gpu_is_one_line(monkeypatch, capsys, tmp_path):
    import gpubench.harness.devices.device

    monkeypatch.setattr(gpubench.harness.devices.device, "cuda_device_count", lambda: 0)
    assert cli.main(["run", "--device", "cuda:all", "--results-dir", str(tmp_path)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA GPU" in err and "--device cpu" in err


def test_cuda_all_under_pytest_names_one_gpu_instead():
    from gpubench.harness.devices.device import resolve_device
    from gpubench.harness.core.exits import UsageError

    with pytest.raises(UsageError, match="is for `gpubench run`.*cuda:N"):
        resolve_device("cuda:all")


# ---- the committed example ----------------------------------------------------------------------


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_report_flags_the_synthetic_degraded_h200(tmp_path):
    examples = ROOT / "reports" / "examples"
    report = build_report(
        [examples / "h200-quick.csv", examples / "h200-quick-SYNTHETIC-degraded.csv"],
        tmp_path,
        None,
    ).read_text(encoding="utf-8")
    section = report.split("## Health against references")[1].split("\n## ")[0]
    flagged = [line for line in section.splitlines() if line.startswith("- **")]
    assert len(flagged) == 1 and flagged[0].startswith(
        "- **synthetic-degraded-h200 · NVIDIA H200 (cuda:0)**"
    )
    assert "matmul bf16, best at 75%" in flagged[0] and "host→device, pinned at 75%" in flagged[0]
    # read from the copied sidecar
    assert "power cap: 700 W (reference run 700 W)" in section
    assert DEFAULT_PATH.name in section or "references.json" in section


def test_the_committed_example_report_shows_the_health_check():
    report = (ROOT / "reports" / "examples" / "report" / "report.md").read_text(encoding="utf-8")
    # rebuilt with this code, not an older one
    section = report.split("## Health against references")[1].split("\n## ")[0]
    assert (
        "| matmul bf16, best (TFLOP/s) | 583.5 vs 778: 0.75 (≥10% below); 0.73 of published 794.5 "
        "| 778 vs 778: 1.00 (ok); 0.98 of published 794.5 |"
    ) in section
    assert (
        "- **synthetic-degraded-h200 · NVIDIA H200 (cuda:0)**: " in section
        and "  - PCIe link width and generation" in section
    )


def test_headlines_pick_each_machines_steady_best_as_one_group_at_a_time_would(h200):
    """The headline per machine (here per run, as a store's history asks) is the case steady_best
    picks in that machine's group, the template epoch its lowest median: checked group by group."""
    runs = [
        copy_of(h200, run_id=f"r{n}", matmul_bf16=1 - 0.03 * n, h2d=1 + 0.02 * n, epoch=1 + 0.1 * n)
        for n in range(4)
    ]
    frame = pd.concat(runs, ignore_index=True)
    cases = per_case(frame.assign(machine=frame["run_id"]))
    matmul = cases["workload"] == "matmul"
    # noisy builds: the steadiest size is the slowest
    cases.loc[matmul, "tflops_q1"] = 1e3 / cases.loc[matmul, "tflops"]
    expected = []
    for figure, (mask, column) in health._masks(cases).items():
        for machine, group in cases[mask].dropna(subset=[column]).groupby("machine", sort=False):
            best = (
                steady_best(group, column)
                if FIGURES[figure].higher_is_better
                else group.loc[group[column].idxmin()]
            )
            expected.append((machine, figure, float(best[column])))
    heads = health.headlines(cases)
    assert (
        list(heads[["machine", "figure", "value"]].itertuples(index=False, name=None)) == expected
    )
    # every run, several figures
    assert len({machine for machine, _, _ in expected}) == 4 and len(expected) > 4 * 4
