"""Notebook helpers that make runs: reuse a matching twin run or make one now.

A notebook must run top to bottom on a fresh checkout, so every result it reads comes
from `ensure_run`: an existing completed run of the same resolved scenario on the same
twin is reused, otherwise a new run is made on the in-process twin (virtual time, so
seconds of wall time). `sweep` and `size` are the CLI's own searches
(`simulator.sweep.api`; `size` builds the command's `SizeRequest`, so it meets the
command's refusals), their runs kept under the results folder and reused. This
module sits above `run` and `sweep` (like the CLI); the read-only helpers live in
`simulator.analysis.notebook` and are re-exported here, so a notebook imports one
module: `from simulator import lab as nb`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulator.analysis.notebook import (
    DEFAULT_TWIN,
    RESULTS_ENV,
    completed_runs,
    describe_run,
    find_run,
    latest_run,
    repo_root,
    results_dir,
    run_summary,
    scenario_path,
)
from simulator.analysis.sizing import SizingResult
from simulator.errors import InputError, RunError
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario.load import load_scenario
from simulator.session.prefix import build_base_prefix
from simulator.sweep import api
from simulator.sweep.point import Target
from simulator.sweep.profiles import Counts, PointBase
from simulator.sweep.request import SizeRequest
from simulator.sweep.size_file import SIZE_FILE, size_data, write_json
from simulator.sweep.size_search import prepare, search
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.model.profiles import parse_twin

__all__ = ["DEFAULT_TWIN", "RESULTS_ENV", "completed_runs", "describe_run", "ensure_run",
           "find_run", "kv_capacity_tokens", "latest_run", "new_run", "repo_root",
           "results_dir", "run_summary", "scenario_path", "shared_prefix_tokens", "size",
           "sweep"]


def new_run(scenario: str | Path, overrides: Sequence[str] = (), out_dir: str | Path | None = None,
            *, twin: str | None = None, label: str | None = None) -> Path:
    """Run the scenario on the in-process twin now; returns the run directory."""
    spec = RunSpec(str(scenario), list(overrides), twin=twin or None,
                   out_dir=Path(out_dir or results_dir()), label=label, show_progress=False)
    res = execute(spec, echo=lambda s: None)  # runs off-loop by itself under Jupyter
    if res.status != "completed":
        raise RunError(f"{res.run_dir}: run {res.status}: {res.outcome.reason}")
    return res.run_dir


def ensure_run(scenario: str | Path, overrides: Sequence[str] = (), out_dir: str | Path | None = None,
               *, twin: str | None = None, label: str | None = None) -> Path:
    """A completed twin run of (scenario, overrides, twin): reused when one exists under
    out_dir (default `results_dir()`), else made now. Returns the run directory."""
    found = find_run(scenario, overrides, out_dir, twin=twin)
    return found if found is not None else new_run(scenario, overrides, out_dir, twin=twin,
                                                   label=label)


def _base(scenario: str | Path, overrides: Sequence[str], out_dir: str | Path | None,
          twin: str | None) -> PointBase:
    """The search's runs straight under out_dir, where a matching one is reused."""
    return api.search_base(scenario, overrides, target=Target(twin=twin or None),
                           folder=Path(out_dir or results_dir()), reuse=True)


def sweep(scenario: str | Path, counts: Sequence[int], overrides: Sequence[str] = (),
          out_dir: str | Path | None = None, *, twin: str | None = None) -> list[dict[str, Any]]:
    """`endurance sweep` on the twin, through the same pipeline: one row per session
    count (every figure of its run under summary.json's names; `window_*` are the
    steady-state window's). A matching completed run under out_dir is reused."""
    return api.points(_base(scenario, overrides, out_dir, twin), Counts(tuple(counts))).rows


def size(scenario: str | Path, slos: Sequence[str], max_sessions: int,
         overrides: Sequence[str] = (), out_dir: str | Path | None = None, *,
         twin: str | None = None, repeats: int = 1,
         save: str | Path | None = None) -> SizingResult:
    """`endurance size` on the twin: the same request (`sweep.SizeRequest`, refused in
    one line as the command refuses it), the same search (SLOs on the steady-state
    window, repeats with other seeds, the KV-capacity bound); runs are reused. With
    `save`, the command's `size.json` is written in that folder."""
    request = SizeRequest(str(scenario), tuple(slos), tuple(overrides), twin=twin or None,
                          max_sessions=max_sessions, repeats=repeats,
                          folder=Path(out_dir or results_dir()), reuse=True)
    plan = prepare(request)
    found = None if plan.team_day else search(plan)
    if not isinstance(found, SizingResult):     # a card request's answer, unless a team day
        raise InputError(f"lab.size {scenario}: a team replay's day is sized by "
                         "sweep.search(SizeRequest(...)), which answers a TeamSizing")
    if save is not None:
        write_json(Path(save) / SIZE_FILE, size_data(found))
    return found


def kv_capacity_tokens(twin: str) -> int:
    """KV-cache capacity (tokens) of a twin profile "hardware/model"."""
    hw, model = parse_twin(twin)
    return int(build_perf_model(hw, model).kv_capacity_tokens())


def shared_prefix_tokens(scenario: str | Path, overrides: Sequence[str] = ()) -> int:
    """Tokens of the prefix every session shares (0 when the scenario busts the cache)."""
    s, _ = load_scenario(scenario, list(overrides))
    return int(build_base_prefix(s).tokens_est) if s.cache_bust == "none" else 0
