"""OpenAI Chat Completions through the official `openai` SDK (the only module importing
it): the fidelity path for `--api openai-chat`, as `messages_api` is for Messages.

`AsyncOpenAI` with `max_retries=0` and explicit timeouts, `chat.completions.create(...,
stream=True, stream_options={"include_usage": True})`; the SDK decodes each chunk and
`openai_chat.ChatStreamState.on_chunk` turns them into the same `LLMResponse` the lean
path builds from the bytes. Errors and limits: `sdk_common.SDKEndpoint`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any, Literal

import httpx2
import openai

from simulator.endpoints import openai_chat
from simulator.endpoints.base import ErrorType, LLMRequest
from simulator.endpoints.dialects import OPENAI_CHAT, ReplyState
from simulator.endpoints.sdk_common import SDKEndpoint
from simulator.endpoints.sse import hint_headers, request_id
from simulator.endpoints.transport import AttemptLimits

Backend = Literal["httpx", "aiohttp"]


class OpenAISDKEndpoint(SDKEndpoint):
    """`Endpoint` over `openai.AsyncOpenAI`; one instance serves all sessions."""

    _sdk = openai

    def __init__(self, base_url: str, api_key: str, *, timeout_s: float = 600.0,
                 connect_timeout_s: float = 10.0, backend: Backend = "httpx",
                 max_connections: int = 1024, http_client: httpx2.AsyncClient | None = None,
                 limits: AttemptLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(OPENAI_CHAT, limits, clock)
        timeout = httpx2.Timeout(timeout_s, connect=connect_timeout_s)
        if http_client is None:
            lim = httpx2.Limits(max_connections=max_connections,
                                max_keepalive_connections=max_connections)
            http_client = (openai.DefaultAioHttpClient(timeout=timeout, limits=lim)
                           if backend == "aiohttp"
                           else openai.DefaultAsyncHttpxClient(timeout=timeout, limits=lim))
        self._client = openai.AsyncOpenAI(
            base_url=base_url.rstrip("/") + "/v1", api_key=api_key or "none", max_retries=0,
            timeout=timeout, http_client=http_client)
        self._desc = {"kind": self.name, "api": "openai-chat", "base_url": base_url,
                      "backend": backend, "timeout_s": timeout_s,
                      "connect_timeout_s": connect_timeout_s, "openai": openai.__version__}

    def describe(self) -> dict[str, Any]:
        return {**self._desc, "limits": self.limits.describe()}

    async def aclose(self) -> None:
        await self._client.close()

    def _stream_error(self, e: Any) -> ErrorType:
        return openai_chat.error_type_of({"error": getattr(e, "body", None)})

    async def _stream(self, request: LLMRequest, state: ReplyState) -> str | None:
        assert isinstance(state, openai_chat.ChatStreamState)
        clock = self._clock
        known, extra = _split_kwargs(openai_chat.chat_kwargs(request))
        stream = await self._client.chat.completions.create(
            **known, stream=True, stream_options={"include_usage": True},
            extra_body=extra or None,
            extra_headers=hint_headers(request.hints) if request.hints else None)
        self._started = True
        async for chunk in stream:
            state.on_chunk(chunk.to_dict(), clock())
        return request_id(stream.response.headers.get)


def _create_params() -> frozenset[str]:
    from openai.resources.chat.completions import AsyncCompletions
    return frozenset(inspect.signature(AsyncCompletions.create).parameters) - {"self"}


_CREATE_PARAMS = _create_params()


def _split_kwargs(kw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what `chat.completions.create` accepts, the rest for `extra_body`)."""
    known = {k: v for k, v in kw.items() if k in _CREATE_PARAMS}
    return known, {k: v for k, v in kw.items() if k not in _CREATE_PARAMS}
