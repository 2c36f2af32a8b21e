"""The suite's plugin as `gpubench run --tests` loads it for the user's own tests: the run set up at configure,
as gpubench.harness.pytest_plugin.suite does, but without the short options (`--device`, `--profile`): a user's
conftest.py often declares those for itself, and the run passes gpubench's own as `--gpubench-*`."""

from __future__ import annotations

from gpubench.harness.processes.lifetime import HELD_INTERRUPT  # torch-free

HELD_INTERRUPT.hold()  # from the plugin's load on: Ctrl-C while pytest and torch load is raised at configure (exit 2)

pytest_plugins = ["gpubench.harness.pytest_plugin.plugin", "gpubench.harness.pytest_plugin.turns"]
