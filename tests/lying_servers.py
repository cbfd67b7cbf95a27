"""Lying HTTP servers, shared by the tests and `benchmarks/hostile_cases.py` (issue 38):
one raw asyncio socket server on 127.0.0.1:0 in a thread of its own, and the replies
it can lie with — each an `async def reply(w, body)` that writes to the connection
(`body`: the request's body, for replies that echo it).

GET /v1/models gets `models` when given, every other request `reply`. Connections are
kept open and may carry several requests; nothing here is mocked below the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

Reply = Callable[..., Awaitable[None]]          # async (writer[, request body]) -> None


def ev(name: str, body: dict[str, Any]) -> bytes:
    """One SSE event."""
    return f"event: {name}\ndata: {json.dumps(body)}\n\n".encode()


def chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


START = ev("message_start", {"type": "message_start", "message": {
    "id": "m", "type": "message", "role": "assistant", "model": "m", "content": [],
    "usage": {"input_tokens": 3, "output_tokens": 0}}})
BLOCK = ev("content_block_start", {"type": "content_block_start", "index": 0,
                                   "content_block": {"type": "text", "text": ""}})


def delta(text: str = "hello") -> bytes:
    return ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": text}})


DELTA = delta()
END = (ev("content_block_stop", {"type": "content_block_stop", "index": 0})
       + ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                              "usage": {"output_tokens": 1}})
       + ev("message_stop", {"type": "message_stop"}))
SSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
JSON_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
# the planted code word a recall case asks for (simulator.check.needle)
CODE_WORD = re.compile(rb"\b[a-z]+-[a-z]+-\d{4}\b")


def _sized(head: bytes, body: bytes) -> bytes:
    return head + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body


def chunked(*events: bytes, close: bool = True) -> Reply:
    """A 200 event stream of `events`, chunked; `close` False: no last chunk."""
    async def write(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
        w.write(SSE + b"transfer-encoding: chunked\r\n\r\n" + chunk(b"".join(events))
                + (chunk(b"") if close else b""))
    return write


# ---------------------------------------------------------------- replies
async def silent(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    """Accept, read, never answer."""
    await asyncio.sleep(3600)


async def trickle(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    """200 JSON, chunked, one space every 0.05 s forever (each read is short)."""
    w.write(JSON_HEAD + b"transfer-encoding: chunked\r\n\r\n")
    while True:
        w.write(b"1\r\n \r\n")
        await w.drain()
        await asyncio.sleep(0.05)


async def pings(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    """200 event stream of `ping` events every 0.05 s forever."""
    w.write(SSE + b"transfer-encoding: chunked\r\n\r\n")
    while True:
        w.write(chunk(ev("ping", {"type": "ping"})))
        await w.drain()
        await asyncio.sleep(0.05)


async def garbage_status(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    """A status line that is not HTTP."""
    w.write(b"\x00\xffHELLO garbage\r\n\r\n")


async def endless_body(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    """200 JSON announcing ~100 GB and sending `[` forever."""
    w.write(JSON_HEAD + b"content-length: 99999999999\r\n\r\n")
    while True:
        w.write(b"[" * 65536)
        await w.drain()


async def json_gb(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    """1 GB of JSON with its content-length."""
    w.write(JSON_HEAD + b"content-length: 1000000000\r\n\r\n")
    piece = b'{"data": [' + b'{"id": "m"}, ' * 5000
    for _ in range(1_000_000_000 // len(piece)):
        w.write(piece)
        await w.drain()


async def not_found(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    w.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")


async def html_200(w: asyncio.StreamWriter, body: bytes = b"") -> None:
    """An HTML page with HTTP 200 (a proxy's welcome page), holding any code word asked."""
    m = CODE_WORD.search(body)
    word = m.group(0) if m else b""
    w.write(_sized(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n",
                   b"<html><body>Welcome to nginx " + word + b"</body></html>"))


async def models_ok(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    """A /v1/models listing: model "m", max_model_len 200000."""
    w.write(_sized(JSON_HEAD, json.dumps({"object": "list", "data": [
        {"id": "m", "object": "model", "max_model_len": 200000}]}).encode()))


def _message(text: str) -> bytes:
    return json.dumps({"id": "m1", "type": "message", "role": "assistant", "model": "m",
                       "content": [{"type": "text", "text": text}],
                       "stop_reason": "end_turn",
                       "usage": {"input_tokens": 100, "output_tokens": 8}}).encode()


async def echo(w: asyncio.StreamWriter, body: bytes = b"") -> None:
    """A valid reply repeating the request's code word (a perfect recall): a Messages
    JSON object, or an event stream when the request streams."""
    m = CODE_WORD.search(body)
    word = m.group(0).decode() if m else "ok"
    if b'"stream": true' in body or b'"stream":true' in body:
        w.write(_sized(SSE, START + BLOCK + delta(word) + END))
    else:
        w.write(_sized(JSON_HEAD, _message(f"The code word is {word}.")))


async def never_closes(w: asyncio.StreamWriter, body: bytes = b"") -> None:
    """A complete Messages JSON reply with the code word, chunked, then neither the
    last chunk nor a close."""
    m = CODE_WORD.search(body)
    word = m.group(0).decode() if m else "ok"
    w.write(JSON_HEAD + b"transfer-encoding: chunked\r\n\r\n"
            + chunk(_message(f"The code word is {word}.")))
    await w.drain()
    await asyncio.sleep(3600)


async def out_of_order(w: asyncio.StreamWriter, body: bytes = b"") -> None:
    """An event stream, its events out of order (a delta before message_start), to any
    request — also a non-streaming one."""
    m = CODE_WORD.search(body)
    word = m.group(0).decode() if m else "ok"
    w.write(_sized(SSE, delta(word) + END + BLOCK + START))


async def reset_refused(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    """vLLM's answer to a prefix-cache reset while requests hold blocks."""
    w.write(_sized(JSON_HEAD, b'{"success": false}'))


# ---------------------------------------------------------------- the server
# a /metrics target (DCGM exporter) that lies: tests/records/test_telemetry_lies.py and
# benchmarks/hostile_round4_lies.py (issue 49)
PROM_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n"


def power_text(*watts: float, uuids: tuple[str, ...] = ()) -> bytes:
    """A DCGM exporter's power gauges, one line per GPU (`uuids` default GPU-0, GPU-1…)."""
    ids = uuids or tuple(f"GPU-{i}" for i in range(len(watts)))
    lines = [b"# TYPE DCGM_FI_DEV_POWER_USAGE gauge"]
    lines += [f'DCGM_FI_DEV_POWER_USAGE{{gpu="{i}",UUID="{u}",Hostname="n"}} {w}'.encode()
              for i, (w, u) in enumerate(zip(watts, ids, strict=True))]
    return b"\n".join(lines) + b"\n"


def prom(body: bytes, status: str = "200 OK") -> Reply:
    async def write(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
        w.write(PROM_HEAD.replace(b"200 OK", status.encode()) + b"content-length: "
                + str(len(body)).encode() + b"\r\n\r\n" + body)
    return write


async def long_line(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    """A 64 MB line, chunked (no length announced), sent as fast as it is read."""
    w.write(PROM_HEAD + b"transfer-encoding: chunked\r\n\r\n")
    piece = b"DCGM_FI_DEV_POWER_USAGE" + b"x" * (1 << 20)
    for _ in range(64):
        w.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        await w.drain()


async def byte_a_second(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    """A valid head, then the body one byte a second (at most its length)."""
    body = power_text(100.0)
    w.write(PROM_HEAD + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n")
    for b in body:
        w.write(bytes([b]))
        await w.drain()
        await asyncio.sleep(1.0)


async def _call(reply: Reply, w: asyncio.StreamWriter, body: bytes) -> None:
    if reply.__code__.co_argcount >= 2:
        await reply(w, body)
    else:
        await reply(w)


@contextlib.contextmanager
def lying_server(reply: Reply, models: Reply | None = None, *,
                 every_get: bool = False) -> Iterator[str]:
    """A raw server on 127.0.0.1:0 in its own thread and loop, stopped at exit; every
    request gets `reply`, except GET /v1/models — or, `every_get`, every GET — which
    gets `models` when given. Yields its base URL."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                n = next((int(x.split(b":")[1]) for x in head.lower().split(b"\r\n")
                          if x.startswith(b"content-length:")), 0)
                body = await r.readexactly(n) if n else b""
                get = head.startswith(b"GET " if every_get else b"GET /v1/models")
                use = models if models is not None and get else reply
                await _call(use, w, body)
                await w.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError,
                asyncio.LimitOverrunError):
            pass
        finally:
            w.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, limit=1 << 26)
        box["url"] = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        stop = asyncio.Event()
        box["stop"], box["loop"] = stop, asyncio.get_running_loop()
        ready.set()
        await stop.wait()
        server.close()
        for t in asyncio.all_tasks() - {asyncio.current_task()}:
            t.cancel()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(5)
    try:
        yield str(box["url"])
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(5)
