"""Service-level objectives: `metric op threshold`, and what a point is judged on.

An SLO names a registry metric (`per_session_tok_s>=30`). A point of a sweep or a
sizing search is judged on its steady-state window: where the registry has a window
figure for the metric (`metrics_registry.WINDOW_OF`) and the run computed a window,
the SLO reads that figure (`window_per_session_tok_s`), else the whole run's. A point
that never reached steady state fails whatever its figures (it did not measure N
sessions).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simulator.analysis import metrics_registry as registry
from simulator.analysis.metric_keys import MetricKey, fact, is_metric_key
from simulator.analysis.run_summary import Summary, record_of
from simulator.errors import InputError

THROUGHPUT_METRICS = frozenset({
    "aggregate_tok_s", "per_session_tok_s", "turn_tok_s_min", "turn_tok_s_median",
    "turn_tok_s_max", "decode_tok_s_median", "first_third_tok_s", "last_third_tok_s",
    "window_aggregate_tok_s", "window_per_session_tok_s", "window_n_x_per_session_tok_s"})
LATENCY_METRICS = frozenset({"ttft_p50_s", "ttft_p95_s", "window_ttft_p50_s",
                             "window_ttft_p95_s"})
SLO_METRICS = frozenset(registry.NUMERIC_KEYS) - {"sessions"}

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_SLO_RE = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(>=|<=|>|<)\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*$")


def has_window(summary: Summary) -> bool:
    """The run computed a steady-state window (every run since the window exists)."""
    return "requested_sessions" in summary


def judged_key(metric: MetricKey, summary: Summary) -> MetricKey:
    """The figure a point is judged on for `metric`: its window's where there is one."""
    window = registry.WINDOW_OF.get(metric)
    return window if window is not None and has_window(summary) else metric


@dataclass(frozen=True, slots=True)
class Slo:
    """`metric op threshold`, e.g. per_session_tok_s >= 50."""

    metric: MetricKey          # a registry metric (`parse_slo` checks a typed one)
    op: str
    threshold: float

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.threshold:g}"

    def value(self, summary: Summary) -> float | None:
        """The judged figure (the window's where there is one); None when unknown."""
        v = record_of(summary).get(judged_key(self.metric, summary))
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def check(self, summary: Summary) -> bool:
        """True when met; a missing figure cannot be shown to meet it (False)."""
        v = self.value(summary)
        return v is not None and _OPS[self.op](v, self.threshold)

    def violation(self, summary: Summary) -> float:
        """How far off the figure is, relative to the threshold (0 when met, inf when unknown)."""
        v = self.value(summary)
        if v is None:
            return float("inf")
        if self.check(summary):
            return 0.0
        return abs(v - self.threshold) / max(abs(self.threshold), 1e-9)

    def margin(self, summary: Summary) -> float | None:
        """Headroom relative to the threshold (> 0: met with room to spare; < 0: missed)."""
        v = self.value(summary)
        if v is None:
            return None
        sign = 1.0 if self.op in (">=", ">") else -1.0
        return sign * (v - self.threshold) / max(abs(self.threshold), 1e-9)

    @property
    def kind(self) -> str:
        if self.metric in THROUGHPUT_METRICS:
            return "throughput"
        if self.metric in LATENCY_METRICS:
            return "latency"
        return "other"


def parse_slo(text: str) -> Slo:
    """Parse `metric>=value` (also <=, >, <); InputError on bad syntax or unknown metric."""
    m = _SLO_RE.match(text)
    if not m:
        raise InputError(f"--slo {text!r}: expected METRIC>=VALUE (or <=, >, <), "
                         "e.g. per_session_tok_s>=50")
    metric, op, value = m.group(1), m.group(2), float(m.group(3))
    if metric not in SLO_METRICS or not is_metric_key(metric):
        raise InputError(f"--slo {text!r}: unknown metric {metric!r}; known: "
                         + ", ".join(sorted(SLO_METRICS)))
    return Slo(metric, op, value)


def failures(summary: Summary, slos: Sequence[Slo]) -> tuple[str, ...]:
    """Why a point of this summary fails (empty: it passes): each SLO it misses, and
    not having reached steady state (then it did not measure n sessions)."""
    failed = tuple(str(s) for s in slos if not s.check(summary))
    rec = record_of(summary)
    if fact(rec, "steady_state") is False:
        failed = (f"not steady: {fact(rec, 'steady_state_reason')}", *failed)
    return failed


def judged_on(summaries: Sequence[Summary]) -> str:
    """What figures the SLOs were checked against, for the answer's heading."""
    if summaries and all(has_window(s) for s in summaries):
        return "the steady-state window's figures"
    return "the whole run's figures (ramp and tail included)"
