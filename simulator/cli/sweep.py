"""`endurance sweep` and `endurance size`: parse the options, call one search, show it.

Every point is a normal run (its own results directory under the command's folder),
so every figure in a table can be traced back to a `turns.parquet`. The searches are
library calls (`simulator.sweep.api`: `points`, `size`, `fleet`, `pd`, `team`,
`kv_tiers`, `speed_tiers`, `ramp`); the options are `cli/sweep_options.py`; `size`'s
make one `SizeRequest` (`cli/size_request.py`), which refuses what means nothing and
names its search (`sweep/size_search.py`); the files and text they leave
`cli/sweep_show.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from simulator.cli._app import main
from simulator.cli.run import scenario_overrides
from simulator.cli.sweep_options import routers, size_options, sweep_options
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

if TYPE_CHECKING:
    from typing import Unpack

    from simulator.analysis.team_hours import TeamHours
    from simulator.cli.size_request import SizeOptions
    from simulator.sweep.profiles import PointBase
    from simulator.sweep.size_search import Answer


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
    from simulator.sweep.request import check_fan_out
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
def size_command(scenario: str, **options: Unpack[SizeOptions]) -> None:
    """Largest session count that meets every SLO at steady state (geometric probe,
    then a gallop from where the figures put the boundary, then --repeats searches with
    other seeds giving a range); with --ramp, in one run; with --tier, per output-speed
    tier.

    Exit code 0 when some count meets every SLO, 1 when not even one session does
    (the JSON and size.json are written either way)."""
    from simulator.cli.size_request import size_request
    from simulator.sweep.fanout import fanout_for
    from simulator.sweep.size_search import prepare, search
    request, as_json = size_request(scenario, options), options["as_json"]
    plan = prepare(request)
    with fanout_for(request.parallel, request.executor, request.ray_address) as fx, \
            watching(plan.base.folder, as_json, "size"):
        found = search(plan, fanout=fx, on_point=progress_line(as_json),
                       on_tier=kv_tier_line(as_json), on_hours=hours_line(as_json))
    sys.exit(_show(found, plan.base.folder, as_json))


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
