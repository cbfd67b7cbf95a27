"""`endurance check URL --recall`: the long-context recall table, length × depth.

Exit codes: 0 the table was measured (whatever the recall: a weak model is not an
error), 1 no case could run (every one failed or was beyond the limit), 2 bad input.
"""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from simulator.check.needle import Cell, cells, length_label, parse_depths, parse_lengths
from simulator.check.recall import RecallReport


def recall_table(report: RecallReport) -> Table:
    """Rows: lengths (with the server's own token count); columns: depths."""
    window = f"window {report.window}" if report.window else "window not reported"
    n = sum(o.status in ("hit", "miss") for o in report.outcomes)
    hits = sum(o.status == "hit" for o in report.outcomes)
    sim = " (simulated: the twin does not search a haystack)" if report.simulated else ""
    table = Table(title=f"recall check {report.base_url} (model {report.model}, {window})"
                        + sim,
                  caption=f"{hits} of {n} recalled, {report.repeats} per cell, greedy, "
                          f"in {report.elapsed_s:.1f} s; cells: recalled/ran")
    table.add_column("length", no_wrap=True)
    table.add_column("server tokens", justify="right")
    for d in report.depths:
        table.add_column(f"depth {d:g}", justify="right")
    table.add_column("all depths", justify="right")
    for row in cells(report.outcomes, report.lengths, report.depths):
        length = row[0].length
        server = [o.server_tokens for o in report.outcomes
                  if o.length == length and o.server_tokens]
        total = Cell(length, -1, sum(c.hits for c in row), sum(c.ran for c in row),
                     sum(c.beyond for c in row), sum(c.errors for c in row))
        table.add_row(length_label(length),
                      f"{sum(server) / len(server):.0f}" if server else "-",
                      *(c.label() for c in row), total.label())
    return table


def run_recall_cli(url: str, model: str | None, api_key: str | None, timeout_s: float,
                   as_json: bool, lengths: str, depths: str, repeats: int) -> int:
    """Parse the grid, run it with a progress line per case, print; the exit code."""
    from simulator.check.recall import run_recall
    from simulator.errors import InputError
    grid_l, grid_d = parse_lengths(lengths), parse_depths(depths)
    if not 1 <= repeats <= 100:
        raise InputError(f"--repeats {repeats}: must be within 1 and 100")

    def progress(o: object) -> None:
        if not as_json:
            click.echo(".", nl=False, err=True)

    report = run_recall(url, grid_l, grid_d, repeats=repeats, model=model, api_key=api_key,
                        timeout_s=timeout_s, progress=progress)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo("", err=True)
        Console(soft_wrap=False).print(recall_table(report))
        errors = [o for o in report.outcomes if o.status == "error"]
        if errors:
            click.echo(f"{len(errors)} case(s) failed, first: {errors[0].detail}", err=True)
    return 0 if any(o.status in ("hit", "miss") for o in report.outcomes) else 1
