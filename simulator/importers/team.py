"""A team's recorded day → replay streams with their real arrivals (pure).

A *stream* is one session's requests from one thread: `session.id` (or the GenAI
conversation id) and its query source; a sub-agent's or an auxiliary model's
requests are a stream of their own, starting when they started. Requests are
sorted by start (an exporter does not keep the order), exact duplicates (the same
request exported twice) are dropped, and the gap before each request is what the
telemetry says: the previous request's end (its start + `duration_ms`) to this
start, a tool gap when a tool of the session finished inside it, else think time.

Each stream becomes a `TraceSession` of the block-hash trace model (`trace_build`):
one-token "blocks", so the recorded cache read is the prefix the request shares
with the previous one (a smaller prompt than the previous is a context drop: a
compaction, keeping the prefix it read), the recorded cache write kept as such.
Requests of one stream that overlapped (parallel sub-agents under one query
source) are split into sequential lanes (`lanes`), each a stream of its own. The replay sends each
request at its recorded time since its stream began (`at_s`) — or when the
previous reply arrives, if that is later.

A slice (`window`, `busiest`) keeps the requests that start inside it; a stream cut
at the window's start begins with its first request inside, sent cold. `scale`
resamples whole sessions (seeded): factor 2 keeps the team and adds as many sessions
drawn from it, each shifted by up to ±SCALE_JITTER_S and replayed with fresh
synthetic text. `profile` counts sessions in flight (first request's start to last
reply) per PROFILE_STEP_S.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from simulator.errors import InputError
from simulator.importers.otel_events import TeamLog, TeamRequest
from simulator.importers.trace_build import TraceRequest, TraceSession

DAY_S = 86_400.0
MAX_SPAN_S = 7 * DAY_S          # one import covers at most a week of telemetry
PROFILE_STEP_S = 300            # the concurrency profile: sessions in flight per 5 min
SCALE_JITTER_S = 900.0          # a resampled session starts within ±15 min of its source
BUSIEST_STEP_S = 60.0           # --busiest slides its window by a minute
LANE_SLACK_S = 0.25            # a start this much before the last reply's end: same lane
# Streams (query sources and lanes) of one session in flight at once. Sessions with 56
# sub-agents at once are reported in use; 256 is over four times that. Past it the
# import refuses, naming the session, rather than capping: a cap would queue the
# requests past their recorded starts and replay a different load than the day's (and
# 9,000 parallel streams of one id took the replay past 2 GB).
MAX_STREAMS_PER_SESSION = 256
REPLAY_MESSAGE_TOKENS = 11      # a message's framing as the twin's chat template counts it


@dataclass(slots=True)
class Stream:
    label: str                   # session id, "/query source" for a side stream
    session: str                 # the session it belongs to
    requests: list[TeamRequest]
    tool_gaps: list[bool]        # per request: a tool finished in the gap before it

    @property
    def start_s(self) -> float:
        return self.requests[0].start_s

    @property
    def end_s(self) -> float:
        return max(r.start_s + (r.api_s or 0.0) for r in self.requests)


def streams(log: TeamLog) -> list[Stream]:
    """The log's streams, ordered by their first request (see the module)."""
    if not log.requests:
        raise InputError(f"no API requests among {log.records:,} records (expected "
                         "claude_code.api_request events or gen_ai spans with usage)")
    for r in log.requests:
        if r.prompt < 1:
            raise InputError(f"{r.where}: a request with a prompt of 0 tokens "
                             "(input + cache read + cache creation)")
    first = min(r.start_s for r in log.requests)
    last = max(r.start_s + (r.api_s or 0.0) for r in log.requests)
    if last - first > MAX_SPAN_S:
        raise InputError(f"the telemetry spans {(last - first) / DAY_S:,.1f} days; an import "
                         f"covers at most {MAX_SPAN_S / DAY_S:.0f} (import a day at a time)")
    by: dict[tuple[str, str], list[TeamRequest]] = {}
    for r in log.requests:
        by.setdefault((r.session, r.stream), []).append(r)
    tools: dict[str, list[float]] = {}
    for t in log.tools:
        tools.setdefault(t.session, []).append(t.end_s)
    for ends in tools.values():
        ends.sort()
    out: list[Stream] = []
    for (session, stream), reqs in by.items():
        reqs.sort(key=lambda r: (r.start_s, r.where))
        kept = [r for i, r in enumerate(reqs) if i == 0 or _key(r) != _key(reqs[i - 1])]
        ends = tools.get(session, [])
        label = session + (f"/{stream}" if stream else "")
        for k, lane in enumerate(lanes(kept)):
            gaps = [False] + [_tool_between(ends, a.start_s + (a.api_s or 0.0), b.start_s)
                              for a, b in itertools.pairwise(lane)]
            out.append(Stream(label + (f"#{k + 1}" if k else ""), session, lane, gaps))
    out.sort(key=lambda s: (s.start_s, s.label))
    _bound_parallel(out)
    return out


def _bound_parallel(ss: Sequence[Stream]) -> None:
    """Refuse a session with more than MAX_STREAMS_PER_SESSION streams in flight at
    once (see the constant), naming its first request past the bound."""
    by: dict[str, list[Stream]] = {}
    for s in ss:
        by.setdefault(s.session, []).append(s)
    for session, mine in by.items():
        if len(mine) <= MAX_STREAMS_PER_SESSION:
            continue
        spans = [(s.start_s, s.end_s) for s in mine]
        peak = peak_at_once(spans)[0]
        if peak <= MAX_STREAMS_PER_SESSION:
            continue
        at = next(t for t, n in _open(spans) if n > MAX_STREAMS_PER_SESSION)
        first = next(s for s in mine if s.start_s >= at)   # the stream past the bound
        raise InputError(
            f"{first.requests[0].where}: session {session[:60]!r} has {peak:,} requests or "
            f"streams in flight at once (at most {MAX_STREAMS_PER_SESSION} per session); "
            "refused, not capped: a cap would queue them past their recorded starts and "
            "replay another load (one session id shared by many clients?)")


def _open(spans: Iterable[tuple[float, float]]) -> Iterator[tuple[float, int]]:
    """(instant, spans open) after each start or end, in time order; at one instant
    the starts come first, so spans that touch overlap (as in `in_flight`)."""
    n = 0
    for t, d in sorted(itertools.chain.from_iterable(((a, -1), (b, 1)) for a, b in spans)):
        n -= d
        yield t, n


def peak_at_once(spans: Iterable[tuple[float, float]]) -> tuple[int, float]:
    """The most [a, b] spans open at one instant, and the first instant it is reached;
    one sort, whatever the overlap."""
    best, at = 0, 0.0
    for t, n in _open(spans):
        if n > best:
            best, at = n, t
    return best, at


def lanes(reqs: Sequence[TeamRequest]) -> list[list[TeamRequest]]:
    """Requests of one stream (sorted by start) in sequential lanes: one that starts
    while every lane is still waiting for its reply (parallel sub-agents under one
    query source) opens a lane of its own. Of the free lanes a request continues the
    one whose last prompt is closest to the prefix it read from the cache (the lowest
    lane of equals).

    O(n log n) comparisons: busy lanes wait in a heap by the end of their last reply;
    a lane that is free stays free (starts only grow), so it moves once into the free
    lanes, kept sorted by (last prompt, lane) (an insert moves pointers, one memmove),
    where the closest prompt is two bisections away. A scan of every lane per request
    was quadratic: 40,000 overlapping requests of one session hung the import."""
    out: list[list[TeamRequest]] = []
    busy: list[tuple[float, int]] = []         # (end of the lane's last reply, lane)
    free: list[tuple[int, int]] = []           # (lane's last prompt, lane), sorted
    for r in reqs:
        while busy and busy[0][0] <= r.start_s + LANE_SLACK_S:
            k = heapq.heappop(busy)[1]
            bisect.insort(free, (out[k][-1].prompt, k))
        if free:
            i = _closest(free, r.cache_read)
            k = free.pop(i)[1]
            out[k].append(r)
        else:
            k = len(out)
            out.append([r])
        heapq.heappush(busy, (r.start_s + (r.api_s or 0.0), k))
    return out


def _closest(free: list[tuple[int, int]], want: int) -> int:
    """The index in `free` (sorted (prompt, lane)) of the lane whose prompt is closest
    to `want`; of equal distances the lowest lane (the first the old scan found)."""
    hi = bisect.bisect_left(free, (want, -1))          # first prompt >= want
    best: tuple[int, int, int] | None = None             # (distance, lane, index)
    if hi < len(free):                                   # the lowest lane of that prompt
        best = (free[hi][0] - want, free[hi][1], hi)
    if hi > 0:                                           # the lowest lane of the prompt below
        below = free[hi - 1][0]
        j = bisect.bisect_left(free, (below, -1))
        cand = (want - below, free[j][1], j)
        best = cand if best is None or cand < best else best
    assert best is not None
    return best[2]


def _key(r: TeamRequest) -> tuple[object, ...]:
    return (r.start_s, r.api_s, r.input, r.cache_read, r.cache_write, r.output, r.model)


def _tool_between(ends: list[float], a: float, b: float) -> bool:
    i = bisect.bisect_left(ends, a)
    return i < len(ends) and ends[i] <= b


def day_start(ss: Sequence[Stream]) -> float:
    """Midnight (UTC) of the day the first request began."""
    first = min(s.start_s for s in ss)
    return first - first % DAY_S


def window(ss: Sequence[Stream], start_s: float, end_s: float) -> list[Stream]:
    """The requests that start in [start_s, end_s) (Unix s); empty streams dropped."""
    out: list[Stream] = []
    for s in ss:
        keep = [i for i, r in enumerate(s.requests) if start_s <= r.start_s < end_s]
        if keep:
            out.append(replace(s, requests=[s.requests[i] for i in keep],
                               tool_gaps=[s.tool_gaps[i] if i != keep[0] else False
                                          for i in keep]))
    if not out:
        raise InputError("the window holds no request")
    return out


def busiest(ss: Sequence[Stream], width_s: float) -> tuple[float, float]:
    """The `width_s` window (sliding by a minute) in which the most requests start;
    the earliest of equals. (start, end) in Unix s."""
    starts = sorted(r.start_s for s in ss for r in s.requests)
    t, end = starts[0] - starts[0] % BUSIEST_STEP_S, starts[-1]
    best, best_t = -1, t
    while t <= end:
        n = bisect.bisect_left(starts, t + width_s) - bisect.bisect_left(starts, t)
        if n > best:
            best, best_t = n, t
        t += BUSIEST_STEP_S
    return best_t, best_t + width_s


def scale(ss: Sequence[Stream], factor: float, seed: int) -> list[Stream]:
    """The team × `factor` (see the module): sessions, not streams, are drawn."""
    sessions = sorted({s.session for s in ss})
    rng = random.Random(f"{seed}:scale")
    by: dict[str, list[Stream]] = {}
    for s in ss:
        by.setdefault(s.session, []).append(s)
    want = round(len(sessions) * factor)
    if want < 1:
        raise InputError(f"--scale {factor:g}: no session left of {len(sessions)}")
    if want <= len(sessions):
        picked = set(rng.sample(sessions, want))
        return [s for s in ss if s.session in picked]
    out = list(ss)
    for k in range(want - len(sessions)):
        src = rng.choice(sessions)
        shift = rng.uniform(-SCALE_JITTER_S, SCALE_JITTER_S)
        name = f"{src}~{k + 1}"
        for s in by[src]:
            reqs = [replace(r, session=name, start_s=r.start_s + shift) for r in s.requests]
            out.append(Stream(name + s.label[len(src):], name, reqs, list(s.tool_gaps)))
    out.sort(key=lambda s: (s.start_s, s.label))
    return out


def profile(ss: Sequence[Stream], t0: float, step_s: float = PROFILE_STEP_S,
            t1: float | None = None) -> list[int]:
    """Sessions in flight per step from `t0` (Unix s): a session counts in every step
    its [first start, last end] overlaps."""
    spans = session_spans(ss)
    end = max(b for _, b in spans.values()) if t1 is None else t1
    n = max(1, int((end - t0) // step_s) + 1)
    return in_flight(spans.values(), t0, step_s, n)


def session_spans(ss: Sequence[Stream]) -> dict[str, tuple[float, float]]:
    """Each session's [first start, last end] over its streams (Unix s)."""
    spans: dict[str, tuple[float, float]] = {}
    for s in ss:
        a, b = spans.get(s.session, (s.start_s, s.end_s))
        spans[s.session] = (min(a, s.start_s), max(b, s.end_s))
    return spans


def in_flight(spans: Iterable[tuple[float, float]], t0: float, step_s: float,
              n: int | None = None) -> list[int]:
    """How many [a, b] spans overlap each step from `t0` (`n` steps, default to the last
    end): one pass over the spans and one over the steps, whatever the spans' lengths."""
    spans = list(spans)
    if n is None:
        n = max(1, int((max((b for _, b in spans), default=t0) - t0) // step_s) + 1)
    delta = [0] * (n + 1)
    for a, b in spans:
        lo, hi = max(0, int((a - t0) // step_s)), min(n - 1, int((b - t0) // step_s))
        if lo <= hi:
            delta[lo] += 1
            delta[hi + 1] -= 1
    return list(itertools.accumulate(delta[:n]))


def shared_prefix(ss: Sequence[Stream]) -> int:
    """The system + tools prefix every stream's first request reads from the cache:
    the median of those first reads (a stream whose first prompt is smaller gets
    its own, below it)."""
    reads = sorted(s.requests[0].cache_read for s in ss if s.requests[0].cache_read > 0)
    return reads[len(reads) // 2] if reads else 0


def _shared(r: TeamRequest, prev: TeamRequest | None) -> int:
    """Tokens the request re-sends of the previous prompt: all of it when the context
    grew (a provider's cache may have expired meanwhile: its read says nothing of the
    conversation then), the cached prefix when it shrank (a compaction kept that)."""
    if prev is None:
        return 0
    return prev.prompt if r.prompt >= prev.prompt else min(r.cache_read, prev.prompt)


def trace_session(s: Stream, t0: float, base_prefix: int,
                  message_tokens: int = REPLAY_MESSAGE_TOKENS) -> TraceSession:
    """The stream as the trace model's session (module docstring); `t0`: the replay's
    start (Unix s)."""
    first = s.requests[0]
    own = min(base_prefix, max(0, first.prompt - 64))
    out = TraceSession(s.label, 1, own, 0, own, start_s=max(0.0, first.start_s - t0),
                       model=first.model, arrivals=True, message_tokens=message_tokens)
    prev: TeamRequest | None = None
    for r, tool in zip(s.requests, s.tool_gaps, strict=True):
        gap = None if prev is None else max(0.0, r.start_s - prev.start_s - (prev.api_s or 0.0))
        out.requests.append(TraceRequest(
            t=r.start_s - first.start_s, in_tokens=r.prompt, out_tokens=r.output,
            blocks=r.prompt,
            shared_prev_blocks=_shared(r, prev),
            implied_hit_tokens=r.cache_read, cache_write_tokens=r.cache_write,
            model=r.model, api_time=r.api_s, think_time=gap,
            input_types=("tool_result",) if tool else ()))
        prev = r
    return out

