"""The twin's n-gram speculation on a scripted exchange: a given prompt and a given reply
(a real model's, in its own token ids), decoded by the twin engine alone, to read its
draft and acceptance counters next to a real engine's for the very same text.

The twin scores a draft against the reply it plans; here the plan is the real reply, so
the counters are what the twin's proposer (`spec_decode.NgramIndex`) makes of real text.
Pure simulation: no I/O, deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.twin.core.config import engine_config
from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import EngineRequest
from simulator.twin.model.perf_model import RooflinePerfModel, build_perf_model
from simulator.twin.spec_decode.ngram import NgramSpec


@dataclass(frozen=True, slots=True)
class SpecCounts:
    """vLLM's counters' meaning: drafts proposed, draft tokens, accepted draft tokens,
    and output tokens emitted."""

    drafts: int
    draft_tokens: int
    accepted_tokens: int
    output_tokens: int

    @property
    def acceptance(self) -> float:
        """accepted ÷ draft tokens (vLLM's draft acceptance rate)."""
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Output tokens per forward pass: 1 + accepted per step on average; the first
        token comes from the prefill pass."""
        passes = max(self.output_tokens - self.accepted_tokens, 1)
        return self.output_tokens / passes

    def __add__(self, other: SpecCounts) -> SpecCounts:
        return SpecCounts(self.drafts + other.drafts, self.draft_tokens + other.draft_tokens,
                          self.accepted_tokens + other.accepted_tokens,
                          self.output_tokens + other.output_tokens)


def replay(exchanges: Sequence[tuple[Sequence[int], Sequence[int]]], spec: NgramSpec,
           *, hardware: str = "cpu-2core", model: str = "tiny-llama-2l") -> SpecCounts:
    """Decode each (prompt ids, reply ids) one after another on one twin engine with
    n-gram speculation `spec`; the summed counters. The profiles set only the timing,
    which does not enter the counts."""
    pm = build_perf_model(hardware, model, spec=f"ngram:{spec.num_speculative_tokens}")
    engine = TwinEngine(pm, engine_config(pm, spec=spec))
    emitted = 0
    for i, (prompt, reply) in enumerate(exchanges):
        if not reply:
            continue
        engine.submit(EngineRequest(f"r{i}", tuple(prompt), tuple(reply), engine.now))
        while not engine.is_idle():
            for rid in engine.run_until(engine.now + 3600.0):
                emitted += len(engine.pop_result(rid).token_times)
    c = engine.counters
    return SpecCounts(c.spec_drafts, c.spec_draft_tokens, c.spec_accepted_tokens, emitted)


def replay_seconds(exchanges: Sequence[tuple[Sequence[int], Sequence[int]]],
                   spec: NgramSpec | None, *, hardware: str, model: str
                   ) -> list[tuple[int, float]]:
    """(output tokens, seconds from arrival to the last token) of each (prompt, reply)
    decoded alone, one after another, on the twin of `hardware`/`model`, with n-gram
    speculation `spec` (None: off): the twin's timing of a real model's own text."""
    pm = build_perf_model(hardware, model,
                          spec="off" if spec is None else f"ngram:{spec.num_speculative_tokens}")
    engine = TwinEngine(pm, engine_config(pm, spec=spec))
    out: list[tuple[int, float]] = []
    for i, (prompt, reply) in enumerate(exchanges):
        if not reply:
            continue
        start = engine.now
        engine.submit(EngineRequest(f"r{i}", tuple(prompt), tuple(reply), start))
        while not engine.is_idle():
            for rid in engine.run_until(engine.now + 3600.0):
                res = engine.pop_result(rid)
                out.append((len(res.token_times), res.token_times[-1] - start))
    return out


def replay_streams(exchanges: Sequence[tuple[Sequence[int], Sequence[int]]],
                   spec: NgramSpec | None, streams: int, perf: RooflinePerfModel
                   ) -> list[tuple[int, float]]:
    """(output tokens, seconds from arrival to the last token) of every request when
    `streams` clients each send all `exchanges` back to back, client i starting at
    exchange i (so they do not move in step), on one twin engine with `perf` (whose
    speculation setting must be `spec`'s): the twin's timing of a real model's own text
    under concurrency, as `twin_check.time_probe_streams` measures the real server."""
    engine = TwinEngine(perf, engine_config(perf, spec=spec))
    todo = [e for e in exchanges if e[1]]
    if not todo:
        return []
    nxt = [0] * streams
    start: dict[str, float] = {}
    out: list[tuple[int, float]] = []

    def send(i: int) -> None:
        j = nxt[i]
        prompt, reply = todo[(i + j) % len(todo)]
        rid = f"s{i}r{j}"
        start[rid] = engine.now
        engine.submit(EngineRequest(rid, tuple(prompt), tuple(reply), engine.now))
        nxt[i] += 1

    for i in range(streams):
        send(i)
    while not engine.is_idle():
        for rid in engine.run_until(engine.now + 3600.0):
            res = engine.pop_result(rid)
            out.append((len(res.token_times), res.token_times[-1] - start.pop(rid)))
            i = int(rid[1:rid.index("r")])
            if nxt[i] < len(todo):
                send(i)
    return out
