"""Sweeps and sizing: how many concurrent sessions a server holds under an SLO.

Pure search logic; running the scenario is injected as `run_point(n) -> summary dict`
(the CLI wires it to the runner, on the twin or a real endpoint). `size` probes
geometrically (1, 2, 4, …, max), bisects between the last pass and the first fail,
re-runs the answer once to confirm it, and names the binding constraint.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simulator.analysis import metrics_registry as registry
from simulator.analysis.summary import NUMERIC_KEYS
from simulator.errors import InputError

RunPoint = Callable[[int], dict[str, Any]]

SWEEP_KEYS: tuple[str, ...] = (*registry.SWEEP_KEYS, "simulated")   # sweep.json / --json

THROUGHPUT_METRICS = frozenset({
    "aggregate_tok_s", "per_session_tok_s", "turn_tok_s_min", "turn_tok_s_median",
    "turn_tok_s_max", "decode_tok_s_median", "first_third_tok_s", "last_third_tok_s"})
LATENCY_METRICS = frozenset({"ttft_p50_s", "ttft_p95_s"})
SLO_METRICS = frozenset(NUMERIC_KEYS) - {"sessions"}

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_SLO_RE = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(>=|<=|>|<)\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*$")


def sweep_row(sessions: int, summary: dict[str, Any]) -> dict[str, Any]:
    """One sweep row: the sweep keys of a summary (None where unknown)."""
    row = {k: summary.get(k) for k in SWEEP_KEYS}
    row["sessions"] = sessions
    row["simulated"] = bool(summary.get("simulated", False))
    return row


def sweep(run_point: RunPoint, counts: list[int]) -> list[dict[str, Any]]:
    """Run the scenario at each session count (in the order given); one row per count."""
    if not counts or any(n < 1 for n in counts):
        raise InputError(f"--sessions: expected positive session counts, got {counts}")
    return [sweep_row(n, run_point(n)) for n in counts]


@dataclass(frozen=True, slots=True)
class Slo:
    """`metric op threshold`, e.g. per_session_tok_s >= 50."""

    metric: str
    op: str
    threshold: float

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.threshold:g}"

    def check(self, summary: dict[str, Any]) -> bool:
        """True when met; a missing figure cannot be shown to meet it (False)."""
        v = summary.get(self.metric)
        return isinstance(v, int | float) and _OPS[self.op](float(v), self.threshold)

    def violation(self, summary: dict[str, Any]) -> float:
        """How far off the figure is, relative to the threshold (0 when met, inf when unknown)."""
        v = summary.get(self.metric)
        if not isinstance(v, int | float):
            return float("inf")
        if self.check(summary):
            return 0.0
        return abs(float(v) - self.threshold) / max(abs(self.threshold), 1e-9)

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
    if metric not in SLO_METRICS:
        raise InputError(f"--slo {text!r}: unknown metric {metric!r}; known: "
                         + ", ".join(sorted(SLO_METRICS)))
    return Slo(metric, op, value)


@dataclass(frozen=True, slots=True)
class Probe:
    sessions: int
    passed: bool
    failed: tuple[str, ...]
    summary: dict[str, Any]


@dataclass(slots=True)
class SizingResult:
    """The answer of `size`: the largest session count meeting every SLO."""

    sessions: int                       # 0 when even one session fails
    slos: tuple[Slo, ...]
    max_sessions: int
    probes: list[Probe] = field(default_factory=list)
    confirmed: bool = False
    binding: str | None = None          # the SLO (or limit) that stops one more session
    binding_kind: str | None = None     # throughput | latency | kv_capacity | max_sessions
    kv_capacity_sessions: int | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions, "slos": [str(s) for s in self.slos],
            "max_sessions": self.max_sessions, "confirmed": self.confirmed,
            "binding": self.binding, "binding_kind": self.binding_kind,
            "kv_capacity_sessions": self.kv_capacity_sessions, "notes": list(self.notes),
            "probes": [{"sessions": p.sessions, "passed": p.passed, "failed": list(p.failed),
                        **{k: p.summary.get(k) for k in SWEEP_KEYS if k != "sessions"}}
                       for p in self.probes],
        }


def _evaluate(run_point: RunPoint, n: int, slos: tuple[Slo, ...]) -> Probe:
    summary = run_point(n)
    failed = tuple(str(s) for s in slos if not s.check(summary))
    return Probe(n, not failed, failed, summary)


def probe_counts(max_sessions: int) -> list[int]:
    """1, 2, 4, … up to max_sessions (max_sessions included as the last probe)."""
    out, n = [], 1
    while n < max_sessions:
        out.append(n)
        n *= 2
    return [*out, max_sessions]


def _binding(probe: Probe, slos: tuple[Slo, ...]) -> tuple[str, str]:
    """The constraint that failed at answer + 1: preemptions mean KV capacity, else
    the most violated SLO (relative to its threshold)."""
    worst = max((s for s in slos if str(s) in probe.failed),
                key=lambda s: s.violation(probe.summary))
    if (probe.summary.get("preemptions") or 0) > 0:
        return f"{worst} (with {probe.summary['preemptions']} preemptions)", "kv_capacity"
    return str(worst), worst.kind


def size(run_point: RunPoint, slos: list[Slo], max_sessions: int, *,
         kv_capacity_tokens: int | None = None, shared_prefix_tokens: int = 0) -> SizingResult:
    """Largest n ≤ max_sessions meeting every SLO: geometric probe, bisection, confirm.

    Assumes the figures get worse as sessions grow (monotone); a non-monotone server
    still gets an answer that passed twice, and the probes are kept for inspection.
    `kv_capacity_tokens` (the twin's profile) or the server's `vllm:cache_config_info`
    (summary key `kv_capacity_tokens`) gives the KV-capacity bound in sessions.
    """
    if max_sessions < 1:
        raise InputError(f"--max-sessions: must be ≥ 1, got {max_sessions}")
    if not slos:
        raise InputError("--slo: give at least one SLO, e.g. --slo 'per_session_tok_s>=50'")
    slo_t = tuple(slos)
    res = SizingResult(0, slo_t, max_sessions)
    seen: dict[int, Probe] = {}

    def probe(n: int) -> Probe:
        if n not in seen:
            seen[n] = _evaluate(run_point, n, slo_t)
            res.probes.append(seen[n])
        return seen[n]

    lo, hi = 0, None
    for n in probe_counts(max_sessions):
        if not probe(n).passed:
            hi = n
            break
        lo = n
    if hi is not None:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if probe(mid).passed else (lo, mid)
    res.sessions = lo
    if lo > 0:
        again = _evaluate(run_point, lo, slo_t)
        res.probes.append(again)
        res.confirmed = again.passed
        if not again.passed:
            res.notes.append(f"the repeat run at {lo} sessions failed {', '.join(again.failed)}:"
                             " the SLO is marginal there (run-to-run noise exceeds the margin)")
    res.kv_capacity_sessions = _kv_bound(res.probes, kv_capacity_tokens, shared_prefix_tokens)
    if hi is None:
        res.binding, res.binding_kind = f"--max-sessions {max_sessions}", "max_sessions"
    else:
        res.binding, res.binding_kind = _binding(seen[hi], slo_t)
    return res


def _kv_bound(probes: list[Probe], capacity: int | None, shared: int) -> int | None:
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


_SWEEP_HEADERS: tuple[registry.Metric, ...] = tuple(registry.REGISTRY[k] for k in registry.SWEEP_KEYS)


def _fmt_cell(fmt: str, v: Any) -> str:
    if v is None or isinstance(v, bool):
        return "n/a"
    if fmt == "{:.1%}":
        return f"{100 * float(v):.1f}"
    return fmt.format(int(v) if fmt == "{:d}" else float(v))


def _sweep_cell(m: registry.Metric, v: Any) -> str:
    """A sweep cell: the registry's format, without the % sign the header carries."""
    return m.format(v).removesuffix("%")


def format_sweep_table(rows: list[dict[str, Any]]) -> str:
    """Terminal table, one line per session count; SIMULATED flagged in the title."""
    sim = any(r.get("simulated") for r in rows)
    table = [[m.sweep_header or m.key for m in _SWEEP_HEADERS]]
    table += [[_sweep_cell(m, r.get(m.key)) for m in _SWEEP_HEADERS] for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(_SWEEP_HEADERS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(t, widths, strict=True)) for t in table]
    title = "sweep — SIMULATED (twin)" if sim else "sweep — real endpoint"
    return "\n".join([title, *lines])


def format_sizing(result: SizingResult) -> str:
    """The answer, the binding constraint and every probe, for the terminal."""
    slos = " and ".join(str(s) for s in result.slos)
    sim = any(p.summary.get("simulated") for p in result.probes)
    head = (f"{result.sessions} session(s) meet {slos}"
            + (" (confirmed by a repeat run)" if result.confirmed else "")
            + (" — SIMULATED (twin)" if sim else ""))
    if result.sessions == 0:
        head = f"no session count meets {slos}" + (" — SIMULATED (twin)" if sim else "")
    lines = [head, f"binding constraint: {result.binding} [{result.binding_kind}]"]
    if result.kv_capacity_sessions is not None:
        lines.append(f"KV-capacity bound: {result.kv_capacity_sessions} sessions at peak context")
    for p in result.probes:
        figs = ", ".join(f"{s.metric}={_fmt_cell('{:.2f}', p.summary.get(s.metric))}"
                         for s in result.slos)
        verdict = "pass" if p.passed else "FAIL " + ", ".join(p.failed)
        lines.append(f"  probe {p.sessions:>4} sessions: {figs}  → {verdict}")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
