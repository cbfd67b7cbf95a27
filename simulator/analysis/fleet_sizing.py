"""How many replicas a team needs behind a given router, from fleet runs (pure search).

`size --team M` divides: ⌈M / N⌉ cards, N being what one card holds. That assumes every
replica is an independent copy of one card and ignores the router, which for agent
traffic decides the cache (docs/fleet.md). Here each probe is one fleet run of M
sessions on R replicas behind the router, judged by the same SLOs (steady state
required, as for one card); the answer is the smallest R whose fleet meets them all.
The search starts at the division's answer (the first guess a user would make), walks
down while the fleet still passes, else doubles up and bisects; it assumes more
replicas never make the figures worse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simulator.analysis.sizing import Slo

RunFleet = Callable[[int], dict[str, Any]]    # replicas → point figures of M sessions
SHOWN = ("aggregate_tok_s", "per_session_tok_s", "ttft_p95_s", "usd_per_mtok")


@dataclass
class FleetProbe:
    replicas: int
    passed: bool
    failed: tuple[str, ...]
    summary: dict[str, Any]


@dataclass
class FleetSizing:
    team_sessions: int
    router: str
    replicas: int | None              # smallest R that meets every SLO (None: none ≤ max)
    division: int | None              # ⌈M / N⌉ from one card's answer
    max_replicas: int
    probes: list[FleetProbe] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        fleet = [p.summary.get("fleet") or {} for p in self.probes]
        return {"team_sessions": self.team_sessions, "router": self.router,
                "replicas": self.replicas, "division_cards": self.division,
                "max_replicas": self.max_replicas,
                "probes": [{"replicas": p.replicas, "passed": p.passed, "failed": list(p.failed),
                            "cache_read_share": f.get("cache_read_share"),
                            "load_imbalance": f.get("load_imbalance"),
                            **{k: p.summary.get(k) for k in SHOWN}}
                           for p, f in zip(self.probes, fleet, strict=True)]}


def judge(summary: dict[str, Any], slos: tuple[Slo, ...]) -> tuple[str, ...]:
    """The SLOs a fleet run missed (a run that never reached steady state misses all)."""
    failed = tuple(str(s) for s in slos if not s.check(summary))
    if summary.get("steady_state") is False:
        failed = (f"not steady: {summary.get('steady_state_reason')}", *failed)
    return failed


def size_fleet(run_fleet: RunFleet, slos: list[Slo], team_sessions: int, router: str, *,
               start: int | None, max_replicas: int = 64) -> FleetSizing:
    """Smallest R ≤ max_replicas whose fleet of `team_sessions` meets every SLO."""
    res = FleetSizing(team_sessions, router, None, start, max_replicas)
    seen: dict[int, FleetProbe] = {}

    def passes(r: int) -> bool:
        if r not in seen:
            summary = run_fleet(r)
            failed = judge(summary, tuple(slos))
            seen[r] = FleetProbe(r, not failed, failed, summary)
            res.probes.append(seen[r])
        return seen[r].passed

    r = min(max(start or 1, 1), max_replicas)
    if passes(r):
        while r > 1 and passes(r - 1):
            r -= 1
        res.replicas = r
        return res
    lo = r                       # fails
    hi = None
    while hi is None and lo < max_replicas:
        nxt = min(lo * 2, max_replicas)
        if passes(nxt):
            hi = nxt
        else:
            lo = nxt
    if hi is None:
        return res
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if passes(mid) else (mid, hi)
    res.replicas = hi
    return res


def format_fleet_sizing(f: FleetSizing) -> str:
    lines = [f"fleet behind {f.router}: a team of {f.team_sessions} sessions needs "
             + (f"{f.replicas} replica(s)" if f.replicas else
                f"more than {f.max_replicas} replicas")
             + (f" (division said {f.division})" if f.division else "")]
    for p in sorted(f.probes, key=lambda p: p.replicas):
        s, fl = p.summary, p.summary.get("fleet") or {}
        tok, ttft = s.get("per_session_tok_s"), s.get("ttft_p95_s")
        share = fl.get("cache_read_share")
        lines.append(f"  R={p.replicas:>3}: {'pass' if p.passed else 'FAIL'}"
                     + (f"  per-session {tok:,.1f} tok/s" if tok is not None else "")
                     + (f", TTFT p95 {ttft:.2f} s" if ttft is not None else "")
                     + (f", cache read {share:.1%}" if share is not None else "")
                     + (f"  ({'; '.join(p.failed)})" if p.failed else ""))
    return "\n".join(lines)
