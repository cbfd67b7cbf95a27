"""`endurance sweep` and `endurance size`: parse the options, call one search, show it.

Every point is a normal run (its own results directory under the command's folder),
so every figure in a table can be traced back to a `turns.parquet`. The searches are
library calls (`simulator.sweep.api`: `points`, `size`, `fleet`, `pd`, `team`,
`kv_tiers`, `speed_tiers`, `ramp`); the options and their refusals are
`cli/sweep_options.py`, the files and text they leave `cli/sweep_show.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from simulator.cli._app import main
from simulator.cli.run import check_ramp_flags, ramp_hold_s, scenario_overrides
from simulator.cli.sweep_options import (
    check_fan_out,
    check_ramp_options,
    check_size_options,
    check_some_slo,
    routers,
    size_options,
    sweep_options,
)
from simulator.cli.sweep_show import (
    kv_tier_line,
    progress_line,
    show_kv_tiers,
    show_node,
    show_ramp,
    show_size,
    show_speed_tiers,
    show_sweep,
    show_team,
    watching,
)
from simulator.errors import InputError

if TYPE_CHECKING:
    from simulator.analysis.sizing import SizingResult
    from simulator.analysis.team_day import TeamSizing
    from simulator.analysis.team_hours import TeamHours
    from simulator.sweep.api import SizeAnswer
    from simulator.sweep.node_size import NodeLayoutTable
    from simulator.sweep.profiles import PointBase
    from simulator.sweep.step_ramp import RampAnswer
    from simulator.sweep.tiers import KvTierTable, SpeedTierTable

    Answer = (TeamSizing | RampAnswer | SpeedTierTable | KvTierTable | SizeAnswer
              | SizingResult | NodeLayoutTable)


def _base(scenario: str, overrides: list[str], kind: str, out: Path, endpoint: str | None,
          twin: str | None, spec: str | None, price_per_hour: float | None,
          client: str | None, reset: bool) -> PointBase:
    """The points' shared part: the scenario (loaded once), where they run, a new
    folder under --out."""
    from simulator.sweep.api import new_folder, search_base
    from simulator.sweep.point import Target
    folder = new_folder(out, kind)
    return search_base(scenario, overrides, folder=folder, target=Target(
        endpoint_url=endpoint, twin=twin, spec=spec, client=client,
        price_per_hour=price_per_hour, reset_prefix_cache=reset))


@main.command(name="sweep")
@click.argument("scenario", type=click.Path(dir_okay=False))
@sweep_options
def sweep_command(scenario: str, endpoint: str | None, twin: str | None, spec: str | None,
                  model: str | None, turns: int | None, sets: tuple[str, ...], seed: int | None,
                  price_per_hour: float | None, client: str | None, out: Path,
                  sessions_list: str | None, as_json: bool, repeats: int = 1, parallel: int = 1,
                  executor: str = "local", ray_address: str | None = None,
                  reset_prefix_cache: bool = False, copy_levels: str | None = None) -> None:
    """Run SCENARIO at each session count; one row per count, plus a plot.

    With `--set KEY=a,b,c` (e.g. compaction.kind=none,prune,block,summarize,
    clear_tool_results): one row per value instead — speed beside recall — and the
    speed–recall frontier plot. `--spec a,b` compares speculation settings, `--copy`
    copy shares; `--kv-offload-gib G1,G2` and `--replicas R1,R2` repeat the sweep per
    host tier size / fleet size."""
    from simulator.analysis.policy_sweep import split_listed_set
    from simulator.cli.fleet_options import pd_choice, replicas_list
    from simulator.cli.twin_options import tiers
    from simulator.sweep import api
    from simulator.sweep.fanout import fanout_for
    from simulator.sweep.profiles import SweepDim, pd_dim, replicas_dim
    from simulator.sweep.tiers import kv_tiers_dim
    check_fan_out(endpoint, reset_prefix_cache, parallel, executor)
    listed = split_listed_set(sets)
    other_sets = tuple(listed[2]) if listed is not None else sets
    base = _base(scenario, scenario_overrides(None, turns, seed, model, other_sets), "sweep",
                 out, endpoint, twin, spec, price_per_hour, client, reset_prefix_cache)
    inner = api.sweep_kind(base, listed, spec, copy_levels, sessions_list, repeats)
    outer: list[SweepDim] = []
    if (sizes := tiers()) is not None:
        outer.append(kv_tiers_dim(sizes))
    if replicas := replicas_list():
        outer.append(replicas_dim(replicas, (routers() or ["round_robin"])[-1]))
    if isinstance(pds := pd_choice(), list):
        outer.append(pd_dim(pds))
    with fanout_for(parallel, executor, ray_address) as fx, \
            watching(base.folder, as_json, "sweep"):      # the running point, live
        answer = api.points(base, inner, outer, fanout=fx, on_point=progress_line(as_json))
    show_sweep(answer, base.folder, as_json)


@main.command(name="size")
@click.argument("scenario", type=click.Path(dir_okay=False))
@size_options
@click.option("--interval", "interval", default=None, metavar="DURATION",
              help="A team replay: also the fewest cards per interval of the day (1h, "
              "30m), each judged on its own requests — a lower bound (a perfect "
              "autoscaler with no warm-up).")
@click.option("--lead-in", "lead_in", default="5m", show_default=True, metavar="DURATION",
              help="--interval: the traffic replayed before each interval, not judged "
              "(the sessions in flight carried over warm).")
def size_command(scenario: str, endpoint: str | None, twin: str | None, spec: str | None,
                 model: str | None, turns: int | None, sets: tuple[str, ...], seed: int | None,
                 price_per_hour: float | None, client: str | None, out: Path,
                 slos: tuple[str, ...], max_sessions: int, as_json: bool,
                 repeats: int = 1, team: int | None = None, parallel: int = 1,
                 executor: str = "local", ray_address: str | None = None,
                 reset_prefix_cache: bool = False, ramp: str | None = None,
                 hold: str = "3m", max_step: str = "30m", tiers: tuple[float, ...] = (),
                 ttft: float | None = None, attainment: float = 0.9,
                 from_twin: str | None = None, no_compare: bool = False,
                 node: str | None = None, interval: str | None = None,
                 lead_in: str = "5m") -> None:
    """Largest session count that meets every SLO at steady state (geometric probe,
    then a gallop from where the figures put the boundary, then --repeats searches with
    other seeds giving a range); with --ramp,
    in one run; with --tier, per output-speed tier.

    Exit code 0 when some count meets every SLO, 1 when not even one session does
    (the JSON and size.json are written either way)."""
    from simulator.analysis.ramp import parse_steps
    from simulator.analysis.slo import parse_slo
    from simulator.analysis.tier_sizing import policy_of
    from simulator.cli.twin_options import tiers as kv_tiers
    from simulator.sweep import api
    from simulator.sweep.fanout import fanout_for
    from simulator.sweep.step_ramp import goodput_overrides
    from simulator.sweep.team_size import is_team_day
    from simulator.sweep.tiers import speed_tiers_for
    parsed = tuple(parse_slo(s) for s in slos)
    check_some_slo(len(parsed), tiers)
    check_fan_out(endpoint, reset_prefix_cache, parallel, executor)
    check_ramp_flags(ramp, None, sets)
    check_ramp_options(ramp, endpoint, from_twin, tiers, ttft, team, repeats,
                       kv_tiers() is not None)
    kind = check_size_options(sets, spec, team, endpoint)
    overrides = scenario_overrides(None, turns, seed, model, sets)
    base = _base(scenario, overrides, "size", out, endpoint, twin, spec, price_per_hour,
                 client, reset_prefix_cache)
    base = replace(base, overrides=(*base.overrides, *goodput_overrides(base, parsed, tiers)))
    team_day = is_team_day(base)     # an imported team's day
    if node is not None and (team_day or ramp is not None or tiers or kind != "size"
                             or kv_tiers() is not None):
        raise InputError("size --node searches each TP layout's replica alone; --ramp, "
                         "--tier, a team replay, --router/--pd and host KV tier lists do "
                         "not combine with it")
    gibs = kv_tiers()
    if team_day and (ramp is not None or tiers or team is not None or gibs is not None):
        raise InputError("size: a team replay sizes cards for the team's own arrivals; "
                         "--ramp, --tier, --team and host KV tiers do not apply")
    interval_s, lead_s = team_interval(interval, lead_in, team_day)
    speed = speed_tiers_for(parsed, tiers, ttft, attainment)
    hold_s, max_step_s = ramp_hold_s(hold, max_step) if ramp is not None else (0.0, 0.0)
    steps = parse_steps(ramp, max_sessions) if ramp else None
    on = progress_line(as_json)
    found: Answer
    with fanout_for(parallel, executor, ray_address) as fx, \
            watching(base.folder, as_json, "size"):
        if node is not None:
            found = api.node(base, parsed, node, team=team, max_sessions=max_sessions,
                             repeats=repeats, fanout=fx, on_point=on)
        elif team_day:
            found = api.team(base, parsed, router=next(iter(routers()), None), fanout=fx,
                             on_point=on, interval_s=interval_s, lead_s=lead_s,
                             on_hours=hours_line(as_json))
        elif ramp is not None:
            found = api.ramp(base, parsed, steps=steps, max_sessions=max_sessions,
                             hold_s=hold_s, max_step_s=max_step_s, speed=speed,
                             from_twin=from_twin, compare=not no_compare, fanout=fx,
                             on_point=on)
        elif speed:
            found = api.speed_tiers(base, speed, max_sessions=max_sessions, repeats=repeats,
                                    fanout=fx, on_point=on)
        elif gibs is not None:
            found = api.kv_tiers(base, parsed, gibs, policy=policy_of(sets), team=team,
                                 max_sessions=max_sessions, repeats=repeats, fanout=fx,
                                 on_point=on, on_tier=kv_tier_line(as_json))
        elif kind == "pd" and team is not None:
            found = api.pd(base, parsed, team, max_sessions=max_sessions, repeats=repeats,
                           fanout=fx, on_point=on)
        elif kind == "fleet" and team is not None:
            found = api.fleet(base, parsed, team, router=routers()[-1],
                              max_sessions=max_sessions, repeats=repeats, fanout=fx,
                              on_point=on)
        else:
            found = api.size(base, parsed, max_sessions=max_sessions, repeats=repeats,
                             team=team, fanout=fx, on_point=on)
    sys.exit(_show(found, base.folder, as_json))


def team_interval(interval: str | None, lead_in: str, team_day: bool
                  ) -> tuple[float | None, float]:
    """`--interval` and `--lead-in` in seconds; refused in one line off a team replay."""
    from simulator.cli.load_options import parse_duration_s
    lead_s = parse_duration_s(lead_in, "--lead-in")
    if interval is None:
        return None, lead_s
    if not team_day:
        raise InputError("size --interval: sizes a team replay's day interval by interval "
                         "(import claude-code-otel / otel-genai first)")
    return parse_duration_s(interval, "--interval"), lead_s


def hours_line(as_json: bool) -> Callable[[TeamHours], None] | None:
    """The stderr progress bar of the intervals judged (none with --json)."""
    if as_json:
        return None
    from simulator.live.watch import progress_bar

    def line(h: TeamHours) -> None:
        click.echo("  " + progress_bar("intervals judged", len(h.judged), len(h.hours))
                   + (" — INTERRUPTED" if h.interrupted else ""), err=True)
    return line


def _show(found: Answer, folder: Path, as_json: bool) -> int:
    """The answer's files and text, whichever search gave it; the exit code."""
    from simulator.analysis.team_day import TeamSizing
    from simulator.sweep.api import SizeAnswer
    from simulator.sweep.node_size import NodeLayoutTable
    from simulator.sweep.step_ramp import RampAnswer
    from simulator.sweep.tiers import KvTierTable, SpeedTierTable
    if isinstance(found, TeamSizing):
        return show_team(found, folder, as_json)
    if isinstance(found, NodeLayoutTable):
        return show_node(found, folder, as_json)
    if isinstance(found, RampAnswer):
        return show_ramp(found, folder, as_json)
    if isinstance(found, SpeedTierTable):
        return show_speed_tiers(found, folder, as_json)
    if isinstance(found, KvTierTable):
        return show_kv_tiers(found, folder, as_json)
    if isinstance(found, SizeAnswer):
        return show_size(found.card, folder, found.fleet, as_json)
    return show_size(found, folder, None, as_json)
