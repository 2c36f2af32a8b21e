"""The suite's plugin as the checkout's conftest.py loads it: the plugin with the short options
(`--profile`) and the run set up at configure, even where the installed entry point loaded it first,
inert."""

from __future__ import annotations

import pytest

# torch-free
from gpubench.harness.processes.lifetime import HELD_INTERRUPT
from gpubench.harness.pytest_plugin.modes import add_suite_options

# from the conftest's load: a Ctrl-C while pytest and torch load is raised at configure
HELD_INTERRUPT.hold()

pytest_plugins = ["gpubench.harness.pytest_plugin.plugin", "gpubench.harness.pytest_plugin.turns"]


# after the other plugins: the short forms skip the options they own
@pytest.hookimpl(trylast=True)
def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    add_suite_options(parser, pluginmanager)
