"""CLI commands: analysis (placeholder until implemented)."""

from __future__ import annotations

from simulator.cli._app import main  # noqa: F401
