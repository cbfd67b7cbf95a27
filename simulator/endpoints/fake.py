"""A scripted in-process endpoint for tests and examples (shipped, not a test-only hack).

Replies with `max_tokens` tokens of synthetic text after fixed virtual delays, reports
a perfect prefix cache at token granularity against the previous request of the same
session, and raises the faults it is told to, in order. Run it on the virtual loop.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Iterable

from simulator.endpoints.base import EndpointError, ErrorType, LLMRequest, LLMResponse, Timing, Usage
from simulator.protocol.messages import TextBlock
from simulator.scenario import content
from simulator.util import tokens
from simulator.util.jsontypes import JSONObject


class FakeEndpoint:
    name = "fake"
    simulated = True

    def __init__(self, *, ttft_s: float = 0.05, tok_s: float = 100.0,
                 faults: Iterable[ErrorType | None] = (), retry_after_s: float | None = None,
                 context_window: int = 1_000_000) -> None:
        self.ttft_s, self.tok_s = ttft_s, tok_s
        self.faults: deque[ErrorType | None] = deque(faults)
        self.retry_after_s = retry_after_s
        self.context_window = context_window
        self.requests: list[LLMRequest] = []
        self._last_prompt: dict[str, list[str]] = {}

    def describe(self) -> JSONObject:
        return {"kind": "fake", "simulated": True}

    async def aclose(self) -> None:
        return None

    async def send(self, request: LLMRequest) -> LLMResponse:
        loop = asyncio.get_running_loop()
        sent = loop.time()
        self.requests.append(request)
        fault = self.faults.popleft() if self.faults else None
        prompt_est = request.prefix.tokens_est + sum(m.tokens_est for m in request.messages)
        if fault is None and prompt_est > self.context_window:
            fault = ErrorType.CONTEXT_OVERFLOW
        if fault is not None:
            await asyncio.sleep(self.ttft_s)
            raise EndpointError(fault, f"injected {fault.value}", status=_STATUS.get(fault),
                                retry_after_s=self.retry_after_s,
                                timing=Timing(sent, done=loop.time()))
        segs = [request.prefix.system, *(m.serialize() for m in request.messages)]
        prev = self._last_prompt.get(request.session_id, [])
        cached = 0
        for a, b in zip(segs, prev, strict=False):
            if a != b:
                break
            cached += tokens.count(a)
        self._last_prompt[request.session_id] = segs
        n = request.max_tokens
        text = content.synth_text("code", n, random.Random(len(self.requests)))
        await asyncio.sleep(self.ttft_s)
        first = loop.time()
        await asyncio.sleep((n - 1) / self.tok_s if n > 1 else 0)
        last = loop.time()
        usage = Usage(max(0, prompt_est - cached), n, cached, 0)
        return LLMResponse((TextBlock(text, n),), "max_tokens", usage,
                           Timing(sent, first, last, last, n), n)


_STATUS = {ErrorType.RATE_LIMITED: 429, ErrorType.OVERLOADED: 529, ErrorType.SERVER: 500,
           ErrorType.PROXY_CUTOFF: 524, ErrorType.CONTEXT_OVERFLOW: 400, ErrorType.AUTH: 401,
           ErrorType.NOT_FOUND: 404, ErrorType.BAD_REQUEST: 400}
