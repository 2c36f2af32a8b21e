"""gpubench harness: the library behind `pytest benches` and the `gpubench` command.

Layers import downward only: stats <- timing <- device/env <- cases <- workloads <- plugin/cli.
"""

__version__ = "0.1.0"
