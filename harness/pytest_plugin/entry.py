"""The installed plugin's entry point (pyproject.toml: `[project.entry-points.pytest11] gpubench`).
It loads gpubench.harness.pytest_plugin.plugin under its module name, so the checkout's conftest.py and
`-p gpubench.harness.pytest_plugin.plugin` find it loaded and pytest never registers one module twice; the
plugin stays inert in a test run that does not use it (gpubench.harness.pytest_plugin.modes).
`-p no:gpubench` turns it off."""

pytest_plugins = ["gpubench.harness.pytest_plugin.plugin", "gpubench.harness.pytest_plugin.turns"]
