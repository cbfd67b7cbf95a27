"""How `sweep` and `size` show a search: a line per finished point while it runs, then
the answer's files in its folder and the answer printed (or its JSON alone with --json);
each `show_*` returns the command's exit code."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from simulator.analysis.fleet_sizing import FleetSizing
    from simulator.analysis.pd_sizing import PDSizing
    from simulator.analysis.sizing import SizingResult
    from simulator.analysis.team_day import TeamSizing
    from simulator.sweep.node_size import NodeLayoutTable
    from simulator.sweep.point import PointResult
    from simulator.sweep.profiles import SweepAnswer
    from simulator.sweep.step_ramp import RampAnswer
    from simulator.sweep.tiers import KvTierTable, SpeedTierTable


def _write(path: Path, data: object) -> None:
    from simulator.sweep.size_file import write_json
    write_json(path, data)


def progress_line(as_json: bool) -> Callable[[PointResult], None] | None:
    """The stderr line each finished point prints (none with --json)."""
    if as_json:
        return None

    def line(r: PointResult) -> None:
        s = r.summary
        if r.status == "error":
            click.echo(f"  {r.point.label}: {r.reason}", err=True)
            return
        if s.get("ramp"):
            steps = s["ramp"].get("steps") or []
            answers = "" if r.status == "interrupted" else \
                ", ".join(f"{t['name']}: {t['sessions']}" for t in s["ramp"]["tiers"])
            click.echo(f"  {r.point.label}: {r.status}, {len(steps)} held step(s)"
                       + (f", {answers}" if answers else "")
                       + f", run in {r.elapsed_s:.1f} s → {r.run_dir}", err=True)
            return
        window = s.get("window_aggregate_tok_s")
        figures = ("no steady-state window" if window is None
                   else f"{window:,.1f} tok/s window aggregate")
        steady = "" if s.get("steady_state", True) else \
            f" NOT STEADY ({s.get('steady_state_reason')})"
        where = f" → {r.run_dir}" if r.run_dir else ""
        click.echo(f"  {r.point.label}: {r.status}, achieved "
                   f"{s.get('achieved_sessions') or 0:,.1f}, {figures} "
                   f"({s.get('aggregate_tok_s') or 0:,.1f} whole run){steady}, "
                   f"run in {r.elapsed_s:.1f} s{where}", err=True)
    return line


def watching(folder: Path, as_json: bool, kind: str) -> AbstractContextManager[None]:
    """The live view of the running point and the search's state (`live/watch.py`; none
    with --json)."""
    from simulator.live.watch import watching as watch_folder
    return watch_folder(folder, as_json, kind)


def show_sweep(answer: SweepAnswer, folder: Path, as_json: bool) -> int:
    """`<stem>.json` and one plot per section in the sweep's folder; then the JSON
    alone, or the tables, the plots' paths and the folder (its last line, as `run`
    prints its run)."""
    from simulator.analysis.target import target_of_runs
    from simulator.report.sweeps import RENDER
    rows = answer.rows
    _write(folder / f"{answer.stem}.json", rows)
    render = RENDER[answer.name]
    plots: list[Path] = []
    text: list[str] = []
    many = len(answer.sections) > 1 or (answer.sections and answer.sections[0][0])
    for i, (title, part) in enumerate(answer.sections):
        stem = answer.stem if not many else f"{answer.stem}-{i + 1}"
        plots += render.write(part, folder / f"{stem}.png")
        text += [title, render.table(part)] if title else [render.table(part)]
    if as_json:
        click.echo(json.dumps(rows, default=str))
        return 0
    target = target_of_runs(d for r in rows for d in r.get("run_dirs") or [])
    click.echo("\n".join(text))
    if target is not None:
        click.echo(f"swept: {target}")
    for p in plots:
        click.echo(f"plot: {p}")
    click.echo(str(folder))
    return 0


def show_size(result: SizingResult, folder: Path, fleet: FleetSizing | PDSizing | None,
              as_json: bool) -> int:
    """size.json in the folder; the JSON, or the answer, the fleet answer and the
    folder. Exit 0 when some count meets every SLO, 1 when not even one session does."""
    from simulator.analysis.pd_sizing import PDSizing
    from simulator.report.console import format_sizing
    from simulator.sweep.size_file import SIZE_FILE, size_data
    data = size_data(result, fleet)
    _write(folder / SIZE_FILE, data)
    target = data["target"] if isinstance(data["target"], str) else None
    if as_json:
        click.echo(json.dumps(data, default=str))
        return 0 if result.sessions > 0 else 1
    click.echo(format_sizing(result, target))
    if isinstance(fleet, PDSizing):
        from simulator.report.pd import format_pd_sizing
        click.echo(format_pd_sizing(fleet))
    elif fleet is not None:
        from simulator.report.sweeps import format_fleet_sizing
        click.echo(format_fleet_sizing(fleet))
    click.echo(str(folder))
    return 0 if result.sessions > 0 else 1


def show_node(table: NodeLayoutTable, folder: Path, as_json: bool) -> int:
    """size.json (the layouts side by side, each search's answer and runs) and the
    table; exit 0 when some layout holds a session under the SLOs."""
    from simulator.sweep.node_size import format_node_layout
    from simulator.sweep.size_file import run_dirs
    data = table.to_dict()
    data["run_dirs"] = {f"tp-{tp}": run_dirs(r.probes) for tp, r in table.answers}
    _write(folder / "size.json", data)
    if as_json:
        click.echo(json.dumps(data, default=str))
    else:
        click.echo(format_node_layout(table))
        click.echo(str(folder))
    return 0 if table.best() is not None else 1


def show_team(result: TeamSizing, folder: Path, as_json: bool) -> int:
    """size.json, the answer, the fidelity and the profile of a team replay's search."""
    from simulator.sweep.team_size import team_report
    data, text = team_report(result, folder)
    click.echo(json.dumps(data, default=str) if as_json else text)
    if result.interrupted:
        return 130               # the intervals judged so far are shown, not an answer
    return 0 if result.replicas is not None else 1


def kv_tier_line(as_json: bool) -> Callable[[float, SizingResult], None] | None:
    """The stderr line each host KV tier's search prints as it ends (none with --json)."""
    if as_json:
        return None

    def line(gib: float, result: SizingResult) -> None:
        click.echo(f"  tier {gib:g} GiB: {result.sessions} sessions "
                   f"({result.binding} [{result.binding_kind}])", err=True)
    return line


def show_kv_tiers(table: KvTierTable, folder: Path, as_json: bool) -> int:
    """size-kv-tiers.json and .png, the table, the plot and the folder."""
    from simulator.report.sweeps import format_tier_table, write_tier_plot
    from simulator.sweep.tiers import KV_TIERS_FILE
    data, rows = table.to_dict(), table.rows()
    _write(folder / KV_TIERS_FILE, data)
    plot = write_tier_plot(rows, (folder / KV_TIERS_FILE).with_suffix(".png"))
    if as_json:
        click.echo(json.dumps(data, default=str))
    else:
        click.echo(format_tier_table(rows))
        click.echo(f"plot: {plot}")
        click.echo(str(folder))
    return 0 if table.any_answer else 1


def show_speed_tiers(table: SpeedTierTable, folder: Path, as_json: bool) -> int:
    """size-speed-tiers.json; sessions per tier, per card and per $/h."""
    from simulator.report.console import format_speed_tiers
    from simulator.sweep.tiers import SPEED_TIERS_FILE
    data = table.to_dict()
    _write(folder / SPEED_TIERS_FILE, data)
    if as_json:
        click.echo(json.dumps(data, default=str))
    else:
        click.echo(format_speed_tiers(table.rows()))
        click.echo(str(folder))
    return 0 if table.any_answer else 1


def show_ramp(answer: RampAnswer, folder: Path, as_json: bool) -> int:
    """size.json (the ramp and the searches compared) and the answer; the exit code
    (130 and no answer line for an interrupted ramp)."""
    from simulator.report.console import format_ramp, format_ramp_cost
    data = answer.to_dict()
    _write(folder / "size.json", data)
    tiers = answer.ramp.get("tiers") or []
    if answer.interrupted:
        if as_json:
            click.echo(json.dumps(data, default=str))
        click.echo(f"error: interrupted after {answer.judged} judged step(s): no answer "
                   f"(size.json says interrupted); continue with `endurance run --resume "
                   f"{answer.run_dir}`, which rewrites {folder / 'size.json'}", err=True)
        return 130
    if as_json:
        click.echo(json.dumps(data, default=str))
    else:
        click.echo(format_ramp(answer.ramp, answer.simulated))
        click.echo(format_ramp_cost(data))
        click.echo(answer.run_dir)
        click.echo(str(folder))
    if answer.compare_interrupted:
        click.echo(f"error: the probe search beside the ramp was {answer.compare_interrupted}"
                   " (the ramp ran to its end: its answer stands)", err=True)
        return 130
    return 0 if tiers and tiers[0]["sessions"] > 0 else 1

