"""How many replicas a team needs behind a given router: the answer of the fleet search.

`size --team M` divides: ⌈M / N⌉ cards, N being what one card holds. That assumes every
replica is an independent copy of one card and ignores the router, which for agent
traffic decides the cache (docs/fleet.md). The fleet search (`sweep.card_size.FleetProfile`)
runs M sessions on R replicas behind the router, judged by the same SLOs (steady state
required, as for one card); the answer is the smallest R whose fleet meets them all.
A probe keeps every figure of its run under summary.json's names (`sweep_row`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.analysis.metric_keys import fact
from simulator.analysis.run_summary import Summary, record_of
from simulator.analysis.sizing import sweep_row


@dataclass
class FleetProbe:
    replicas: int
    passed: bool
    failed: tuple[str, ...]
    summary: Summary


@dataclass
class FleetSizing:
    team_sessions: int
    router: str
    replicas: int | None              # smallest R that meets every SLO (None: none ≤ max)
    division: int | None              # ⌈M / N⌉ from one card's answer
    max_replicas: int
    probes: list[FleetProbe] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"team_sessions": self.team_sessions, "router": self.router,
                "replicas": self.replicas, "division_cards": self.division,
                "max_replicas": self.max_replicas,
                "probes": [sweep_row({"replicas": p.replicas, "passed": p.passed,
                                      "failed": list(p.failed),
                                      "fleet": fact(record_of(p.summary), "fleet")},
                                     p.summary)
                           for p in self.probes]}
