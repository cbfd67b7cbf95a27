"""`--replicas`, `--router`, `--route` and repeated `--endpoint`: fleets (docs/fleet.md).

`--replicas R --router P` (the twin) and `--route P` (several real URLs) are sugar for
`--set fleet.replicas=R` / `--set fleet.router=P`, stored in the click context and
appended by `scenario_overrides` before the user's `--set`, as the load options are.
`--endpoint` may be repeated: the first URL stays the command's `endpoint` parameter,
and `endpoint_urls()` returns them all (`run` routes over them on the client).

Each option is checked against the others when the overrides are read (issue 38): the
twin's `--replicas`/`--router` mean nothing against `--endpoint` servers, `--route`
nothing without two or more of them, `--route` and `--router` name one setting, and a
sweep's list of replica counts may not repeat one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from simulator.errors import InputError
from simulator.twin.fleet.router import POLICIES
from simulator.twin.pd.policy import parse_split

_META = "endurance.fleet_overrides"
_URLS = "endurance.endpoint_urls"
_REPLICAS = "endurance.replicas_list"
_GIVEN = "endurance.fleet_given"     # which of --replicas, --router, --route were given
_PD = "endurance.pd"                 # size: "search"; sweep: the P:D splits
MAX_REPLICAS = 1024


def _replicas(ctx: click.Context, _param: Any, value: str | None) -> None:
    """`--replicas R`, or `R1,R2,…` for `sweep` (one sweep per fleet size)."""
    if value is None:
        return
    try:
        counts = [int(x) for x in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected a replica count or a list such as "
                                 "1,2,4") from None
    if not counts or any(not 1 <= r <= MAX_REPLICAS for r in counts):
        raise click.BadParameter(f"{value!r}: replica counts must be within 1..{MAX_REPLICAS}")
    if len(set(counts)) < len(counts):
        raise click.BadParameter(f"{value!r}: a replica count is listed twice")
    ctx.meta.setdefault(_GIVEN, set()).add("--replicas")
    if len(counts) > 1:
        if ctx.command.name != "sweep":
            raise click.BadParameter(f"{value!r}: a list of replica counts is for `sweep`")
        ctx.meta[_REPLICAS] = counts
        return
    ctx.meta.setdefault(_META, []).append(f"fleet.replicas={counts[0]}")


def _pd(ctx: click.Context, _param: Any, value: str | None) -> None:
    """`--pd P:D` (run: P prefill + D decode instances, sugar for fleet.prefill=P and
    fleet.replicas=D), `--pd P:D,P:D,…` (sweep), `--pd` alone (size --team: search)."""
    if value is None:
        return
    ctx.meta.setdefault(_GIVEN, set()).add("--pd")
    if value == "search":
        if ctx.command.name != "size":
            raise click.BadParameter("give a split, e.g. --pd 1:2 (--pd alone is "
                                     "`size --team M --pd`)")
        ctx.meta[_PD] = "search"
        return
    try:
        pairs = [parse_split(x) for x in value.split(",")]
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if len(set(pairs)) < len(pairs):
        raise click.BadParameter(f"{value!r}: a split is listed twice")
    if len(pairs) > 1:
        if ctx.command.name != "sweep":
            raise click.BadParameter(f"{value!r}: a list of P:D splits is for `sweep`")
        ctx.meta[_PD] = pairs
        return
    p, d = pairs[0]
    ctx.meta.setdefault(_META, []).extend([f"fleet.prefill={p}", f"fleet.replicas={d}"])


def _store(key: str, flag: str) -> Callable[[click.Context, Any, Any], None]:
    def callback(ctx: click.Context, _param: Any, value: Any) -> None:
        if value is not None:
            ctx.meta.setdefault(_META, []).append(f"fleet.{key}={value}")
            ctx.meta.setdefault(_GIVEN, set()).add(flag)
    return callback


def _check(ctx: click.Context) -> None:
    """InputError (one line) for fleet options that cannot combine."""
    given: set[str] = ctx.meta.get(_GIVEN, set())
    urls = ctx.meta.get(_URLS, ())
    if {"--route", "--router"} <= given:
        raise InputError("--route and --router name the same setting: --router for the "
                         "twin's fleet, --route over several --endpoint URLs")
    if "--route" in given and len(urls) < 2:
        raise InputError("--route routes over several --endpoint URLs (give two or more); "
                         "the twin's fleet takes --replicas and --router")
    if urls and "--router" in given:
        raise InputError("--router is the twin fleet's policy; over --endpoint URLs give "
                         "--route (and one --endpoint per server)")
    if "--pd" in given and urls:
        raise InputError("--pd splits the twin into prefill and decode instances; against "
                         "servers point --endpoint at the disaggregated deployment's router")
    if {"--pd", "--replicas"} <= given:
        raise InputError("--pd P:D sets the decode instances (D) itself: drop --replicas")
    if {"--pd", "--router"} <= given:
        raise InputError("--router with --pd: a P/D fleet picks decode instances by session "
                         "affinity and prefill instances by fleet.prefill_router; drop --router")
    if urls and "--replicas" in given:
        raise InputError("--replicas is for the twin; against servers give one --endpoint "
                         "per replica (and --route)")


def _endpoints(ctx: click.Context, _param: Any, value: tuple[str, ...]) -> str | None:
    if len(value) > 1 and ctx.command.name != "run":
        raise click.BadParameter(f"{len(value)} URLs: routing over several endpoints is "
                                 "`endurance run` only", param_hint="--endpoint")
    ctx.meta[_URLS] = tuple(value)
    return value[0] if value else None


def endpoint_option() -> Callable[[Any], Any]:
    return click.option("--endpoint", metavar="URL", multiple=True, callback=_endpoints,
                        help="Endpoint base URL: Anthropic Messages, or OpenAI Chat "
                        "Completions with --api openai-chat (default: the in-process twin, "
                        "simulated); repeat it to route over several servers (--route).")


def fleet_options() -> list[Callable[[Any], Any]]:
    """The click options (not exposed as parameters; see the module docstring)."""
    choice = click.Choice(POLICIES)
    return [
        click.option("--replicas", metavar="R", expose_value=False, callback=_replicas,
                     help="Twin: R engines behind one router, on one virtual clock "
                     "(sweep: a list, e.g. 1,2,4)."),
        click.option("--router", type=choice, expose_value=False,
                     callback=_store("router", "--router"),
                     help="Twin fleet routing policy (default round_robin)."),
        click.option("--pd", metavar="P:D", is_flag=False, flag_value="search", default=None,
                     expose_value=False, callback=_pd,
                     help="Twin: P prefill and D decode instances with KV transfer "
                     "(docs/disaggregation.md); sweep: a list, e.g. 1:1,1:2,2:3; "
                     "size --team M --pd: search the split and the cards."),
        click.option("--route", type=click.Choice(POLICIES[:3]), expose_value=False,
                     callback=_store("router", "--route"),
                     help="Routing over several --endpoint URLs, on the client."),
    ]


def fleet_overrides() -> list[str]:
    return _checked_meta(_META)


def replicas_list() -> list[int]:
    """`sweep --replicas 1,2,4`: the fleet sizes to sweep (empty: one)."""
    return _checked_meta(_REPLICAS)


def _checked_meta(key: str) -> list[Any]:      # click's ctx.meta holds Any
    """What the fleet options left in the current command's context under `key`
    (checked together first); empty outside a command."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return []
    _check(ctx)
    return list(ctx.meta.get(key, []))


def pd_choice() -> str | list[tuple[int, int]] | None:
    """`--pd`: "search" (size), the splits to sweep (sweep), else None."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    _check(ctx)
    value = ctx.meta.get(_PD)
    return value if isinstance(value, str | list) else None


def fleet_given() -> set[str]:
    """Which of --replicas, --router, --route, --pd the current command was given."""
    ctx = click.get_current_context(silent=True)
    return set(ctx.meta.get(_GIVEN, set())) if ctx is not None else set()


def endpoint_urls() -> tuple[str, ...]:
    """Every --endpoint URL given (empty: none)."""
    ctx = click.get_current_context(silent=True)
    return tuple(ctx.meta.get(_URLS, ())) if ctx is not None else ()
