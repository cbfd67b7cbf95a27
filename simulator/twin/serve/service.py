"""The real-time driver of the twin engine behind the HTTP server.

One asyncio task (`TwinService.run`) steps the engine and sleeps each step's modelled
duration divided by `time_scale`, then hands what the step emitted to the requests'
`RequestStream`s (a counter plus an `asyncio.Event`, so the server writes everything
that arrived since its last write in one go). When the engine is idle the task waits on
an `asyncio.Event` — it never polls. Timestamps are the loop's monotonic seconds.

Engine time is mapped to wall time by an anchor pair (engine t0, wall t0): a step ending
at engine time `e` is delivered at `wall_t0 + (e - engine_t0) / time_scale`. If the
driver falls behind by more than `max_lag_s` (a busy CPU), it re-anchors instead of
bursting to catch up, as a slower card would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from simulator.twin.core.sampling import SamplingParams
from simulator.twin.core.types import Engine, EngineCounters, EngineRequest, StepOutcome


@dataclass(slots=True)
class RequestStream:
    """One request's view of the engine: tokens emitted so far and when (wall seconds)."""

    request_id: str
    prompt_len: int
    plan: tuple[int, ...]
    received: float                       # monotonic seconds at submission
    emitted: int = 0                      # output tokens emitted so far
    finished: bool = False
    cached_tokens: int = 0                # prefix-cache hit at admission (tokens)
    num_preemptions: int = 0
    spec_drafts: int = 0                  # speculation: drafts, draft and accepted tokens
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    emit_times: list[float] = field(default_factory=list)   # monotonic, one per step
    emit_counts: list[int] = field(default_factory=list)    # tokens per step
    # when each emission's bytes were handed to the socket (HTTP server; monotonic):
    # the reference a client's receipt times are compared with
    write_times: list[float] = field(default_factory=list)
    engine_token_times: list[float] = field(default_factory=list)  # engine clock
    engine_arrival: float = 0.0
    finished_at: float | None = None
    queue_s: float | None = None          # arrival → first scheduled (wall seconds)
    abandoned: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def record(self) -> dict[str, object]:
        """A JSON-able debug record: server-side emission times relative to receipt."""
        t0 = self.received
        return {
            "request_id": self.request_id,
            "prompt_tokens": self.prompt_len,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.emitted,
            "planned_tokens": len(self.plan),
            "finished": self.finished,
            "abandoned": self.abandoned,
            "num_preemptions": self.num_preemptions,
            "spec_drafts": self.spec_drafts,
            "spec_draft_tokens": self.spec_draft_tokens,
            "spec_accepted_tokens": self.spec_accepted_tokens,
            # per forward pass that emitted for it (emit_counts has each pass's tokens)
            "tokens_per_forward_pass": (round(self.emitted / len(self.emit_counts), 4)
                                        if self.emit_counts else None),
            "emit_times_s": [round(t - t0, 6) for t in self.emit_times],
            # the same on the machine-wide monotonic clock (time.monotonic), so a client
            # on this host can compare its own receipt times with the server's writes
            "received_mono_s": t0,
            "first_emit_mono_s": self.emit_times[0] if self.emit_times else None,
            "write_times_s": [round(t - t0, 6) for t in self.write_times],
            "first_write_mono_s": self.write_times[0] if self.write_times else None,
            "emit_counts": list(self.emit_counts),
            "engine_token_times_s": [round(t - self.engine_arrival, 6)
                                     for t in self.engine_token_times],
            "e2e_s": None if self.finished_at is None else round(self.finished_at - t0, 6),
        }


@dataclass(frozen=True, slots=True)
class ServiceSnapshot:
    """Engine state for /metrics (counters are cumulative, vLLM meanings)."""

    counters: EngineCounters
    num_running: int
    num_waiting: int
    kv_usage: float
    block_size: int
    num_blocks: int


class TwinService:
    """Admits requests into a `TwinEngine` and plays its steps out in real time."""

    def __init__(self, engine: Engine, *, time_scale: float = 1.0, instant: bool = False,
                 ring_size: int = 1024, max_lag_s: float = 0.05,
                 on_finish: Callable[[RequestStream], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        self.engine = engine
        self.time_scale = time_scale
        self.instant = instant
        self.clock = clock
        self._max_lag = max_lag_s
        self._on_finish = on_finish
        self._streams: dict[str, RequestStream] = {}
        self._ring: OrderedDict[str, RequestStream] = OrderedDict()  # recently finished
        self._ring_size = ring_size
        self._wake = asyncio.Event()
        self._ids = itertools.count(1)
        self._anchor_engine = engine.now
        self._anchor_wall = clock()
        self.steps = 0

    def submit(self, prompt_tokens: Sequence[int], plan: Sequence[int],
               request_id: str | None = None, *,
               sampling: SamplingParams | None = None,
               kv_transfer: Callable[[float, int], float] | None = None) -> RequestStream:
        """Queue a request in the engine now; the driver task will play it out
        (`sampling`: what it samples with, resolved; `kv_transfer`: a decode instance's
        pull of a remote prefill's KV)."""
        rid = request_id or f"msg_twin_{next(self._ids):08d}"
        now = self.clock()
        if self.engine.is_idle():
            self._realign(now)
        stream = RequestStream(rid, len(prompt_tokens), tuple(plan), received=now,
                               engine_arrival=self.engine.now)
        self._streams[rid] = stream
        self.engine.submit(EngineRequest(rid, prompt_tokens, stream.plan, self.engine.now,
                                         sampling=sampling, kv_transfer=kv_transfer))
        self._wake.set()
        return stream

    def abandon(self, stream: RequestStream) -> None:
        """The client went away: stop tracking deliveries (the engine finishes the work:
        the twin models no abort)."""
        stream.abandoned = True

    def debug_record(self, request_id: str) -> dict[str, object] | None:
        """The debug record of a running or recently finished request."""
        stream = self._streams.get(request_id)
        if stream is not None:
            return stream.record()
        done = self._ring.get(request_id)
        return None if done is None else done.record()

    def snapshot(self) -> ServiceSnapshot:
        e = self.engine
        c = e.counters
        copy = dataclasses.replace(c, spec_accepted_per_pos=list(c.spec_accepted_per_pos))
        return ServiceSnapshot(copy, e.num_running(), e.num_waiting(), e.kv_usage(),
                               e.block_size, e.num_blocks)

    def _realign(self, now: float) -> None:
        """Idle engine: move engine time to match the wall clock and re-anchor."""
        target = self._anchor_engine + (now - self._anchor_wall) * self.time_scale
        if target > self.engine.now:
            self.engine.run_until(target)
        self._anchor_engine, self._anchor_wall = self.engine.now, now

    async def run(self) -> None:
        """Drive the engine until cancelled."""
        while True:
            if self.engine.is_idle():
                self._wake.clear()
                await self._wake.wait()
                continue
            outcome = self.engine.step()
            if outcome is None:       # nothing runnable yet: wait for a submission
                self._wake.clear()
                await self._wake.wait()
                continue
            self.steps += 1
            await self._pace(outcome.end)
            self._deliver(outcome)

    async def _pace(self, engine_end: float) -> None:
        """Sleep until the step's end in wall time (re-anchor when lagging)."""
        if self.instant:
            await asyncio.sleep(0)
            return
        now = self.clock()
        delay = self._anchor_wall + (engine_end - self._anchor_engine) / self.time_scale - now
        if delay > 0:
            await asyncio.sleep(delay)
            return
        if delay < -self._max_lag:
            self._anchor_engine, self._anchor_wall = engine_end, now
        await asyncio.sleep(0)

    def _deliver(self, outcome: StepOutcome) -> None:
        """Hand the step's emitted tokens and finished requests to their streams."""
        now = self.clock()
        streams = self._streams
        for rid in outcome.admitted:
            s = streams.get(rid)
            if s is not None:
                s.cached_tokens = self.engine.result(rid).cached_tokens
        for rid, n in outcome.emitted:
            s = streams.get(rid)
            if s is None or n <= 0:
                continue
            s.emitted += n
            s.emit_times.append(now)
            s.emit_counts.append(n)
            s.changed.set()
        for rid in outcome.finished:
            self._finish(rid, now)

    def _finish(self, rid: str, now: float) -> None:
        s = self._streams.pop(rid, None)
        result = self.engine.pop_result(rid)
        if s is None:
            return
        s.cached_tokens = result.cached_tokens
        s.num_preemptions = result.num_preemptions
        s.spec_drafts, s.spec_draft_tokens = result.spec_drafts, result.spec_draft_tokens
        s.spec_accepted_tokens = result.spec_accepted_tokens
        s.engine_token_times = list(result.token_times)
        if result.first_scheduled is not None:
            s.queue_s = max(0.0, result.first_scheduled - s.engine_arrival) / self.time_scale
        s.finished, s.finished_at = True, now
        s.changed.set()
        self._ring[rid] = s  # recorded when asked: the writer may still be writing
        if len(self._ring) > self._ring_size:
            self._ring.popitem(last=False)
        if self._on_finish is not None and not s.abandoned:
            self._on_finish(s)
