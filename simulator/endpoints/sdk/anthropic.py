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

from collections.abc import Callable
from typing import Any

import anthropic

from simulator.endpoints.base import ErrorType, LLMRequest
from simulator.endpoints.sdk.common import SDKEndpoint, create_params, split_kwargs
from simulator.endpoints.wire.anthropic import StreamState, stream_error_type
from simulator.endpoints.wire.dialects import ANTHROPIC, ReplyState
from simulator.endpoints.wire.http_errors import hint_headers, request_id


class AnthropicSDKEndpoint(SDKEndpoint):
    """`Endpoint` over `anthropic.AsyncAnthropic`; one instance serves all sessions."""

    _sdk = anthropic
    dialect = ANTHROPIC

    def _open(self, base_url: str, api_key: str) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(base_url=base_url, api_key=api_key, max_retries=0,
                                        timeout=self.timeout, http_client=self.http_client)

    def _stream_error(self, e: Exception) -> ErrorType:
        return stream_error_type(getattr(e, "body", None))

    async def _stream(self, request: LLMRequest, state: ReplyState) -> str | None:
        assert isinstance(state, StreamState)
        clock = self._clock
        known, extra = split_kwargs(request.to_api_kwargs(), _CREATE_PARAMS)
        stream = await self._client.messages.create(
            **known, stream=True, extra_body=extra or None,
            extra_headers=hint_headers(request.hints) if request.hints else None)
        self._started = True
        async for ev in stream:
            _on_sdk_event(state, ev, clock)
        return request_id(stream.response.headers.get)


def _create_params() -> frozenset[str]:
    from anthropic.resources.messages import AsyncMessages
    return create_params(AsyncMessages.create)


_CREATE_PARAMS = _create_params()


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
