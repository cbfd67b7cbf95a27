"""The hand-written HTTP/1.1 transport (`simulator.endpoints.http.http1`) against a raw
asyncio server on 127.0.0.1 that writes scripted bytes, split however the test likes:
every body framing, interim responses, gzip, keep-alive reuse, servers that close
pooled connections, bad framing and silence."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.endpoints.http import http1

Script = Callable[[int], list[bytes]]  # request number → the writes of the reply


@dataclass
class RawServer:
    """Answers each request (head + Content-Length body) with `script(n)`'s writes; a
    write of b"<close>" closes the connection there."""

    script: Script
    requests: int = 0
    connections: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                await reader.readexactly(length)
                self.requests += 1
                for w in self.script(self.requests):
                    if w == b"<close>":
                        writer.close()
                        return
                    writer.write(w)
                    await writer.drain()
                    await asyncio.sleep(0)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.fixture
async def raw() -> AsyncIterator[tuple[RawServer, str]]:
    rs = RawServer(script=lambda n: [])
    srv = await asyncio.start_server(rs.handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    yield rs, f"http://127.0.0.1:{port}"
    for w in rs.writers:
        w.close()
    srv.close()
    await srv.wait_closed()


def _chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


OK_CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Id: 7\r\n\r\n"
BODY = [b"event: a\ndata: 1\n\n", b"event: b\ndata: \xc3\xa9\n\n", b"x" * 300]


async def _post(url: str, *, read_timeout: float = 5.0, **kw: object) -> tuple[
        http1.ResponseHead, bytes, list[float], http1.HTTP1Pool]:
    pool = http1.HTTP1Pool(url, read_timeout_s=read_timeout, clock=time.monotonic)
    got: list[bytes] = []
    times: list[float] = []
    req = pool.request_bytes("/v1/messages", {"content-type": "application/json"}, b"{}")
    async with await pool.exchange(req) as ex:
        head = await ex.head()

        def sink(b: bytes, now: float) -> None:
            got.append(b)
            times.append(now)

        ex.set_sink(sink)
        await ex.body_done()
    return head, b"".join(got), times, pool


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(1, 400), max_size=8))
async def test_chunked_body_survives_any_split(raw: tuple[RawServer, str],
                                               cuts: list[int]) -> None:
    rs, url = raw
    whole = OK_CHUNKED + _chunked(*BODY)
    points = sorted({c % len(whole) for c in cuts} - {0})
    pieces = [whole[a:b] for a, b in zip([0, *points], [*points, len(whole)], strict=True)]
    rs.script = lambda n: pieces
    head, body, times, pool = await _post(url)
    assert head.status == 200 and head.get("x-id") == "7"
    assert body == b"".join(BODY)
    assert times == sorted(times)
    await pool.aclose()


async def test_one_chunk_per_read(raw: tuple[RawServer, str]) -> None:
    """The paced case: every write is exactly one chunk (one with an extension, which
    the general parser reads), then the last chunk with a trailer."""
    rs, url = raw
    chunks = [b"%x\r\n%s\r\n" % (len(p), p) for p in BODY]
    chunks.insert(1, b"4;ext=1\r\nwxyz\r\n")
    rs.script = lambda n: [OK_CHUNKED, *chunks, b"0\r\nx-t: 1\r\n\r\n"]
    head, body, times, pool = await _post(url)
    assert head.status == 200
    assert body == BODY[0] + b"wxyz" + b"".join(BODY[1:])
    assert times == sorted(times)
    await pool.aclose()


@pytest.mark.parametrize("framing", ["length", "close", "gzip", "interim", "http10"])
async def test_other_framings(raw: tuple[RawServer, str], framing: str) -> None:
    rs, url = raw
    data = b"".join(BODY)
    replies = {
        "length": [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data), data],
        "close": [b"HTTP/1.1 200 OK\r\n\r\n", data[:10], data[10:], b"<close>"],
        "gzip": [b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked"
                 b"\r\n\r\n", _chunked(gzip.compress(data))],
        "interim": [b"HTTP/1.1 100 Continue\r\n\r\n", OK_CHUNKED, _chunked(data)],
        "http10": [b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data), data],
    }
    rs.script = lambda n: replies[framing]
    head, body, _, pool = await _post(url)
    assert (head.status, body) == (200, data)
    await pool.aclose()


async def test_keep_alive_reuses_one_connection(raw: tuple[RawServer, str]) -> None:
    rs, url = raw
    rs.script = lambda n: [OK_CHUNKED, _chunked(b"reply %d" % n)]
    pool = http1.HTTP1Pool(url, clock=time.monotonic)
    bodies = []
    for _ in range(3):
        req = pool.request_bytes("/v1/messages", {}, b"{}")
        async with await pool.exchange(req) as ex:
            await ex.head()
            bodies.append(await ex.read_body(1000))
    assert bodies == [b"reply 1", b"reply 2", b"reply 3"]
    assert rs.connections == 1 and pool.connections_opened == 1
    await pool.aclose()


async def test_connection_close_header_is_obeyed(raw: tuple[RawServer, str]) -> None:
    rs, url = raw
    rs.script = lambda n: [b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2"
                           b"\r\n\r\nok"]
    pool = http1.HTTP1Pool(url, clock=time.monotonic)
    for _ in range(2):
        async with await pool.exchange(pool.request_bytes("/", {}, b"")) as ex:
            await ex.head()
            assert await ex.read_body(10) == b"ok"
    assert pool.connections_opened == 2
    await pool.aclose()


async def test_pooled_connection_closed_by_server_is_stale(raw: tuple[RawServer, str]) -> None:
    """The server closes a kept-alive connection instead of answering (as llama.cpp does
    after tools requests): that fails as StaleConnection (safe to re-send), and a fresh
    connection then works. On a first use the same close is a plain Disconnected."""
    rs, url = raw
    rs.script = lambda n: [b"<close>"] if n == 2 else [OK_CHUNKED, _chunked(b"hi")]
    pool = http1.HTTP1Pool(url, clock=time.monotonic)
    async with await pool.exchange(pool.request_bytes("/", {}, b"")) as ex:
        await ex.head()
        assert await ex.read_body(10) == b"hi"
    with pytest.raises(http1.StaleConnection):
        async with await pool.exchange(pool.request_bytes("/", {}, b"")) as ex:
            await ex.head()
    async with await pool.exchange(pool.request_bytes("/", {}, b""), fresh=True) as ex:
        await ex.head()
        assert await ex.read_body(10) == b"hi"
    assert pool.connections_opened == 2
    await pool.aclose()


@pytest.mark.parametrize(("writes", "error"), [
    ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
     http1.ProtocolViolation),
    ([b"SPDY/3 200 OK\r\n\r\n"], http1.ProtocolViolation),
    ([b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx"],
     http1.ProtocolViolation),
    ([OK_CHUNKED, b"5\r\nab", b"<close>"], http1.Disconnected),
    ([b"<close>"], http1.Disconnected),
])
async def test_bad_responses_raise(raw: tuple[RawServer, str], writes: list[bytes],
                                   error: type[Exception]) -> None:
    rs, url = raw
    rs.script = lambda n: writes
    with pytest.raises(error):
        await _post(url)


async def test_silence_is_a_read_timeout(raw: tuple[RawServer, str]) -> None:
    rs, url = raw
    rs.script = lambda n: [OK_CHUNKED, b"3\r\nabc\r\n"]  # then nothing
    t0 = time.monotonic()
    with pytest.raises(http1.ReadTimeout) as info:
        await _post(url, read_timeout=0.2)
    assert info.value.responded
    assert 0.15 < time.monotonic() - t0 < 3.0


async def test_sink_errors_reach_the_caller(raw: tuple[RawServer, str]) -> None:
    rs, url = raw
    rs.script = lambda n: [OK_CHUNKED, _chunked(b"boom")]
    pool = http1.HTTP1Pool(url, clock=time.monotonic)

    def sink(b: bytes, now: float) -> None:
        raise RuntimeError("parser said no")

    with pytest.raises(RuntimeError, match="parser said no"):
        async with await pool.exchange(pool.request_bytes("/", {}, b"")) as ex:
            await ex.head()
            ex.set_sink(sink)
            await ex.body_done()
    await pool.aclose()


def test_request_bytes_and_url_checks() -> None:
    pool = http1.HTTP1Pool("http://example.test:8080/anthropic/", clock=time.monotonic)
    raw = pool.request_bytes("/v1/messages", {"x-a": "1"}, b"{}")
    assert raw.startswith(b"POST /anthropic/v1/messages HTTP/1.1\r\nhost: example.test:8080\r\n")
    assert b"content-length: 2\r\n" in raw and raw.endswith(b"\r\n\r\n{}")
    assert http1.HTTP1Pool("https://h.test", clock=time.monotonic).port == 443
    with pytest.raises(ValueError, match="not an http"):
        http1.check_url("ftp://h.test")


async def test_lean_endpoint_resends_on_a_stale_connection(raw: tuple[RawServer, str]) -> None:
    from simulator.endpoints.base import LLMRequest
    from simulator.endpoints.http.lean import LeanEndpoint
    from simulator.session.conversation import Prefix, TextBlock, user_text
    sse = (b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
           b'{"input_tokens":3,"output_tokens":1}}}\n\n'
           b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
           b'"content_block":{"type":"text","text":""}}\n\n'
           b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
           b'"delta":{"type":"text_delta","text":"ok"}}\n\n'
           b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
           b'"end_turn"},"usage":{"output_tokens":1}}\n\n'
           b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    rs, url = raw
    rs.script = lambda n: [b"<close>"] if n == 2 else [OK_CHUNKED, _chunked(sse)]
    ep = LeanEndpoint(url)
    req = LLMRequest(model="m", prefix=Prefix("s", (), 1, 0), messages=(user_text("hi"),),
                     max_tokens=8)
    try:
        replies = [await ep.send(req) for _ in range(2)]
    finally:
        await ep.aclose()
    assert [r.content for r in replies] == [(TextBlock("ok"),)] * 2
    assert ep.stale_connection_retries == 1 and rs.requests == 3


async def test_tls() -> None:
    """HTTPS: the pool verifies the server's certificate (here from a throwaway CA)."""
    import ssl

    import trustme
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    rs = RawServer(script=lambda n: [OK_CHUNKED, _chunked(b"secure %d" % n)])
    srv = await asyncio.start_server(rs.handle, "127.0.0.1", 0, ssl=server_ctx)
    port = srv.sockets[0].getsockname()[1]
    try:
        pool = http1.HTTP1Pool(f"https://127.0.0.1:{port}", clock=time.monotonic,
                               ssl_context=client_ctx)
        for i in (1, 2):
            async with await pool.exchange(pool.request_bytes("/", {}, b"")) as ex:
                assert (await ex.head()).status == 200
                assert await ex.read_body(100) == b"secure %d" % i
        assert pool.connections_opened == 1
        await pool.aclose()
        untrusting = http1.HTTP1Pool(f"https://127.0.0.1:{port}", clock=time.monotonic)
        with pytest.raises(http1.ConnectFailed):
            await untrusting.exchange(untrusting.request_bytes("/", {}, b""))
    finally:
        for w in rs.writers:
            w.close()
        srv.close()
        await srv.wait_closed()


async def test_read_body_stops_at_its_limit(raw: tuple[RawServer, str]) -> None:
    """A long (error) body is cut at the limit, even when it arrives with the head (the
    limit is hit inside `set_sink`); the pool stays usable afterwards."""
    rs, url = raw
    body = b"e" * 5000
    rs.script = lambda n: [b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n" % len(body) + body]
    pool = http1.HTTP1Pool(url, clock=time.monotonic)
    async with await pool.exchange(pool.request_bytes("/", {}, b"")) as ex:
        assert (await ex.head()).status == 500
        assert await ex.read_body(100) == b"e" * 100
    async with await pool.exchange(pool.request_bytes("/", {}, b"")) as ex:
        await ex.head()
        assert await ex.read_body(10_000) == body
    await pool.aclose()
