# Loads gpubench's pytest plugin as the suite's (short options, the run set up at configure) for
# `pytest benches` and `pytest tests` run from this checkout; installed, the same plugin is also
# loaded, inert, by its entry point.
pytest_plugins = ["gpubench.harness.pytest_plugin.suite"]
