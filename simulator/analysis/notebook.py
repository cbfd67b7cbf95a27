"""Read-only helpers the notebooks share: find the bundled scenarios and completed runs.

Where results live follows `ENDURANCE_RESULTS` (tests point it at a temporary folder),
else the repository's `results/`. Making runs (`ensure_run`, `TwinPoints`) needs the run
orchestration above this layer, so it lives in `simulator.lab`, which re-exports these.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from simulator.analysis.load import load_run, load_saved_summary
from simulator.analysis.metric_keys import SummaryRecord
from simulator.analysis.summary import summarize_run
from simulator.errors import InputError
from simulator.records.manifest import Manifest, read_manifest
from simulator.scenario.load import load_scenario, scenario_hash
from simulator.twin.model.profiles import DEFAULT_TWIN

__all__ = ["DEFAULT_TWIN", "completed_runs", "describe_run", "find_run", "latest_run",
           "repo_root", "results_dir", "run_summary", "scenario_path"]

RESULTS_ENV = "ENDURANCE_RESULTS"


def repo_root(start: Path | None = None) -> Path:
    """The checkout holding `scenarios/`: the start folder or a parent, else the package's."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "scenarios").is_dir() and (d / "simulator").is_dir():
            return d
    return Path(__file__).resolve().parents[2]


def scenario_path(name: str) -> Path:
    """Path of a bundled scenario by name (`claude-code-endurance`) or file name."""
    stem = name.removesuffix(".yaml")
    path = repo_root() / "scenarios" / f"{stem}.yaml"
    if not path.is_file():
        raise InputError(f"scenario {name!r}: {path} not found")
    return path


def results_dir() -> Path:
    """Where notebooks read and write runs: $ENDURANCE_RESULTS, else <repo>/results."""
    env = os.environ.get(RESULTS_ENV)
    return Path(env) if env else repo_root() / "results"


def _twin_of(manifest: Manifest) -> str | None:
    """"hardware/model" of an in-process twin run (None for real endpoints)."""
    ep = manifest.endpoint
    if ep.kind != "twin-inprocess":
        return None
    return f"{ep.hardware}/{ep.model}"


def _wanted(scenario: str | Path, overrides: Sequence[str],
            twin: str | None) -> tuple[str, str]:
    """(scenario hash, twin) that a matching run's manifest must carry."""
    s, resolved = load_scenario(scenario, list(overrides))
    h = scenario_hash({k: v for k, v in resolved.items() if k != "base_dir"})
    return h, twin or f"{s.twin.hardware}/{s.twin.model}"


def completed_runs(out_dir: str | Path) -> list[tuple[Path, Manifest]]:
    """(run_dir, manifest) of every completed run directly under out_dir, oldest first."""
    root = Path(out_dir)
    if not root.is_dir():
        return []
    found = []
    for d in sorted(root.iterdir()):
        if not (d / "manifest.json").is_file() or not (d / "turns.parquet").is_file():
            continue
        try:
            m = read_manifest(d)
        except InputError:
            continue
        if m.status == "completed":
            found.append((d, m))
    return sorted(found, key=lambda dm: dm[1].started_at or 0.0)


def find_run(scenario: str | Path, overrides: Sequence[str] = (), out_dir: str | Path | None = None,
             *, twin: str | None = None) -> Path | None:
    """The newest completed twin run of this resolved scenario on this twin, if any."""
    want_hash, want_twin = _wanted(scenario, overrides, twin)
    hits = [d for d, m in completed_runs(out_dir or results_dir())
            if m.scenario_hash == want_hash and _twin_of(m) == want_twin]
    return hits[-1] if hits else None


def latest_run(scenario_name: str, out_dir: str | Path | None = None, *,
               compaction: str | None = None, sessions: int | None = None,
               seed: int | None = None) -> Path | None:
    """The newest completed run (any endpoint) of a scenario by name whose manifest also
    has the compaction, session count and seed given (e.g. compaction="block")."""
    hits = [d for d, m in completed_runs(out_dir or results_dir())
            if m.scenario == scenario_name
            and (compaction is None or m.compaction == compaction)
            and (sessions is None or m.sessions == sessions)
            and (seed is None or m.seed == seed)]
    return hits[-1] if hits else None


def run_summary(run_dir: str | Path) -> SummaryRecord:
    """The summary of a run directory, recomputed from its files (as `report` does)."""
    manifest, turns, server = load_run(run_dir)
    return summarize_run(manifest, turns, server, load_saved_summary(run_dir))


def describe_run(run_dir: str | Path) -> str:
    """What a run was, in one paragraph: endpoint (hardware, model, quantization or URL,
    simulated or not, time scale), scenario, sessions × turns, compaction, seed, overrides
    — printed by every notebook so a figure is never read without its settings."""
    m = read_manifest(Path(run_dir))
    ep = m.endpoint
    if ep.kind == "twin-inprocess":
        where = (f"in-process twin (SIMULATED): hardware {ep.hardware}, model "
                 f"{ep.model} ({ep.quantization or '?'})")
    elif m.http_twin is not None:
        where = (f"HTTP twin at {ep.url} (SIMULATED, time scale {m.time_scale}): "
                 f"hardware {m.http_twin_hardware}, model {m.http_twin_model}")
    else:
        model = None if m.scenario_resolved is None else m.scenario_resolved.model
        where = f"real endpoint {ep.url or '?'}, model {model or '?'}"
    over = ", ".join(m.overrides) or "none"
    return (f"{Path(run_dir).name}: {where}; scenario {m.scenario}, "
            f"{m.sessions} session(s) × {m.turns} turns, compaction "
            f"{m.compaction}, seed {m.seed}, overrides {over}; status "
            f"{m.status}")
