"""OpenAI Chat Completions through the official `openai` SDK (the only module importing
it): the fidelity path for `--api openai-chat`, as `messages_api` is for Messages.

`AsyncOpenAI` with `max_retries=0` and explicit timeouts, `chat.completions.create(...,
stream=True, stream_options={"include_usage": True})`; the SDK decodes each chunk and
`openai_chat.ChatStreamState.on_chunk` turns them into the same `LLMResponse` the lean
path builds from the bytes. Errors and limits: `sdk_common.SDKEndpoint`.
"""

from __future__ import annotations

import openai

from simulator.endpoints.base import ErrorType, LLMRequest
from simulator.endpoints.sdk.common import SDKEndpoint, create_params, split_kwargs
from simulator.endpoints.wire import openai_chat
from simulator.endpoints.wire.dialects import OPENAI_CHAT, ReplyState
from simulator.endpoints.wire.http_errors import hint_headers, request_id


class OpenAISDKEndpoint(SDKEndpoint):
    """`Endpoint` over `openai.AsyncOpenAI`; one instance serves all sessions."""

    _sdk = openai
    dialect = OPENAI_CHAT

    def _open(self, base_url: str, api_key: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=base_url.rstrip("/") + "/v1", api_key=api_key,
                                  max_retries=0, timeout=self.timeout,
                                  http_client=self.http_client)

    def _stream_error(self, e: Exception) -> ErrorType:
        return openai_chat.error_type_of({"error": getattr(e, "body", None)})

    async def _stream(self, request: LLMRequest, state: ReplyState) -> str | None:
        assert isinstance(state, openai_chat.ChatStreamState)
        clock = self._clock
        known, extra = split_kwargs(openai_chat.chat_kwargs(request), _CREATE_PARAMS)
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
    return create_params(AsyncCompletions.create)


_CREATE_PARAMS = _create_params()
