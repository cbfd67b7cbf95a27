"""The engine's virtual-time fast path: runs of pure decode steps in a tight loop.

Between two scheduling events (an arrival, a request finishing, the driver's horizon)
a batch of decoding sequences changes only in positions and block tables, so the
engine runs those steps here instead of through the general scheduler. Step times are
those the performance model gives for each step; for the roofline model they are
computed from its decode terms inline (`DecodeTerms`), bit-for-bit equal to
`step_time` (checked when the terms are built), at ~0.2 µs per step instead of ~3 µs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from simulator.twin.core.kv_cache_manager import KVCacheManager
from simulator.twin.core.request import Seq
from simulator.twin.core.types import StepShape

# kv values at which the inline decode terms are checked against `step_time`
_CHECK_KV = (0, 1, 15, 16, 1_000, 4_095, 33_333, 250_000, 1_000_000, 7_654_321)


@dataclass(frozen=True, slots=True)
class DecodeTerms:
    """Step time (s) of a pure-decode step of `num_seqs` sequences over `kv` tokens of
    KV (before this step's): base + max(mem0 + kv_coef·(kv + n)·kv_scale + state, comp).
    The operations are ordered exactly as `RooflinePerfModel.step_time` orders them."""

    num_seqs: int
    base: float
    mem0: float
    kv_coef: float
    kv_scale: float
    state: float
    comp: float

    def step(self, kv: int) -> float:
        t_mem = self.mem0 + self.kv_coef * (kv + self.num_seqs) * self.kv_scale + self.state
        return self.base + (t_mem if t_mem > self.comp else self.comp)


@runtime_checkable
class InlineDecodeModel(Protocol):
    """A performance model that gives its pure-decode step terms (the roofline model);
    one that does not (a test's stand-in, a wrapper) is stepped through `step_time`."""

    def step_time(self, shape: StepShape) -> float: ...

    def decode_terms(self, n: int) -> DecodeTerms | None: ...


def decode_terms(perf: object, n: int) -> DecodeTerms | None:
    """Inline decode terms of a perf model for batches of n: its public `decode_terms(n)`
    (None for a model without one, or when the terms do not reproduce `step_time`
    exactly)."""
    if n <= 0 or not isinstance(perf, InlineDecodeModel):
        return None
    terms = perf.decode_terms(n)
    if terms is None:
        return None
    step_time = perf.step_time
    for kv in _CHECK_KV:
        if terms.step(kv) != step_time(StepShape(n, n, kv, 0, 0.0)):
            return None
    return terms


def burst_len(running: list[Seq], max_num_batched_tokens: int) -> int:
    """Steps that can run as pure decode with nothing changing but positions and
    block tables: no request finishing, no admission possible (0 if none)."""
    if not running or len(running) > max_num_batched_tokens:
        return 0
    k = 1 << 62
    for s in running:
        n = s.num_tokens
        if n - s.num_computed != 1:
            return 0
        left = s.total - n - 1
        if left < k:
            k = left
    return k


def run_burst(running: list[Seq], kv: KVCacheManager, k: int, now: float, stop: float,
              step_time: Callable[[StepShape], float], terms: DecodeTerms | None,
              room: list[int], since: int) -> tuple[int, float]:
    """Up to k pure decode steps of `running` from `now`; stops once now ≥ stop, or when
    a block is needed and none is free. Appends each step's end time to every sequence's
    token times and gives blocks as the tables fill (raising `room`: `kv.room(running)`
    as it was `since` decode steps ago, kept by the caller across the bursts of one
    batch); the caller advances positions. Returns (steps run, new now in s)."""
    r = len(running)
    ctx = sum(s.num_computed for s in running) + r
    next_alloc = min(room) - since              # steps each can run without a block
    ends: list[float] = []
    append = ends.append
    done = 0
    if terms is not None:
        base, mem0, coef, scale = terms.base, terms.mem0, terms.kv_coef, terms.kv_scale
        state, comp = terms.state, terms.comp
    while done < k and now < stop:
        if done == next_alloc and not kv.allocate_blocks(running, room, done + since):
            break
        if terms is not None:
            t_mem = mem0 + coef * (ctx + r) * scale + state
            now += base + (t_mem if t_mem > comp else comp)
        else:
            now += step_time(StepShape(r, r, ctx, 0, 0.0))
        append(now)
        ctx += r
        done += 1
        if done > next_alloc:
            next_alloc = min(room) - since
    if ends:
        for s in running:
            s.result.token_times.extend(ends)
    return done, now

