"""`endurance sweep … --copy 0,0.5,1 --spec off,ngram:24`: every (copy level, setting,
session count, seed) as an ordinary run under the sweep's folder, then one table with
the break-even per session count and one plot (`simulator.analysis.copy_sweep`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from simulator.cli.setting_sweep import run_jobs
from simulator.errors import RunError


def copy_sweep(scenario: str, levels_text: str, spec_text: str | None, base: list[str],
               folder: Path, opts: dict[str, Any], counts: list[int], repeats: int,
               as_json: bool, par: tuple[int, str, str | None],
               save_and_show: Callable[..., None]) -> None:
    from simulator.analysis.copy_sweep import (
        copy_levels,
        copy_overrides,
        copy_rows,
        format_copy_table,
        write_copy_plot,
    )
    from simulator.analysis.spec_sweep import spec_list
    from simulator.scenario.load import load_scenario
    from simulator.sweep.point import PointSpec, run_point
    levels = copy_levels(levels_text)
    specs = spec_list(spec_text or "off,ngram:24")
    s, _ = load_scenario(scenario, base)
    code_edit = [t.code_edit for t in s.turn_templates]
    sets = {lv: copy_overrides(code_edit, lv) for lv in levels}
    jobs = [(lv, sp, n, k) for lv in levels for sp in specs for n in counts
            for k in range(repeats)]
    points = {j: PointSpec(scenario, (*base, *sets[j[0]]), j[2],
                           str(folder / f"copy-{j[0]:g}" / j[1].replace(":", "-")), j[3],
                           **{**opts, "spec": j[1]}) for j in jobs}

    def one(job: tuple[float, str, int, int]) -> Any:
        return run_point(points[job])
    results = run_jobs(one, jobs, par, None if as_json else
                       lambda j: f"copy {j[0]:g}, {j[1]}, {j[2]} sessions (seed +{j[3]})",
                       lambda j: float(j[2]))
    for job, res in zip(jobs, results, strict=True):
        if res.status == "failed":
            raise RunError(f"the run at copy {job[0]:g}, {job[1]}, {job[2]} sessions "
                           f"failed: {res.reason} ({res.run_dir})")
    figures = {job: res.figures for job, res in zip(jobs, results, strict=True)}
    rows = copy_rows(figures, levels, specs, counts, repeats)
    dirs = {job: res.run_dir for job, res in zip(jobs, results, strict=True)}
    for r in rows:
        r["run_dirs"] = [dirs[j] for j in jobs if j[0] == r["copy"] and j[2] == r["sessions"]
                         and j[1] in (r["spec"], r["baseline"])]
    save_and_show(rows, folder, "copy-sweep", write_copy_plot, format_copy_table, as_json)
