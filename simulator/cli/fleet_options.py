"""`--replicas`, `--router`, `--route` and repeated `--endpoint`: fleets (docs/fleet.md).

`--replicas R --router P` (the twin) and `--route P` (several real URLs) are sugar for
`--set fleet.replicas=R` / `--set fleet.router=P`, stored in the click context and
appended by `scenario_overrides` before the user's `--set`, as the load options are.
`--endpoint` may be repeated: the first URL stays the command's `endpoint` parameter,
and `endpoint_urls()` returns them all (`run` routes over them on the client).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from simulator.twin.router import POLICIES

_META = "endurance.fleet_overrides"
_URLS = "endurance.endpoint_urls"


def _store(key: str) -> Callable[[click.Context, Any, Any], None]:
    def callback(ctx: click.Context, _param: Any, value: Any) -> None:
        if value is not None:
            ctx.meta.setdefault(_META, []).append(f"fleet.{key}={value}")
    return callback


def _endpoints(ctx: click.Context, _param: Any, value: tuple[str, ...]) -> str | None:
    if len(value) > 1 and ctx.command.name != "run":
        raise click.BadParameter(f"{len(value)} URLs: routing over several endpoints is "
                                 "`endurance run` only", param_hint="--endpoint")
    ctx.meta[_URLS] = tuple(value)
    return value[0] if value else None


def endpoint_option() -> Callable[[Any], Any]:
    return click.option("--endpoint", metavar="URL", multiple=True, callback=_endpoints,
                        help="Anthropic Messages endpoint base URL (default: the in-process "
                        "twin, simulated); repeat it to route over several servers "
                        "(--route).")


def fleet_options() -> list[Callable[[Any], Any]]:
    """The click options (not exposed as parameters; see the module docstring)."""
    choice = click.Choice(POLICIES)
    return [
        click.option("--replicas", type=click.IntRange(1, 1024), expose_value=False,
                     callback=_store("replicas"),
                     help="Twin: R engines behind one router, on one virtual clock."),
        click.option("--router", type=choice, expose_value=False, callback=_store("router"),
                     help="Twin fleet routing policy (default round_robin)."),
        click.option("--route", type=click.Choice(POLICIES[:3]), expose_value=False,
                     callback=_store("router"),
                     help="Routing over several --endpoint URLs, on the client."),
    ]


def fleet_overrides() -> list[str]:
    ctx = click.get_current_context(silent=True)
    return list(ctx.meta.get(_META, [])) if ctx is not None else []


def endpoint_urls() -> tuple[str, ...]:
    """Every --endpoint URL given (empty: none)."""
    ctx = click.get_current_context(silent=True)
    return tuple(ctx.meta.get(_URLS, ())) if ctx is not None else ()
