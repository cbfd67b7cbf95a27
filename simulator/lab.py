"""Notebook helpers that make runs: reuse a matching twin run or make one now.

A notebook must run top to bottom on a fresh checkout, so every result it reads comes
from `ensure_run`: an existing completed run of the same resolved scenario on the same
twin is reused, otherwise a new run is made on the in-process twin (virtual time, so
seconds of wall time). This module sits above `runs` (like the CLI); the read-only
helpers live in `simulator.analysis.notebook` and are re-exported here, so a notebook
imports one module: `from simulator import lab as nb`.
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
from simulator.errors import RunError
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario.load import load_scenario
from simulator.session.prefix import build_base_prefix
from simulator.sweep.point import point_figures
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.model.profiles import parse_twin

__all__ = ["DEFAULT_TWIN", "RESULTS_ENV", "TwinPoints", "completed_runs", "describe_run",
           "ensure_run", "find_run",
           "kv_capacity_tokens", "latest_run", "new_run", "repo_root", "results_dir", "run_summary",
           "scenario_path", "shared_prefix_tokens"]


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


class TwinPoints:
    """`run_point(n) -> figures` for `sizing.sweep`/`sizing.size` on the twin, the figures
    `endurance sweep`/`size` judge (`points.point_figures`: the steady-state window's, the
    whole run's as `run_<key>`), and `seeded(n, k)` for `size`'s repeats (seed + k).

    The first call at a session count reuses a matching run (`ensure_run`); a repeat
    call makes a fresh run. `run_dirs[n]` lists the runs.
    """

    def __init__(self, scenario: str | Path, overrides: Sequence[str] = (),
                 out_dir: str | Path | None = None, *, twin: str | None = None) -> None:
        self.scenario, self.overrides = scenario, list(overrides)
        self.out_dir, self.twin = Path(out_dir or results_dir()), twin
        self.run_dirs: dict[int, list[Path]] = {}

    def __call__(self, n: int) -> dict[str, Any]:
        return self.seeded(n, 0)

    def seeded(self, n: int, seed_offset: int) -> dict[str, Any]:
        """The point at n sessions with the scenario's seed + seed_offset (as the CLI's
        `points.run_point`): a repeat with the same seed would only return the same run."""
        over = [*self.overrides, f"sessions={n}"]
        if seed_offset:
            s, _ = load_scenario(self.scenario, over)
            over.append(f"seed={s.seed + seed_offset}")
        done = self.run_dirs.setdefault(n, [])
        make = new_run if done and not seed_offset else ensure_run
        label = f"{n} sessions" + (f" (seed +{seed_offset})" if seed_offset else "")
        run_dir = make(self.scenario, over, self.out_dir, twin=self.twin, label=label)
        done.append(run_dir)
        return point_figures(run_summary(run_dir))


def kv_capacity_tokens(twin: str) -> int:
    """KV-cache capacity (tokens) of a twin profile "hardware/model"."""
    hw, model = parse_twin(twin)
    return int(build_perf_model(hw, model).kv_capacity_tokens())


def shared_prefix_tokens(scenario: str | Path, overrides: Sequence[str] = ()) -> int:
    """Tokens of the prefix every session shares (0 when the scenario busts the cache)."""
    s, _ = load_scenario(scenario, list(overrides))
    return int(build_base_prefix(s).tokens_est) if s.cache_bust == "none" else 0
