"""A machine's history (reports/render/history.py): several runs of one machine and device, at
several dates or torch versions, on synthetic copies of the committed H200 run."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from test_health import H200, copy_of

from gpubench.reports.judge.history import run_figures
from gpubench.reports.render import history
from gpubench.reports.render.build import build_report
from gpubench.reports.judge.load import load_results, machine_labels, write_merged

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def h200() -> pd.DataFrame:
    return load_results([H200])


def run_at(
    frame: pd.DataFrame,
    run_id: str,
    day: str,
    torch: str = "2.11.0+cu130",
    device: str = "cuda:0",
    **scales: float,
) -> pd.DataFrame:
    out = copy_of(frame, "vm", "8f9f0ab5b928", device, run_id, **scales)
    out["timestamp_utc"] = f"{day}T12:00:00+00:00"
    out["torch_version"] = torch
    return out


def labelled(*frames: pd.DataFrame) -> pd.DataFrame:
    frame = pd.concat(frames, ignore_index=True)
    frame["machine"] = machine_labels(frame)
    return frame


def test_one_run_per_machine_has_no_history(h200, tmp_path):
    # two GPUs of a node: two machines, one run each
    frame = labelled(h200, run_at(h200, "gpu1", "2026-11-29", device="cuda:1"))
    assert run_figures(frame).empty
    # said in one line, not left to the reader to infer from a missing section
    text = history.render(frame, tmp_path)
    assert (
        text.startswith("## History")
        and "None yet: no machine here has two runs" in text
        and not list(tmp_path.glob("*.png"))
    )


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_two_runs_of_a_machine_are_its_history_in_time_order(h200, tmp_path):
    later = run_at(h200, "later", "2026-12-20", torch="2.12.0+cu130", matmul_bf16=0.8)
    # given newest first
    frame = labelled(later, run_at(h200, "earlier", "2026-11-29"))
    runs = run_figures(frame)
    assert list(runs["run_id"]) == ["earlier", "later"] and list(runs["torch"]) == [
        "2.11.0+cu130",
        "2.12.0+cu130",
    ]
    assert runs["matmul_bf16_tflops"].iloc[1] / runs["matmul_bf16_tflops"].iloc[0] == pytest.approx(
        0.8, rel=0.01
    )
    assert runs["h2d_pinned_gbps"].iloc[1] == pytest.approx(runs["h2d_pinned_gbps"].iloc[0])
    text = history.render(frame, tmp_path)
    assert text.startswith("## History")
    rows = [line for line in text.splitlines() if line.startswith("| vm · NVIDIA H200 (cuda:0) |")]
    # one row per machine: the report grows with machines, not runs
    assert len(rows) == 1
    assert "| 2 | 2026-11-29 → 2026-12-20 | 2.11.0+cu130, 2.12.0+cu130 |" in rows[0]
    # each change with compare's word on it (test_report_two_runs.py: the verdicts themselves)
    assert (
        "778 → 622.4 (-20%; " in rows[0] and "55.14 → 55.14 (+0%; inconclusive, 99% CI " in rows[0]
    )
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert links == ["history_vm_8f9f0ab5_cuda_0.png"]
    assert (tmp_path / links[0]).read_bytes()[:8] == PNG_MAGIC


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_each_gpu_of_a_node_has_its_own_history(h200, tmp_path):
    frame = labelled(
        *[
            run_at(h200, f"{day}-{gpu}", day, device=gpu)
            for day in ("2026-11-29", "2026-11-30")
            for gpu in ("cuda:0", "cuda:1")
        ]
    )
    runs = run_figures(frame)
    assert runs.groupby("device")["run_id"].apply(list).to_dict() == {
        "cuda:0": ["2026-11-29-cuda:0", "2026-11-30-cuda:0"],
        "cuda:1": ["2026-11-29-cuda:1", "2026-11-30-cuda:1"],
    }
    history.render(frame, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("history_*.png")) == [
        "history_vm_8f9f0ab5_cuda_0.png",
        "history_vm_8f9f0ab5_cuda_1.png",
    ]


def test_two_nodes_given_the_same_run_ids_each_have_their_own_history(h200, tmp_path):
    """`--run-id nightly-<day>` on two nodes of one store: four runs, two per node, never two merged
    runs."""

    def node(host: str, machine_id: str, run_id: str, day: str, **scales: float) -> pd.DataFrame:
        out = copy_of(h200, host, machine_id, "cuda:0", run_id, **scales)
        out["timestamp_utc"] = f"{day}T12:00:00+00:00"
        return out

    frame = labelled(
        *[
            node(host, machine_id, f"nightly-{day}", day, matmul_bf16=scale)
            for day in ("2026-11-29", "2026-11-30")
            for host, machine_id, scale in (
                ("node1", "aaaaaaaaaaaa", 1.0),
                ("node2", "cccccccccccc", 0.5),
            )
        ]
    )
    runs = run_figures(frame)
    assert runs.groupby("hostname")["run_id"].apply(list).to_dict() == {
        "node1": ["nightly-2026-11-29", "nightly-2026-11-30"],
        "node2": ["nightly-2026-11-29", "nightly-2026-11-30"],
    }
    bf16 = runs.groupby("hostname")["matmul_bf16_tflops"].median()
    # each node's own figures, not a fold of both
    assert bf16["node2"] / bf16["node1"] == pytest.approx(0.5, rel=0.01)


def test_a_run_without_headline_figures_is_no_point(h200, tmp_path):
    inference_only = run_at(h200, "inference-only", "2026-12-01")
    inference_only = inference_only[inference_only["workload"] == "inference"]
    assert run_figures(labelled(h200, inference_only)).empty


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_report_of_a_store_shows_the_history(h200, tmp_path):
    # the results store's layout: <store>/<machine_id>/<run_id>.csv
    store = tmp_path / "store" / "8f9f0ab5b928"
    store.mkdir(parents=True)
    for run_id, day in (("r1", "2026-11-29"), ("r2", "2026-12-05")):
        write_merged(run_at(h200, run_id, day), store / f"{run_id}.csv")
    report = build_report([tmp_path / "store"], tmp_path / "out", None).read_text(encoding="utf-8")
    assert "## History" in report and "(history_vm_8f9f0ab5_cuda_0.png)" in report
    assert (tmp_path / "out" / "history_vm_8f9f0ab5_cuda_0.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("higher_is_better, edge", [(True, 90.0), (False, 100 / 0.9)])
def test_history_panels_draw_the_reference_and_the_flag_edge(higher_is_better, edge):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    history._reference_lines(ax, 100.0, higher_is_better)
    # a device without a reference: nothing drawn
    history._reference_lines(ax, None, higher_is_better)
    assert [line.get_ydata()[0] for line in ax.get_lines()] == [100.0, pytest.approx(edge)]
    plt.close(fig)


def test_a_torch_version_is_labelled_where_it_starts_not_at_every_run():
    days = pd.to_datetime(
        ["2026-06-01", "2026-07-01", "2026-08-01", "2026-09-01", "2026-10-01"], utc=True
    )
    points = pd.DataFrame(
        {
            "torch": ["2.13.0", "2.13.0", "2.14.1", "2.14.1", "2.13.0"],
            "started": days,
            "tflops": [1.0, 2.0, 3.0, 4.0, 5.0],
        }
    )
    labels = history._torch_changes(points, "tflops")
    assert [(torch, value) for torch, _, value in labels] == [
        ("2.13.0", 1.0),
        ("2.14.1", 3.0),
        ("2.13.0", 5.0),
    ]


def machines_in(frame: pd.DataFrame) -> dict[str, list[int]]:
    """How history, health and before and after count the machines of `frame` (a read store): runs
    per machine in the History table, the labels Health judges, runs per machine in Before and
    after."""
    from gpubench.reports.judge import before_after, health
    from gpubench.reports.judge.aggregate import per_case
    from gpubench.reports.judge.load import run_key
    from gpubench.reports.judge.references import load_references

    judged = health.health_table(frame, per_case(frame), load_references())
    return {
        "history": list(history.history_table(run_figures(frame))["runs"]),
        "health": [judged["machine"].nunique()],
        "before_after": [len(keys) for _, keys in before_after.machine_runs(frame, run_key(frame))],
    }


def test_every_grouping_by_machine_reads_machine_id(h200, tmp_path):
    """One host, one CPU, one RAM size, one GPU model: two machine_ids of this schema are two
    machines (another GPU list of the node), in History, Health and Before and after alike; an older
    gpubench's rows, whose machine_id a kernel update changed, are one machine, read as one."""

    def store(name: str, ids: list[str], **cells: object) -> pd.DataFrame:
        folder = tmp_path / name
        folder.mkdir()
        for number, machine_id in enumerate(ids):
            day = f"2026-11-{number + 1:02d}"
            run = run_at(h200, f"r{number}", day).assign(machine_id=machine_id, **cells)
            write_merged(run.assign(os=f"Linux 6.{number}"), folder / f"r{number}.csv")
        return load_results([folder])

    current = store("current", ["aaaaaaaaaaaa", "bbbbbbbbbbbb"] * 2)
    assert machines_in(current) == {"history": [2, 2], "health": [2], "before_after": [2, 2]}
    old = store("old", ["8f9f0ab5b928", "0a1b2c3d4e5f"], schema_version=5)
    assert old["machine_id"].nunique() == 1
    assert machines_in(old) == {"history": [2], "health": [1], "before_after": [2]}
