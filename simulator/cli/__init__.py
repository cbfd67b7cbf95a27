"""The `endurance` command: a thin click layer over the library.

Each sub-module registers its commands on `main`; errors from the library are mapped
to one-line messages and exit codes here (2: bad input, 1: runtime failure).
"""

from __future__ import annotations

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

twin.twin_group.add_command(serve_command, "serve")

__all__ = ["main"]
