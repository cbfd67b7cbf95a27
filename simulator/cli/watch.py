"""`endurance watch RUN_DIR`: the live dashboard of a run directory."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from simulator.cli._app import main

MIN_SPEED = 1e-3      # a replay slower than this would outlast any watcher


def _replay_speed(ctx: click.Context, param: click.Parameter, value: float | None
                  ) -> float | None:
    if value is not None and (value != value or 0 < value < MIN_SPEED):
        raise click.BadParameter(f"{value:g}: 0 (the end at once) or at least {MIN_SPEED:g}",
                                 ctx, param)
    return value


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--progress", "progress", type=click.Choice(["auto", "dashboard", "plain"]),
              default="auto", show_default=True,
              help="The dashboard (on a terminal; elsewhere plain lines) or plain status "
              "lines.")
@click.option("--every", "every", type=click.FloatRange(min=0.1, max=86400), default=None,
              metavar="S", help="Seconds between plain status lines (default 30; 1 while "
              "replaying).")
@click.option("--speed", "speed", type=click.FloatRange(min=0, max=1e9), default=None,
              metavar="X", callback=_replay_speed,
              help="A finished run replays at X run seconds per wall second (default: in "
              "about 10 s; 0: its final figures at once).")
def watch(run_dir: Path, progress: str, every: float | None, speed: float | None) -> None:
    """Watch RUN_DIR: follow a running run (a --workers or Ray run included) to its end,
    or replay a finished one; read-only, never in the writer's way.

    RUN_DIR may also be a sweep or size folder: its running point is followed, under
    the search's state."""
    from simulator.errors import InputError
    from simulator.live.follow import manifest_now, run_dirs_in
    from simulator.live.watch import (
        FolderWatch,
        answer_file,
        follow,
        replay,
        unreadable,
        view_for,
        writer_alive,
    )

    if (problem := unreadable(run_dir)) is not None:
        raise InputError(problem)
    manifest = manifest_now(run_dir)
    if manifest is None:
        if not run_dirs_in(run_dir):
            raise InputError(f"{run_dir}: no manifest.json, and no run directory inside: "
                             "not a run, sweep or size folder")
        folder = FolderWatch(run_dir, progress, sys.stdout, every or 30.0, "watch")
        if answer_file(run_dir) is not None and not any(
                writer_alive(d) for d in run_dirs_in(run_dir)):
            click.echo("\n".join(folder.finished_lines()))
            return
        folder.start()
        try:
            while True:
                folder.wait(1.0)      # until Ctrl-C
        except KeyboardInterrupt:
            folder.stop()
        return
    running = manifest.status == "running" and writer_alive(run_dir)
    view = view_for(run_dir, progress, sys.stdout,
                    every if every is not None else (30.0 if running else 1.0))
    click.echo(f"watch: {'following' if running else 'replaying'} {run_dir} "
               f"(status {manifest.status})", err=True)
    try:
        if running:
            view.warm_up()
            view.start()
            follow(run_dir, view, note=lambda line: click.echo(f"note: {line}", err=True))
        else:
            if manifest.status == "running":
                click.echo(f"note: {run_dir}: its status is running but no process writes "
                           "it (killed?); replaying what it journaled", err=True)
            replay(run_dir, view, speed)
    except KeyboardInterrupt:
        view.close(view.figures.run_figures().wall_window_s or 0.0, final=False)
        sys.exit(130)
