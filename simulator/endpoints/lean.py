"""Lean Messages-API endpoint: a hand-written HTTP/1.1 transport + the minimal SSE parser.

Same contract and same records as the SDK path (`messages_api.py`) and the aiohttp path
(`aiohttp_client.py`), at the least client CPU per token we know how to spend: the event
loop hands each socket read to `http1._Conn.data_received`, which de-chunks it and
feeds `SSEParser` / `StreamState` right there with one clock reading, so a streamed
token costs one loop callback and no coroutine wake-up (`benchmarks/client_ceiling.py`
measures it side by side with the other paths). Timestamps are therefore taken at the
earliest point user space sees the bytes.

Timeouts: `connect_timeout_s` for the TCP (and TLS) connect, `timeout_s` for the longest
silence between two reads (a stalled server), not for the whole reply.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from simulator import __version__
from simulator.endpoints import http1
from simulator.endpoints.base import (
    EndpointError,
    ErrorType,
    LLMRequest,
    LLMResponse,
)
from simulator.endpoints.sse import (
    StreamFault,
    StreamState,
    hint_headers,
    request_headers,
    request_id,
    status_error,
    stream_body,
)

_ERROR_BODY_LIMIT = 64 * 1024  # bytes of an error page we read to classify it
# Sends repeated on a fresh connection when a pooled one proves stale (bounded: each
# failure drops one dead connection from the pool).
_STALE_RETRIES = 8


class LeanEndpoint:
    """`Endpoint` over `http1.HTTP1Pool`; one instance serves all sessions of a run."""

    name = "lean"
    simulated = False

    def __init__(self, base_url: str, api_key: str = "", *, timeout_s: float = 600.0,
                 connect_timeout_s: float = 10.0, max_connections: int = 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._base_url = base_url
        self._headers = {**request_headers(api_key), "user-agent": f"endurance/{__version__}"}
        self._timeouts = (timeout_s, connect_timeout_s)
        self._max_connections = max_connections
        self._clock = clock
        self._pool: http1.HTTP1Pool | None = None
        http1.check_url(base_url)  # fail now, not at the first send
        self.stale_connection_retries = 0

    def _get_pool(self) -> http1.HTTP1Pool:
        if self._pool is None:  # created lazily: it needs the running loop
            self._pool = http1.HTTP1Pool(
                self._base_url, max_connections=self._max_connections,
                connect_timeout_s=self._timeouts[1], read_timeout_s=self._timeouts[0],
                clock=self._clock)
        return self._pool

    def describe(self) -> dict[str, Any]:
        return {"kind": self.name, "base_url": self._base_url, "timeout_s": self._timeouts[0],
                "connect_timeout_s": self._timeouts[1],
                "max_connections": self._max_connections, "transport": "http1 (asyncio)"}

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None

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
        pool = self._get_pool()
        raw = pool.request_bytes("/v1/messages", headers, stream_body(request))
        fresh = False
        for _ in range(_STALE_RETRIES):
            try:
                return await self._attempt(pool, raw, fresh)
            except _Stale:
                self.stale_connection_retries += 1
                fresh = True
        return await self._attempt(pool, raw, True)

    async def _attempt(self, pool: http1.HTTP1Pool, raw: bytes, fresh: bool) -> LLMResponse:
        clock = self._clock
        state = StreamState(clock())
        status: int | None = None  # response head received
        try:
            async with await pool.exchange(raw, fresh=fresh) as ex:
                head = await ex.head()
                status = head.status
                if status != 200:
                    raise await _status_error(ex, head)
                ex.set_sink(state.feed_bytes)
                await ex.body_done()
                state.end_of_body(clock())
                return state.response(clock(), request_id(head.get))
        except EndpointError as e:
            e.timing = state.timing(clock())
            raise
        except StreamFault as e:
            raise state.failure(e.error_type, str(e), 200, clock()) from e
        except http1.StaleConnection as e:
            raise _Stale from e
        except http1.ConnectTimeout as e:
            raise state.failure(ErrorType.TIMEOUT, str(e), None, clock()) from e
        except http1.ConnectFailed as e:
            raise state.failure(ErrorType.CONNECTION, str(e), None, clock()) from e
        except http1.ReadTimeout as e:
            raise state.failure(ErrorType.TIMEOUT, f"timed out: {e}", status, clock()) from e
        except http1.ProtocolViolation as e:
            raise state.failure(ErrorType.MALFORMED, str(e), status, clock()) from e
        except (http1.HTTPError, ConnectionError) as e:
            kind = ErrorType.DISCONNECT if status is not None else ErrorType.CONNECTION
            raise state.failure(kind, f"{type(e).__name__}: {e}", status, clock()) from e


class _Stale(Exception):
    """The pooled connection was closed by the server before our request was answered."""


async def _status_error(ex: http1.Exchange, head: http1.ResponseHead) -> EndpointError:
    """Classify a non-200 reply from its status and (bounded) body text."""
    try:
        raw = await ex.read_body(_ERROR_BODY_LIMIT)
    except http1.HTTPError:
        raw = b""
    return status_error(head.status, raw, head.get)
