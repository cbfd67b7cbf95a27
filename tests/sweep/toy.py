"""Toy servers for the search pipeline's tests: a point runner that answers from the
probe's session count and seed offset, and `size`/`sweep` run through the pipeline."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from simulator.analysis.run_summary import RunSummary
from simulator.analysis.sizing import SizingResult
from simulator.analysis.slo import parse_slo
from simulator.sweep.card_size import SizeProfile
from simulator.sweep.fanout import Serial
from simulator.sweep.pipeline import run_profile
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import Counts, PointBase, Sweep

BASE = PointBase("scenario.yaml", (), Path("/nonexistent"), base_seed=7)


def toy_server(n: int, *, knee: int = 10, kv_limit: int | None = None) -> dict[str, Any]:
    """Per-session speed halves at `knee` sessions; TTFT grows linearly; preemptions past kv."""
    per = 100.0 / (1.0 + n / knee)
    return {"requested_sessions": n, "window_per_session_tok_s": per,
            "window_aggregate_tok_s": per * n, "window_ttft_p50_s": 0.1 * n,
            "window_ttft_p95_s": 0.2 * n, "cache_shared_pct": 80.0,
            "window_usd_per_mtok": 1.0, "simulated": True, "steady_state": True,
            "preemptions": (5 if kv_limit is not None and n > kv_limit else 0),
            "kv_usage_peak": min(1.0, n / 20)}


Server = Callable[[int, int], Mapping[str, Any]]     # (sessions, seed offset) → summary


class Toy:
    """A point runner over a toy server; `calls` lists (sessions, seed offset) asked."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.calls: list[tuple[int, int]] = []

    def __call__(self, p: Point) -> PointResult:
        n, k = p.coords["requested_sessions"], p.coords.get("seed_offset", 0)
        self.calls.append((n, k))
        return PointResult(p, f"run-{n}-{k}", "completed", "",
                           RunSummary.from_json(self.server(n, k)), 0.0, 0.0)


class Wide(Serial):
    """A serial executor that says it runs K at once: the profile plans K-wide batches."""

    def __init__(self, width: int) -> None:
        self.width = width


def size(server: Server, slos: list[str], max_sessions: int, *, width: int = 1,
         **kw: Any) -> tuple[SizingResult, Toy]:
    toy = Toy(server)
    profile = SizeProfile(BASE, tuple(parse_slo(s) for s in slos), max_sessions, **kw)
    return run_profile(profile, Wide(width), runner=toy), toy




def sweep(server: Server, counts: tuple[int, ...]) -> list[dict[str, Any]]:
    """The counts sweep over a toy server: its rows."""
    rows: list[dict[str, Any]] = run_profile(Sweep(BASE, Counts(counts)), Serial(),
                                             runner=Toy(server)).rows
    return rows
