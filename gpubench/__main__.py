"""`python -m gpubench`: the `gpubench` command."""

import sys

from gpubench.harness.commands.cli import main

sys.exit(main())
