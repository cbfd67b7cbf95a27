"""Every HTTP path (lean, aiohttp and the official SDK) against one in-test Anthropic SSE
server on 127.0.0.1 that can also misbehave. The fault is chosen per request by the
`x-endurance-fault` header, i.e. by `LLMRequest.hints` (which this also tests)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from simulator.endpoints.base import EndpointError, ErrorType, LLMRequest, LLMResponse
from simulator.endpoints.http.aiohttp_client import AiohttpEndpoint
from simulator.endpoints.http.lean import LeanEndpoint
from simulator.endpoints.sdk.anthropic import AnthropicSDKEndpoint
from simulator.session.conversation import Prefix, TextBlock, ToolUseBlock, user_text

TEXT_PIECES = ["Hello", ",", " wor", "ld", "! é ✓"]
TOOL_PIECES = ['{"path": ', '"a.py", ', '"n": 3}']


def _ev(name: str, body: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(body)}\n\n".encode()


def reply_events() -> list[bytes]:
    """A full reply: text block, tool_use block, ping, usage split across two events."""
    evs = [_ev("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "m", "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 30}}}),
        _ev("content_block_start", {"type": "content_block_start", "index": 0,
                                    "content_block": {"type": "text", "text": ""}}),
        b"event: ping\ndata: {\"type\": \"ping\"}\n\n"]
    evs += [_ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": t}})
            for t in TEXT_PIECES]
    evs += [_ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _ev("content_block_start", {"type": "content_block_start", "index": 1,
                                        "content_block": {"type": "tool_use", "id": "tu_1",
                                                          "name": "Read", "input": {}}})]
    evs += [_ev("content_block_delta", {"type": "content_block_delta", "index": 1,
                                        "delta": {"type": "input_json_delta",
                                                  "partial_json": p}})
            for p in TOOL_PIECES]
    evs += [_ev("content_block_stop", {"type": "content_block_stop", "index": 1}),
            _ev("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                  "usage": {"output_tokens": 9}}),
            _ev("message_stop", {"type": "message_stop"})]
    return evs


def _error_body(etype: str, msg: str) -> str:
    return json.dumps({"type": "error", "error": {"type": etype, "message": msg}})


STATUS_FAULTS: dict[str, tuple[int, str, str, dict[str, str]]] = {
    "429": (429, "application/json", _error_body("rate_limit_error", "slow down"),
            {"retry-after": "7"}),
    "529": (529, "application/json", _error_body("overloaded_error", "busy"), {}),
    "500": (500, "application/json", _error_body("api_error", "boom"), {}),
    "524": (524, "text/html", "<html>A timeout occurred</html>", {}),
    "404": (404, "text/html", "<html><h1>Not Found</h1></html>", {}),
    "401": (401, "application/json", _error_body("authentication_error", "bad key"), {}),
    "overflow": (400, "application/json",
                 _error_body("invalid_request_error", "prompt is too long: 300000 tokens"), {}),
}


class FaultServer:
    """aiohttp Anthropic SSE server; records the last request's headers and body."""

    def __init__(self) -> None:
        self.last_headers: dict[str, str] = {}
        self.last_body: dict[str, Any] = {}
        self.stall = asyncio.Event()
        self.peers: list[Any] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.last_headers = {k.lower(): v for k, v in request.headers.items()}
        self.last_body = await request.json()
        if request.transport is not None:
            self.peers.append(request.transport.get_extra_info("peername"))
        fault = request.headers.get("x-endurance-fault", "")
        if fault in STATUS_FAULTS:
            status, ctype, text, headers = STATUS_FAULTS[fault]
            return web.Response(status=status, text=text, content_type=ctype, headers=headers)
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        events = reply_events()
        await self._stream(request, resp, events, fault)
        return resp

    async def _stream(self, request: web.Request, resp: web.StreamResponse,
                      events: list[bytes], fault: str) -> None:
        if fault == "split":  # one byte per write: every event split across reads
            for b in b"".join(events).replace(b"\n", b"\r\n"):
                await resp.write(bytes([b]))
        elif fault == "disconnect":
            await resp.write(b"".join(events[:5]))
            assert request.transport is not None
            request.transport.close()
        elif fault == "no_stop":
            await resp.write(b"".join(events[:-1]))
        elif fault in ("error_overloaded", "error_api"):
            etype = "overloaded_error" if fault == "error_overloaded" else "api_error"
            await resp.write(b"".join(events[:5]) + _ev(
                "error", json.loads(_error_body(etype, "mid-stream"))))
        elif fault == "malformed":
            await resp.write(b"".join(events[:2]) + b"event: message_delta\ndata: {oops\n\n")
        elif fault == "stall":
            await resp.write(b"".join(events[:4]))
            await self.stall.wait()
        else:
            await resp.write(b"".join(events))
        await resp.write_eof()


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, FaultServer]]:
    fs = FaultServer()
    app = web.Application()
    app.router.add_post("/v1/messages", fs.handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}", fs
    fs.stall.set()
    await runner.cleanup()


EndpointFactory = Callable[..., Any]
FACTORIES: dict[str, EndpointFactory] = {
    "lean": lambda url, **kw: LeanEndpoint(url, "sk-test", **kw),
    "aiohttp": lambda url, **kw: AiohttpEndpoint(url, "sk-test", **kw),
    "sdk": lambda url, **kw: AnthropicSDKEndpoint(url, "sk-test", **kw),
    "sdk-aiohttp": lambda url, **kw: AnthropicSDKEndpoint(url, "sk-test", backend="aiohttp",
                                                          **kw),
}


def make_request(fault: str = "", **hints: str) -> LLMRequest:
    h = dict(hints)
    if fault:
        h["fault"] = fault
    return LLMRequest(model="m", prefix=Prefix("You are terse.", (), 4, 0),
                      messages=(user_text("hi"),), max_tokens=64, hints=h)


async def _send(kind: str, url: str, req: LLMRequest, **kw: Any) -> LLMResponse:
    ep = FACTORIES[kind](url, **kw)
    try:
        result: Awaitable[LLMResponse] = ep.send(req)
        return await result
    finally:
        await ep.aclose()


@pytest.mark.parametrize("kind", list(FACTORIES))
@pytest.mark.parametrize("fault", ["", "split"])
async def test_reply_is_reconstructed(server: tuple[str, FaultServer], kind: str,
                                      fault: str) -> None:
    url, fs = server
    resp = await _send(kind, url, make_request(fault, turn_kind="edit"))
    assert resp.content == (TextBlock("".join(TEXT_PIECES)),
                            ToolUseBlock("tu_1", "Read", "".join(TOOL_PIECES)))
    assert resp.stop_reason == "tool_use"
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (12, 9)
    assert resp.usage.cache_read_input_tokens == 30
    assert resp.usage.cache_creation_input_tokens is None
    assert resp.timing.n_deltas == len(TEXT_PIECES) + len(TOOL_PIECES)
    assert resp.timing.first_token is not None and resp.timing.last_token is not None
    assert resp.timing.sent <= resp.timing.first_token <= resp.timing.last_token
    assert resp.timing.done is not None and resp.timing.done >= resp.timing.last_token
    assert len(resp.extra["token_times"]) == resp.timing.n_deltas
    assert resp.output_tokens_est > 0
    assert fs.last_headers["x-endurance-turn-kind"] == "edit"
    assert "sk-test" in (fs.last_headers.get("x-api-key", "")
                         + fs.last_headers.get("authorization", ""))
    assert fs.last_body["stream"] is True
    assert fs.last_body["messages"] == [{"role": "user",
                                         "content": [{"type": "text", "text": "hi"}]}]


async def test_paths_produce_identical_records(server: tuple[str, FaultServer]) -> None:
    url, _ = server
    got = {k: await _send(k, url, make_request()) for k in FACTORIES}

    def key(r: LLMResponse) -> tuple[Any, ...]:
        return (r.content, r.usage, r.stop_reason, r.output_tokens_est, r.timing.n_deltas,
                r.status)

    assert key(got["lean"]) == key(got["aiohttp"]) == key(got["sdk"]) == key(got["sdk-aiohttp"])


FAULT_CASES = [
    ("429", ErrorType.RATE_LIMITED, 429),
    ("529", ErrorType.OVERLOADED, 529),
    ("500", ErrorType.SERVER, 500),
    ("524", ErrorType.PROXY_CUTOFF, 524),
    ("404", ErrorType.NOT_FOUND, 404),
    ("401", ErrorType.AUTH, 401),
    ("overflow", ErrorType.CONTEXT_OVERFLOW, 400),
    ("disconnect", ErrorType.DISCONNECT, 200),
    ("no_stop", ErrorType.DISCONNECT, 200),
    ("error_overloaded", ErrorType.OVERLOADED, 200),
    ("error_api", ErrorType.STREAM_ERROR, 200),
    ("malformed", ErrorType.MALFORMED, 200),
    ("stall", ErrorType.TIMEOUT, 200),
]


@pytest.mark.parametrize("kind", list(FACTORIES))
@pytest.mark.parametrize(("fault", "expected", "status"), FAULT_CASES)
async def test_faults_are_classified_alike(server: tuple[str, FaultServer], kind: str,
                                           fault: str, expected: ErrorType,
                                           status: int) -> None:
    url, _ = server
    # the timeout is every read's: long enough for a loaded machine to deliver what the
    # server wrote before it stalls (at 0.2 s the stall case failed once in a full suite
    # at load); only the stall waits it out
    with pytest.raises(EndpointError) as info:
        await _send(kind, url, make_request(fault), timeout_s=1.0)
    err = info.value
    assert err.error_type is expected, str(err)
    assert err.status == status
    assert err.timing is not None
    if fault == "429":
        assert err.retry_after_s == 7.0
    if fault in ("disconnect", "error_overloaded", "stall"):
        assert err.timing.n_deltas == 2 if fault != "stall" else err.timing.n_deltas == 1
        assert err.partial_output_tokens > 0


@pytest.mark.parametrize("kind", list(FACTORIES))
async def test_connection_refused(kind: str) -> None:
    with socket.socket() as s, pytest.raises(EndpointError) as info:
        s.bind(("127.0.0.1", 0))       # bound, never listening: refused, and ours meanwhile
        await _send(kind, f"http://127.0.0.1:{s.getsockname()[1]}", make_request(),
                    connect_timeout_s=1.0)
    assert info.value.error_type is ErrorType.CONNECTION
    assert info.value.status is None


@pytest.mark.parametrize("kind", list(FACTORIES))
async def test_connection_is_reused(server: tuple[str, FaultServer], kind: str) -> None:
    url, fs = server
    ep = FACTORIES[kind](url)
    try:
        for _ in range(3):
            await ep.send(make_request())
    finally:
        await ep.aclose()
    assert len(fs.peers) == 3 and len(set(fs.peers)) == 1  # one keep-alive connection
    assert "base_url" in ep.describe()
    assert "sk-test" not in json.dumps(ep.describe())
