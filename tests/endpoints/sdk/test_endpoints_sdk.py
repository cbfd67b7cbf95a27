"""The SDK path without sockets: `httpx2.MockTransport` behind `AsyncAnthropic`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import anthropic
import httpx2
import pytest

from simulator.endpoints.base import EndpointError, ErrorType, LLMRequest
from simulator.endpoints.sdk.anthropic import AnthropicSDKEndpoint
from simulator.endpoints.sdk.common import wire_fault
from simulator.session.conversation import Prefix, TextBlock, user_text


def _ev(name: str, body: dict[str, object]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(body)}\n\n".encode()


EVENTS = [
    _ev("message_start", {"type": "message_start", "message": {
        "id": "m1", "type": "message", "role": "assistant", "content": [], "model": "m",
        "usage": {"input_tokens": 3, "output_tokens": 1}}}),
    _ev("content_block_start", {"type": "content_block_start", "index": 0,
                                "content_block": {"type": "text", "text": ""}}),
    *(_ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                  "delta": {"type": "text_delta", "text": t}})
      for t in ["one", " two"]),
    _ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
                          "usage": {"output_tokens": 2}}),
    _ev("message_stop", {"type": "message_stop"}),
]

Handler = Callable[[httpx2.Request], httpx2.Response]


class _Body(httpx2.AsyncByteStream):
    """Yields `parts`, then raises `exc` (if any): a stream cut mid-way."""

    def __init__(self, parts: list[bytes], exc: Exception | None = None) -> None:
        self.parts, self.exc = parts, exc

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for p in self.parts:
            yield p
        if self.exc is not None:
            raise self.exc


def _endpoint(handler: Handler, calls: list[httpx2.Request]) -> AnthropicSDKEndpoint:
    def recorder(req: httpx2.Request) -> httpx2.Response:
        calls.append(req)
        return handler(req)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(recorder))
    return AnthropicSDKEndpoint("http://sdk.test", "sk-secret", timeout_s=5,
                                connect_timeout_s=1, http_client=client)


REQ = LLMRequest(model="m", prefix=Prefix("sys", ({"name": "Read", "input_schema": {}},), 1, 5),
                 messages=(user_text("hi"),), max_tokens=32, temperature=0.5,
                 hints={"turn_kind": "read"})


async def test_request_shape_and_reply() -> None:
    calls: list[httpx2.Request] = []
    ep = _endpoint(lambda r: httpx2.Response(200, stream=_Body(EVENTS), headers={
        "content-type": "text/event-stream"}), calls)
    resp = await ep.send(REQ)
    await ep.aclose()
    assert resp.content == (TextBlock("one two"),)
    assert resp.stop_reason == "max_tokens"
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (3, 2)
    assert resp.timing.n_deltas == 2
    body = json.loads(calls[0].content)
    assert body["stream"] is True and body["max_tokens"] == 32 and body["temperature"] == 0.5
    assert body["tools"] == [{"name": "Read", "input_schema": {}}]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert calls[0].headers["x-endurance-turn-kind"] == "read"
    assert "sk-secret" not in json.dumps(ep.describe())


async def test_no_hidden_retries_on_529() -> None:
    calls: list[httpx2.Request] = []
    ep = _endpoint(lambda r: httpx2.Response(529, json={"type": "error", "error": {
        "type": "overloaded_error", "message": "busy"}}, headers={"retry-after": "2"}), calls)
    with pytest.raises(EndpointError) as info:
        await ep.send(REQ)
    await ep.aclose()
    assert len(calls) == 1
    assert info.value.error_type is ErrorType.OVERLOADED
    assert info.value.retry_after_s == 2.0


@pytest.mark.parametrize(("exc", "expected"), [
    (httpx2.ConnectError("refused"), ErrorType.CONNECTION),
    (httpx2.ConnectTimeout("slow"), ErrorType.TIMEOUT),
    (httpx2.ReadTimeout("stalled"), ErrorType.TIMEOUT),
])
async def test_transport_errors_before_the_reply(exc: Exception, expected: ErrorType) -> None:
    def boom(_: httpx2.Request) -> httpx2.Response:
        raise exc

    ep = _endpoint(boom, [])
    with pytest.raises(EndpointError) as info:
        await ep.send(REQ)
    await ep.aclose()
    assert info.value.error_type is expected
    assert info.value.status is None


_SDK_REQ = httpx2.Request("POST", "http://sdk.test/v1/messages")


@pytest.mark.parametrize(("exc", "expected"), [
    (httpx2.RemoteProtocolError("peer closed"), ErrorType.DISCONNECT),
    (httpx2.ReadTimeout("stalled"), ErrorType.TIMEOUT),
    # anthropic >= 2.17 wraps a failed body read in its own errors (2.16 let httpx2's
    # through): the same wire event, so the same record whatever the SDK calls it
    (anthropic.APIConnectionError(request=_SDK_REQ), ErrorType.DISCONNECT),
    (anthropic.APITimeoutError(request=_SDK_REQ), ErrorType.TIMEOUT),
])
async def test_transport_errors_mid_stream_keep_partial_timing(exc: Exception,
                                                               expected: ErrorType) -> None:
    ep = _endpoint(lambda r: httpx2.Response(200, stream=_Body(EVENTS[:3], exc)), [])
    with pytest.raises(EndpointError) as info:
        await ep.send(REQ)
    await ep.aclose()
    err = info.value
    assert err.error_type is expected
    assert err.timing is not None and err.timing.n_deltas == 1
    assert err.timing.first_token is not None
    assert err.partial_output_tokens == 1
    assert err.status == 200, "the status line was seen: the fault came mid-stream"



def _wrapped(outer: Exception, cause: Exception) -> Exception:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(("exc", "status_seen", "expected"), [
    # anthropic <= 2.16: httpx2's own error out of the body read
    (httpx2.RemoteProtocolError("peer closed"), True, ErrorType.DISCONNECT),
    (httpx2.ReadTimeout("stalled"), True, ErrorType.TIMEOUT),
    # anthropic >= 2.17: the same faults wrapped as the SDK's connection/timeout errors
    (_wrapped(anthropic.APIConnectionError(request=_SDK_REQ),
              httpx2.RemoteProtocolError("peer closed")), True, ErrorType.DISCONNECT),
    (_wrapped(anthropic.APITimeoutError(request=_SDK_REQ), httpx2.ReadTimeout("stalled")),
     True, ErrorType.TIMEOUT),
    # before any status line: the connection, whatever wraps it
    (_wrapped(anthropic.APIConnectionError(request=_SDK_REQ), httpx2.ConnectError("refused")),
     False, ErrorType.CONNECTION),
    (httpx2.ConnectError("refused"), False, ErrorType.CONNECTION),
    (anthropic.APITimeoutError(request=_SDK_REQ), False, ErrorType.TIMEOUT),
])
def test_wire_fault_classified_by_the_wire_for_every_sdk_shape(
        exc: Exception, status_seen: bool, expected: ErrorType) -> None:
    kind, message = wire_fault(exc, anthropic, status_seen=status_seen)
    assert kind is expected
    assert message
    assert ("HTTP 200" in message) is status_seen
