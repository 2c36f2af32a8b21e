"""The installed plugin's pytest11 entry point: it loads the plugin under its module name, so the
conftest.py and `-p gpubench.harness.pytest_plugin.plugin` find it loaded and pytest never registers
one module twice. Inert in a test run that does not use it; `-p no:gpubench` turns it off."""

pytest_plugins = ["gpubench.harness.pytest_plugin.plugin", "gpubench.harness.pytest_plugin.turns"]
