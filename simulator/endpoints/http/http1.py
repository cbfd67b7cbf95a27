"""A minimal keep-alive HTTP/1.1 client on `asyncio.Protocol`, for streamed POSTs.

Why not aiohttp: with a paced server (one token per TCP segment) a client's cost is the
work per socket read. aiohttp turns each read into a `StreamReader` append, a future
wake-up and a coroutine step before our parser sees the bytes; here the event loop hands
the bytes straight to `data_received`, where llhttp (`httptools`, the parser behind
uvicorn) de-chunks them and passes them, with one clock reading, to the caller's sink.
llhttp replaced a hand-written chunked state machine: 0.6 vs 1.6 µs of client CPU per
one-token read (`benchmarks/http_framing.py`). The awaiting coroutine wakes only twice per
request: when the response head arrives and when the body ends.

Scope, deliberately small: one origin per pool; `POST` with a `Content-Length` body;
responses framed by `Transfer-Encoding: chunked`, `Content-Length`, or connection close;
gzip/deflate bodies decoded (we never ask for them); TLS through `ssl`; no proxies, no
redirects, no HTTP/2. Failures surface as `HTTPError` subclasses that say whether the
server may have seen the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import SplitResult, urlsplit

import httptools

_T = TypeVar("_T")
Sink = Callable[[bytes, float], None]  # (decoded body bytes, clock reading at receipt)

_MAX_HEAD = 64 * 1024  # a response head larger than this is not HTTP we want
_INFLATE_STEP = 256 * 1024  # bytes inflated per step of a compressed body
# An event stream compresses 5-20×; past this ratio (and a few MiB) it is a bomb.
_MAX_INFLATE_RATIO = 200
_INFLATE_FREE = 4 * 2**20


class HTTPError(Exception):
    """Transport-level failure. `responded`: response bytes had arrived."""

    def __init__(self, message: str, *, responded: bool = False) -> None:
        super().__init__(message)
        self.responded = responded


class ConnectFailed(HTTPError):
    """Could not open a connection (refused, DNS, TLS, connect timeout)."""


class ConnectTimeout(ConnectFailed):
    """The connect (or TLS handshake) took longer than the connect timeout."""


class StaleConnection(HTTPError):
    """A pooled keep-alive connection was closed by the server before it answered: the
    request may be re-sent on a fresh connection (RFC 9112 §9.3.1)."""


class Disconnected(HTTPError):
    """The connection closed (or reset) before the response was complete."""


class ReadTimeout(HTTPError):
    """No bytes for longer than the read timeout."""


class ProtocolViolation(HTTPError):
    """The server's bytes are not a well-formed HTTP/1.1 response."""


@dataclass(frozen=True, slots=True)
class ResponseHead:
    status: int
    reason: str
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "

    def get(self, name: str) -> str | None:
        return self.headers.get(name)


def check_url(url: str) -> SplitResult:
    """`urlsplit(url)`, or `ValueError` unless it is an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    return parts


class _Conn(asyncio.Protocol):
    """One connection; at most one request in flight. The response head and the body
    framing are parsed by llhttp (`httptools`) inside `data_received`, whose callbacks
    hand body bytes to the sink with the read's clock reading."""

    def __init__(self, pool: HTTP1Pool) -> None:
        self._pool = pool
        self._clock = pool.clock
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.uses = 0
        self._reset()

    def _reset(self) -> None:
        self._head_bytes = 0       # bytes of the response head seen so far
        self._head: ResponseHead | None = None
        self._head_fut: asyncio.Future[ResponseHead] | None = None
        self._done_fut: asyncio.Future[None] | None = None
        self._sink: Sink | None = None
        self._early: list[tuple[bytes, float]] = []  # body bytes before a sink was set
        self._mode = ""            # "chunked" | "length" | "close"
        self._inflate: Any = None
        self._zipped = 0           # compressed body bytes in, inflated bytes out
        self._unzipped = 0
        self.last_rx = 0.0
        self._active = False       # a request is in flight and its body is not complete
        self._parser: Any = None   # httptools.HttpResponseParser of the request in flight
        self._names: list[bytes] = []
        self._values: list[bytes] = []
        self._reason = b""
        self._now = 0.0
        self._error: BaseException | None = None  # raised inside a parser callback

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool.forget(self)
        if self._done_fut is None or self._done_fut.done():
            return  # idle
        if self._head is None and not self._head_bytes:
            self._fail_unanswered(f"connection closed before the response ({exc or 'EOF'})")
        elif self._head is not None and self._mode == "close":
            self._finish()
        else:
            self.fail(Disconnected(f"connection closed mid-response ({exc or 'EOF'})",
                                    responded=True))

    def eof_received(self) -> bool | None:
        return None  # close our side too; connection_lost does the bookkeeping

    def data_received(self, data: bytes) -> None:
        now = self._clock()
        self.last_rx = now
        if not self._active:
            if data.strip():  # bytes nobody asked for: this connection is unusable
                self.closed = True
                if self.transport is not None:
                    self.transport.abort()
            return
        self._now = now
        if self._head is None:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
            if self._head is None and self._head_bytes > _MAX_HEAD:
                raise ProtocolViolation("response head too large", responded=True)
        except httptools.HttpParserError as e:
            err, self._error = self._error, None
            self.fail(err if err is not None else ProtocolViolation(
                f"malformed HTTP response: {e}", responded=True))
        except Exception as e:  # raised by us, e.g. head too large
            self.fail(e)

    # -- httptools callbacks (llhttp parses the head and the framing) ---------------------
    def on_message_begin(self) -> None:
        if self._head is not None:  # a second response on one request: unusable
            self._error = ProtocolViolation("bytes after the response", responded=True)
            raise self._error
        self._names, self._values, self._reason = [], [], b""

    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self._names.append(name)
        self._values.append(value)

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # interim response: skip it
            return
        headers: dict[str, str] = {}
        for n, v in zip(self._names, self._values, strict=True):
            key, value = n.decode("latin-1").lower(), v.decode("latin-1").strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if self._parser.get_http_version() == "1.0" \
                and "keep-alive" not in headers.get("connection", "").lower():
            headers.setdefault("connection", "close")
        head = ResponseHead(status, self._reason.decode("latin-1"), headers)
        try:
            self._start_body(head)
        except BaseException as e:
            self._error = e
            raise
        if self._head_fut is not None and not self._head_fut.done():
            self._head_fut.set_result(head)

    def on_body(self, body: bytes) -> None:
        try:
            sink = self._sink
            if self._inflate is None and sink is not None and body:
                sink(body, self._now)  # the paced hot path: one call per token
            else:
                self._emit(body, self._now)
        except BaseException as e:  # the sink's own (StreamFault): the caller's error
            self._error = e
            raise

    def on_message_complete(self) -> None:
        if self._head is not None:
            self._finish()

    # -- body framing ----------------------------------------------------------------------
    def _start_body(self, head: ResponseHead) -> None:
        self._head = head
        h = head.headers
        if "chunked" in h.get("transfer-encoding", "").lower():
            self._mode = "chunked"
        elif "content-length" in h or head.status in (204, 304):
            self._mode = "length"
        else:
            self._mode = "close"
        enc = h.get("content-encoding", "").lower()
        if enc in ("gzip", "x-gzip", "deflate"):
            self._inflate = zlib.decompressobj(47 if "gzip" in enc else 15)
        elif enc not in ("", "identity"):
            raise ProtocolViolation(f"unsupported content-encoding {enc!r}", responded=True)

    def _emit(self, payload: bytes, now: float) -> None:
        inflate = self._inflate
        if inflate is not None:
            # At most _INFLATE_STEP bytes out per call, each piece checked and handed on
            # at once, so a decompression bomb is stopped before it is inflated.
            self._zipped += len(payload)
            try:
                out = inflate.decompress(payload, _INFLATE_STEP)
                while True:
                    self._unzipped += len(out)
                    if self._unzipped > max(_INFLATE_FREE,
                                            _MAX_INFLATE_RATIO * self._zipped):
                        raise ProtocolViolation(
                            f"compressed body inflates more than {_MAX_INFLATE_RATIO}× "
                            f"({self._zipped} bytes → {self._unzipped}+): a "
                            "decompression bomb", responded=True)
                    if not inflate.unconsumed_tail:
                        break
                    self._deliver(out, now)
                    out = inflate.decompress(inflate.unconsumed_tail, _INFLATE_STEP)
            except zlib.error as e:
                raise ProtocolViolation(f"undecodable compressed body ({e})",
                                        responded=True) from None
            self._deliver(out, now)
            return
        self._deliver(payload, now)

    def _deliver(self, payload: bytes, now: float) -> None:
        if not payload:
            return
        if self._sink is not None:
            self._sink(payload, now)
        else:
            self._early.append((payload, now))

    def _finish(self, extra: bool = False) -> None:
        self._active = False
        fut = self._done_fut
        if self._inflate is not None:
            inflate, self._inflate = self._inflate, None
            try:
                tail = inflate.flush()
            except zlib.error:
                tail = b""
            if tail:
                self._deliver(tail, self.last_rx)
        head = self._head
        reusable = (not extra and self._mode != "close" and head is not None
                    and "close" not in head.headers.get("connection", "").lower())
        if not reusable:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _fail_unanswered(self, message: str) -> None:
        """The connection closed with no answer: safe to re-send (stale) only if it was
        a reused keep-alive connection; on a first use the server really hung up."""
        self.fail((StaleConnection if self.uses > 1 else Disconnected)(message))

    def fail(self, exc: BaseException) -> None:
        self._active = False
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
        for fut in (self._head_fut, self._done_fut):
            if fut is not None and not fut.done():
                fut.set_exception(exc)
                # the caller may never await the other future: don't warn about it
                fut.exception()

    # -- caller side -----------------------------------------------------------------------
    def begin(self, request: bytes) -> tuple[asyncio.Future[ResponseHead], asyncio.Future[None]]:
        loop = asyncio.get_running_loop()
        self._reset()
        self.uses += 1
        self._head_fut, self._done_fut = loop.create_future(), loop.create_future()
        self._parser = httptools.HttpResponseParser(self)
        self._active = True
        self.last_rx = self._pool.clock()
        if self.closed or self.transport is None or self.transport.is_closing():
            self._fail_unanswered("connection closed before the request was sent")
        else:
            self.transport.write(request)
        return self._head_fut, self._done_fut

    @property
    def responded(self) -> bool:
        return self._head is not None

    def set_sink(self, sink: Sink) -> None:
        self._sink = sink
        early, self._early = self._early, []
        for payload, now in early:
            sink(payload, now)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Exchange:
    """One request/response on a pooled connection: await `head()`, optionally
    `set_sink`, then await `body_done()`; always `release()` (an async context manager
    does it)."""

    def __init__(self, pool: HTTP1Pool, conn: _Conn, request: bytes) -> None:
        self._pool, self._conn = pool, conn
        self._head_fut, self._done_fut = conn.begin(request)
        self._released = False

    async def head(self) -> ResponseHead:
        return await self._pool.watch(self._conn, self._head_fut)

    def set_sink(self, sink: Sink) -> None:
        self._conn.set_sink(sink)

    async def body_done(self) -> None:
        await self._pool.watch(self._conn, self._done_fut)

    async def read_body(self, limit: int) -> bytes:
        """The body (up to `limit` bytes; the connection is dropped if there is more)."""
        parts: list[bytes] = []
        got = 0

        def sink(b: bytes, _: float) -> None:
            nonlocal got
            parts.append(b)
            got += len(b)
            if got > limit:
                raise _BodyTooLong

        with contextlib.suppress(_BodyTooLong):
            self.set_sink(sink)  # may raise at once: the body can arrive with the head
            await self.body_done()
        return b"".join(parts)[:limit]

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        done = self._done_fut.done() and not self._done_fut.cancelled() \
            and self._done_fut.exception() is None
        if not done:
            self._conn.abort()  # abandoned mid-response: the connection is unusable
        self._pool.release(self._conn)

    async def __aenter__(self) -> Exchange:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class _BodyTooLong(Exception):
    pass


class HTTP1Pool:
    """Keep-alive connections to one origin, at most `max_connections` at a time."""

    def __init__(self, base_url: str, *, max_connections: int = 1024,
                 connect_timeout_s: float = 10.0, read_timeout_s: float = 600.0,
                 clock: Callable[[], float], ssl_context: ssl.SSLContext | None = None) -> None:
        parts = check_url(base_url)
        self.host = parts.hostname or ""      # (check_url refused a URL without one)
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        default = 443 if self.tls else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if self.port == default else f"{host}:{self.port}"
        self.base_path = parts.path.rstrip("/")
        self.clock = clock
        self._ssl = (ssl_context or ssl.create_default_context()) if self.tls else None
        self._connect_timeout = connect_timeout_s
        self._read_timeout = read_timeout_s
        self._idle: list[_Conn] = []
        self._slots = asyncio.Semaphore(max_connections)
        self._open: set[_Conn] = set()
        self.connections_opened = 0

    def request_bytes(self, path: str, headers: dict[str, str], body: bytes,
                      method: str = "POST") -> bytes:
        lines = [f"{method} {self.base_path}{path} HTTP/1.1", f"host: {self.host_header}",
                 f"content-length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def exchange(self, request: bytes, *, fresh: bool = False) -> Exchange:
        """Send `request` on an idle connection (a new one if `fresh` or none is idle)."""
        await self._slots.acquire()
        try:
            conn = None
            while self._idle and not fresh:
                c = self._idle.pop()
                if not c.closed and c.transport is not None and not c.transport.is_closing():
                    conn = c
                    break
            if conn is None:
                conn = await self._connect()
            return Exchange(self, conn, request)
        except BaseException:
            self._slots.release()
            raise

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, proto = await loop.create_connection(
                    lambda: _Conn(self), self.host, self.port, ssl=self._ssl,
                    server_hostname=self.host if self._ssl else None)
        except TimeoutError as e:
            raise ConnectTimeout(f"connect to {self.host}:{self.port} timed out after "
                                f"{self._connect_timeout:g} s") from e
        except (OSError, ssl.SSLError) as e:
            raise ConnectFailed(f"cannot connect to {self.host}:{self.port}: {e}") from e
        self.connections_opened += 1
        self._open.add(proto)
        return proto

    async def watch(self, conn: _Conn, fut: asyncio.Future[_T]) -> _T:
        """Await `fut`, failing with `ReadTimeout` after `read_timeout_s` without bytes.
        One timer per wait, re-armed from the last receipt (no per-read timer work)."""
        if fut.done():
            return fut.result()
        loop = asyncio.get_running_loop()
        limit = self._read_timeout
        clock = self.clock
        handle: list[asyncio.TimerHandle] = []

        def check() -> None:
            if fut.done():
                return
            idle = clock() - conn.last_rx
            if idle >= limit:
                conn.fail(ReadTimeout(f"no data for {limit:g} s", responded=conn.responded))
            else:
                handle[0] = loop.call_later(limit - idle, check)

        handle.append(loop.call_later(limit, check))
        try:
            return await fut
        finally:
            handle[0].cancel()

    def release(self, conn: _Conn) -> None:
        self._slots.release()
        if not conn.closed:
            self._idle.append(conn)
        else:
            self._open.discard(conn)

    def forget(self, conn: _Conn) -> None:
        self._open.discard(conn)

    async def aclose(self) -> None:
        for conn in list(self._open):
            if conn.transport is not None:
                conn.transport.close()
        self._idle.clear()
        self._open.clear()
        await asyncio.sleep(0)
