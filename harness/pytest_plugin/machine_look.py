"""The look at the machine before the first case: what else used it, torch's threads moved to the
free cores of a busy CPU, and the one line that says so (in every build, plain pytest and `gpubench
run` alike)."""

from __future__ import annotations

import pytest
import torch

from gpubench.harness.devices.machine_load import look, look_line, threads_for
from gpubench.harness.pytest_plugin.budget_hooks import say
from gpubench.harness.pytest_plugin.build_answer import this_build
from gpubench.harness.pytest_plugin.console import console_of
from gpubench.harness.pytest_plugin.run_state import RunState


def take_look(state: RunState) -> None:
    """Once, before the plan is priced: the look, and the threads that follow the free cores unless
    --threads set them (before the fingerprint, whose torch_threads is then what the cases ran
    with)."""
    if state.look is not None or state.load_meter is None:
        return
    state.look = look(state.load_meter, state.ctx.device)
    threads = None if state.threads_given else threads_for(state.look, torch.get_num_threads())
    if threads is not None:
        state.threads_moved = (torch.get_num_threads(), threads)
        torch.set_num_threads(threads)


def show_look(config: pytest.Config, state: RunState) -> None:
    """The first build says the look, quiet or busy; a later build only a busy one."""
    if state.look is None:
        return
    first = this_build(config) in (None, 0)
    # compact: its end line counts busy
    if not first and (not state.look.busy or console_of(config) is not None):
        return
    say(config, look_line(state.look, state.threads_moved, state.ctx.device))
