# Loads gpubench's pytest plugin for `pytest benches` and `pytest tests` run from this checkout.
pytest_plugins = ["harness.pytest_plugin.plugin"]
