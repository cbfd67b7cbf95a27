"""The answer of a sizing search, and what one sweep point or probe says (pure).

A sweep row or a probe carries its coordinates and every figure of its run under the
registry's names (`sweep_row`): `window_per_session_tok_s` is the steady window's,
`per_session_tok_s` the whole run's, exactly as in the run's summary.json. The search
that produces a `SizingResult` lives in `simulator.sweep` (it runs points); here are its
result, the binding constraint at the first failing count and the KV-capacity bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulator.analysis import metrics_registry as registry
from simulator.analysis.queueing import QUEUE_BOUND_SHARE
from simulator.analysis.slo import Slo
from simulator.errors import InputError


def sweep_row(coords: Mapping[str, Any], summary: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep row or a probe: its coordinates, then every registry figure and the
    sweep facts of its run (None where unknown), under the names summary.json uses."""
    row = dict(coords)
    for k in (*registry.NUMERIC_KEYS, *registry.SWEEP_FACT_KEYS):
        row.setdefault(k, summary.get(k))
    row["simulated"] = bool(summary.get("simulated", False))
    return row


@dataclass(frozen=True, slots=True)
class Probe:
    sessions: int
    passed: bool
    failed: tuple[str, ...]
    summary: Mapping[str, Any]
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

    def to_dict(self) -> dict[str, Any]:
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


def probe_dict(p: Probe) -> dict[str, Any]:
    """A probe as size.json keeps it: what it ran, its verdict, every figure of its run."""
    return sweep_row({"requested_sessions": p.sessions, "seed_offset": p.seed_offset,
                      "passed": p.passed, "failed": list(p.failed), "run_dir": p.run_dir},
                     p.summary)


def queue_share_of(summary: Mapping[str, Any]) -> float | None:
    """Share of TTFT spent queueing: the steady-state window's, else the whole run's."""
    for key in ("window_queue_share_of_ttft", "queue_share_of_ttft"):
        v = summary.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    return None


def binding(probe: Probe, slos: Sequence[Slo]) -> tuple[str, str]:
    """The constraint that failed at answer + 1: preemptions mean KV capacity; a TTFT
    SLO failing while queue wait is most of TTFT means queueing; else the most violated
    SLO (relative to its threshold)."""
    if probe.summary.get("saturated"):
        return str(probe.summary.get("saturated_reason")), "saturated"
    if probe.summary.get("steady_state") is False:
        return str(probe.failed[0]), "not_steady"
    worst = max((s for s in slos if str(s) in probe.failed),
                key=lambda s: s.violation(probe.summary))
    share = queue_share_of(probe.summary)
    if (probe.summary.get("preemptions") or 0) > 0:
        queued = f"; queue wait {share:.0%} of TTFT" if share is not None else ""
        return (f"{worst} (with {probe.summary['preemptions']} preemptions{queued})",
                "kv_capacity")
    if "ttft" in worst.metric and share is not None and share >= QUEUE_BOUND_SHARE:
        return f"{worst} (queue wait {share:.0%} of TTFT)", "queueing"
    return str(worst), worst.kind


def kv_bound(probes: Sequence[Probe], capacity: int | None, shared: int) -> int | None:
    """KV-capacity bound in sessions from the largest probe's peak context (tokens)."""
    if not probes:
        return None
    last = max(probes, key=lambda p: p.sessions).summary
    cap = capacity if capacity is not None else last.get("kv_capacity_tokens")
    # The largest peak context any probe saw: steadier than the last probe's alone.
    peaks = [p.summary.get("context_tokens_max") for p in probes]
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


def upgrade_point_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep row or probe as written before one name meant one figure (`sessions` the
    requested count, the window's figures under the whole run's names, the whole run's
    as `run_<key>`), under today's names; a row of today passes unchanged."""
    if "run_aggregate_tok_s" not in row and "requested_sessions" in row:
        return dict(row)
    out = {k: v for k, v in row.items()
           if k not in registry.WINDOW_OF and not k.startswith("run_")}
    out["requested_sessions"] = row.get("requested_sessions", row.get("sessions"))
    out.pop("sessions", None)
    for key, window in registry.WINDOW_OF.items():
        if key in row:
            out[window] = row[key]
        if f"run_{key}" in row:
            out[key] = row[f"run_{key}"]
    if "run_dirs" in row:
        out["run_dirs"] = row["run_dirs"]
    return out
