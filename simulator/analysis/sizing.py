"""The answer of a sizing search, and what one sweep point or probe says (pure).

A sweep row or a probe carries its coordinates and every figure of its run under the
registry's names (`point_row.sweep_row`, a typed `PointRow`). The search
that produces a `SizingResult` lives in `simulator.sweep` (it runs points); here are its
result, the binding constraint at the first failing count and the KV-capacity bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from simulator.analysis.metric_keys import fact, figure
from simulator.analysis.point_row import PointRow
from simulator.analysis.point_row import sweep_row as sweep_row  # its old home
from simulator.analysis.point_row import upgrade_point_row as upgrade_point_row
from simulator.analysis.queueing import QUEUE_BOUND_SHARE
from simulator.analysis.run_summary import Summary, record_of
from simulator.analysis.slo import Slo
from simulator.errors import InputError


@dataclass(frozen=True, slots=True)
class Probe:
    sessions: int
    passed: bool
    failed: tuple[str, ...]
    summary: Summary
    seed_offset: int = 0        # repeats run the scenario's seed + this
    run_dir: str = ""


@dataclass(slots=True)
class SizingResult:
    """The answer of `size`: the largest session count meeting every SLO."""

    sessions: int                       # what held on every seed (0: not even one session)
    slos: tuple[Slo, ...]
    max_sessions: int
    probes: list[Probe] = field(default_factory=list)
    confirmed: bool = False
    binding: str | None = None          # the SLO (or limit) that stops one more session
    binding_kind: str | None = None     # throughput | latency | queueing | kv_capacity |
    #                                     saturated | not_steady | max_sessions
    kv_capacity_sessions: int | None = None
    notes: list[str] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)   # one per seed (first: the search's)
    team_sessions: int | None = None                   # --team M: sessions to serve
    reseeded: bool = False      # repeats ran with other seeds (False: the same run again)
    unused: list[Probe] = field(default_factory=list)  # run ahead (--parallel), not needed

    @property
    def sessions_range(self) -> tuple[int, int]:
        """(lowest, highest) answer over the seeds tried."""
        return (min(self.answers), max(self.answers)) if self.answers else (0, 0)

    def cards(self) -> tuple[int, int] | None:
        """Cards a team of `team_sessions` needs: (at the highest answer, at the lowest);
        None without a team or when no count meets the SLOs."""
        lo, hi = self.sessions_range
        if self.team_sessions is None or lo < 1:
            return None
        return -(-self.team_sessions // hi), -(-self.team_sessions // lo)

    def to_dict(self) -> dict[str, object]:
        return {
            "sessions": self.sessions, "slos": [str(s) for s in self.slos],
            "max_sessions": self.max_sessions, "confirmed": self.confirmed,
            "repeats_reseeded": self.reseeded,
            "binding": self.binding, "binding_kind": self.binding_kind,
            "kv_capacity_sessions": self.kv_capacity_sessions, "notes": list(self.notes),
            "sessions_range": list(self.sessions_range), "answers_by_seed": list(self.answers),
            "team_sessions": self.team_sessions,
            "cards": None if self.cards() is None else list(self.cards() or ()),
            "probes": [probe_dict(p) for p in self.probes],
        }


def probe_dict(p: Probe) -> PointRow:
    """A probe as size.json keeps it: what it ran, its verdict, every figure of its run."""
    return sweep_row({"requested_sessions": p.sessions, "seed_offset": p.seed_offset,
                      "passed": p.passed, "failed": list(p.failed), "run_dir": p.run_dir},
                     p.summary)


def queue_share_of(summary: Summary) -> float | None:
    """Share of TTFT spent queueing: the steady-state window's, else the whole run's."""
    rec = record_of(summary)
    for v in (figure(rec, "window_queue_share_of_ttft"), figure(rec, "queue_share_of_ttft")):
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    return None


def binding(probe: Probe, slos: Sequence[Slo]) -> tuple[str, str]:
    """The constraint that failed at answer + 1: preemptions mean KV capacity; a TTFT
    SLO failing while queue wait is most of TTFT means queueing; else the most violated
    SLO (relative to its threshold)."""
    rec = record_of(probe.summary)
    if fact(rec, "saturated"):
        return str(fact(rec, "saturated_reason")), "saturated"
    if fact(rec, "steady_state") is False:
        return str(probe.failed[0]), "not_steady"
    worst = max((s for s in slos if str(s) in probe.failed),
                key=lambda s: s.violation(rec))
    share = queue_share_of(rec)
    preemptions = figure(rec, "preemptions")
    if (preemptions or 0) > 0:
        queued = f"; queue wait {share:.0%} of TTFT" if share is not None else ""
        return (f"{worst} (with {preemptions} preemptions{queued})",
                "kv_capacity")
    if "ttft" in worst.metric and share is not None and share >= QUEUE_BOUND_SHARE:
        return f"{worst} (queue wait {share:.0%} of TTFT)", "queueing"
    return str(worst), worst.kind


def kv_bound(probes: Sequence[Probe], capacity: int | None, shared: int) -> int | None:
    """KV-capacity bound in sessions from the largest probe's peak context (tokens)."""
    if not probes:
        return None
    last = record_of(max(probes, key=lambda p: p.sessions).summary)
    cap = capacity if capacity is not None else figure(last, "kv_capacity_tokens")
    # The largest peak context any probe saw: steadier than the last probe's alone.
    peaks = [figure(record_of(p.summary), "context_tokens_max") for p in probes]
    peak = max((x for x in peaks if isinstance(x, int | float)), default=None)
    if not cap or not isinstance(peak, int | float) or peak <= shared:
        return None
    return kv_capacity_sessions(int(cap), int(peak), shared)


def kv_capacity_sessions(kv_capacity_tokens: int, peak_context_tokens: int,
                         shared_prefix_tokens: int = 0) -> int:
    """Sessions whose peak contexts fit in KV at once, the shared prefix stored once:
    n = (capacity − shared) // (peak − shared)."""
    own = peak_context_tokens - shared_prefix_tokens
    if own <= 0:
        raise InputError("kv capacity: peak context must exceed the shared prefix")
    return max(0, (kv_capacity_tokens - shared_prefix_tokens) // own)
