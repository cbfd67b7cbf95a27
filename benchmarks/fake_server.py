"""A deliberately cheap fake Anthropic Messages SSE server for client benchmarks.

Raw `asyncio.Protocol` (uvloop when installed), replies precomputed once, so the server
is not what limits a client benchmark. Two modes:

* ``bulk``  — zero latency: the whole reply (chunked SSE) is written in one call.
* ``paced`` — every stream emits one content delta per write at ``--rate`` tokens/s.
  One 1 ms ticker drives all streams: a stream lives in one slot of a ring of
  ``round(1000 / rate)`` slots and gets one token each time its slot comes round.

Two wire protocols, same number of content deltas per reply: ``--protocol anthropic``
(default: Messages API events) and ``--protocol openai`` (Chat Completions chunks, a
final usage chunk, ``data: [DONE]``), for peer load generators that cannot speak the
Messages API. The request path and body are ignored either way.

Run as its own process, optionally pinned: ``python benchmarks/fake_server.py --mode
paced --rate 50 --tokens 128 --cpu 1``; it prints ``READY <port>`` when listening.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
         b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")
_WORDS = [" the", " quick", " brown", " fox", " jumps", " over", " lazy", " dog", " and",
          " code", "()", " return", " self", ".", "\n", " value"]


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(name: str, body: dict[str, Any]) -> bytes:
    return _chunk(f"event: {name}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n".encode())


def build_reply(n_tokens: int) -> tuple[bytes, list[bytes], bytes]:
    """(head incl. message_start, one chunk per token, tail incl. message_stop + EOF)."""
    head = _HEAD + _event("message_start", {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "content": [],
        "model": "fake", "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 0}}})
    head += _event("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
    toks = [_event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
        "type": "text_delta", "text": _WORDS[i % len(_WORDS)]}}) for i in range(n_tokens)]
    tail = _event("content_block_stop", {"type": "content_block_stop", "index": 0})
    tail += _event("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": "max_tokens", "stop_sequence": None}, "usage": {"output_tokens": n_tokens}})
    tail += _event("message_stop", {"type": "message_stop"}) + b"0\r\n\r\n"
    return head, toks, tail


def _data(body: dict[str, Any]) -> bytes:
    return _chunk(b"data: %s\n\n" % json.dumps(body, separators=(",", ":")).encode())


def build_openai_reply(n_tokens: int) -> tuple[bytes, list[bytes], bytes]:
    """The same reply as Chat Completions SSE: role chunk, one chunk per token, finish
    chunk, usage chunk, ``[DONE]``."""
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
            "model": "fake"}

    def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    head = _HEAD + _data(choice({"role": "assistant", "content": ""}))
    toks = [_data(choice({"content": _WORDS[i % len(_WORDS)]})) for i in range(n_tokens)]
    tail = _data(choice({}, "length"))
    tail += _data(base | {"choices": [], "usage": {
        "prompt_tokens": 10, "completion_tokens": n_tokens, "total_tokens": 10 + n_tokens}})
    tail += _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
    return head, toks, tail


class Server:
    """Shared reply bytes and the paced ticker ring."""

    def __init__(self, mode: str, n_tokens: int, rate: float,
                 protocol: str = "anthropic") -> None:
        self.mode = mode
        build = build_openai_reply if protocol == "openai" else build_reply
        self.head, self.toks, self.tail = build(n_tokens)
        self.whole = self.head + b"".join(self.toks) + self.tail
        self.ring: list[list[list[Any]]] = [[] for _ in range(max(1, round(1000 / rate)))]
        self.tick = 0
        self.requests = 0

    def respond(self, transport: asyncio.Transport) -> None:
        self.requests += 1
        if self.mode == "bulk":
            transport.write(self.whole)
            return
        transport.write(self.head)
        # place the stream in the slot the ticker visits next: first token ≈ 1 ms later
        self.ring[(self.tick + 1) % len(self.ring)].append([transport, 0])

    async def run_ticker(self) -> None:
        """Every 1 ms (absolute schedule, catching up when late) serve one ring slot."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        toks, tail, n = self.toks, self.tail, len(self.toks)
        while True:
            self.tick += 1
            slot = self.ring[self.tick % len(self.ring)]
            keep = []
            for st in slot:
                tr, i = st
                if tr.is_closing():
                    continue
                tr.write(toks[i])
                if i + 1 == n:
                    tr.write(tail)
                else:
                    st[1] = i + 1
                    keep.append(st)
            slot[:] = keep
            delay = t0 + self.tick * 0.001 - loop.time()
            await asyncio.sleep(max(0.0, delay))


def _content_length(head: bytes) -> int:
    i = head.find(b"content-length:")
    if i < 0:
        return 0
    j = head.find(b"\r\n", i)
    return int(head[i + 15:j if j >= 0 else len(head)])


class Conn(asyncio.Protocol):
    """Minimal HTTP/1.1 keep-alive: headers, Content-Length body, then the reply."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            length = _content_length(self.buf[:end].lower())
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length:]
            assert self.transport is not None
            self.server.respond(self.transport)


async def serve(mode: str, n_tokens: int, rate: float, port: int,
                protocol: str = "anthropic") -> None:
    server = Server(mode, n_tokens, rate, protocol)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: Conn(server), "127.0.0.1", port, backlog=4096)
    sock_port = srv.sockets[0].getsockname()[1]
    print(f"READY {sock_port}", flush=True)
    async with srv:
        if mode == "paced":
            await server.run_ticker()
        else:
            await srv.serve_forever()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["bulk", "paced"], default="bulk")
    ap.add_argument("--tokens", type=int, default=512, help="content deltas per reply")
    ap.add_argument("--rate", type=float, default=50.0, help="paced: tokens/s per stream")
    ap.add_argument("--protocol", choices=["anthropic", "openai"], default="anthropic",
                    help="SSE wire format (openai: Chat Completions chunks)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cpu", type=int, default=None, help="pin to this core")
    ap.add_argument("--no-uvloop", action="store_true")
    a = ap.parse_args(argv)
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})
    runner: Any = asyncio.run
    if not a.no_uvloop:
        try:
            import uvloop
            runner = uvloop.run
        except ImportError:
            pass
    try:
        runner(serve(a.mode, a.tokens, a.rate, a.port, a.protocol))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
