"""`endurance sweep … --set KEY=a,b,c`: the scenario once per value (R seeds each) at
one session count, one row per value with speed beside recall, and the speed–recall
frontier (`simulator.analysis.policy_sweep`). Every run is a normal results directory
under the sweep's folder."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from simulator.errors import InputError, RunError


def setting_sweep(scenario: str, listed: tuple[str, list[str]], base: list[str],
                  folder: Path, opts: dict[str, Any], sessions_list: str | None, repeats: int,
                  as_json: bool, par: tuple[int, str, str | None],
                  save_and_show: Callable[..., None]) -> None:
    from simulator.analysis.load import load_run
    from simulator.analysis.policy_sweep import (
        format_policy_table,
        mark_frontier,
        point_row,
        write_age_plot,
        write_frontier_plot,
    )
    from simulator.scenario.load import load_scenario
    from simulator.sweep.point import PointSpec, run_point
    key, values = listed
    if len(set(values)) < len(values):
        raise InputError(f"--set {key}: a value is listed twice ({','.join(values)})")
    for v in values:                      # a bad value fails here, before any run
        load_scenario(scenario, [*base, f"{key}={v}"])
    if sessions_list is None:
        n = load_scenario(scenario, base)[0].sessions
    else:
        counts = [c for c in sessions_list.split(",") if c.strip()]
        if len(counts) != 1 or not counts[0].strip().isdigit() or int(counts[0]) < 1:
            raise InputError(f"--sessions: a --set sweep runs at one session count, got "
                             f"{sessions_list!r}")
        n = int(counts[0])
    jobs = [(v, k) for v in values for k in range(repeats)]
    specs = {job: PointSpec(scenario, (*base, f"{key}={job[0]}"), n,
                            str(folder / _safe(job[0])), job[1], **opts) for job in jobs}

    def one(job: tuple[str, int]) -> Any:
        return run_point(specs[job])
    results = run_jobs(one, jobs, par, None if as_json else
                       lambda job: f"{key}={job[0]} (seed +{job[1]})", lambda j: 1.0)
    rows = []
    for v in values:
        done = [r for (jv, _), r in zip(jobs, results, strict=True) if jv == v]
        failed = [r for r in done if r.status == "failed"]
        if failed:
            raise RunError(f"the run with {key}={v} failed: {failed[0].reason} "
                           f"({failed[0].run_dir})")
        turns = [load_run(Path(r.run_dir))[1] for r in done]
        row = point_row(key, v, [r.figures for r in done], turns)
        rows.append(row | {"sessions": n, "run_dirs": [r.run_dir for r in done]})
    save_and_show(mark_frontier(rows), folder, "policy-sweep", write_frontier_plot,
                  format_policy_table, as_json)
    if any(r.get("probe_requests") for r in rows):
        write_age_plot(rows, folder / "recall-vs-age.png")


def run_jobs(one: Callable[[Any], Any], jobs: Sequence[Any], par: tuple[int, str, str | None],
             label: Callable[[Any], str] | None, cost: Callable[[Any], float]) -> list[Any]:
    """`[one(job) for job in jobs]`: serially in this process (each printed to stderr
    with its status and run folder when `label` is given), or through
    `simulator.sweep.fanout.map_points` with --parallel / --executor (costliest first)."""
    from simulator.sweep.fanout import map_points
    parallel, executor, ray_address = par
    if parallel != 1 or executor != "local":
        return map_points(one, jobs, parallel, executor, ray_address=ray_address, cost=cost)
    results = []
    for job in jobs:
        res = one(job)
        if label is not None:
            click.echo(f"  {label(job)}: {res.status} → {res.run_dir}", err=True)
        results.append(res)
    return results


def _safe(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", value) or "value"
