"""A scenario name becomes part of a directory name (the run id): printable, no path
separators, no control or bidi characters (issue 29)."""

from __future__ import annotations

from simulator.util.visible import first_hidden


def check_name(name: str) -> str:
    """`name` unchanged, or ValueError naming the character that cannot be in it."""
    hidden = first_hidden(name)
    if hidden is not None:
        raise ValueError(f"must not contain control or bidi characters (found {hidden})")
    for bad in ("/", "\\"):
        if bad in name:
            raise ValueError(f"must not contain {bad!r} (it becomes a directory name)")
    return name
