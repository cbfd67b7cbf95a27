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
from simulator.analysis.queueing import QUEUE_BOUND_SHARE
from simulator.analysis.summary import NUMERIC_KEYS
from simulator.errors import InputError

RunPoint = Callable[[int], dict[str, Any]]
RunSeeded = Callable[[int, int], dict[str, Any]]   # (sessions, seed offset) → summary

SWEEP_KEYS: tuple[str, ...] = (
    "sessions", "aggregate_tok_s", "per_session_tok_s", "ttft_p50_s", "ttft_p95_s",
    "cache_shared_pct", "kv_usage_peak", "preemptions", "usd_per_mtok", "simulated",
    # steady state: requested vs achieved, the window, and the whole-run figures by name
    "achieved_sessions", "achieved_sessions_run", "achieved_in_flight", "steady_state",
    "steady_state_reason", "window_start_s", "window_end_s", "window_s",
    "window_n_x_per_session_tok_s", "window_itl_p95_s",
    "run_aggregate_tok_s", "run_per_session_tok_s", "run_ttft_p95_s", "run_usd_per_mtok",
    "usd_per_mtok_counts_idle",
    # queue wait: what `size` reads to name queueing as binding
    "queue_time_p95_s", "queue_share_of_ttft", "window_queue_share_of_ttft",
    "server_queue_time_mean_s",
    # saturation gate: TTFT and in-flight slopes over the window
    "saturated", "saturated_reason", "window_ttft_slope", "window_in_flight_slope",
    # coordinated omission: the closed loop's rates beside latency, and schedule lag
    "window_turns_per_s", "window_sessions_per_s", "turns_per_s", "schedule_lag_p95_s",
)

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
    seed_offset: int = 0        # repeats run the scenario's seed + this


@dataclass(slots=True)
class SizingResult:
    """The answer of `size`: the largest session count meeting every SLO."""

    sessions: int                       # 0 when even one session fails
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
            "probes": [{"sessions": p.sessions, "seed_offset": p.seed_offset,
                        "passed": p.passed, "failed": list(p.failed),
                        **{k: p.summary.get(k) for k in SWEEP_KEYS if k != "sessions"}}
                       for p in self.probes],
        }


def failures(summary: dict[str, Any], slos: tuple[Slo, ...] | list[Slo]) -> tuple[str, ...]:
    """Why a probe of this summary fails (empty: it passes): each SLO it misses, and
    not having reached steady state (then it did not measure n sessions)."""
    failed = tuple(str(s) for s in slos if not s.check(summary))
    if summary.get("steady_state") is False:
        failed = (f"not steady: {summary.get('steady_state_reason')}", *failed)
    return failed


def _evaluate(run_point: RunPoint, n: int, slos: tuple[Slo, ...]) -> Probe:
    summary = run_point(n)
    failed = failures(summary, slos)
    return Probe(n, not failed, failed, summary)


def bisection_frontier(lo: int, hi: int, k: int) -> list[int]:
    """Up to `k` points a bisection of (lo, hi) may probe next, breadth first: the
    midpoint, then the midpoints of both halves, … (the next levels of its tree). With
    all of them known, a serial bisection descends `log2(k + 1)` levels at once."""
    out: list[int] = []
    queue = [(lo, hi)]
    while queue and len(out) < k:
        a, b = queue.pop(0)
        if b - a <= 1:
            continue
        mid = (a + b) // 2
        out.append(mid)
        queue += [(a, mid), (mid, b)]
    return out


@dataclass
class SizeSearch:
    """The search `size` runs, as data (pure): geometric probes 1, 2, 4, … up to the
    first failure, then a bisection between the last pass and that failure.

    `passed` holds the counts known so far; `next_counts(k)` says which counts the
    search needs next — one for the serial search, up to k at once for `--parallel K`
    (the next geometric probes, or the next levels of the bisection tree), so the CLI
    runs them ahead without a search of its own and the answer is the serial one."""

    max_sessions: int
    passed: dict[int, bool] = field(default_factory=dict)

    def bounds(self) -> tuple[int, int | None, bool]:
        """(highest count known to pass, lowest above it known to fail or None, done)."""
        lo, hi = 0, None
        for n in probe_counts(self.max_sessions):
            if n not in self.passed:
                return lo, None, False
            if not self.passed[n]:
                hi = n
                break
            lo = n
        if hi is None:
            return lo, None, True
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if mid not in self.passed:
                return lo, hi, False
            lo, hi = (mid, hi) if self.passed[mid] else (lo, mid)
        return lo, hi, True

    def next_counts(self, k: int = 1) -> list[int]:
        """Up to `k` counts the search will ask for next (empty: it is done)."""
        lo, hi, done = self.bounds()
        if done:
            return []
        if hi is None:
            return [n for n in probe_counts(self.max_sessions) if n not in self.passed][:k]
        return [n for n in bisection_frontier(lo, hi, k) if n not in self.passed]


def probe_counts(max_sessions: int) -> list[int]:
    """1, 2, 4, … up to max_sessions (max_sessions included as the last probe)."""
    out, n = [], 1
    while n < max_sessions:
        out.append(n)
        n *= 2
    return [*out, max_sessions]


def queue_share_of(summary: dict[str, Any]) -> float | None:
    """Share of TTFT spent queueing: the steady-state window's, else the whole run's."""
    for key in ("window_queue_share_of_ttft", "queue_share_of_ttft"):
        v = summary.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    return None


def _binding(probe: Probe, slos: tuple[Slo, ...]) -> tuple[str, str]:
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


def size(run_point: RunPoint, slos: list[Slo], max_sessions: int, *,
         kv_capacity_tokens: int | None = None, shared_prefix_tokens: int = 0,
         repeats: int = 1, run_seeded: RunSeeded | None = None,
         team_sessions: int | None = None) -> SizingResult:
    """Largest n ≤ max_sessions meeting every SLO: geometric probe, bisection, then
    `repeats` searches with other seeds (`run_seeded(n, k)`: seed + k) started at the
    answer, giving a range. A deterministic twin run repeated with the same seed would
    only return the same figures, so repeats always change the seed.

    Assumes the figures get worse as sessions grow (monotone); a non-monotone server
    still gets an answer, and the probes are kept for inspection. A probe that never
    reached steady state fails (it did not measure n sessions); so does a saturated one
    (TTFT and in-flight still rising over the window: a longer run would read worse),
    so a saturated probe is never the passing bound of the search.
    `kv_capacity_tokens` (the twin's profile) or the server's `vllm:cache_config_info`
    (summary key `kv_capacity_tokens`) gives the KV-capacity bound in sessions.
    """
    if max_sessions < 1:
        raise InputError(f"--max-sessions: must be ≥ 1, got {max_sessions}")
    if not slos:
        raise InputError("--slo: give at least one SLO, e.g. --slo 'per_session_tok_s>=50'")
    if repeats < 0:
        raise InputError(f"--repeats: must be ≥ 0, got {repeats}")
    slo_t = tuple(slos)
    res = SizingResult(0, slo_t, max_sessions, team_sessions=team_sessions)
    seen: dict[int, Probe] = {}

    def probe(n: int) -> Probe:
        if n not in seen:
            seen[n] = _evaluate(run_point, n, slo_t)
            res.probes.append(seen[n])
        return seen[n]

    search = SizeSearch(max_sessions)
    while counts := search.next_counts():
        search.passed[counts[0]] = probe(counts[0]).passed
    lo, hi, _ = search.bounds()
    res.sessions = lo
    res.answers = [lo]
    # Without a seeded runner a repeat re-runs the same seed: a real server's noise, but
    # on the deterministic twin the same figures; the result says which it was.
    seeded = run_seeded or (lambda n, k: run_point(n))
    res.reseeded = run_seeded is not None
    for k in range(1, repeats + 1 if lo > 0 else 1):
        res.answers.append(_search_from(seeded, k, lo, max_sessions, slo_t, res))
    if lo > 0 and repeats >= 1:
        again = next(p for p in res.probes if p.seed_offset == 1 and p.sessions == lo)
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


def _search_from(seeded: RunSeeded, k: int, guess: int, max_sessions: int,
                 slos: tuple[Slo, ...], res: SizingResult) -> int:
    """The largest passing n with seed offset k: gallop from `guess`, then bisect."""
    cache: dict[int, bool] = {0: True}

    def passes(n: int) -> bool:
        if n not in cache:
            p = _evaluate(lambda m: seeded(m, k), n, slos)
            res.probes.append(Probe(p.sessions, p.passed, p.failed, p.summary, k))
            cache[n] = p.passed
        return cache[n]

    step = 1
    if passes(guess):
        lo, hi = guess, None
        while lo < max_sessions:
            n = min(max_sessions, lo + step)
            if not passes(n):
                hi = n
                break
            lo, step = n, step * 2
        if hi is None:
            return lo
    else:
        hi, lo = guess, guess
        while lo > 0:
            lo = max(0, hi - step)
            if passes(lo):
                break
            hi, step = lo, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if passes(mid) else (lo, mid)
    return lo


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


# Sweep table columns, in order: registry metrics (header and format from the registry),
# the steady-state flag, and the whole-run aggregate (a sweep row's own field).
_SWEEP_COLUMNS: tuple[str, ...] = (
    "sessions", "achieved_sessions", "steady_state", "aggregate_tok_s",
    "window_n_x_per_session_tok_s", "per_session_tok_s", "ttft_p50_s", "ttft_p95_s",
    "window_turns_per_s", "cache_shared_pct", "kv_usage_peak", "preemptions", "usd_per_mtok",
    "run_aggregate_tok_s")
_COLUMN_HEADERS: dict[str, str] = {"steady_state": "steady",
                                   "run_aggregate_tok_s": "run aggregate tok/s"}


def _header(key: str) -> str:
    m = registry.REGISTRY.get(key)
    return _COLUMN_HEADERS.get(key) or (m.sweep_header or m.key if m else key)


def _fmt_cell(fmt: str, v: Any) -> str:
    if fmt == "flag":
        return {True: "yes", False: "NO"}.get(v, "n/a") if isinstance(v, bool) else "n/a"
    if v is None or isinstance(v, bool):
        return "n/a"
    if fmt == "{:.1%}":
        return f"{100 * float(v):.1f}"
    return fmt.format(int(v) if fmt == "{:d}" else float(v))


def _sweep_cell(key: str, v: Any) -> str:
    """A sweep cell: the registry's format, without the % sign the header carries."""
    if key == "steady_state":
        return {True: "yes", False: "NO"}.get(v, "n/a") if isinstance(v, bool) else "n/a"
    m = registry.REGISTRY.get(key) or registry.REGISTRY["aggregate_tok_s"]
    return m.format(v).removesuffix("%")


def format_sweep_table(rows: list[dict[str, Any]]) -> str:
    """Terminal table, one line per session count; SIMULATED flagged in the title."""
    sim = any(r.get("simulated") for r in rows)
    table = [[_header(k) for k in _SWEEP_COLUMNS]]
    table += [[_sweep_cell(k, r.get(k)) for k in _SWEEP_COLUMNS] for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(_SWEEP_COLUMNS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(t, widths, strict=True)) for t in table]
    title = "sweep — SIMULATED (twin)" if sim else "sweep — real endpoint"
    notes = [f"{'SATURATED' if r.get('saturated') else 'NOT STEADY'} at {r['sessions']} "
             f"sessions (achieved "
             f"{_fmt_cell('{:,.1f}', r.get('achieved_sessions'))}): {r.get('steady_state_reason')}"
             for r in rows if r.get("steady_state") is False]
    if any(r.get("steady_state") is not None for r in rows):
        notes.append("aggregate, per-session, TTFT and $/1M: steady-state window "
                     "(n/a when never steady); run aggregate: whole run incl. ramp and tail")
        notes.append("closed loop: each session waits for its reply, so a slower server is "
                     "offered fewer turns/s (coordinated omission); read turns/s with TTFT")
    return "\n".join([title, *lines, *notes])


def judged_on(probes: list[Probe]) -> str:
    """What figures the SLOs were checked against: `points.point_figures` keeps the whole
    run's as `run_<key>` beside the window's; a plain summary is the whole run's."""
    if probes and all("run_aggregate_tok_s" in p.summary for p in probes):
        return "the steady-state window's figures"
    return "the whole run's figures (ramp and tail included)"


def format_sizing(result: SizingResult, target: str | None = None) -> str:
    """The answer, what was sized (`target`: hardware, model, scenario), the binding
    constraint, the range over seeds, the cards for a team, then every probe."""
    slos = " and ".join(str(s) for s in result.slos)
    sim = any(p.summary.get("simulated") for p in result.probes)
    again = "with another seed" if result.reseeded else "with the same seed"
    head = (f"{result.sessions} session(s) meet {slos}"
            + (f" (confirmed by a repeat {again})" if result.confirmed else "")
            + (" — SIMULATED (twin)" if sim else ""))
    if result.sessions == 0:
        head = f"no session count meets {slos}" + (" — SIMULATED (twin)" if sim else "")
    lo, hi = result.sessions_range
    lines = [head, *([f"sized: {target}"] if target else []),
             f"binding constraint: {result.binding} [{result.binding_kind}]",
             f"SLOs judged on {judged_on(result.probes)}"]
    if len(result.answers) > 1:
        over = (f"{len(result.answers)} seeds" if result.reseeded
                else f"{len(result.answers)} searches with the same seed")
        lines.append(f"range over {over}: {lo}–{hi} sessions "
                     f"(per search: {', '.join(map(str, result.answers))})")
    cards = result.cards()
    if cards is not None:
        lines.append(f"a team of {result.team_sessions} sessions needs "
                     + (f"{cards[0]} card(s)" if cards[0] == cards[1]
                        else f"{cards[0]}–{cards[1]} cards"))
    if result.kv_capacity_sessions is not None:
        lines.append(f"KV-capacity bound: {result.kv_capacity_sessions} sessions at peak context")
    for p in result.probes:
        figs = ", ".join(f"{s.metric}={_fmt_cell('{:.2f}', p.summary.get(s.metric))}"
                         for s in result.slos)
        verdict = "pass" if p.passed else "FAIL " + ", ".join(p.failed)
        seed = f" seed +{p.seed_offset}" if p.seed_offset else ""
        ach = p.summary.get("achieved_sessions")
        ach_s = f" (achieved {ach:.1f})" if isinstance(ach, int | float) else ""
        lines.append(f"  probe {p.sessions:>4} sessions{seed}{ach_s}: {figs}  → {verdict}")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
