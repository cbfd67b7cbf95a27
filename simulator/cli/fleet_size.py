"""`size --team M --router P`: after one card's answer, the fleet search (`analysis/fleet_sizing`).

Each probe is a normal run (a results directory under the size folder) of M sessions on
R twin replicas behind the router the command was given; the division's answer is where
the search starts and what it is compared with.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from simulator.analysis.fleet_sizing import FleetSizing, size_fleet
from simulator.analysis.sizing import SizingResult, Slo
from simulator.cli.fleet_options import fleet_overrides
from simulator.errors import InputError, RunError

_ROUTER = re.compile(r"^fleet\.router=(\w+)$")


def fleet_team(scenario: str, base: list[str], folder: Path, opts: dict[str, Any],
               slos: list[Slo], team: int | None, single: SizingResult,
               verbose: bool) -> FleetSizing | None:
    """The fleet answer for `--team` when `--router` was given, else None."""
    routers = [m.group(1) for o in fleet_overrides() if (m := _ROUTER.match(o))]
    if team is None or not routers:
        return None
    if opts.get("endpoint_url") is not None:
        raise InputError("size --team --router: the fleet search runs on the twin (no --endpoint)")
    from simulator.sweep.point import PointSpec, run_point
    cards = single.cards()

    def run_fleet(r: int) -> dict[str, Any]:
        res = run_point(PointSpec(scenario, (*base, f"fleet.replicas={r}"), team,
                                  str(folder / f"fleet-{r}"), **opts))
        if res.status == "failed":
            raise RunError(f"the fleet run at {r} replicas failed: {res.reason} ({res.run_dir})")
        if verbose:
            click.echo(f"  fleet of {r} × {team} sessions → {res.run_dir}", err=True)
        return res.figures

    return size_fleet(run_fleet, slos, team, routers[-1], start=cards[0] if cards else None)


def replicas_sweep(scenario: str, base: list[str], folder: Path, opts: dict[str, Any],
                   counts: list[int], as_json: bool) -> bool:
    """`sweep --replicas R1,R2,…`: the session sweep once per fleet size (one JSON list,
    rows tagged `replicas`; a table and a plot per size). False when not asked for."""
    from simulator.cli.fleet_options import replicas_list
    sizes = replicas_list()
    if not sizes:
        return False
    import json

    from simulator.analysis.render import write_sweep_plot
    from simulator.analysis.sizing import format_sweep_table, sweep
    from simulator.cli.sweep import _PointRunner
    routers = [m.group(1) for o in fleet_overrides() if (m := _ROUTER.match(o))]
    router = routers[-1] if routers else "round_robin"
    rows: list[dict[str, Any]] = []
    text: list[str] = []
    for r in sizes:
        sub = folder / f"replicas-{r}"
        point = _PointRunner(scenario, [*base, f"fleet.replicas={r}"], sub, opts, not as_json)
        part = sweep(point, counts)
        for row in part:
            row["replicas"], row["router"] = r, router
            row["run_dirs"] = point.run_dirs.get(row["sessions"], [])
        sub.mkdir(parents=True, exist_ok=True)
        plot = write_sweep_plot(part, sub / "sweep.png")
        text += [f"{r} replica(s) behind {router}:", format_sweep_table(part), f"plot: {plot}"]
        rows += part
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sweep.json").write_text(json.dumps(rows, indent=2, default=str) + "\n")
    click.echo(json.dumps(rows, default=str) if as_json else "\n".join([*text, str(folder)]))
    return True
