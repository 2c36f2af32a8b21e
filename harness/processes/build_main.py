"""The entry of a build process (`python -m harness.processes.build_main <pytest arguments>`), as `gpubench
run` and `gpubench ab` start one: pytest's command line with Ctrl-C held from the first line.

The launcher starts it with SIGINT blocked (harness.processes.launch.ProcessLauncher): a Ctrl-C that comes
while the interpreter starts stays pending until the handler below is in, and one that comes
while pytest, its plugins and torch import is held, then raised at the session's first hook
(harness.pytest_plugin.plugin), instead of a KeyboardInterrupt traceback from an import."""

from __future__ import annotations

import signal
import sys

from harness.core.exits import BUILD_INTERRUPTED
from harness.processes.lifetime import HELD_INTERRUPT


def main() -> int:
    HELD_INTERRUPT.hold()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a pending Ctrl-C arrives here, held
    import pytest

    code = int(pytest.main())  # pytest's own command line: sys.argv[1:], no extra plugins
    # a Ctrl-C held while pytest never reached its session (a usage error first) is still an interrupt
    return BUILD_INTERRUPTED if HELD_INTERRUPT.pending and code in (0, 1, 5) else code


if __name__ == "__main__":
    sys.exit(main())
