"""Lying servers, round two (issue 29 items 3-4): one raw-socket fixture per behaviour.
A complete stream is a success however the body fails to end; a stream that cannot be
read (no line feed, undecodable or bomb-sized gzip, a garbage status line, events out
of the Anthropic grammar) is `malformed_stream`, within seconds and a stated memory
bound, with DEFAULT limits where the point is that no timeout is needed."""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from simulator.endpoints.base import EndpointError, ErrorType
from simulator.endpoints.http import transport
from simulator.endpoints.http.aiohttp_client import AiohttpEndpoint
from simulator.endpoints.http.lean import LeanEndpoint
from simulator.endpoints.http.transport import AttemptLimits
from simulator.endpoints.wire.dialects import ANTHROPIC, OPENAI_CHAT, Dialect
from tests.endpoints.http.test_endpoints_limits import REQ, SSE_HEAD, Writer, _chunk, hostile


def _ev(name: str, body: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(body)}\n\n".encode()


START = _ev("message_start", {"type": "message_start", "message": {"usage": {
    "input_tokens": 3}}})
BLOCK = _ev("content_block_start", {"type": "content_block_start", "index": 0,
                                    "content_block": {"type": "text", "text": ""}})
DELTA = _ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                    "delta": {"type": "text_delta", "text": "hello"}})
END = (_ev("content_block_stop", {"type": "content_block_stop", "index": 0})
       + _ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                               "usage": {"output_tokens": 1}})
       + _ev("message_stop", {"type": "message_stop"}))
COMPLETE = {"anthropic": START + BLOCK + DELTA + END,
            "openai-chat": b'data: {"choices":[{"index":0,"delta":{"content":"hello"}}]}\n\n'
                           b'data: {"choices":[{"index":0,"delta":{},"finish_reason":'
                           b'"stop"}]}\n\ndata: [DONE]\n\n'}
HEAD_10 = b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"


def complete_no_close(api: str) -> Writer:
    """A whole valid stream, chunked, then neither the last chunk nor a close."""
    async def write(w: asyncio.StreamWriter) -> None:
        w.write(SSE_HEAD + _chunk(COMPLETE[api]))
    return write


def http10_no_length(api: str) -> Writer:
    async def write(w: asyncio.StreamWriter) -> None:
        w.write(HEAD_10 + COMPLETE[api])
    return write


def length_larger_than_body(api: str) -> Writer:
    async def write(w: asyncio.StreamWriter) -> None:
        body = COMPLETE[api]
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
                + str(len(body) * 10).encode() + b"\r\n\r\n" + body)
    return write


def _gzip_head(n: int) -> bytes:
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip"
            b"\r\ncontent-length: " + str(n).encode() + b"\r\n\r\n")


async def gzip_garbage(w: asyncio.StreamWriter) -> None:
    junk = b"\x1f\x8b\x08\x00garbage, not deflate at all" * 20
    w.write(_gzip_head(len(junk)) + junk)


@functools.cache
def _bomb() -> bytes:
    return gzip.compress(b"\n" * (64 * 2**20), compresslevel=6)   # 64 MiB of line feeds


async def gzip_bomb(w: asyncio.StreamWriter) -> None:
    w.write(_gzip_head(len(_bomb())) + _bomb())


async def no_line_feed(w: asyncio.StreamWriter) -> None:
    """An endless event with no blank line (the issue's 1 GB stream, cut short by us)."""
    w.write(SSE_HEAD)
    piece = _chunk(b"a" * 65536)
    for _ in range(16 * 1024):            # at most 1 GiB if nothing stops the client
        w.write(piece)
        await w.drain()


async def garbage_status_line(w: asyncio.StreamWriter) -> None:
    w.write(b"HTTQ/9 two hundred\r\n\r\n")


def _stream(*events: bytes) -> Writer:
    async def write(w: asyncio.StreamWriter) -> None:
        w.write(SSE_HEAD + _chunk(b"".join(events)) + _chunk(b""))
    return write


OUT_OF_GRAMMAR: list[tuple[str, Writer, str]] = [
    ("deltas-without-message_start", _stream(BLOCK, DELTA, END), "before message_start"),
    ("delta-before-its-block", _stream(START, DELTA, END), "not started"),
    ("stop-first", _stream(_ev("message_stop", {"type": "message_stop"}), START, BLOCK,
                           DELTA, END), "before message_start"),
    ("events-after-stop", _stream(START, BLOCK, DELTA, END, DELTA), "after message_stop"),
    ("two-message_starts", _stream(START, START, BLOCK, DELTA, END), "second message_start"),
    ("stop-of-unopened-block", _stream(START, _ev("content_block_stop", {
        "type": "content_block_stop", "index": 3}), END), "not open"),
    ("index-not-a-number", _stream(START, _ev("content_block_start", {
        "type": "content_block_start", "index": "zero", "content_block": {"type": "text"}}),
        END), "index is not a block number"),
]

KINDS: dict[str, type[Any]] = {"lean": LeanEndpoint, "aiohttp": AiohttpEndpoint}


async def _send(kind: str, url: str, d: Dialect, limits: AttemptLimits | None = None,
                bound_s: float = 3.0) -> Any:
    lim = limits or AttemptLimits()       # the defaults: 600 s idle, 3600 s total
    ep = KINDS[kind](url, timeout_s=lim.idle_s, dialect=d, limits=lim)
    try:
        async with asyncio.timeout(bound_s):   # a guard; the client must end well before
            return await ep.send(REQ)
    finally:
        await ep.aclose()


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> float:
    """The grace after a stream's last event, cut from 0.5 s so the twelve cases below
    don't each wait it out: what they check is that the grace, not the 600 s idle
    limit, ends a body that never ends."""
    monkeypatch.setattr(transport, "COMPLETE_GRACE_S", 0.1)
    return 0.1


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("dialect", [ANTHROPIC, OPENAI_CHAT], ids=lambda d: d.name)
@pytest.mark.parametrize("make", [complete_no_close, http10_no_length,
                                  length_larger_than_body],
                         ids=["complete-no-close", "http10-no-length", "length-too-large"])
async def test_a_complete_stream_is_a_success_whether_or_not_the_body_ends(
        kind: str, dialect: Dialect, make: Callable[[str], Writer], short_grace: float) -> None:
    async with hostile(make(dialect.name)) as url:
        t0 = asyncio.get_running_loop().time()
        resp = await _send(kind, url, dialect)
        elapsed = asyncio.get_running_loop().time() - t0
    assert resp.text == "hello" and resp.status == 200
    assert elapsed < 60.0                      # the grace, not a 600 s idle timeout
    # done = when the end arrived, not a timeout's end; 2 s leaves a loaded box room
    # (CI measured 0.57 s under two xdist workers; the limits here are 600 s)
    assert resp.timing.done - resp.timing.sent < 2.0


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("case", "write", "expected"), [
    ("gzip-garbage", gzip_garbage, ErrorType.MALFORMED),
    ("garbage-status-line", garbage_status_line, ErrorType.MALFORMED),
    ("no-line-feed", no_line_feed, ErrorType.MALFORMED),
], ids=["gzip-garbage", "garbage-status-line", "no-line-feed"])
async def test_unreadable_streams_are_malformed_in_bounded_memory(
        kind: str, case: str, write: Writer, expected: ErrorType) -> None:
    tracemalloc.start()
    try:
        async with hostile(write) as url:
            with pytest.raises(EndpointError) as info:
                await _send(kind, url, ANTHROPIC, bound_s=5.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.error_type is expected, f"{case}: {info.value}"
    assert peak < 128 * 2**20, f"{case}: peak {peak / 2**20:.0f} MiB"   # stated bound


@pytest.mark.slow
async def test_a_gzip_bomb_is_malformed_before_it_is_inflated() -> None:
    """64 MiB inflated from 64 KiB: stopped at the ratio, never held in memory."""
    _bomb()                       # made before memory is traced
    tracemalloc.start()
    try:
        async with hostile(gzip_bomb) as url:
            with pytest.raises(EndpointError) as info:
                await _send("lean", url, ANTHROPIC, bound_s=5.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.error_type is ErrorType.MALFORMED and "bomb" in str(info.value)
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("case", "write", "needle"), OUT_OF_GRAMMAR,
                         ids=[c[0] for c in OUT_OF_GRAMMAR])
async def test_anthropic_events_out_of_grammar_are_malformed_naming_the_event(
        kind: str, case: str, write: Writer, needle: str) -> None:
    async with hostile(write) as url:
        with pytest.raises(EndpointError) as info:
            await _send(kind, url, ANTHROPIC)
    err = info.value
    assert err.error_type is ErrorType.MALFORMED, f"{case}: {err.error_type}: {err}"
    assert needle in str(err) and "(event " in str(err), str(err)


def test_a_reply_past_the_content_cap_is_too_large_without_counting_it() -> None:
    """The issue's 1 GB delta stream: 17 MiB of one unbroken word would take a minute
    and gigabytes to token-count; it is refused, and the partial count is the deltas."""
    import time

    from simulator.endpoints.wire.anthropic import StreamState
    from simulator.endpoints.wire.sse import MAX_REPLY_CONTENT_BYTES, SSEParser, StreamFault
    state = StreamState(0.0)
    piece = _ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta",
                                                  "text": "ab" * 32768}})
    state.feed_blocks(SSEParser().feed(START + BLOCK), 0.5)
    n = MAX_REPLY_CONTENT_BYTES // 65536 + 2
    t0 = time.monotonic()
    for _ in range(n):
        state.feed_bytes(piece, 1.0)
    state.feed_bytes(END, 2.0)
    with pytest.raises(StreamFault) as info:
        state.response(3.0)
    assert info.value.error_type is ErrorType.RESPONSE_TOO_LARGE
    assert state.partial_output_tokens() == n
    assert time.monotonic() - t0 < 10.0       # minutes before (bounded, not timed)
