"""The suite's plugin as `gpubench run --tests` loads it for the user's own tests: set up at
configure, without the short options (`--device`, `--profile`), which a user's conftest.py often
declares itself."""

from __future__ import annotations

# torch-free
from gpubench.harness.processes.lifetime import HELD_INTERRUPT

# from the plugin's load: a Ctrl-C while pytest and torch load is raised at configure
HELD_INTERRUPT.hold()

pytest_plugins = ["gpubench.harness.pytest_plugin.plugin", "gpubench.harness.pytest_plugin.turns"]
