"""The twin, in-process, in virtual time: the embedded default endpoint.

Requests go straight into a `TwinEngine` (no sockets). A driver task advances the
engine in tight loops of steps, never past the loop's next timer (the moment some
agent could send something new), sleeps — virtually — until the step that finished a
request, and hands that request its per-token times. Timings are therefore exactly
what the engine computed. Run it on `simulator.vtime.VirtualTimeLoop`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
from array import array
from collections.abc import Callable, Coroutine
from typing import Any

from simulator import tokens
from simulator.endpoints.base import (
    EndpointError,
    ErrorType,
    LLMRequest,
    LLMResponse,
    Timing,
    Usage,
)
from simulator.protocol.messages import TextBlock
from simulator.twin import reply
from simulator.twin.engine import RequestTooLong, TwinEngine
from simulator.twin.perf_model import build_perf_model
from simulator.twin.prompt import PromptError, PromptTokenizer
from simulator.twin.timeline import EngineTimeline
from simulator.twin.types import EngineRequest, RequestResult
from simulator.twin.wire import ReplyUsage
from simulator.vtime import next_timer

# Yields granted to woken agents before the driver plans again, so that a request
# sent in reaction to a delivery is in the engine before it runs ahead.
_SETTLE_YIELDS = 3


class InProcessTwin:
    name = "twin"
    simulated = True

    def __init__(self, hardware: str, model: str, *, spec: str = "off", seed: int = 0,
                 context_window: int | None = None,
                 overrides: dict[str, Any] | None = None) -> None:
        self.hardware, self.model = hardware, model
        self.perf = build_perf_model(hardware, model, spec=spec, overrides=overrides)
        self.engine = TwinEngine(self.perf)
        self.tokenizer = PromptTokenizer()
        self.seed = seed
        self.context_window = context_window or int(getattr(self.perf, "max_model_len", 262_144))
        self._waiters: dict[str, asyncio.Future[RequestResult]] = {}
        self._wake: asyncio.Event | None = None
        self._ids = itertools.count()
        self.timeline = EngineTimeline()   # engine log for the report's timeline

    def background(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        return [self._drive]

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": "twin-inprocess", "simulated": True,
                             "hardware": self.hardware, "model": self.model,
                             "virtual_time": True}
        describe = getattr(self.perf, "describe", None)
        if callable(describe):
            d["profile"] = describe()
        return d

    def stats(self) -> dict[str, Any]:
        c = self.engine.counters
        return {"prefix_cache_queries": c.prefix_cache_queries,
                "prefix_cache_hits": c.prefix_cache_hits, "preemptions": c.preemptions,
                "kv_usage_peak": self.engine.kv_usage_peak, "num_gpu_blocks": self.engine.num_blocks,
                "block_size": self.engine.block_size,
                "kv_capacity_tokens": self.engine.num_blocks * self.engine.block_size,
                "spec_drafts": c.spec_drafts, "spec_accepted_tokens": c.spec_accepted_tokens,
                **self._spec_stats()}

    def _spec_stats(self) -> dict[str, Any]:
        """Why speculation won or lost (vLLM's spec_decode counters, derived): tokens
        emitted per forward pass that emitted any, mean acceptance length (1 + accepted
        per draft, bonus token included, as vLLM logs it), acceptance per position."""
        c = self.engine.counters
        if self.engine.spec is None:
            return {}
        drafts = c.spec_drafts
        return {"spec_draft_tokens": c.spec_draft_tokens,
                "spec_accepted_tokens_per_pos": list(c.spec_accepted_per_pos),
                "spec_acceptance_per_pos": [n / drafts if drafts else 0.0
                                            for n in c.spec_accepted_per_pos],
                "spec_mean_acceptance_length": (1 + c.spec_accepted_tokens / drafts
                                                if drafts else None),
                "tokens_per_forward_pass": (c.generation_tokens / c.decode_steps
                                            if c.decode_steps else None)}

    def timeline_rows(self) -> list[dict[str, Any]]:
        """The engine log as `server_metrics` rows (seconds since the run started)."""
        self.timeline.close(self.engine.now, self.engine)
        return self.timeline.rows()

    async def aclose(self) -> None:
        for fut in self._waiters.values():
            fut.cancel()

    def prompt_of(self, request: LLMRequest) -> array[int]:
        """The request's prompt token ids (EndpointError 400 for an invalid prompt)."""
        def head() -> tuple[Any, Any]:
            kw = dataclasses.replace(request, messages=()).to_api_kwargs()
            return kw["system"], kw.get("tools")

        try:
            # prefix and messages are immutable: their token ids are cached by identity
            return self.tokenizer.encode_objects(request.prefix, head, request.messages)
        except PromptError as exc:
            raise EndpointError(ErrorType.BAD_REQUEST, str(exc), status=400) from None

    async def send(self, request: LLMRequest) -> LLMResponse:
        loop = asyncio.get_running_loop()
        sent = loop.time()
        prompt = self.prompt_of(request)
        try:
            reply.check_window(len(prompt), self.context_window)
        except reply.PromptTooLong as exc:
            raise EndpointError(ErrorType.CONTEXT_OVERFLOW, str(exc), status=400) from None
        planned = reply.plan_for(prompt, request.max_tokens, request.hints,
                                 context_window=self.context_window, seed=self.seed)
        rid = f"req-{next(self._ids)}"
        if self.engine.is_idle():
            self.engine.run_until(sent)
        try:
            self.engine.submit(EngineRequest(rid, prompt, planned.token_ids, sent))
        except RequestTooLong as exc:
            raise EndpointError(ErrorType.CONTEXT_OVERFLOW, str(exc), status=400) from None
        fut: asyncio.Future[RequestResult] = loop.create_future()
        self._waiters[rid] = fut
        self._wake_event().set()
        try:
            res = await fut
        finally:
            self._waiters.pop(rid, None)
        return self._response(res, planned, sent)

    def _response(self, res: RequestResult, planned: reply.PlannedReply, sent: float) -> LLMResponse:
        text = tokens.decode(planned.token_ids)
        usage = ReplyUsage(res.prompt_len, res.cached_tokens, self.engine.block_size,
                           len(planned.token_ids)).as_dict()
        times = res.token_times
        timing = Timing(sent, times[0] if times else None, times[-1] if times else None,
                        res.finished, len(times))
        return LLMResponse((TextBlock(text, len(planned.token_ids)),), planned.stop_reason,
                           Usage.from_mapping(usage), timing, len(planned.token_ids),
                           extra={"num_preemptions": res.num_preemptions,
                                  "spec_drafts": res.spec_drafts,
                                  "spec_draft_tokens": res.spec_draft_tokens,
                                  "spec_accepted_tokens": res.spec_accepted_tokens,
                                  "forward_passes": res.decode_steps,
                                  "queue_s": (None if res.first_scheduled is None
                                              else max(0.0, res.first_scheduled - sent))})

    def _wake_event(self) -> asyncio.Event:
        if self._wake is None:
            self._wake = asyncio.Event()
        return self._wake

    async def _drive(self) -> None:
        """Advance the engine between the loop's timers and deliver finished requests."""
        loop = asyncio.get_running_loop()
        wake = self._wake_event()
        engine = self.engine
        self.timeline.start(loop.time(), engine)   # the driver starts with the run
        while True:
            if engine.is_idle():
                wake.clear()
                await wake.wait()
                for _ in range(_SETTLE_YIELDS):
                    await asyncio.sleep(0)
                continue
            horizon = next_timer()
            finished = engine.run_until(math.inf if horizon is None else horizon)
            self.timeline.observe(engine.now, engine)
            delay = engine.now - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            for rid in finished:
                res = engine.pop_result(rid)
                fut = self._waiters.get(rid)
                if fut is not None and not fut.done():
                    fut.set_result(res)
            for _ in range(_SETTLE_YIELDS):
                await asyncio.sleep(0)
