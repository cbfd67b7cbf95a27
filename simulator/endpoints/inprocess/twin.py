"""The twin, in-process, in virtual time: the embedded default endpoint.

Requests go straight into a `TwinEngine` (no sockets). A driver task advances the
engine in tight loops of steps, never past the loop's next timer (the moment some
agent could send something new), sleeps — virtually — until the step that finished a
request, and hands that request its per-token times. Timings are therefore exactly
what the engine computed. Run it on `simulator.clock.virtual.VirtualTimeLoop`.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from simulator.clock.virtual import next_timer, quiet_now
from simulator.endpoints.base import (
    BackgroundTask,
    EndpointError,
    ErrorType,
    LLMRequest,
    LLMResponse,
    ReplyExtra,
    Timing,
    Usage,
)
from simulator.endpoints.client_meter import prompt_ids
from simulator.endpoints.inprocess.timeline import EngineTimeline
from simulator.protocol.messages import TextBlock
from simulator.records.prometheus import MetricsRow
from simulator.twin.core.config import TwinEngineConfig, engine_config
from simulator.twin.core.engine import RequestTooLong, TwinEngine
from simulator.twin.core.sampling import SamplingParams
from simulator.twin.core.stats import EngineStats, SpecStats
from simulator.twin.core.types import EngineRequest, RequestResult
from simulator.twin.model.perf_model import RooflinePerfModel, build_perf_model
from simulator.twin.serve import reply, sampling_wire
from simulator.twin.serve.prompt import PromptError, shared_tokenizer
from simulator.twin.serve.wire import ReplyUsage
from simulator.twin.spec_decode.predictability import ReferenceMeter
from simulator.util import tokens
from simulator.util.jsontypes import JSONObject

# Yields granted to woken agents before the driver plans again, so that a request
# sent in reaction to a delivery is in the engine before it runs ahead.
_SETTLE_YIELDS = 3


# Planned replies by request, shared by the runs of one process: the probes of a `size`
# search (or a fleet's) replay the same sessions, whose requests are made of the very
# same prefix and message objects turn by turn (`session.agent`'s draws and replies are
# shared alike), so a request met again skips `plan_for`: hashing the whole prompt for
# its reply seed, the probe check, the plan. Keyed by the objects' identities, which
# the entry holds (so none is reused while it lives), with every other argument
# `plan_for` reads; an LRU bounded by the planned ids held (4 bytes a token, the text
# shared with the replies' history). The entry also keeps the reply's reference passes
# (`ReferenceMeter.passes`, a function of the prompt and the reply alone) once counted.
PLANS_HELD_TOKENS = 8_000_000
_PlanKey = tuple[int, tuple[int, ...], int, tuple[tuple[str, str], ...], int, int]
_Passes = list[int | None]                          # one slot: the count, once made
_plans: OrderedDict[_PlanKey, tuple[tuple[object, tuple[object, ...]],
                                    tuple[array[int], str, str | None, _Passes]]] = OrderedDict()
_plans_held = [0]                                   # ids in _plans
_ONE_TOKEN = array("I", [0])     # a prefill instance's reply: one sampled token


@dataclass(frozen=True)
class TwinSetup:
    """One card's performance model and engine configuration: built once per point and
    shared by every replica and P/D instance of it. Neither holds per-run state (the
    configuration is frozen, the model a function of its profiles), so sharing them is
    the same as building one per instance."""

    perf: RooflinePerfModel
    config: TwinEngineConfig


def twin_setup(hardware: str, model: str, *, spec: str = "off",
               context_window: int | None = None,
               overrides: dict[str, Any] | None = None) -> TwinSetup:
    """The setup of a twin named by profiles (InputError, one line, for a bad one)."""
    perf = build_perf_model(hardware, model, spec=spec, overrides=overrides)
    return TwinSetup(perf, engine_config(perf, context_window=context_window))


def _timing(sent: float, times: Sequence[float], done: float | None, hidden: int) -> Timing:
    """What a streaming client sees of a reply whose tokens came at `times`: as vLLM
    streams it, the first `hidden` tokens carry no text (the role chunk goes with the
    first), so the first text comes with token hidden + 1, or with the last token of a
    reply no longer than its opening."""
    if not times:
        return Timing(sent, None, None, done, 0)
    if not hidden:
        return Timing(sent, times[0], times[-1], done, len(times))
    first = min(hidden, len(times) - 1)
    return Timing(sent, times[first], times[-1], done, len(times) - first, times[0])


class InProcessTwin:
    name = "twin"
    simulated = True

    def __init__(self, hardware: str, model: str, *, spec: str = "off", seed: int = 0,
                 context_window: int | None = None,
                 overrides: dict[str, Any] | None = None,
                 setup: TwinSetup | None = None) -> None:
        """`setup` is the card's model and configuration when the caller built it once
        for several instances; without it they are built from the names here."""
        self.hardware, self.model = hardware, model
        if setup is None:
            setup = twin_setup(hardware, model, spec=spec, context_window=context_window,
                               overrides=overrides)
        self.perf, self.config = setup.perf, setup.config
        self.engine = TwinEngine(self.perf, self.config)
        self.tokenizer = shared_tokenizer()     # one per process: runs share encodings
        self.seed = seed
        self.context_window = self.config.scheduler.max_model_len   # the model's, by profile
        self._waiters: dict[str, asyncio.Future[RequestResult]] = {}
        self._wake: asyncio.Event | None = None
        self._ids = itertools.count()
        self.timeline = EngineTimeline()   # engine log for the report's timeline
        self.ngram_meter = ReferenceMeter()  # what n-gram speculation would see
        gen = self.perf.model.generation_config
        # what a request samples with where it sets nothing (vLLM --generation-config auto)
        self.sampling_defaults = sampling_wire.defaults_of(
            gen.values() if gen is not None else None)
        self._sampling: dict[tuple[object, ...], SamplingParams] = {}   # resolved, by fields

    def background(self) -> list[BackgroundTask]:
        return [self._drive]

    def describe(self) -> JSONObject:
        d: JSONObject = {"kind": "twin-inprocess", "simulated": True,
                         "hardware": self.hardware, "model": self.model,
                         "virtual_time": True}
        d["profile"] = self.perf.describe()
        return d

    def stats(self) -> dict[str, Any]:
        return {**self.engine_stats().to_dict(), **self._tier_stats()}

    def _tier_stats(self) -> dict[str, float]:
        """The host KV tier's counters (vLLM's offload metrics), only with a tier."""
        tier = self.engine.host_tier
        if tier is None:
            return {}
        c = self.engine.counters
        return {"kv_offload_blocks": tier.capacity, "kv_offload_blocks_used": len(tier),
                "kv_offload_evicted_blocks": tier.evicted,
                "external_prefix_cache_queries": c.external_prefix_cache_queries,
                "external_prefix_cache_hits": c.external_prefix_cache_hits,
                "kv_offload_load_bytes": c.offload_load_bytes,
                "kv_offload_load_time_s": c.offload_load_time_s,
                "kv_offload_store_bytes": c.offload_store_bytes,
                "kv_offload_store_time_s": c.offload_store_time_s,
                "kv_offload_stall_s": c.offload_stall_s}

    def engine_stats(self) -> EngineStats:
        """The engine's counters now, typed (see `endpoints.engine_stats`)."""
        c, e = self.engine.counters, self.engine
        spec = None
        if e.spec is not None:
            drafts = c.spec_drafts
            spec = SpecStats(
                draft_tokens=c.spec_draft_tokens,
                accepted_tokens_per_pos=tuple(c.spec_accepted_per_pos),
                mean_acceptance_length=1 + c.spec_accepted_tokens / drafts if drafts else None,
                tokens_per_forward_pass=(c.generation_tokens / c.decode_steps
                                         if c.decode_steps else None), drafts=drafts)
        return EngineStats(c.prefix_cache_queries, c.prefix_cache_hits, c.preemptions,
                           e.kv_usage_peak, e.num_blocks, e.block_size, c.spec_drafts,
                           c.spec_accepted_tokens, spec)

    def continue_timeline(self, offset_s: float) -> None:
        """A resumed run: the engine log continues where the journal ended (s)."""
        self.timeline.offset_s = offset_s

    def timeline_since(self, done: int) -> tuple[list[MetricsRow], int]:
        """The engine log's windows after the first `done` (a live view's), and how
        many are done now; the log is not closed."""
        return self.timeline.rows_since(done)

    def timeline_rows(self) -> list[MetricsRow]:
        """The engine log as `server_metrics` rows (seconds since the run started)."""
        self.timeline.close(self.engine.now, self.engine)
        return self.timeline.rows()

    async def aclose(self) -> None:
        for fut in self._waiters.values():
            fut.cancel()

    def prompt_of(self, request: LLMRequest) -> array[int]:
        """The request's prompt token ids (EndpointError 400 for an invalid prompt)."""
        try:
            # prefix and messages are immutable: their token ids are cached by identity
            return prompt_ids(self.tokenizer, request)
        except PromptError as exc:
            raise EndpointError(ErrorType.BAD_REQUEST, str(exc), status=400) from None

    async def send(self, request: LLMRequest, *,
                   prefix_hashes: Sequence[int] | None = None,
                   kv_transfer: Callable[[float, int], float] | None = None) -> LLMResponse:
        """The request on this engine; `prefix_hashes`: its prompt's block hash chain
        where a fleet's router computed it (`EngineRequest.prefix_hashes`);
        `kv_transfer`: a decode instance's pull of a remote prefill's KV
        (`EngineRequest.kv_transfer`)."""
        sent = asyncio.get_running_loop().time()
        prompt = self.prompt_of(request)
        self._check_window(prompt)
        planned, counted = self._plan(request, prompt)
        ref_passes = self.ngram_meter.passes(prompt, planned.token_ids, request.session_id,
                                             known=counted[0])
        if counted[0] is None:
            counted[0] = ref_passes
        res = await self._run(prompt, planned.token_ids, sent, request.session_id,
                              prefix_hashes, self.sampling_of(request), kv_transfer)
        return self._response(res, planned, sent, ref_passes)

    async def prefill(self, request: LLMRequest, *,
                      prefix_hashes: Sequence[int] | None = None) -> RequestResult:
        """The request's prompt on this engine with one token to sample, as a prefill
        instance serves it (vLLM's P/D proxy sends max_tokens=1 to the prefiller): the
        engine's result, whose `finished` is when its KV is ready to be pulled."""
        sent = asyncio.get_running_loop().time()
        prompt = self.prompt_of(request)
        self._check_window(prompt)
        return await self._run(prompt, _ONE_TOKEN, sent, request.session_id, prefix_hashes,
                               self.sampling_of(request))

    def _check_window(self, prompt: array[int]) -> None:
        try:
            reply.check_window(len(prompt), self.context_window)
        except reply.PromptTooLong as exc:
            raise EndpointError(ErrorType.CONTEXT_OVERFLOW, str(exc), status=400) from None

    async def _run(self, prompt: array[int], output: Sequence[int], sent: float,
                   session: str, prefix_hashes: Sequence[int] | None,
                   sampling: SamplingParams,
                   kv_transfer: Callable[[float, int], float] | None = None
                   ) -> RequestResult:
        """Submit one request to the engine and wait (virtually) for its result."""
        rid = f"req-{next(self._ids)}"
        if self.engine.is_idle():
            self.engine.run_until(sent)
        try:
            self.engine.submit(EngineRequest(rid, prompt, output, sent, session,
                                             prefix_hashes, sampling=sampling,
                                             kv_transfer=kv_transfer))
        except RequestTooLong as exc:
            raise EndpointError(ErrorType.CONTEXT_OVERFLOW, str(exc), status=400) from None
        fut: asyncio.Future[RequestResult] = asyncio.get_running_loop().create_future()
        self._waiters[rid] = fut
        self._wake_event().set()
        try:
            return await fut
        finally:
            self._waiters.pop(rid, None)

    def sampling_of(self, request: LLMRequest) -> SamplingParams:
        """What the request samples with: its fields over the model's generation config
        (EndpointError 400 for a value vLLM refuses)."""
        key = (request.temperature, tuple(request.sampling.items()))
        known = self._sampling.get(key)          # a run sends a handful of distinct sets
        if known is not None:
            return known
        fields: dict[str, float | int] = dict(request.sampling)
        if request.temperature is not None:
            fields["temperature"] = request.temperature
        try:
            resolved = sampling_wire.resolve(sampling_wire.request_fields(fields, chat=True),
                                             self.sampling_defaults)
        except ValueError as exc:
            raise EndpointError(ErrorType.BAD_REQUEST, str(exc), status=400) from None
        if len(self._sampling) < 64:
            self._sampling[key] = resolved
        return resolved

    def _plan(self, request: LLMRequest,
              prompt: array[int]) -> tuple[reply.PlannedReply, _Passes]:
        """`reply.plan_for` of the request, or the plan a run in this process made for a
        request of the very same prefix and message objects (hence the same prompt),
        max_tokens and hints on a twin of the same window and seed (`_plans`); with
        the slot that holds its reference passes once counted."""
        key = (id(request.prefix), tuple(map(id, request.messages)), request.max_tokens,
               tuple(sorted(request.hints.items())), self.context_window, self.seed)
        hit = _plans.get(key)
        if hit is not None:
            _plans.move_to_end(key)
            ids, stop_reason, text, slot = hit[1]
            return reply.PlannedReply(ids.tolist(), stop_reason, text), slot
        planned = reply.plan_for(prompt, request.max_tokens, request.hints,
                                 context_window=self.context_window, seed=self.seed)
        ids = array("I", planned.token_ids)
        counted: _Passes = [None]
        _plans[key] = ((request.prefix, request.messages),
                       (ids, planned.stop_reason, planned.text, counted))
        _plans_held[0] += len(ids)
        while _plans_held[0] > PLANS_HELD_TOKENS and len(_plans) > 1:
            _plans_held[0] -= len(_plans.popitem(last=False)[1][1][0])
        return planned, counted

    def _response(self, res: RequestResult, planned: reply.PlannedReply, sent: float,
                  ref_passes: int | None = None) -> LLMResponse:
        text = planned.text if planned.text is not None else tokens.decode(planned.token_ids)
        tokens.remember(text, planned.token_ids)    # the next prompt frames it
        usage = ReplyUsage(res.prompt_len, res.cached_tokens, self.engine.block_size,
                           len(planned.token_ids)).as_dict()
        timing = _timing(sent, res.token_times, res.finished, self.perf.model.hidden_opening)
        return LLMResponse((TextBlock(text, len(planned.token_ids)),), planned.stop_reason,
                           Usage.from_mapping(usage), timing, len(planned.token_ids),
                           extra={"num_preemptions": res.num_preemptions,
                                  "spec_drafts": res.spec_drafts,
                                  "spec_draft_tokens": res.spec_draft_tokens,
                                  "spec_accepted_tokens": res.spec_accepted_tokens,
                                  "forward_passes": res.decode_steps,
                                  "ngram_ref_passes": ref_passes,
                                  "queue_s": (None if res.first_scheduled is None
                                              else max(0.0, res.first_scheduled - sent)),
                                  **self._tier_extra(res), **_pd_extra(res)})

    def _tier_extra(self, res: RequestResult) -> ReplyExtra:
        """The host tier's share of the hit, only when the engine has a tier."""
        if self.engine.host_tier is None:
            return {}
        return {"host_cached_tokens": res.host_cached_tokens}

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
            finished = engine.run_until(min(math.inf if horizon is None else horizon,
                                            self.timeline.next_due()))
            self.timeline.observe(engine.now, engine)
            delay = engine.now - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            for rid in finished:
                res = engine.pop_result(rid)
                fut = self._waiters.get(rid)
                if fut is not None and not fut.done():
                    fut.set_result(res)
            if finished or not quiet_now():     # (alone at this instant: none to wait for)
                for _ in range(_SETTLE_YIELDS):
                    await asyncio.sleep(0)


def _pd_extra(res: RequestResult) -> ReplyExtra:
    """A decode instance's pull of a remote prefill's KV (only for such a request)."""
    if not res.remote_tokens:
        return {}
    return {"remote_tokens": res.remote_tokens,
            "kv_transfer_wait_s": res.kv_transfer_wait_s}
