"""The fast loop's guard (tests/process_guard.py): under --no-processes an unmarked test that starts
a process fails by name; a marked one, a cheap helper program, and runs without the option go
through."""

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

GUARD = Path(__file__).with_name("process_guard.py").read_text()
SUITE = """
import multiprocessing, subprocess, sys
import pytest

def test_starts_python():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_starts_a_multiprocessing_child():
    child = multiprocessing.Process(target=print)
    child.start()
    child.join()

@pytest.mark.process
def test_marked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_git_is_cheap():
    subprocess.run(["git", "--version"], capture_output=True, check=True)
"""


@pytest.fixture
def guarded(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(process_guard=GUARD)
    pytester.makeconftest(
        "from process_guard import _no_processes, pytest_addoption, pytest_configure  # noqa: F401"
    )
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_unmarked_process_starts_fail_and_name_the_mark(guarded: pytest.Pytester) -> None:
    result = guarded.runpytest("--no-processes", "-m", "not process", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "*StartsProcess: this test starts a process (subprocess *python*mark it "
            "@pytest.mark.process*",
            "*StartsProcess: this test starts a process (multiprocessing)*",
        ]
    )


# the unguarded run really starts its interpreters: that is what it shows
@pytest.mark.process
def test_without_the_option_nothing_is_refused(guarded: pytest.Pytester) -> None:
    guarded.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=4)
