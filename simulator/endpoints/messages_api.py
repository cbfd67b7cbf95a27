"""Messages-API endpoint through the official `anthropic` SDK (the only module importing it).

`AsyncAnthropic` with `max_retries=0` and explicit timeouts (retries are the driver's,
one `send` = one attempt), always `messages.create(..., stream=True)` iterating the raw
events, which the SDK decodes; the shared `StreamState` turns them into the same
`LLMResponse` the lean path builds. `backend="aiohttp"` swaps httpx2's transport for the
SDK's aiohttp one (faster). Errors and limits: `sdk_common.SDKEndpoint`.

Timeouts: `connect_timeout_s` for the TCP connect, `timeout_s` for the longest silence
between two reads (a stalled server), not for the whole reply.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any, Literal

import anthropic
import httpx2

from simulator.endpoints.base import ErrorType, LLMRequest
from simulator.endpoints.dialects import ANTHROPIC, ReplyState
from simulator.endpoints.sdk_common import SDKEndpoint
from simulator.endpoints.sse import StreamState, hint_headers, request_id, stream_error_type
from simulator.endpoints.transport import AttemptLimits

Backend = Literal["httpx", "aiohttp"]


class AnthropicSDKEndpoint(SDKEndpoint):
    """`Endpoint` over `anthropic.AsyncAnthropic`; one instance serves all sessions."""

    _sdk = anthropic

    def __init__(self, base_url: str, api_key: str, *, timeout_s: float = 600.0,
                 connect_timeout_s: float = 10.0, backend: Backend = "httpx",
                 max_connections: int = 1024, http_client: httpx2.AsyncClient | None = None,
                 limits: AttemptLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(ANTHROPIC, limits, clock)
        timeout = httpx2.Timeout(timeout_s, connect=connect_timeout_s)
        if http_client is None:
            lim = httpx2.Limits(max_connections=max_connections,
                                max_keepalive_connections=max_connections)
            http_client = (anthropic.DefaultAioHttpClient(timeout=timeout, limits=lim)
                           if backend == "aiohttp"
                           else anthropic.DefaultAsyncHttpxClient(timeout=timeout, limits=lim))
        self._client = anthropic.AsyncAnthropic(
            base_url=base_url, api_key=api_key or "none", max_retries=0, timeout=timeout,
            http_client=http_client)
        self._desc = {"kind": self.name, "api": "anthropic", "base_url": base_url,
                      "backend": backend, "timeout_s": timeout_s,
                      "connect_timeout_s": connect_timeout_s,
                      "anthropic": anthropic.__version__}

    def describe(self) -> dict[str, Any]:
        return {**self._desc, "limits": self.limits.describe()}

    async def aclose(self) -> None:
        await self._client.close()

    def _stream_error(self, e: Any) -> ErrorType:
        return stream_error_type(getattr(e, "body", None))

    async def _stream(self, request: LLMRequest, state: ReplyState) -> str | None:
        assert isinstance(state, StreamState)
        clock = self._clock
        known, extra = _split_kwargs(request.to_api_kwargs())
        stream = await self._client.messages.create(
            **known, stream=True, extra_body=extra or None,
            extra_headers=hint_headers(request.hints) if request.hints else None)
        self._started = True
        async for ev in stream:
            _on_sdk_event(state, ev, clock)
        return request_id(stream.response.headers.get)


def _create_params() -> frozenset[str]:
    from anthropic.resources.messages import AsyncMessages
    return frozenset(inspect.signature(AsyncMessages.create).parameters) - {"self"}


_CREATE_PARAMS = _create_params()


def _split_kwargs(kw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what `messages.create` accepts, the rest for `extra_body`): SDK versions drop
    parameters (2.x has no `temperature`) that servers still honour."""
    known = {k: v for k, v in kw.items() if k in _CREATE_PARAMS}
    return known, {k: v for k, v in kw.items() if k not in _CREATE_PARAMS}


def _on_sdk_event(state: StreamState, ev: Any, clock: Callable[[], float]) -> None:
    """Feed one SDK raw event to `state` (attribute access only; rare events as dicts)."""
    t = ev.type
    if t == "content_block_delta":
        d = ev.delta
        kind = d.type
        payload = d.text if kind == "text_delta" else (
            d.partial_json if kind == "input_json_delta" else "")
        state.add_delta(ev.index, kind, payload, clock())
    elif t == "message_start":
        state.on_event(t, {"message": {"usage": getattr(ev.message, "usage", None)}})
    elif t == "content_block_start":
        cb = ev.content_block
        state.on_event(t, {"index": ev.index, "content_block": {
            "type": cb.type, "id": getattr(cb, "id", ""), "name": getattr(cb, "name", "")}})
    elif t == "message_delta":
        state.on_event(t, {"delta": {"stop_reason": ev.delta.stop_reason},
                           "usage": getattr(ev, "usage", None)})
    elif t == "message_stop":
        state.on_event(t, {})
