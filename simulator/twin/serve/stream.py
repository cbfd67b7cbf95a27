"""Writing one twin reply to the wire: SSE or JSON, with mid-stream faults and the
proxy cut-off.

The writer waits on the request's `RequestStream.changed` event and writes everything
emitted since its last write — one `content_block_delta` per engine step — in a single
transport write. Headers and `message_start` go out with the first token (as vLLM does),
which is what lets a proxy cut-off answer 524 while the prefill is still running.
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import ClientConnectionResetError, web

from simulator.twin.serve import wire
from simulator.twin.serve.faults import FaultDecision, FaultKind
from simulator.twin.serve.service import RequestStream, TwinService

_CUTOFF_BODY = "error code: 524"   # what Cloudflare sends non-browser clients
_DISCONNECTED = (ConnectionResetError, ClientConnectionResetError)


class ReplyWriter:
    """Plays one `RequestStream` out to one HTTP request."""

    def __init__(self, request: web.Request, service: TwinService, stream: RequestStream,
                 *, model: str, stop_reason: str, decision: FaultDecision,
                 deadline: float | None, fmt: wire.ReplyFormat = wire,
                 hidden: int = 0) -> None:
        self._req, self._svc, self._s = request, service, stream
        self._w = fmt  # the wire format: `wire` (Messages) or an `openai_wire.ChatWire`
        self._model, self._stop, self._fault = model, stop_reason, decision
        self._deadline = deadline            # loop time of the proxy cut-off, if any
        self._pieces = wire.token_pieces(stream.plan)
        self._sent = 0                       # tokens written
        self._chunks = 0                     # emission steps written
        self._unstamped = 0                  # emissions taken, write time not stamped
        # the reply's opening tokens that stream no text (vLLM on gpt-oss: the harmony
        # header); their text is held and goes out with the first token past them, or
        # with the last token of a reply no longer than its opening
        self._hidden, self._held = min(hidden, len(self._pieces) - 1), ""
        self._resp: web.StreamResponse | None = None
        self._headers = {"x-endurance-request-id": stream.request_id,
                         "request-id": stream.request_id}

    async def _wait(self, whole: bool = False) -> bool:
        """Wait until there is something to write (`whole` or instant mode: the whole
        reply); False when the cut-off deadline passed first."""
        s = self._s
        whole = whole or self._svc.instant
        while not s.finished and (whole or len(s.emit_counts) == self._chunks):
            s.changed.clear()
            if self._deadline is None:
                await s.changed.wait()
                continue
            try:
                async with asyncio.timeout_at(self._deadline):
                    await s.changed.wait()
            except TimeoutError:
                return False
        return True

    def _take(self) -> bytes:
        """Deltas for every emission not yet written (instant mode: one delta)."""
        counts = self._s.emit_counts
        new = counts[self._chunks:]
        self._chunks = len(counts)
        self._unstamped += len(new)
        if self._svc.instant and new:
            new = [sum(new)]
        out = []
        for n in new:
            text = self._held + "".join(self._pieces[self._sent:self._sent + n])
            self._sent += n
            if self._sent <= self._hidden:
                self._held = text
                continue
            self._held = ""
            out.append(self._w.text_delta(text))
        return b"".join(out)

    async def _write(self, data: bytes) -> None:
        """Write to the client, first stamping the write time of the emissions `data`
        carries (`RequestStream.write_times`, what clients' receipt times are held to)."""
        assert self._resp is not None
        if self._unstamped:
            self._s.write_times.extend([self._svc.clock()] * self._unstamped)
            self._unstamped = 0
        await self._resp.write(data)

    def _usage(self) -> wire.ReplyUsage:
        s = self._s
        return wire.ReplyUsage(s.prompt_len, s.cached_tokens, self._svc.engine.block_size,
                               s.emitted)

    def _drop(self) -> None:
        """Close the connection abruptly (a mid-stream disconnect or proxy drop)."""
        transport = self._req.transport
        if transport is not None:
            transport.abort()

    async def stream(self) -> web.StreamResponse:
        """The SSE reply; returns the (possibly cut) response."""
        try:
            return await self._stream()
        except _DISCONNECTED:
            self._svc.abandon(self._s)
            return self._resp or web.Response(status=499)
        except asyncio.CancelledError:
            self._svc.abandon(self._s)
            raise

    async def _stream(self) -> web.StreamResponse:
        fault, fired = self._fault, False
        while True:
            if not await self._wait():
                return await self._cut()
            data = self._take()
            if self._resp is None:
                self._resp = web.StreamResponse(headers={
                    **self._headers, "content-type": "text/event-stream; charset=utf-8",
                    "cache-control": "no-cache"})
                await self._resp.prepare(self._req)
                data = self._w.message_start(self._s.request_id, self._model,
                                          self._s.prompt_len) + data
            done = self._s.finished and self._chunks == len(self._s.emit_counts)
            if (fault.kind is not None and fault.kind.mid_stream and not fired
                    and (self._sent >= fault.after_tokens or done)):
                fired = True
                if fault.kind is not FaultKind.STALL:
                    return await self._strike(fault.kind, data)
                await self._write(data)
                if not await self._stall(fault.duration_s):
                    return await self._cut()
                continue
            if done:
                await self._write(data + self._w.message_end(self._stop,
                                                               self._usage()))
                await self._resp.write_eof()
                return self._resp
            await self._write(data)

    async def _strike(self, kind: FaultKind, data: bytes) -> web.StreamResponse:
        """A mid-stream fault other than a stall; ends the reply."""
        assert self._resp is not None
        if kind is FaultKind.DISCONNECT:
            await self._write(data)
            self._svc.abandon(self._s)
            self._drop()
            return self._resp
        tail = self._w.error_event() if kind is FaultKind.ERROR_EVENT else self._w.MALFORMED_EVENT
        await self._write(data + tail)
        await self._resp.write_eof()
        self._svc.abandon(self._s)
        return self._resp

    async def _stall(self, seconds: float) -> bool:
        """Send nothing for `seconds`; False when the cut-off deadline passed first."""
        loop = asyncio.get_running_loop()
        if self._deadline is not None and loop.time() + seconds >= self._deadline:
            await asyncio.sleep(max(0.0, self._deadline - loop.time()))
            return False
        await asyncio.sleep(seconds)
        return True

    async def _cut(self) -> web.StreamResponse:
        """The proxy gave up: 524 if no byte was sent yet, else drop the connection."""
        self._svc.abandon(self._s)
        if self._resp is None:
            return web.Response(status=524, text=_CUTOFF_BODY, headers=self._headers)
        self._drop()
        return self._resp

    async def whole(self) -> web.StreamResponse:
        """The non-streaming reply (one JSON body when the request finishes)."""
        s, kind = self._s, self._fault.kind
        try:
            if not await self._wait(whole=True):
                return await self._cut()
            if kind is FaultKind.STALL and not await self._stall(self._fault.duration_s):
                return await self._cut()
        except asyncio.CancelledError:
            self._svc.abandon(s)
            raise
        return self._whole_reply(kind)

    def _whole_reply(self, kind: FaultKind | None) -> web.StreamResponse:
        s = self._s
        if kind is FaultKind.DISCONNECT:
            self._drop()
            return web.Response(status=499)
        if kind is FaultKind.ERROR_EVENT:
            return web.json_response(self._w.error_body("overloaded_error", "Overloaded"),
                                     status=529, headers=self._headers)
        body = self._w.message_body(s.request_id, self._model, "".join(self._pieces[:s.emitted]),
                                 self._stop, self._usage())
        text = json.dumps(body)
        if kind is FaultKind.MALFORMED:
            text = text[: len(text) // 2]
        return web.Response(text=text, content_type="application/json", headers=self._headers)
