"""A run's figures while it runs: rolling windows and whole-run counters, pure.

`LiveFigures` folds in each journaled turn row (simulated seconds since the run
started, as `Recorder.subscribe` hands them and the journal holds them), each
/metrics window row and each run event, and `snapshot(now_s)` returns what a live view
shows. Nothing here reads a file, a clock or a terminal: the dashboard, the plain
status line, `endurance watch` and the tests feed it the same rows.

Two kinds of figure, never mixed:

* **Rolling** (the last 30 s and 5 min of the run's clock, `WINDOWS_S`): kept in
  one-second buckets (`BUCKET_S`), so folding a row and taking a snapshot cost the
  same whatever the request rate. A request's output tokens are apportioned as the
  steady-state window does (`analysis/steady.py`): the first token at its time, the
  other n − 1 evenly over its decode interval; its busy time (send → last token)
  likewise, so `per_session_tok_s` is tokens ÷ busy time (the window's
  `window_per_session_tok_s`) and `concurrency` is busy time ÷ window (mean requests in
  flight, Little's law). TTFT counts a turn by its first-token time, ITL
  ((last − first) / (n − 1)) by its decode midpoint. Percentiles come from log-spaced
  histograms (`HIST_RATIO` apart: within 2% of the exact value), as a Prometheus
  histogram would give them. Only finished requests are known: a request still in
  flight enters when its row is written, its tokens then spread over the past seconds.
* **Whole run** (`RunFigures`): exact, by the summary's own definitions
  (`analysis/summary.py`: probe rows apart, cancelled and overflow attempts not
  failures, a compaction counted once per session and turn), so when the run ends they
  equal summary.json's figures of the same keys.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from simulator.analysis.energy import PowerSums, energy_figures
from simulator.analysis.metric_keys import SummaryRecord
from simulator.util.numbers import finite_float, to_float, to_int

N = TypeVar("N", int, float)   # a ring's counters: counts or seconds

WINDOWS_S: tuple[float, ...] = (30.0, 300.0)   # the rolling windows shown
BUCKET_S = 1.0                                 # their resolution (run seconds)
_SLOTS = int(max(WINDOWS_S) / BUCKET_S) + 2    # ring of buckets (one spare each side)

# log-spaced latency histogram: bin i holds [LO·R^i, LO·R^(i+1)); below LO → bin 0
HIST_LO_S = 1e-4
HIST_RATIO = 1.02
HIST_BINS = int(math.ceil(math.log(1e5 / HIST_LO_S) / math.log(HIST_RATIO))) + 1
_LOG_R = math.log(HIST_RATIO)

LAST_EVENTS = 6            # the last events a view lists
NOT_FAILURES = ("cancelled", "context_overflow")   # as the summary counts failures


def bucket_of(t: float) -> int:
    """The bucket holding time `t`: bucket b is (b, b + 1] seconds (bucket 0 also holds
    t = 0), so a window (now − span, now] on bucket edges is whole buckets."""
    return max(0, math.ceil(t / BUCKET_S) - 1)


def hist_bin(x: float) -> int:
    """The histogram bin of a latency `x` (s)."""
    if x <= HIST_LO_S:
        return 0
    return min(HIST_BINS - 1, int(math.log(x / HIST_LO_S) / _LOG_R))


def hist_value(i: int) -> float:
    """The value a bin stands for: its geometric middle (s)."""
    return float(HIST_LO_S * HIST_RATIO ** (i + 0.5))


def hist_quantile(counts: np.ndarray, q: float) -> float | None:
    """The q-quantile of a histogram (None when empty), within one bin's width."""
    total = int(counts.sum())
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    return hist_value(int(np.searchsorted(np.cumsum(counts), rank)))


def exact_quantile(values: array[float], q: float) -> float | None:
    """pandas' default quantile (linear interpolation) of the values, None when empty."""
    if not values:
        return None
    return float(np.quantile(np.frombuffer(values, dtype=float), q))


@dataclass(frozen=True, slots=True)
class SteadyPlan:
    """What the steady-state window waits for (the run's `SteadyConfig`, flattened):
    `sessions` requested, `turns` per session (fixed-turn runs end a session there),
    the constant-load `duration_s`, `warmup_s`, `cooldown_s`."""

    sessions: int
    turns: int
    duration_s: float | None = None
    warmup_s: float | None = None
    cooldown_s: float = 0.0
    ramp: bool = False


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """One rolling window's figures (None where it held nothing to measure)."""

    span_s: float                     # the window's length (shorter at the run's start)
    aggregate_tok_s: float | None     # finished requests' tokens (in flight: not yet)
    per_session_tok_s: float | None   # tokens ÷ busy time: a stream's speed
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    itl_p50_s: float | None
    requests: int                     # finished in the window (probes apart)
    concurrency: float | None         # mean requests in flight (busy time ÷ window)
    cache_read_share: float | None    # server-reported reads ÷ prompt tokens
    client_reusable_share: float | None   # the client's bound: reusable ÷ context
    failures: Mapping[str, int] = field(default_factory=dict)
    preemptions: float | None = None  # the server's, from /metrics deltas
    # the server's own output tokens/s (its /metrics counter, the twin's engine log):
    # it counts tokens as they are generated, requests in flight included
    server_tok_s: float | None = None


@dataclass(frozen=True, slots=True)
class RunFigures:
    """The whole run so far; keys and definitions are summary.json's."""

    sessions: int = 0
    requests: int = 0
    ok_turns: int = 0
    failed_requests: int = 0
    cancelled_requests: int = 0
    summary_requests: int = 0
    output_tokens: int = 0
    wall_window_s: float | None = None
    aggregate_tok_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    compaction_events: int = 0
    compactions_by_kind: Mapping[str, int] = field(default_factory=dict)
    errors_by_type: Mapping[str, int] = field(default_factory=dict)
    server_cache_read_share: float | None = None
    client_reusable_share: float | None = None
    probe_requests: int = 0
    probes_answered: int = 0
    probe_recall: float | None = None
    # P/D on the twin (None elsewhere): turns prefilled remotely, their KV wait
    remote_prefill_share: float | None = None
    kv_transfer_wait_p95_s: float | None = None

    def as_summary(self) -> dict[str, float | dict[str, int] | None]:
        """These figures under their summary.json keys."""
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in (
            (f, getattr(self, f)) for f in self.__dataclass_fields__)}


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    """What a live view shows at run time `now_s` (simulated seconds)."""

    now_s: float
    windows: tuple[WindowFigures, ...]
    run: RunFigures
    sessions_started: int
    sessions_active: int
    sessions_done: int
    context_spread: tuple[int, int, int, int] | None   # p10, p50, p90, max (tokens)
    server: Mapping[str, float]                # latest gauges: kv_usage, requests_waiting, …
    steady: str                                # the steady-state window's state, one line
    ramp: str | None                           # a ramp's current step and verdicts
    energy: SummaryRecord | None               # measured power, energy per 1M tokens, …
    events: tuple[str, ...]                    # the last few, oldest first
    live: Mapping[str, int] = field(default_factory=dict)   # in-flight / waiting (this process)


class _Ring:
    """`_SLOTS` one-second buckets of rolling sums and latency histograms. The ring
    holds buckets (newest − _SLOTS, newest]: moving `newest` on clears the slots it
    passes, so a window's sums are plain slices."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        n = _SLOTS
        self.tokens = [0.0] * n
        self.busy = [0.0] * n
        self.requests = [0] * n
        self.cache_read = [0] * n
        self.prompt = [0] * n
        self.reusable = [0] * n
        self.context = [0] * n
        self.preempt = [0.0] * n
        self.server_tokens = [0.0] * n     # the server's generation_tokens deltas
        self.fail: list[Counter[str] | None] = [None] * n
        self.ttft = np.zeros((n, HIST_BINS), dtype=np.int64)
        self.itl = np.zeros((n, HIST_BINS), dtype=np.int64)
        # flat views for one-count increments (a numpy scalar update costs 3× as much)
        self.ttft_flat = self.ttft.data.cast("B").cast("q")
        self.itl_flat = self.itl.data.cast("B").cast("q")
        self.newest = -1

    def _clear(self, i: int) -> None:
        self.tokens[i] = self.busy[i] = self.preempt[i] = self.server_tokens[i] = 0.0
        self.requests[i] = self.cache_read[i] = self.prompt[i] = 0
        self.reusable[i] = self.context[i] = 0
        self.fail[i] = None
        self.ttft[i] = 0
        self.itl[i] = 0

    def advance(self, b: int) -> None:
        """Make bucket `b` the newest (clearing what falls out of the ring)."""
        if b <= self.newest:
            return
        if b - self.newest >= _SLOTS:
            self._reset()            # a jump past the whole ring
        else:
            for k in range(self.newest + 1, b + 1):
                self._clear(k % _SLOTS)
        self.newest = b

    def slot(self, b: int) -> int | None:
        """The slot of bucket `b`; None when it is older than the ring keeps."""
        if b > self.newest:
            self.advance(b)
        elif b <= self.newest - _SLOTS:
            return None
        return b % _SLOTS

    def spread(self, lo: float, hi: float, amount: float, into: list[float]) -> None:
        """Add `amount` spread evenly over [lo, hi] (at lo when the interval is empty)."""
        if amount == 0:
            return
        if hi <= lo:
            i = self.slot(bucket_of(lo))
            if i is not None:
                into[i] += amount
            return
        self.advance(bucket_of(hi))
        per_s = amount / (hi - lo)
        floor = self.newest - _SLOTS + 1
        for b in range(max(int(lo // BUCKET_S), floor), bucket_of(hi) + 1):
            a0, a1 = max(lo, b * BUCKET_S), min(hi, (b + 1) * BUCKET_S)
            if a1 > a0:
                into[b % _SLOTS] += per_s * (a1 - a0)

    def request(self, t0: float, first: float, end: float, out: int) -> None:
        """A finished request's busy time over [t0, end] and its tokens (the first at
        `first`, the other n − 1 evenly over [first, end]), in one pass."""
        if out > 0:       # no decode interval: every token at `first`, as steady.py counts
            i = self.slot(bucket_of(first))
            if i is not None:
                self.tokens[i] += 1.0 if end > first else float(out)
        if end <= t0:
            return
        self.advance(bucket_of(end))
        rest = float(out - 1) / (end - first) if out > 1 and end > first else 0.0
        floor = self.newest - _SLOTS + 1
        tokens, busy = self.tokens, self.busy
        for b in range(max(int(t0 // BUCKET_S), floor), bucket_of(end) + 1):
            lo, hi = b * BUCKET_S, (b + 1) * BUCKET_S
            i = b % _SLOTS
            hi_ = end if end < hi else hi
            over = hi_ - (t0 if t0 > lo else lo)
            if over > 0:
                busy[i] += over
            if rest:
                over = hi_ - (first if first > lo else lo)
                if over > 0:
                    tokens[i] += rest * over

    def slices(self, lo_b: int, hi_b: int) -> list[slice]:
        """The slots of buckets lo_b … hi_b (at most the ring), as one or two slices."""
        self.advance(hi_b)
        lo_b = max(lo_b, hi_b - _SLOTS + 1)
        if hi_b < lo_b:
            return []
        i0, i1 = lo_b % _SLOTS, hi_b % _SLOTS
        if i0 <= i1:
            return [slice(i0, i1 + 1)]
        return [slice(i0, _SLOTS), slice(0, i1 + 1)]


class LiveFigures:
    """Folds rows in; `snapshot(now_s)` gives the figures (see the module docstring)."""

    def __init__(self, plan: SteadyPlan | None = None) -> None:
        self.plan = plan
        self._events: deque[str] = deque(maxlen=LAST_EVENTS)
        self._reset_rows()
        # server /metrics
        self._gauges: dict[str, float] = {}
        self._power: dict[str, PowerSums] = {}     # per --scrape target
        # run events
        self._ramp_step: dict[str, object] | None = None
        self._ramp_done: list[tuple[int, bool]] = []

    def _reset_rows(self) -> None:
        self._ring = _Ring()
        # whole run (non-probe rows unless said)
        # sid → [start, first turn, its reply's end (first_done), last end]
        self._sessions: dict[str, list[float]] = {}
        self._done: set[str] = set()
        self._context: dict[str, int] = {}            # latest context of a live session
        self._requests = self._ok_turns = self._failed = self._cancelled = 0
        self._summaries = 0
        self._out_tokens = 0
        self._first_start: float | None = None
        self._last_end: float | None = None
        self._ttft: array[float] = array("d")
        self._compactions: set[tuple[str, int, str]] = set()
        self._by_kind: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._cache = [0, 0]              # server-reported reads, prompt tokens
        self._client = [0, 0]             # reusable, context estimate
        self._probes = self._answered = self._correct = 0
        self._steady_lo: float | None = None
        self._steady_noted = False
        self._first_done_end: float | None = None     # the first session to end, its end
        self._pd = [0, 0]                 # P/D turns: remote, with a prefill_where
        self._kv_wait: array[float] = array("d")

    def rebuild(self, rows: Iterable[Mapping[str, object]]) -> None:
        """Fold these rows afresh in place of every row so far (a sharded run's merged
        journal replaces its shards' rows); /metrics, events and the event list stay."""
        events = list(self._events)
        self._reset_rows()
        for row in rows:
            self.add_row(row)
        self._events.clear()
        self._events.extend(events)

    # ------------------------------------------------------------------ rows in
    def add_row(self, row: Mapping[str, object]) -> None:
        """Fold in one turn row (a journal row: simulated seconds since the run began)."""
        kind = str(row.get("request_kind") or "turn")
        ok = bool(row.get("ok", True))
        sid = str(row.get("session_id"))
        turn = to_int(row.get("turn_index") or 0)
        t0 = to_float(row.get("started_mono_s") or 0.0)
        e2e, ttft = finite_float(row.get("e2e_s")), finite_float(row.get("ttft_s"))
        end = t0 + (e2e or 0.0)
        if kind == "probe":
            self._probes += 1
            correct = row.get("probe_correct")
            if ok and correct is not None:
                self._answered += 1
                self._correct += bool(correct)
            return
        err = row.get("error_type")
        self._requests += 1
        self._first_start = t0 if self._first_start is None else min(self._first_start, t0)
        if e2e is not None:
            self._last_end = end if self._last_end is None else max(self._last_end, end)
        self._session_seen(sid, turn, t0, end, kind, ok)
        if err is not None:
            self._errors[str(err)] += 1
        if not ok:
            if err == "cancelled":
                self._cancelled += 1
            elif err not in NOT_FAILURES:
                self._failed += 1
                self._events.append(f"{t0 + (e2e or 0):>8.1f} s  {sid} turn {turn}: "
                                    f"{err or 'error'}"
                                    + (f" (HTTP {row['http_status']})"
                                       if row.get("http_status") else ""))
        comp = row.get("compaction")
        if comp:
            key = (sid, turn, str(comp))
            if key not in self._compactions:
                self._compactions.add(key)
                self._by_kind[str(comp)] += 1
                removed = to_int(row.get("compaction_tokens_removed") or 0)
                self._events.append(f"{t0:>8.1f} s  {sid} turn {turn}: {comp} compaction, "
                                    f"−{removed:,} tokens")
        out = to_int(row.get("output_tokens") or 0) if ok else 0
        ring = self._ring
        if ok:
            self._out_tokens += out
            if kind == "turn":
                self._ok_turns += 1
                if ttft is not None:
                    self._ttft.append(ttft)
                where = row.get("prefill_where")
                if where is not None:
                    self._pd[1] += 1
                    if where == "remote":
                        self._pd[0] += 1
                        self._kv_wait.append(finite_float(row.get("kv_transfer_wait_s")) or 0.0)
                ctx = row.get("context_tokens_est")
                if ctx is not None and sid not in self._done:
                    self._context[sid] = to_int(ctx)
            elif kind == "summary":
                self._summaries += 1
            cr, pt = row.get("cache_read_tokens"), row.get("prompt_tokens")
            if cr is not None and pt is not None:
                self._cache[0] += to_int(cr)
                self._cache[1] += to_int(pt)
            reus, ctx_est = to_int(row.get("reusable_prefix_tokens") or 0), \
                to_int(row.get("context_tokens_est") or 0)
            self._client[0] += reus
            self._client[1] += ctx_est
            # rolling: tokens, busy time, latency
            first = t0 + ttft if ttft is not None else end
            ring.request(t0, first, end, out)
            i = ring.slot(bucket_of(end))
            if i is not None:
                ring.requests[i] += 1
                if cr is not None and pt is not None:
                    ring.cache_read[i] += to_int(cr)
                    ring.prompt[i] += to_int(pt)
                ring.reusable[i] += reus
                ring.context[i] += ctx_est
            if kind == "turn" and ttft is not None:
                j = ring.slot(bucket_of(first))
                if j is not None:
                    ring.ttft_flat[j * HIST_BINS + hist_bin(ttft)] += 1
                if out > 1 and end > first:
                    k = ring.slot(bucket_of((first + end) / 2))
                    if k is not None:
                        ring.itl_flat[k * HIST_BINS + hist_bin((end - first) / (out - 1))] += 1
        elif err not in NOT_FAILURES:
            i = ring.slot(bucket_of(end))
            if i is not None:
                ring.requests[i] += 1
                c = ring.fail[i]
                if c is None:
                    c = ring.fail[i] = Counter()
                c[str(err or "error")] += 1

    def _session_seen(self, sid: str, turn: int, t0: float, end: float, kind: str,
                      ok: bool) -> None:
        s = self._sessions.get(sid)
        if s is None:
            self._sessions[sid] = [t0, float(turn), end, end]
        else:
            s[0] = min(s[0], t0)
            if turn < s[1]:
                s[1], s[2] = float(turn), end
            elif turn == s[1]:
                s[2] = max(s[2], end)
            s[3] = max(s[3], end)
        plan = self.plan
        if plan is not None and ok and kind == "turn" and turn >= plan.turns - 1 \
                and sid not in self._done:
            self._done.add(sid)
            self._context.pop(sid, None)
            ends = self._sessions[sid][3]
            if self._first_done_end is None or ends < self._first_done_end:
                self._first_done_end = ends

    def add_metrics(self, row: Mapping[str, object]) -> None:
        """Fold in one /metrics window row (`records/prometheus.py`'s schema)."""
        metric, kind, value = row.get("metric"), row.get("kind"), finite_float(row.get("value"))
        if metric is None or value is None:
            return
        t0, t1 = finite_float(row.get("t_start_s")) or 0.0, finite_float(row.get("t_end_s")) or 0.0
        source = row.get("source")
        if source is not None:        # a --scrape target (GPU telemetry)
            self._power.setdefault(str(source), PowerSums()).add(
                str(metric), str(kind), value, t1 - t0)
        if kind == "gauge":
            self._gauges[str(metric)] = value
        elif kind == "delta":
            key = f"{metric}_total"
            self._gauges[key] = self._gauges.get(key, 0.0) + value
            if metric == "preemptions":
                self._ring.spread(t1, t1, value, self._ring.preempt)
            elif metric == "generation_tokens":
                self._ring.spread(t0, t1, value, self._ring.server_tokens)

    def add_event(self, row: Mapping[str, object]) -> None:
        """Fold in one run event (`events.jsonl`: a ramp's steps)."""
        ev = row.get("event")
        if ev == "ramp_hold":
            self._ramp_step = dict(row)
            self._events.append(f"{to_float(row.get('t_s') or 0):>8.1f} s  ramp step "
                                f"{to_int(row.get('step', 0)) + 1}: {row.get('sessions')} "
                                f"sessions ({row.get('phase')})")
        elif ev == "ramp_step":
            n = to_int(row.get("sessions") or 0)
            steady = bool(row.get("steady"))
            self._ramp_done.append((n, steady and not row.get("breached")))
            self._events.append(f"{'':>8}    ramp step {n} sessions judged: "
                                + ("held" if steady else "not steady")
                                + (f", breached {row['breached']}" if row.get("breached")
                                   else ""))

    # ------------------------------------------------------------------ figures out
    def run_figures(self) -> RunFigures:
        """The whole run so far (exact; summary.json's definitions)."""
        window = None
        if self._first_start is not None and self._last_end is not None:
            w = self._last_end - self._first_start
            window = w if w > 0 else None
        cr, pt = self._cache
        reus, ctx = self._client
        return RunFigures(
            sessions=len(self._sessions), requests=self._requests, ok_turns=self._ok_turns,
            failed_requests=self._failed, cancelled_requests=self._cancelled,
            summary_requests=self._summaries, output_tokens=self._out_tokens,
            wall_window_s=window,
            aggregate_tok_s=self._out_tokens / window if window else None,
            ttft_p50_s=exact_quantile(self._ttft, 0.50),
            ttft_p95_s=exact_quantile(self._ttft, 0.95),
            compaction_events=len(self._compactions),
            compactions_by_kind=dict(sorted(self._by_kind.items())),
            errors_by_type=dict(sorted(self._errors.items())),
            server_cache_read_share=cr / pt if pt > 0 else None,
            client_reusable_share=reus / ctx if ctx > 0 else None,
            probe_requests=self._probes, probes_answered=self._answered,
            probe_recall=self._correct / self._answered if self._answered else None,
            remote_prefill_share=self._pd[0] / self._pd[1] if self._pd[1] else None,
            kv_transfer_wait_p95_s=exact_quantile(self._kv_wait, 0.95))

    def window(self, now_s: float, span_s: float) -> WindowFigures:
        """The rolling window: the whole buckets from `span_s` before the bucket that
        holds `now_s` up to it, i.e. (now − span, now] when `now_s` falls on a bucket
        boundary; shorter while the run is younger."""
        ring = self._ring
        hi_b = bucket_of(now_s)
        lo_b = max(0, hi_b - int(round(span_s / BUCKET_S)) + 1)
        parts = ring.slices(lo_b, hi_b)
        span = max(now_s - lo_b * BUCKET_S, BUCKET_S)

        def total(xs: list[N]) -> N:
            return sum(sum(xs[p]) for p in parts)
        tok, busy, requests = total(ring.tokens), total(ring.busy), total(ring.requests)
        cr, pt = total(ring.cache_read), total(ring.prompt)
        ru, cx = total(ring.reusable), total(ring.context)
        fails: Counter[str] = Counter()
        for p in parts:
            for c in ring.fail[p]:
                if c:
                    fails.update(c)
        ttft = sum((ring.ttft[p].sum(axis=0) for p in parts), np.zeros(HIST_BINS, np.int64))
        itl = sum((ring.itl[p].sum(axis=0) for p in parts), np.zeros(HIST_BINS, np.int64))
        seen = bool(parts) and self._first_start is not None
        return WindowFigures(
            span_s=span, aggregate_tok_s=tok / span if seen else None,
            per_session_tok_s=tok / busy if busy > 0 else None,
            ttft_p50_s=hist_quantile(ttft, 0.50), ttft_p95_s=hist_quantile(ttft, 0.95),
            itl_p50_s=hist_quantile(itl, 0.50), requests=int(requests),
            concurrency=busy / span if seen else None,
            cache_read_share=cr / pt if pt > 0 else None,
            client_reusable_share=ru / cx if cx > 0 else None,
            failures=dict(sorted(fails.items())),
            preemptions=total(ring.preempt) if "preemptions_total" in self._gauges else None,
            server_tok_s=total(ring.server_tokens) / span
            if "generation_tokens_total" in self._gauges else None)

    def steady_state(self, now_s: float) -> str:
        """Whether the steady-state window has started (`analysis/steady.py`'s rule)."""
        plan = self.plan
        if plan is None:
            return "steady window: n/a"
        if plan.ramp:
            return "steady window: per ramp step"
        lo = self._steady_lo
        if lo is None:
            if plan.warmup_s is not None:
                lo = plan.warmup_s
            else:
                past = [s[2] for s in sorted(self._sessions.values())[:plan.sessions]]
                if len(past) < plan.sessions:
                    return (f"steady window: not started ({len(self._sessions)} of "
                            f"{plan.sessions} sessions started)")
                lo = max(past)
            self._steady_lo = lo
        if plan.duration_s is not None:
            hi: float | None = plan.duration_s - plan.cooldown_s
        else:
            hi = self._first_done_end
        if now_s < lo:
            return f"steady window: opens at {lo:,.1f} s"
        if hi is not None and now_s >= hi:
            return f"steady window: {lo:,.1f} → {hi:,.1f} s (closed)"
        if not self._steady_noted:
            self._steady_noted = True
            self._events.append(f"{lo:>8.1f} s  steady-state window opens")
        return f"steady window: open since {lo:,.1f} s"

    def ramp_state(self) -> str | None:
        step = self._ramp_step
        if step is None:
            return None
        judged = ", ".join(f"{n}{'✓' if held else '✗'}" for n, held in self._ramp_done)
        return (f"ramp step {to_int(step.get('step', 0)) + 1}: {step.get('sessions')} sessions "
                f"({step.get('phase')}) since {to_float(step.get('t_s') or 0):,.1f} s"
                + (f"; judged {judged}" if judged else ""))

    def energy(self, run: RunFigures) -> SummaryRecord | None:
        """Measured power so far and what it gives (`analysis/energy.py`): sessions per
        kW counts the sessions active now; None without a power series."""
        out = energy_figures(self._power, run.wall_window_s, run.output_tokens,
                             float(len(self._sessions) - len(self._done)))
        return out.copy() if out.get("gpu_power_mean_w") is not None else None

    def snapshot(self, now_s: float, live: Mapping[str, int] | None = None) -> LiveSnapshot:
        """Everything a view shows at run time `now_s`."""
        run = self.run_figures()
        ctxs = sorted(self._context.values())
        spread = None
        if ctxs:
            def pick(q: float) -> int:
                return ctxs[min(len(ctxs) - 1, int(q * len(ctxs)))]
            spread = (pick(0.10), pick(0.50), pick(0.90), ctxs[-1])
        server = dict(self._gauges)
        return LiveSnapshot(
            now_s=now_s, windows=tuple(self.window(now_s, w) for w in WINDOWS_S), run=run,
            sessions_started=len(self._sessions),
            sessions_active=len(self._sessions) - len(self._done),
            sessions_done=len(self._done), context_spread=spread, server=server,
            steady=self.steady_state(now_s), ramp=self.ramp_state(),
            energy=self.energy(run), events=tuple(self._events), live=dict(live or {}))


