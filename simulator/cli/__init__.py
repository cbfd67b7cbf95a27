"""The `endurance` command: a thin click layer over the library.

Each sub-module registers its commands on `main`; errors from the library are mapped
to one-line messages and exit codes here (2: bad input, 1: runtime failure).
"""

from __future__ import annotations

import sys

try:        # Ctrl-C in the second or so these imports take: one line and 130, as later
    from simulator.cli import (  # noqa: F401  (registers commands)
        analysis,
        check,
        export,
        importer,
        run,
        sweep,
        twin,
        watch,
    )
    from simulator.cli._app import main
    from simulator.cli.twin_serve import serve_command
except KeyboardInterrupt:
    sys.stderr.write("error: interrupted\n")
    raise SystemExit(130) from None

twin.twin_group.add_command(serve_command, "serve")

__all__ = ["main"]
