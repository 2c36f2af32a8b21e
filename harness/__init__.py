"""gpubench harness: the library behind `pytest benches` and the `gpubench` command.

Layers import downward only (docs/architecture.md; tests/test_layering.py checks it): pure
statistics and declarations <- schema and results <- devices and the clock <- one measurement <-
workloads <- the pytest plugin and the command line. reports/ sits on the results reader,
torch-free.
"""

__version__ = "0.1.0"
