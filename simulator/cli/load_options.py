"""`--duration`, `--warmup`, `--warm-start`: sugar for `--set load.*=…` (cool-down: --set).

The options do not reach the commands' signatures: each stores its override in the
click context, and `scenario_overrides` appends them before the user's `--set`
(which still wins), so run, sweep and size get them alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from simulator.util.durations import parse_duration_s

_META = "endurance.load_overrides"


def _store(key: str, parse: Callable[[str], str]) -> Callable[[click.Context, Any, Any], None]:
    def callback(ctx: click.Context, _param: Any, value: Any) -> None:
        if value is None or value is False:
            return
        ctx.meta.setdefault(_META, []).append(f"load.{key}={parse(value)}")
    return callback


def load_shape_options() -> list[Callable[[Any], Any]]:
    """The click options (not exposed as parameters; see the module docstring)."""
    return [
        click.option("--duration", metavar="TIME", expose_value=False,
                     callback=_store("duration_s", lambda v: f"{parse_duration_s(v)}"),
                     help="Constant-load run: keep N sessions (a session that ends is "
                     "replaced at once) for TIME (600, 90s, 10m; virtual time on the twin)."),
        click.option("--warmup", metavar="TIME", expose_value=False,
                     callback=_store("warmup_s",
                                     lambda v: f"{parse_duration_s(v, '--warmup')}"),
                     help="Steady-state window starts at TIME (default: once all N "
                     "sessions are past their first turn)."),
        click.option("--warm-start", is_flag=True, default=False, expose_value=False,
                     callback=_store("warm_start", lambda v: "true"),
                     help="Start each session at a seeded random turn, history synthesised."),
    ]


def load_overrides() -> list[str]:
    """The overrides the load options stored in the current click context (if any)."""
    ctx = click.get_current_context(silent=True)
    return list(ctx.meta.get(_META, [])) if ctx is not None else []
