"""`endurance watch RUN_DIR`: the live dashboard of a run directory."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from simulator.cli._app import main


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--progress", "progress", type=click.Choice(["auto", "dashboard", "plain"]),
              default="auto", show_default=True,
              help="The dashboard (on a terminal; elsewhere plain lines) or plain status "
              "lines.")
@click.option("--every", "every", type=click.FloatRange(min=0.1, max=86400), default=None,
              metavar="S", help="Seconds between plain status lines (default 30; 1 while "
              "replaying).")
@click.option("--speed", "speed", type=click.FloatRange(min=0), default=None, metavar="X",
              help="A finished run replays at X run seconds per wall second (default: in "
              "about 10 s; 0: its final figures at once).")
def watch(run_dir: Path, progress: str, every: float | None, speed: float | None) -> None:
    """Watch RUN_DIR: follow a running run (a --workers or Ray run included) to its end,
    or replay a finished one; read-only, never in the writer's way.

    RUN_DIR may also be a sweep or size folder: its running point is followed, under
    the search's state."""
    from simulator.errors import InputError
    from simulator.live.follow import read_manifest, run_dirs_in
    from simulator.live.watch import FolderWatch, follow, replay, view_for, writer_alive

    manifest = read_manifest(run_dir)
    if manifest is None:
        if not run_dirs_in(run_dir):
            raise InputError(f"{run_dir}: no manifest.json, and no run directory inside: "
                             "not a run, sweep or size folder")
        folder = FolderWatch(run_dir, progress, sys.stdout, every or 30.0, "watch").start()
        try:
            while True:
                folder.wait(1.0)      # until Ctrl-C
        except KeyboardInterrupt:
            folder.stop()
        return
    running = manifest.get("status") == "running" and writer_alive(run_dir)
    view = view_for(run_dir, progress, sys.stdout,
                    every if every is not None else (30.0 if running else 1.0))
    click.echo(f"watch: {'following' if running else 'replaying'} {run_dir} "
               f"(status {manifest.get('status')})", err=True)
    try:
        if running:
            view.warm_up()
            view.start()
            follow(run_dir, view, note=lambda line: click.echo(f"note: {line}", err=True))
        else:
            if manifest.get("status") == "running":
                click.echo(f"note: {run_dir}: its status is running but no process writes "
                           "it (killed?); replaying what it journaled", err=True)
            replay(run_dir, view, speed)
    except KeyboardInterrupt:
        view.close(view.figures.run_figures().wall_window_s or 0.0, final=False)
        sys.exit(130)
