"""The id a run gives its i-th session (`s0007`): written in rows, resume state, shard
splits and exported traces, so it is spelled once here."""

from __future__ import annotations


def session_id(index: int) -> str:
    """The id of session number `index` (0-based), zero-padded to four digits."""
    return f"s{index:04d}"
