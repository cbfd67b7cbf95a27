"""One sweep/size point as a plain, picklable call: `run_point(PointSpec) -> PointResult`.

`sweep` and `size` map this over their session counts (and seeds), so a parallel
executor can ship a `PointSpec` to another process and get a JSON-able result back.
The point's figures are the steady-state window's (`point_figures`); the whole-run
figures stay beside them, prefixed `run_`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Sweep/size figures taken from the steady-state window; the run's own go to run_<key>.
WINDOW_FOR: dict[str, str] = {
    "aggregate_tok_s": "window_aggregate_tok_s",
    "per_session_tok_s": "window_per_session_tok_s",
    "ttft_p50_s": "window_ttft_p50_s",
    "ttft_p95_s": "window_ttft_p95_s",
    "usd_per_mtok": "window_usd_per_mtok",
}


@dataclass(frozen=True, slots=True)
class PointSpec:
    """Everything one point needs; plain values only (picklable, JSON-able)."""

    scenario_path: str
    overrides: tuple[str, ...]
    sessions: int
    out_dir: str
    seed_offset: int = 0           # repeats: the scenario's seed + this
    endpoint_url: str | None = None
    twin: str | None = None
    spec: str | None = None
    price_per_hour: float | None = None
    client: str | None = None
    reset_prefix_cache: bool = False   # POST /reset_prefix_cache before the run (cold start)


@dataclass(slots=True)
class PointResult:
    sessions: int
    seed_offset: int
    run_dir: str
    status: str
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)   # point_figures(summary)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def point_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary with the sizing figures taken from the steady-state window (None
    when the point never reached one) and the whole-run ones kept as run_<key>."""
    out = dict(summary)
    if "requested_sessions" not in summary:      # a summary without steady figures
        return out
    for key, wkey in WINDOW_FOR.items():
        out[f"run_{key}"] = summary.get(key)
        out[key] = summary.get(wkey)
    return out


def run_point(p: PointSpec) -> PointResult:
    """Run the scenario at p.sessions (a normal results directory under p.out_dir)."""
    from simulator.run.execute import execute
    from simulator.run.spec import RunSpec
    from simulator.scenario.load import load_scenario
    overrides = [*p.overrides, f"sessions={p.sessions}"]
    if p.seed_offset:
        s, _ = load_scenario(p.scenario_path, overrides)
        overrides.append(f"seed={s.seed + p.seed_offset}")
    label = f"{p.sessions} sessions" + (f" (seed +{p.seed_offset})" if p.seed_offset else "")
    spec = RunSpec(p.scenario_path, overrides, out_dir=Path(p.out_dir), label=label,
                   show_progress=False, endpoint_url=p.endpoint_url, twin=p.twin, spec=p.spec,
                   price_per_hour=p.price_per_hour, client=p.client)
    if p.reset_prefix_cache and p.endpoint_url:
        from simulator.endpoints.http.cache_reset import reset_prefix_cache
        reset_prefix_cache(p.endpoint_url)
    res = execute(spec, echo=lambda s: None)
    return PointResult(p.sessions, p.seed_offset, str(res.run_dir), res.status,
                       res.outcome.reason, point_figures(res.summary))
