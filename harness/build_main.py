"""The entry of a build process (`python -m harness.build_main <pytest arguments>`), as `gpubench
run` and `gpubench ab` start one: pytest's command line with Ctrl-C held from the first line.

The launcher starts it with SIGINT blocked (harness.launch.ProcessLauncher): a Ctrl-C that comes
while the interpreter starts stays pending until the handler below is in, and one that comes
while pytest, its plugins and torch import is held, then raised at the session's first hook
(harness.plugin), instead of a KeyboardInterrupt traceback from an import."""

from __future__ import annotations

import signal
import sys

from harness.lifetime import HELD_INTERRUPT, INTERRUPTED_EXIT


def main() -> int:
    HELD_INTERRUPT.hold()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a pending Ctrl-C arrives here, held
    import pytest

    code = int(pytest.main())  # pytest's own command line: sys.argv[1:], no extra plugins
    # a Ctrl-C held while pytest never reached its session (a usage error first) is still an interrupt
    return INTERRUPTED_EXIT if HELD_INTERRUPT.pending and code in (0, 1, 5) else code


if __name__ == "__main__":
    sys.exit(main())
