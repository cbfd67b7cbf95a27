"""CLI commands over finished runs: `report` and `compare`.

`sweep` and `size` live in `simulator.cli.sweep`. The analysis modules (pandas,
matplotlib) are imported inside the commands, so that every other command starts fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from simulator.cli._app import main
from simulator.errors import InputError

_RUN_DIR = click.Path(path_type=Path, file_okay=False)


@main.command()
@click.argument("run_dir", type=_RUN_DIR)
def report(run_dir: Path) -> None:
    """Write RUN_DIR/report.html (self-contained), report.md and the PNG plots.

    On a `sweep`/`size` folder: sizing_report.html (speed, latency, KV, cost and
    achieved concurrency against N; each point's steady-state window on a timeline)."""
    from simulator.report.sweep_html import is_sizing_dir, render_sizing_report
    if is_sizing_dir(run_dir):
        click.echo(str(render_sizing_report(run_dir)))
        return
    from simulator.report.html import render_report
    paths = render_report(run_dir)
    for p in paths.images:
        click.echo(str(p))
    click.echo(str(paths.markdown))
    click.echo(str(paths.html))


@main.command()
@click.argument("run_dirs", nargs=-1, type=_RUN_DIR)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.option("--out", type=click.Path(path_type=Path),
              help="Overlay PNG path or folder (default: a compare-… folder beside the first run).")
@click.option("--resamples", type=click.IntRange(100, 100_000), default=2000,
              show_default=True, help="Bootstrap resamples for the paired ratio.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
def compare(run_dirs: tuple[Path, ...], as_json: bool, out: Path | None, resamples: int,
            seed: int) -> None:
    """Compare runs side by side (% vs the first); paired per-turn CI for same-seed runs."""
    if len(run_dirs) < 2:
        raise InputError("compare: give at least two run directories")
    from simulator.analysis.compare import compare_runs, load_runs
    from simulator.report.compare import format_comparison, write_overlay
    runs = load_runs(list(run_dirs))
    result = compare_runs(runs, resamples=resamples, seed=seed)
    result["overlay_png"] = str(write_overlay(runs, out))
    (Path(result["overlay_png"]).parent / "compare.json").write_text(json.dumps(result, indent=2) + "\n")
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(format_comparison(result))
        click.echo(f"overlay: {result['overlay_png']}")
