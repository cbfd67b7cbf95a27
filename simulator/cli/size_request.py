"""`endurance size`'s options, typed, and the one request they make (`sweep/request.py`).

click hands the command every option by name; `SizeOptions` names their types, so the
command's signature is one line and the request is built in one place. The options kept
in the click context (the fleet's `--router`/`--pd`/`--replicas`, `--kv-offload-gib`
lists, the load and twin sugar) are read here, once; every refusal is the request's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import click

from simulator.cli.run import scenario_overrides

if TYPE_CHECKING:
    from simulator.sweep.request import SizeRequest


class SizeOptions(TypedDict):
    """Every option of `endurance size`, under its click name."""

    endpoint: str | None
    twin: str | None
    spec: str | None
    model: str | None
    turns: int | None
    sets: tuple[str, ...]
    seed: int | None
    price_per_hour: float | None
    client: str | None
    out: Path
    slos: tuple[str, ...]
    max_sessions: int
    as_json: bool
    repeats: int
    team: int | None
    parallel: int
    executor: str
    ray_address: str | None
    reset_prefix_cache: bool
    ramp: str | None
    hold: str
    max_step: str
    tiers: tuple[float, ...]
    ttft: float | None
    attainment: float
    from_twin: str | None
    no_compare: bool
    node: str | None
    interval: str | None
    lead_in: str


def _typed(name: str, value: str) -> str | None:
    """An option's value when the user typed it (None when click filled its default)."""
    ctx = click.get_current_context(silent=True)
    source = ctx.get_parameter_source(name) if ctx is not None else None
    return None if source in (None, click.core.ParameterSource.DEFAULT) else value


def size_request(scenario: str, o: SizeOptions) -> SizeRequest:
    """The request `size SCENARIO <options>` makes (refused in one line when it means
    nothing)."""
    from simulator.cli.fleet_options import fleet_given, pd_choice
    from simulator.cli.sweep_options import routers
    from simulator.cli.twin_options import tiers as kv_tiers
    from simulator.sweep.request import SizeRequest
    overrides = scenario_overrides(None, o["turns"], o["seed"], o["model"], o["sets"])
    gibs = kv_tiers()
    return SizeRequest(
        scenario, o["slos"], tuple(overrides), endpoint=o["endpoint"], twin=o["twin"],
        spec=o["spec"], client=o["client"], price_per_hour=o["price_per_hour"],
        reset_prefix_cache=o["reset_prefix_cache"], parallel=o["parallel"],
        executor=o["executor"], ray_address=o["ray_address"],
        max_sessions=o["max_sessions"], repeats=o["repeats"], team=o["team"],
        router=next(iter(routers()), None), pd=pd_choice() == "search",
        kv_offload_gibs=tuple(gibs) if gibs is not None else None, tiers=o["tiers"],
        ttft=o["ttft"], attainment=o["attainment"], ramp=o["ramp"],
        hold=_typed("hold", o["hold"]), max_step=_typed("max_step", o["max_step"]),
        from_twin=o["from_twin"], compare=not o["no_compare"], node=o["node"],
        interval=o["interval"], lead_in=o["lead_in"], out=o["out"],
        given=frozenset(fleet_given()))
