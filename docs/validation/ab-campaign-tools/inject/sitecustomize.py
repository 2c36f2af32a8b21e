"""Python imports this at start when its folder is on PYTHONPATH: installs slowdown.py's wrappers
(GPUBENCH_SLOW_TARGETS, GPUBENCH_SLOW_FACTOR; nothing when unset)."""

import slowdown

slowdown.install_from_env()
