"""A `SizeRequest` run: the scenario loaded once and checked against the request, then
the one search the request is (`request.py`: its precedence), through `sweep.api`.

    from simulator.sweep import SizeRequest, search
    answer = search(SizeRequest("scenarios/claude-code-team.yaml", ("per_session_tok_s>=30",),
                                twin="a40/qwen3-coder-30b-a3b-awq", max_sessions=8))

`prepare` reads the scenario and refuses what only it can tell (a team replay given a
ramp, `interval` off one) before any run; the command calls it before its live view
starts, so a refusal is still one line. `search` takes either.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace

from simulator.analysis.sizing import SizingResult
from simulator.analysis.team_day import TeamSizing
from simulator.analysis.team_hours import TeamHours
from simulator.analysis.tier_sizing import policy_of
from simulator.errors import InputError
from simulator.sweep import api
from simulator.sweep.fanout import Fanout, fanout_for
from simulator.sweep.node_size import NodeLayoutTable
from simulator.sweep.point import Target
from simulator.sweep.profiles import PointBase
from simulator.sweep.request import NODE_ALONE, NOT_A_TEAM_DAY, TEAM_DAY_ALONE, SizeRequest
from simulator.sweep.step_ramp import RampAnswer, goodput_overrides
from simulator.sweep.team_size import is_team_day
from simulator.sweep.tiers import KvTierTable, SpeedTierTable, speed_tiers_for
from simulator.util.durations import parse_duration_s

Answer = (TeamSizing | RampAnswer | SpeedTierTable | KvTierTable | api.SizeAnswer
          | SizingResult | NodeLayoutTable)


@dataclass(frozen=True)
class Prepared:
    """A request with its scenario loaded (`base`: the points' shared part, goodput
    judged under the SLOs) and what the scenario decided."""

    request: SizeRequest
    base: PointBase
    team_day: bool                # an imported team's day: the team search
    interval_s: float | None      # the team day judged interval by interval
    lead_s: float


def prepare(request: SizeRequest) -> Prepared:
    """The scenario read once (a bad file or override is one line now) and the
    request's refusals that need it; no run yet."""
    r = request
    base = api.search_base(r.scenario, r.overrides, target=Target(
        endpoint_url=r.endpoint, twin=r.twin, spec=r.spec, client=r.client,
        price_per_hour=r.price_per_hour, reset_prefix_cache=r.reset_prefix_cache),
        folder=r.folder, out=r.out, kind="size", reuse=r.reuse)
    base = replace(base, overrides=(*base.overrides,
                                    *goodput_overrides(base, r.judged(), r.tiers)))
    team_day = is_team_day(base)
    if team_day and r.node is not None:
        raise InputError(NODE_ALONE)
    if team_day and (r.ramp is not None or r.tiers or r.team is not None
                     or r.kv_offload_gibs is not None):
        raise InputError(TEAM_DAY_ALONE)
    if r.interval is not None and not team_day:
        raise InputError(NOT_A_TEAM_DAY)
    interval_s = parse_duration_s(r.interval, "--interval") if r.interval is not None else None
    return Prepared(r, base, team_day, interval_s, r.lead_s())


def search(request: SizeRequest | Prepared, *, fanout: Fanout | None = None,
           on_point: api.OnPoint | None = None,
           on_tier: Callable[[float, SizingResult], None] | None = None,
           on_hours: Callable[[TeamHours], None] | None = None) -> Answer:
    """The search the request is, its points run by `fanout` (default: the request's
    `parallel`/`executor`, closed when the search ends); `on_point` hears each point,
    `on_tier` each host KV tier's answer, `on_hours` the team day's intervals."""
    p = request if isinstance(request, Prepared) else prepare(request)
    r, base = p.request, p.base
    slos, n, k = r.judged(), r.max_sessions, r.repeats
    with ExitStack() as stack:
        fx = fanout or stack.enter_context(fanout_for(r.parallel, r.executor, r.ray_address))
        if r.node is not None:
            return api.node(base, slos, r.node, team=r.team, max_sessions=n, repeats=k,
                            fanout=fx, on_point=on_point)
        if p.team_day:
            return api.team(base, slos, router=r.router, fanout=fx, on_point=on_point,
                            interval_s=p.interval_s, lead_s=p.lead_s, on_hours=on_hours)
        speed, kind = speed_tiers_for(slos, r.tiers, r.ttft, r.attainment), r.kind()
        if kind == "ramp":
            hold_s, max_step_s = r.hold_s()
            return api.ramp(base, slos, steps=r.steps(), max_sessions=n, hold_s=hold_s,
                            max_step_s=max_step_s, speed=speed, from_twin=r.from_twin,
                            compare=r.compare, fanout=fx, on_point=on_point)
        if kind == "speed_tiers":
            return api.speed_tiers(base, speed, max_sessions=n, repeats=k, fanout=fx,
                                   on_point=on_point)
        if kind == "kv_tiers":
            return api.kv_tiers(base, slos, r.kv_offload_gibs or (), policy=policy_of(
                r.overrides), team=r.team, max_sessions=n, repeats=k, fanout=fx,
                on_point=on_point, on_tier=on_tier)
        if kind in ("pd", "fleet") and r.team is not None:
            if kind == "pd":
                return api.pd(base, slos, r.team, max_sessions=n, repeats=k, fanout=fx,
                              on_point=on_point)
            return api.fleet(base, slos, r.team, router=r.router or "round_robin",
                             max_sessions=n, repeats=k, fanout=fx, on_point=on_point)
        return api.size(base, slos, max_sessions=n, repeats=k, team=r.team, fanout=fx,
                        on_point=on_point)
