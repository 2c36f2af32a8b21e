"""gpubench installed as a pytest plugin: inert in a test run that does not use it, and a user's own
benchmark (`gpubench.measure` in a test of their own repository) recorded, reported and compared
like the suite's cases. The plugin is loaded the way an installed gpubench loads it: pytest finds
the `pytest11` entry point of pyproject.toml in a distribution's metadata on sys.path."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import tomllib
from runs import GPUBENCH, ONE_CASE_BENCH, REPO, run_bench, run_bench_process

from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.results_reader import read_rows
from gpubench.reports.render.build import build_report
from gpubench.reports.render.compare import compare_paths

pytest_plugins = ["pytester"]

PLAIN_CONFTEST = """
import pytest


def pytest_addoption(parser):
    # a user's own --device: the suite's short form would collide
    parser.addoption("--device", default="cpu")


@pytest.fixture
def device(request):
    return request.config.getoption("--device")
"""

LOADED_MODULES = """

def pytest_unconfigure(config):
    import sys
    plugin = "gpubench.harness.pytest_plugin.plugin"
    print("plugin loaded:", config.pluginmanager.has_plugin(plugin))
    print("heavy modules:", sorted(m for m in ("torch", "pandas", "numpy") if m in sys.modules))
"""

PLAIN_TESTS = """
import pytest


@pytest.mark.parametrize("n", [3, 1, 2])
def test_numbers(n, device):
    assert device == "cpu" and n > 0


def test_fails():
    assert False


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass
"""

USER_MODEL_TEST = '''
import pytest
import torch


def make_step(device):
    """A tiny MLP's training step on `device`: the user's own code."""
    torch.manual_seed(0)
    layers = (torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    model = torch.nn.Sequential(*layers).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 32, device=device), torch.randint(0, 10, (64,), device=device)

    def step():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def test_train_step(gpubench):
    rows = gpubench.measure(make_step(gpubench.device), name="tinymlp/train", params={"batch": 64},
                            work={"samples": 64, "tokens": 64 * 32},
                            figures=lambda stats, loss: {"loss": float(loss)})
    assert [row["status"] for row in rows] == ["ok"]
    with pytest.raises(ValueError,
                       match="builds=2 needs setup= .* one callable timed again is not an "
                             "independent build"):
        gpubench.measure(lambda: None, name="tinymlp/again", builds=2)


def test_builds(gpubench):
    rows = gpubench.measure(setup=lambda: make_step(gpubench.device), name="tinymlp/fresh",
                            builds=2)
    assert [row["build"] for row in rows] == [0, 1]


def test_plain():
    assert 1 + 1 == 2
'''


def install_entry_point(site: Path) -> None:
    """A distribution's metadata declaring pyproject.toml's pytest11 entry points, as pip installs
    it."""
    entry_points = tomllib.loads((Path(REPO) / "pyproject.toml").read_text())["project"][
        "entry-points"
    ]["pytest11"]
    info = site / "gpubench_under_test-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gpubench-under-test\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[pytest11]\n" + "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    )


@pytest.fixture
def installed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> pytest.Pytester:
    """A pytester folder (a user's repository) where gpubench's entry point is installed."""
    site = tmp_path / "site"
    install_entry_point(site)
    # in-process runs find it through importlib.metadata
    monkeypatch.syspath_prepend(str(site))
    # and the processes a test starts
    monkeypatch.setenv("PYTHONPATH", f"{site}:{REPO}")
    monkeypatch.setenv("GPUBENCH_DOWNLOAD", "0")
    return pytester


class Observer:
    """What a test run leaves in pytest's state: its options, markers, order and signal handlers."""

    def __init__(self) -> None:
        self.options: dict = {}
        self.markers: list[str] = []
        self.order: list[str] = []
        self.handlers: list[tuple] = []
        self.plugin_loaded = False

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.order = [item.nodeid for item in session.items]

    def pytest_runtest_call(self, item: pytest.Item) -> None:
        self.handlers.append(
            tuple(signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
        )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.plugin_loaded = config.pluginmanager.has_plugin(
            "gpubench.harness.pytest_plugin.plugin"
        )
        # the plugin's own --gpubench-* options are the only ones it adds; -p is how the other run
        # turned it off
        self.options = {
            k: v
            for k, v in vars(config.option).items()
            if not k.startswith("gpubench_") and k != "plugins"
        }
        self.markers = config.getini("markers")


def observed_run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, Observer]:
    observer = Observer()
    result = pytester.runpytest("-p", "no:cacheprovider", *args, plugins=[observer])
    return result, observer


# A user's own fixture by the plugin's fixture name: theirs, and the plugin stays off.
OWN_GPUBENCH_FIXTURE = """
import pytest


@pytest.fixture
def gpubench():
    return "the user's"
"""


@pytest.mark.parametrize(
    "others",
    [(), ("-p", "no:benchmark")],
    ids=["with-pytest-benchmark", "without-pytest-benchmark"],
)
@pytest.mark.parametrize("own_fixture", [False, True], ids=["plain", "own-gpubench-fixture"])
def test_the_installed_plugin_leaves_an_unrelated_suite_as_it_was(installed, others, own_fixture):
    installed.makeconftest(PLAIN_CONFTEST + (OWN_GPUBENCH_FIXTURE if own_fixture else ""))
    installed.makepyfile(
        test_plain=PLAIN_TESTS
        + (
            '\n\ndef test_own(gpubench):\n    assert gpubench == "the user\'s"\n'
            if own_fixture
            else ""
        )
    )
    without, plain = observed_run(installed, "-p", "no:gpubench", *others)
    # pytest-benchmark's .benchmarks/ too
    before = sorted(p.relative_to(installed.path) for p in installed.path.rglob("*"))
    used, loaded = observed_run(installed, *others)
    # the comparison is between the two
    assert loaded.plugin_loaded and not plain.plugin_loaded
    assert (
        used.parseoutcomes()
        == without.parseoutcomes()
        == {"passed": 3 + own_fixture, "failed": 1, "skipped": 1}
    )
    # no option changed (--benchmark-timer included)
    assert loaded.options == plain.options
    assert (loaded.order, loaded.markers, loaded.handlers) == (
        plain.order,
        plain.markers,
        plain.handlers,
    )
    assert not [
        line for line in used.outlines if "gpubench" in line and not line.startswith("plugins:")
    ]
    # no results folder, no file
    assert sorted(p.relative_to(installed.path) for p in installed.path.rglob("*")) == before


# pytest-xdist's workers are processes of their own
@pytest.mark.process
@pytest.mark.parametrize(
    "others",
    [(), ("-p", "no:benchmark")],
    ids=["with-pytest-benchmark", "without-pytest-benchmark"],
)
def test_the_installed_plugin_leaves_an_unrelated_suite_under_xdist_as_it_was(installed, others):
    installed.makeconftest(PLAIN_CONFTEST)
    installed.makepyfile(test_plain=PLAIN_TESTS)
    without = installed.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "-p", "no:gpubench", *others
    )

    # pytester's own (its subprocess's output and temporary folders) left out
    def files() -> list[Path]:
        found = (p.relative_to(installed.path) for p in installed.path.rglob("*"))
        return sorted(
            p
            for p in found
            if not p.parts[0].startswith("runpytest") and p.suffix not in (".stdout", ".stderr")
        )

    before = files()
    used = installed.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", *others)
    assert used.ret == without.ret == 1 and used.parseoutcomes() == without.parseoutcomes() == {
        "passed": 3,
        "failed": 1,
        "skipped": 1,
    }
    assert not [
        line for line in used.outlines if "gpubench" in line and not line.startswith("plugins:")
    ]
    assert files() == before


# a fresh interpreter: this test process imported torch long ago
@pytest.mark.process
def test_an_unrelated_suite_loads_no_torch_through_the_installed_plugin(installed):
    installed.makeconftest(PLAIN_CONFTEST + LOADED_MODULES)
    installed.makepyfile(test_plain=PLAIN_TESTS)
    result = installed.runpytest_subprocess("-p", "no:cacheprovider")
    assert "plugin loaded: True" in result.outlines and "heavy modules: []" in result.outlines, (
        result.stdout.str()
    )


def slowed_copy(csv: Path, folder: Path, factor: float) -> Path:
    """The run's rows with every time `factor` times longer, as another run would record them."""
    folder.mkdir()
    writer = ResultsWriter(folder, "slowed")
    for row in read_rows(csv):
        times = {k: row[k] * factor for k in ("median_s", "min_s", "mean_s")}
        writer.append(
            dict(row, run_id="slowed", samples_s=[s * factor for s in row["samples_s"]], **times)
        )
    writer.close()
    return folder / "slowed.csv"


# pytest-benchmark's JSON asks py-cpuinfo for the machine, which runs dmesg and lscpu
@pytest.mark.process
def test_a_users_own_model_is_recorded_reported_and_compared(installed):
    # not test_model: tests/test_model.py is imported by that name
    installed.makepyfile(test_users_model=USER_MODEL_TEST)
    # no gpubench option: set up by the fixture
    result = installed.runpytest("-p", "no:cacheprovider", "--benchmark-json=bench.json")
    assert result.parseoutcomes() == {"passed": 3}, result.stdout.str()[-3000:]
    [csv] = (installed.path / "results").glob("*.csv")
    rows = {(row["case_id"], row["build"]): row for row in read_rows(csv)}
    assert sorted(rows) == [
        ("tinymlp/fresh", 0),
        ("tinymlp/fresh", 1),
        ("tinymlp/train-batch=64", 0),
    ]
    train = rows[("tinymlp/train-batch=64", 0)]
    assert (train["workload"], train["params"], train["status"], train["builds"]) == (
        "tinymlp",
        {"batch": 64},
        "ok",
        1,
    )
    assert train["samples_per_s"] == pytest.approx(64 / train["median_s"])
    assert train["user_figures"]["tokens_per_s"] == pytest.approx(64 * 32 / train["median_s"])
    assert 0 < train["user_figures"]["loss"] < 10 and len(train["samples_s"]) == train["rounds"]
    assert train["hostname"] and train["torch_version"] and train["device"] == "cpu"
    assert rows[("tinymlp/fresh", 1)]["builds"] == 2
    # pytest-benchmark's JSON: the same rounds, the synced clock
    bench = json.loads((installed.path / "bench.json").read_text())
    [timed] = [b for b in bench["benchmarks"] if b["name"] == "test_train_step"]
    assert (
        timed["extra_info"]["case_id"] == "tinymlp/train-batch=64"
        and "build_clock" in timed["options"]["timer"]
    )
    assert (
        timed["stats"]["median"] == pytest.approx(train["median_s"])
        and bench["gpubench"]["hostname"]
    )

    report = build_report([csv], installed.path / "report", baseline=None).read_text()
    table = report.split("## tinymlp", 1)[1].split("\n## ", 1)[0]
    assert "| train-batch=64 |" in table and "| fresh |" in table and "user.tokens_per_s" in table

    # judged like the suite's cases: matched by case id, the ratio of medians, a verdict (which one
    # depends on this machine's noise: another engineer's tests on the same cores make it
    # inconclusive, or flag the rows busy on both sides, the copy's too: then the load alone could
    # have made it, "cannot judge: busy", exit 6)
    text, code = compare_paths(
        csv, slowed_copy(csv, installed.path / "slowed", 3.0), threshold=0.05
    )
    verdicts = {
        cells[1].strip(): cells[8].split()[0]
        for cells in (
            line.split("|") for line in text.splitlines() if line.startswith("| tinymlp/")
        )
    }
    assert set(verdicts) == {"tinymlp/train-batch=64", "tinymlp/fresh"}, text
    busy = any("busy" in str(row["flags"]).split(";") for row in read_rows(csv))
    assert set(verdicts.values()) <= {"slower", "inconclusive", *(["cannot"] if busy else [])}, text
    assert "| 3.000 |" in text
    assert code == (
        1 if "slower" in verdicts.values() else 6 if "cannot" in verdicts.values() else 0
    )


def test_a_gpubench_option_sets_the_run_up_at_configure_with_one_line_for_a_bad_value(installed):
    # not test_model: tests/test_model.py is imported by that name
    installed.makepyfile(test_users_model=USER_MODEL_TEST)
    result = installed.runpytest(
        "-p", "no:cacheprovider", "--gpubench-profile=fastest", "-k", "plain"
    )
    # no test uses the fixture: the option alone sets it up
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.startswith("ERROR:")] == [
        "ERROR: unknown profile 'fastest': use --profile quick, full or smoke"
    ]


# the suite's plugin holds Ctrl-C and signals as a command-line pytest: its own process
@pytest.mark.process
def test_the_checkouts_conftest_keeps_the_suites_options_where_the_plugin_is_installed(installed):
    installed.makeconftest('pytest_plugins = ["gpubench.harness.pytest_plugin.suite"]\n')
    installed.makepyfile(bench_tiny=ONE_CASE_BENCH)
    result = installed.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "bench_tiny.py",
        "--benchmark-only",
        "--profile=smoke",
        "--device=cpu",
        "--results-dir=out",
    )
    assert result.ret == 0, result.stderr.str()[-2000:]
    # set up at configure
    assert any(line.startswith("gpubench: device cpu, profile smoke") for line in result.outlines)
    assert [row["case_id"] for row in read_rows(next((installed.path / "out").glob("*.csv")))] == [
        "matmul/n8"
    ]


USER_AB_TEST = """
import torch


def test_my_matmul(gpubench):
    gpubench.measure(setup=lambda: (lambda a=torch.randn(64, 64): a @ a), name="mine/matmul",
                     params={"n": 64})
"""


# a whole paired session: gpubench ab starts each side's builds as processes
@pytest.mark.process
def test_ab_pairs_a_users_own_tests_build_by_build(tmp_path):
    import subprocess

    from gpubench.harness.records.results_reader import read_rows

    user = tmp_path / "myrepo"
    user.mkdir()
    (user / "test_mine.py").write_text(USER_AB_TEST)
    out = tmp_path / "out"
    result = subprocess.run(
        [
            *GPUBENCH,
            "ab",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--pairs",
            "3",
            "--tests",
            str(user),
            "--results-dir",
            str(out),
            "--run-id",
            "s",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=user,
    )
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    for side in "AB":
        rows = read_rows(out / f"s-{side}.csv")
        assert sorted((row["case_id"], row["build"]) for row in rows) == [
            ("mine/matmul-n=64", 0),
            ("mine/matmul-n=64", 1),
            ("mine/matmul-n=64", 2),
        ]
    # judged in the session's table
    assert "| mine/matmul-n=64 |" in result.stdout
    missing = subprocess.run(
        [
            *GPUBENCH,
            "ab",
            "--tests",
            str(user / "nothere.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        missing.returncode == 4
        and "--tests" in missing.stderr
        and "no such file or folder" in missing.stderr
    )


# A user's suite that declares --device and --profile for itself, as many ML suites do.
OWN_OPTIONS_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--device", default="their-device")
    parser.addoption("--profile", default="their-profile")
"""

OWN_OPTIONS_TEST = """
def test_mine(gpubench, request):
    options = (request.config.getoption("--device"), request.config.getoption("--profile"))
    assert options == ("their-device", "their-profile")
    # gpubench's own --device reached the run under its own name
    assert gpubench.device.type == "cpu"
    gpubench.measure(lambda: sum(range(1000)), name="mine/sum")
"""


# gpubench run starts the builds as processes
@pytest.mark.process
def test_a_users_suite_that_declares_device_and_profile_itself_runs_with_its_own_values(tmp_path):
    import subprocess

    from gpubench.harness.records.results_reader import read_rows

    user = tmp_path / "myrepo"
    user.mkdir()
    (user / "conftest.py").write_text(OWN_OPTIONS_CONFTEST)
    (user / "test_mine.py").write_text(OWN_OPTIONS_TEST)
    out = tmp_path / "out"
    result = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--tests",
            str(user),
            "--results-dir",
            str(out),
            "--run-id",
            "own",
            "--no-report",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=user,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert [
        (row["case_id"], row["status"], row["profile"]) for row in read_rows(out / "own.csv")
    ] == [("mine/sum", "ok", "smoke")]


FRESH_BUILDS_TEST = """
def test_fresh(gpubench):
    gpubench.measure(setup=lambda: (lambda: sum(range(1000))), name="mine/fresh", builds=3)


def test_once(gpubench):
    gpubench.measure(lambda: sum(range(1000)), name="mine/once")
"""


# gpubench run starts the builds as processes
@pytest.mark.process
def test_a_users_fresh_builds_under_gpubench_run_are_one_build_process_each(tmp_path):
    """measure(setup=..., builds=3) under gpubench run: the first build process asks for 3 builds,
    and build K of the test is made in process K, as a suite case's; none is made twice (the run's
    file refused a second copy)."""
    import subprocess

    from gpubench.harness.records.results_reader import read_rows

    (tmp_path / "test_mine.py").write_text(FRESH_BUILDS_TEST)
    out = tmp_path / "out"
    result = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--tests",
            str(tmp_path / "test_mine.py"),
            "--results-dir",
            str(out),
            "--run-id",
            "fresh",
            "--no-report",
            "--budget",
            "1m",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [(row["case_id"], row["build"], row["builds"]) for row in read_rows(out / "fresh.csv")]
    fresh = sorted(build for case_id, build, _ in rows if case_id == "mine/fresh")
    # an extra build may add build 3, 4...
    assert fresh[:3] == [0, 1, 2] and len(set(fresh)) == len(fresh), rows
    assert [build for case_id, build, _ in rows if case_id == "mine/once"] == [0], rows


COMPARED_TEST = """
def test_sum(gpubench):
    gpubench.measure(lambda: sum(range(2000)), name="mine/sum")
"""


def test_pytest_benchmarks_compare_workflow_sees_the_same_machine_info_in_every_run(
    installed, machine_info_in_process
):
    """--benchmark-autosave, then --benchmark-compare: pytest-benchmark checks the saved
    machine_info against the one it builds at configure, before the test asked for the fixture; a
    gpubench key in one of them warned on every compare, an INTERNALERROR under filterwarnings =
    error."""
    installed.makepyfile(test_compared=COMPARED_TEST)
    installed.makeini(
        "[pytest]\nfilterwarnings =\n    error\n    ignore:.*pin_memory.*:UserWarning\n"
    )
    # no gpubench option: the fixture switches the plugin on after collection, as in a user's
    # project
    common = ("-p", "no:cacheprovider")
    assert installed.runpytest(*common, "--benchmark-autosave").ret == 0
    compared = installed.runpytest(*common, "--benchmark-autosave", "--benchmark-compare")
    assert compared.ret == 0, compared.stdout.str()[-3000:]
    assert "machine_info is different" not in compared.stdout.str() + compared.stderr.str()
    saved = sorted((installed.path / ".benchmarks").rglob("*.json"))
    assert len(saved) == 2 and all(
        json.loads(path.read_text())["gpubench"]["device"] == "cpu" for path in saved
    )


# gpubench run starts the builds as processes
@pytest.mark.process
def test_a_users_test_file_that_cannot_be_collected_is_named_not_taken_for_a_ctrl_c(tmp_path):
    """pytest stops a session whose collection failed as 'interrupted' (2): it read 'interrupted …
    re-run with another --run-id', exit 130. An empty --tests folder blamed a -k/-m no one gave."""
    import subprocess

    def gpubench_run(folder):
        return subprocess.run(
            [
                *GPUBENCH,
                "run",
                "--device",
                "cpu",
                "--profile",
                "smoke",
                "--tests",
                str(folder),
                "--results-dir",
                str(tmp_path / "out"),
                "--no-report",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "test_bad.py").write_text("def test_a(gpubench:\n    pass\n")
    done = gpubench_run(broken)
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        "gpubench: 1 test file(s) could not be collected (pytest's error "
        "above): fix them, then run again"
    )
    assert "interrupted" not in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "helpers.py").write_text("X = 1\n")
    done = gpubench_run(empty)
    assert (
        done.returncode == 5
        and (
            f"--tests {empty}: pytest collected no test there: nothing was run — name files "
            "that hold test_"
        )
        in done.stderr
    )


def saved_then_made_faster(pytester: pytest.Pytester) -> Path:
    """A --benchmark-save of the one-case bench whose times are then divided by 100: the next run
    regressed."""
    assert run_bench(pytester, "--benchmark-storage=store", "--benchmark-save=base").ret == 0
    return made_faster(pytester.path / "store")


def made_faster(store: Path) -> Path:
    """The saved runs' times divided by 100."""
    for path in store.rglob("*.json"):
        data = json.loads(path.read_text())
        for bench in data["benchmarks"]:
            bench["stats"].update(
                {k: bench["stats"][k] / 100 for k in ("min", "max", "mean", "median")}
            )
        path.write_text(json.dumps(data))
    return store


COMPARE_FAIL = ("--benchmark-compare=0001", "--benchmark-compare-fail=min:5%")


# the exit status is the process's: the suite's plugin leaves through exit_process
@pytest.mark.process
def test_benchmark_compare_fail_ends_the_suites_session_as_without_gpubench(one_case):
    """pytest-benchmark raises its PerformanceRegression from the terminal summary: plain pytest
    exits 1 on it, the suite's plugin exited with the session's status, 0."""
    saved_then_made_faster(one_case)
    result = run_bench_process(one_case, "--benchmark-storage=store", *COMPARE_FAIL)
    assert result.ret == 1, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    assert "Performance has regressed" in result.stdout.str() + result.stderr.str()


# the exit status is the process's
@pytest.mark.process
def test_benchmark_compare_fail_in_a_users_project_exits_1_as_without_gpubench(
    installed, machine_info_in_process
):
    """Installed, the plugin leaves the process to pytest: pytest-benchmark's verdict ends a user's
    run with exit 1."""
    installed.makepyfile(test_compared=COMPARED_TEST)
    assert (
        installed.runpytest(
            "-p", "no:cacheprovider", "--benchmark-storage=store", "--benchmark-save=base"
        ).ret
        == 0
    )
    made_faster(installed.path / "store")
    result = installed.runpytest_subprocess(
        "-p", "no:cacheprovider", "--benchmark-storage=store", *COMPARE_FAIL
    )
    assert result.ret == 1, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    assert "Performance has regressed" in result.stdout.str() + result.stderr.str()


# gpubench run starts the builds as processes
@pytest.mark.process
def test_benchmark_compare_fail_under_gpubench_run_is_a_failed_comparison(one_case):
    """It read 'build 1 of 1 ended with exit 3, pytest's internal error above', exit 3."""
    import subprocess

    store = saved_then_made_faster(one_case)
    done = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--tests",
            str(one_case.path / "bench_tiny.py"),
            "--results-dir",
            str(one_case.path / "res"),
            "--no-report",
            f"--benchmark-storage={store}",
            *COMPARE_FAIL,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=one_case.path,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert (
        "Performance has regressed" in done.stdout + done.stderr
        and "internal error" not in done.stderr
    )
