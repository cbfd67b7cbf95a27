"""The seam between a wire protocol and an HTTP client: `Transport`, and the one
`StreamingClient` that speaks any `Dialect` over any `Transport`.

A transport (lean HTTP/1.1, aiohttp, …) only moves bytes: it POSTs a body, hands the
response head and every body chunk (with one clock reading) to a `Sink`, reads a bounded
error body for a non-200 status, and maps its own exceptions to `TransportFailure`
(transport-level `ErrorType`s) or `StaleConnection`. Everything else — request
building, the SSE event grammar, usage, per-token timestamps, error classification,
stale-connection re-sends and the per-attempt limits — lives here and in the dialects
(`simulator.endpoints.wire.dialects`), once. A new transport is the ~100 lines of
`lean.LeanTransport`.

Per-attempt limits (`AttemptLimits`, seconds and bytes): time to the response head
(`first_byte_s`, ends with FIRST_BYTE_TIMEOUT), silence between two reads (the
transport's read timeout, `idle_s`, TIMEOUT), the whole attempt (`total_s`,
STREAM_TIMEOUT) and the response size (`max_response_bytes`, RESPONSE_TOO_LARGE); a
server's retry-after hint is capped at `retry_after_max_s`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

from simulator import __version__
from simulator.endpoints.base import EndpointError, ErrorType, LLMRequest, LLMResponse
from simulator.endpoints.wire.dialects import ANTHROPIC, Dialect, ReplyState
from simulator.endpoints.wire.http_errors import hint_headers, request_id
from simulator.endpoints.wire.sse import StreamFault
from simulator.util.jsontypes import JSONObject

ERROR_BODY_LIMIT = 64 * 1024  # bytes of an error page read to classify it
# A stream that reached its end (message_stop / [DONE]) but whose body does not end —
# a connection the server never closes, an HTTP/1.0 reply with no length, a
# content-length larger than what was sent — is a complete reply after this grace.
COMPLETE_GRACE_S = 0.5
# Sends repeated on a fresh connection when a pooled one proves stale (bounded: each
# failure drops one dead connection from the pool).
STALE_RETRIES = 8


@dataclass(frozen=True, slots=True)
class AttemptLimits:
    """Bounds of one attempt (seconds, bytes); `None` = unbounded."""

    first_byte_s: float | None = 600.0
    idle_s: float = 600.0
    total_s: float | None = 3600.0
    max_response_bytes: int | None = 256 * 1024 * 1024
    retry_after_max_s: float = 300.0

    def describe(self) -> JSONObject:
        return {"first_byte_s": self.first_byte_s, "idle_s": self.idle_s,
                "total_s": self.total_s, "max_response_bytes": self.max_response_bytes,
                "retry_after_max_s": self.retry_after_max_s}


@dataclass(frozen=True, slots=True)
class TransportSettings:
    """What every transport is built from (seconds; `timeout_s` = longest silence
    between two reads, `connect_timeout_s` = TCP/TLS connect)."""

    base_url: str
    timeout_s: float = 600.0
    connect_timeout_s: float = 10.0
    max_connections: int = 1024
    clock: Callable[[], float] = time.monotonic

    def describe(self) -> JSONObject:
        return {"base_url": self.base_url, "timeout_s": self.timeout_s,
                "connect_timeout_s": self.connect_timeout_s,
                "max_connections": self.max_connections}


class TransportFailure(Exception):
    """A transport-level failure, already classified (timeout, connection, disconnect,
    malformed HTTP). `status` is 200 once a response head was received, else None."""

    def __init__(self, error_type: ErrorType, message: str, status: int | None) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.status = status


class StaleConnection(Exception):
    """A pooled keep-alive connection was closed by the server before it answered: the
    request may be re-sent on a fresh connection (RFC 9112 §9.3.1)."""


class Sink(Protocol):
    """What a transport feeds. `head` returns True when the body is a stream to `feed`."""

    def head(self, status: int, get: Callable[[str], str | None], now: float) -> None: ...

    def feed(self, chunk: bytes, now: float) -> None: ...

    def end(self, now: float) -> None: ...


class Transport(Protocol):
    """Moves one streamed POST. Raises `EndpointError` (non-200, via `status_error`),
    `TransportFailure`, `StaleConnection`, or whatever the sink raises."""

    name: str

    def __init__(self, cfg: TransportSettings) -> None: ...

    async def post(self, path: str, headers: dict[str, str], body: bytes, sink: Sink,
                   *, fresh: bool) -> None: ...

    async def aclose(self) -> None: ...

    def describe(self) -> JSONObject: ...


class _AttemptSink:
    """Wraps a dialect's reply state: the head's content type, the byte limit and the
    moment the first byte arrived."""

    __slots__ = ("bytes", "complete_at", "deadline", "get", "head_at", "limit", "state",
                 "status")

    def __init__(self, state: ReplyState, limit: int | None) -> None:
        self.state = state
        self.limit = limit
        self.deadline: AttemptDeadline | None = None
        self.complete_at: float | None = None   # the stream's own end was received
        self.bytes = 0
        self.status: int | None = None
        self.head_at: float | None = None
        self.get: Callable[[str], str | None] = lambda _: None

    def head(self, status: int, get: Callable[[str], str | None], now: float) -> None:
        self.status, self.get, self.head_at = status, get, now
        ctype = (get("content-type") or "").lower()
        if status == 200 and ctype and "event-stream" not in ctype:
            raise StreamFault(ErrorType.MALFORMED,
                              f"HTTP 200 with content-type {ctype!r}, not an event stream")

    def feed(self, chunk: bytes, now: float) -> None:
        if self.limit is not None:
            self.bytes += len(chunk)
            if self.bytes > self.limit:
                raise StreamFault(ErrorType.RESPONSE_TOO_LARGE,
                                  f"response exceeded {self.limit} bytes")
        state = self.state
        state.feed_bytes(chunk, now)
        if state.stopped and self.complete_at is None:
            self.complete_at = now
            if self.deadline is not None:
                self.deadline.complete()

    def end(self, now: float) -> None:
        self.state.end_of_body(now)


class StreamingClient:
    """`Endpoint` = one `Dialect` (what to say) over one `Transport` (how to move it)."""

    simulated = False

    def __init__(self, transport: Transport, dialect: Dialect, api_key: str = "", *,
                 limits: AttemptLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.transport = transport
        self.dialect = dialect
        self.name = transport.name
        self.limits = limits or AttemptLimits()
        self._headers = {**dialect.headers(api_key), "user-agent": f"endurance/{__version__}"}
        self._clock = clock
        self.stale_connection_retries = 0

    def describe(self) -> JSONObject:
        return {"kind": self.name, "api": self.dialect.name, **self.transport.describe(),
                "limits": self.limits.describe()}

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def send(self, request: LLMRequest) -> LLMResponse:
        """One streamed attempt; raises `EndpointError` (never retries a request the
        server may have seen).

        A pooled keep-alive connection that the server closed without saying so
        (llama.cpp does after requests with tools) fails before any answer; such a send
        is repeated on a fresh connection, as HTTP clients do for stale connections
        (RFC 9112 §9.3.1), and counted in `stale_connection_retries`."""
        headers = self._headers
        if request.hints:
            headers = {**headers, **hint_headers(request.hints)}
        body = self.dialect.body(request)
        for i in range(STALE_RETRIES):
            try:
                return await self._attempt(headers, body, fresh=i > 0)
            except StaleConnection:
                self.stale_connection_retries += 1
        try:
            return await self._attempt(headers, body, fresh=True)
        except StaleConnection as e:
            raise EndpointError(ErrorType.CONNECTION, "every connection was stale") from e

    async def _attempt(self, headers: dict[str, str], body: bytes, *,
                       fresh: bool) -> LLMResponse:
        clock, limits = self._clock, self.limits
        state = self.dialect.new_state(clock())
        sink = _AttemptSink(state, limits.max_response_bytes)
        try:
            sink.deadline = AttemptDeadline(limits, lambda: sink.head_at is not None)
            try:
                async with sink.deadline:
                    await self.transport.post(self.dialect.path, headers, body, sink,
                                              fresh=fresh)
            except StreamCompleted:
                assert sink.complete_at is not None
                return state.response(sink.complete_at, request_id(sink.get))
            return state.response(clock(), request_id(sink.get))
        except EndpointError as e:
            e.timing = state.timing(clock())
            if e.retry_after_s is not None:
                e.retry_after_s = min(e.retry_after_s, limits.retry_after_max_s)
            raise
        except StreamFault as e:
            raise state.failure(e.error_type, str(e), 200, clock()) from e
        except TransportFailure as e:
            raise state.failure(e.error_type, str(e), e.status, clock()) from e
        except AttemptTimeout as e:
            raise state.failure(e.error_type, str(e), sink.status, clock()) from e


class TransportEndpoint(StreamingClient):
    """A `StreamingClient` that builds its own transport (`transport_class`) from the
    usual endpoint arguments: `LeanEndpoint`, `AiohttpEndpoint`."""

    transport_class: ClassVar[type[Transport]]

    def __init__(self, base_url: str, api_key: str = "", *, timeout_s: float = 600.0,
                 connect_timeout_s: float = 10.0, max_connections: int = 1024,
                 dialect: Dialect = ANTHROPIC, limits: AttemptLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        transport = type(self).transport_class(TransportSettings(
            base_url, timeout_s, connect_timeout_s, max_connections, clock))
        super().__init__(transport, dialect, api_key, clock=clock,
                         limits=dataclasses.replace(limits or AttemptLimits(),
                                                    idle_s=timeout_s))


class StreamCompleted(Exception):
    """The stream's end arrived and the body did not end within COMPLETE_GRACE_S."""


class AttemptTimeout(Exception):
    def __init__(self, error_type: ErrorType, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


class AttemptDeadline:
    """`async with`: cancels the attempt at `first_byte_s` until `started()` says the
    response head came, then at `total_s` from the start; raises `AttemptTimeout`.
    One timer, re-armed at most once per check (no per-read work)."""

    def __init__(self, limits: AttemptLimits, started: Callable[[], bool]) -> None:
        self._limits, self._started = limits, started
        self._task: asyncio.Task[object] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._fired: ErrorType | None = None
        self._completed = False
        self._grace: asyncio.TimerHandle | None = None
        self._t0 = 0.0

    def complete(self) -> None:
        """The reply's last event came: end the attempt after COMPLETE_GRACE_S unless
        the body ends first (one timer, only once per attempt)."""
        if self._task is not None and self._grace is None:
            self._grace = asyncio.get_running_loop().call_later(COMPLETE_GRACE_S,
                                                                 self._end_completed)

    def _end_completed(self) -> None:
        if self._fired is None and self._task is not None:
            self._completed = True
            self._task.cancel()

    async def __aenter__(self) -> AttemptDeadline:
        lim = self._limits
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        if lim.first_byte_s is None and lim.total_s is None:
            return self
        self._t0 = loop.time()
        first = lim.first_byte_s if lim.first_byte_s is not None else lim.total_s
        assert first is not None
        if lim.total_s is not None:
            first = min(first, lim.total_s)
        self._timer = loop.call_later(first, self._check)
        return self

    def _check(self) -> None:
        if self._completed:
            return
        lim = self._limits
        loop = asyncio.get_running_loop()
        elapsed = loop.time() - self._t0
        if lim.total_s is not None and elapsed >= lim.total_s:
            self._fired = ErrorType.STREAM_TIMEOUT
        elif not self._started() and lim.first_byte_s is not None:
            self._fired = ErrorType.FIRST_BYTE_TIMEOUT
        elif lim.total_s is not None:
            self._timer = loop.call_later(lim.total_s - elapsed, self._check)
            return
        else:
            return
        assert self._task is not None
        self._task.cancel()

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._grace is not None:
            self._grace.cancel()
        if self._completed and et is asyncio.CancelledError:
            assert self._task is not None
            if self._task.uncancel() == 0:
                raise StreamCompleted from e
        if self._fired is not None and et is asyncio.CancelledError:
            assert self._task is not None
            if self._task.uncancel() == 0:
                lim = self._limits
                if self._fired is ErrorType.STREAM_TIMEOUT:
                    msg = f"attempt exceeded total_s={lim.total_s:g} s"
                else:
                    msg = f"no response head within first_byte_s={lim.first_byte_s:g} s"
                raise AttemptTimeout(self._fired, msg) from e
