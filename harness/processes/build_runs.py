"""A run of builds: build k of every case in process k, one after the other through a Launcher, and
how each build's end ends the run or lets the next start. Torch-free."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gpubench.harness.processes.launch import (
    NO_TESTS,
    Completed,
    Job,
    Launcher,
    signal_death,
    signal_name,
    stop_requests,
)
from gpubench.harness.core.options import MAX_BUILDS
from gpubench.harness.processes.protocol import BuildAnswer
from gpubench.harness.core.exits import (
    BUILD_INTERRUPTED,
    NO_CASES_LINE,
    RUN_OUTCOMES,
    SIGNAL_BASE,
    ExitCode,
)


@dataclass
class BuildsOutcome:
    # the worst exit code, or the one that stopped the run
    code: int
    builds: int
    stopped: bool = False
    notes: list[str] = field(default_factory=list)
    # which build process a signal killed, and how: 'build 2 of 3 was killed by SIGKILL (...)'
    died: str = ""
    # a later build that ended the run with an exit of its own: 'build 2 of 3 ended with exit 4'
    cut_short: str = ""
    # the build the launcher cut from outside past the run's end: 'build 1 of 1 (in test_x) did not
    # ...'
    cut: str = ""
    # what each build answered, in order
    answers: list[BuildAnswer] = field(default_factory=list)


def signal_exit(signum: int) -> int:
    """2 for SIGINT (pytest's interrupted; gpubench run says 130), else 128 + N."""
    return BUILD_INTERRUPTED if signum == signal.SIGINT else SIGNAL_BASE + signum


def run_builds(
    launcher: Launcher,
    job_for: Callable[[int, int | None], Job],
    stop_codes: tuple[int, ...],
    on_build: Callable[[int, int], None] = lambda build, builds: None,
    more: Callable[[int, list[BuildAnswer]], bool] = lambda build, answers: False,
) -> BuildsOutcome:
    """Build k of every case in process k (separate processes sample memory layout, thread placement
    and another moment of the machine). `job_for(build, builds)`: builds is None until the first
    build's answer tells the count; after them, `more(build, answers)` says whether an extra build
    starts (the budget's time left)."""
    worst, builds, build, known = 0, 1, 0, None
    answers: list[BuildAnswer] = []
    with stop_requests() as request:
        while build < builds or more(build, answers):
            # arrived between two builds: start no other
            if request.signum:
                note = f"{signal_name(request.signum)} received: no build started after it"
                return BuildsOutcome(
                    signal_exit(request.signum), builds, True, [note], answers=answers
                )
            on_build(build, builds)
            job = job_for(build, known)
            done = launcher.run(job)
            answers += [done.answer] if done.answer is not None else []
            count = done.answer.builds if done.answer is not None and build == 0 else None
            request.signum = request.signum or done.signal
            if done.code == NO_TESTS and build == 0 and not request.signum:
                return BuildsOutcome(done.code, 0, True, [NO_CASES_LINE], answers=answers)
            # read even from a process that died after its collection: 'build 1 of 3'
            if count is not None:
                builds = known = min(MAX_BUILDS, max(1, count))
            if build >= builds and done.code == NO_TESTS and not request.signum:
                # an extra build with no case left to repeat: the run is whole
                break
            where = (
                f"build {build + 1} of {builds}" if build < builds else f"extra build {build + 1}"
            )
            outcome = build_outcome(
                done,
                request.signum,
                where,
                builds,
                stop_codes,
                later=build > 0,
                model=model_of(job),
            )
            # an earlier build's failed case still counts: exit 1, not a later build's 0
            if outcome is not None:
                return replace(outcome, code=max(outcome.code, worst), answers=answers)
            worst = max(worst, done.code if done.code != NO_TESTS else 0)
            build += 1
        # came as the last build ended: every build ran, but the run was asked to stop
        if request.signum:
            return BuildsOutcome(signal_exit(request.signum), builds, True, answers=answers)
    return BuildsOutcome(worst, builds, answers=answers)


# A later build's stop, named (the first build's usage error is pytest's one ERROR line, enough
# alone).
LATER_STOPS = {
    3: "pytest's internal error, above",
    4: "a usage error, above",
    NO_TESTS: "it selected no case, though the first build's collection asked for more builds",
}


def model_of(job: Job) -> str:
    """The --model factory a build makes before its cases (`module:factory`), '' without one."""
    spec = job.plan.run.model if job.plan is not None else None
    return spec.target if spec is not None else ""


def build_outcome(
    done: Completed,
    signum: int,
    where: str,
    builds: int,
    stop_codes: tuple[int, ...],
    later: bool = False,
    model: str = "",
) -> BuildsOutcome | None:
    """How one build's end ends the run, or None when the next build starts; `model`: the --model
    factory it makes before its cases, named when the build ends there."""
    code = done.code
    # this process got a signal: the run stops after this build, whatever it exited with
    if signum:
        notes = [f"{where} {done.stalled}"] if done.stalled else []
        return BuildsOutcome(signal_exit(signum), builds, True, notes)
    # a case cut past the budget fails the run, as the in-process cut does
    if done.cut:
        return BuildsOutcome(
            ExitCode.FAILED, builds, True, cut=f"{where}{case_in_progress(done, model)} {done.cut}"
        )
    # ProcessLauncher killed it: stopped for too long
    if done.stalled:
        return BuildsOutcome(128 + signal.SIGKILL, builds, True, died=f"{where} {done.stalled}")
    # killed: not an exit pytest chose
    if code < 0 or (code not in stop_codes and signal_death(code)):
        return BuildsOutcome(
            code if code >= 0 else 128 - code,
            builds,
            True,
            died=f"{where}{before_cases(done, model)} was killed by {signal_death(code)}",
        )
    if done.vanished:
        return BuildsOutcome(
            ExitCode.FAILED,
            builds,
            True,
            died=f"{where} ended with exit 0 before pytest finished, without a word: "
            "its code (a --model factory, a conftest or a test) called os._exit",
        )
    # neither pytest's code nor the plugin's: the build's own
    if code not in PYTEST_EXITS and code not in OWN_EXITS:
        return BuildsOutcome(
            ExitCode.FAILED,
            builds,
            True,
            died=f"{where} ended with exit {code}, " + foreign_exit(done),
        )
    # no later build either: a build with no case means the rest have none
    if later and code in LATER_STOPS:
        return BuildsOutcome(
            0 if code == NO_TESTS else code,
            builds,
            True,
            cut_short=f"{where} ended with exit {code} ({LATER_STOPS[code]}): no later build "
            "started",
        )
    # pytest's INTERNALERROR: its own lines above say what raised; what was kept is ours
    if code == ExitCode.INTERNAL:
        return BuildsOutcome(
            code, builds, True, [f"{where} ended with exit 3, pytest's internal error above"]
        )
    if code in stop_codes:
        return BuildsOutcome(code, builds, True)
    return None


# pytest.ExitCode: 0 passed ... 5 no tests collected
PYTEST_EXITS = range(6)
# the plugin's own: 75 results full, 129, 130, 143
OWN_EXITS = frozenset(int(code) for code in ExitCode if code not in RUN_OUTCOMES)


def foreign_exit(done: Completed) -> str:
    """Who chose an exit code that is neither pytest's nor gpubench's, from the build's last
    answer."""
    code, session = done.code, done.answer.exit_code if done.answer is not None else None
    if session is None:
        return (
            "a code pytest never gives, before pytest finished: the build's own code (a --model "
            "factory, a conftest, a test or a thread of theirs) ended the process with it "
            f"(os._exit({code}))"
        )
    if session == code:
        return f"which a plugin or conftest gave pytest (pytest.exit(returncode={code}))"
    return (
        f"a code pytest never gives, after its session ended with {session}: an atexit handler or "
        "a plugin's unconfigure ended the process with it"
    )


def case_in_progress(done: Completed, model: str = "") -> str:
    """' (in <test id>)' when the build's last answer named the case it had started, ' (before
    collecting ...)' when it never answered its collection (the --model factory `model` and its
    check, a conftest, an import), else ''."""
    if done.answer is None:
        return (
            before_cases(done, model) or " (before collecting its cases: a conftest or an import)"
        )
    return f" (in {done.answer.case})" if done.answer.case else ""


def before_cases(done: Completed, model: str) -> str:
    """' (in the --model factory X or its check, before its cases)' for a build that ended before
    answering its collection while making the user's model, else ''."""
    if done.answer is not None or not model:
        return ""
    return (
        f" (in --model {model}: the factory or its check of one batch, before collecting its cases)"
    )
