"""Messages-API endpoint on aiohttp + the minimal SSE parser (`--client aiohttp`).

The previous default client, kept as a selectable path and as the benchmark's reference
for what the hand-written transport (`lean.py`) saves. Same contract and same records as
the SDK path (`messages_api.py`), at a fraction of its client CPU per token: one
`ClientSession` (keep-alive connections, pool sized for the concurrency), raw body
chunks split on blank lines, and only the rare events' JSON decoded on arrival (see
`simulator.endpoints.sse`). Each chunk's content deltas get one timestamp
(`time.monotonic`, the clock `asyncio`'s default loop uses).

Timeouts: `connect_timeout_s` for the TCP connect, `timeout_s` for the longest silence
between two reads (a stalled server), not for the whole reply.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import aiohttp

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


class AiohttpEndpoint:
    """`Endpoint` over aiohttp; one instance serves all sessions of a run."""

    name = "aiohttp"
    simulated = False

    def __init__(self, base_url: str, api_key: str = "", *, timeout_s: float = 600.0,
                 connect_timeout_s: float = 10.0, max_connections: int = 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._base_url = base_url
        self._headers = request_headers(api_key)
        self._timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout_s,
                                              sock_read=timeout_s)
        self._timeouts = (timeout_s, connect_timeout_s)
        self._max_connections = max_connections
        self.stale_connection_retries = 0
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            conn = aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=0,
                                        ttl_dns_cache=None, enable_cleanup_closed=False)
            self._session = aiohttp.ClientSession(
                connector=conn, timeout=self._timeout, headers=self._headers,
                auto_decompress=True, skip_auto_headers=("User-Agent",))
        return self._session

    def describe(self) -> dict[str, Any]:
        return {"kind": self.name, "base_url": self._base_url, "timeout_s": self._timeouts[0],
                "connect_timeout_s": self._timeouts[1],
                "max_connections": self._max_connections, "aiohttp": aiohttp.__version__}

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, request: LLMRequest) -> LLMResponse:
        """One streamed attempt; raises `EndpointError` (never retries a request the
        server may have seen).

        A pooled keep-alive connection that the server closed without saying so
        (llama.cpp does after requests with tools) fails before any answer; such a send
        is repeated on another connection, as HTTP clients do for stale connections
        (RFC 9112 §9.3.1), and counted in `stale_connection_retries`."""
        payload = stream_body(request)
        headers = hint_headers(request.hints) if request.hints else None
        for _ in range(_STALE_RETRIES):
            try:
                return await self._attempt(payload, headers)
            except _StaleConnection:
                self.stale_connection_retries += 1
        return await self._attempt(payload, headers, last=True)

    async def _attempt(self, payload: bytes, headers: dict[str, str] | None,
                       last: bool = False) -> LLMResponse:
        clock = self._clock
        state = StreamState(clock())
        started = False  # response headers received
        try:
            async with self._client().post(self._url, data=payload, headers=headers) as resp:
                started = True
                if resp.status != 200:
                    raise await _status_error(resp)
                feed = state.feed_bytes
                async for chunk in resp.content.iter_any():
                    feed(chunk, clock())
                state.end_of_body(clock())
                return state.response(clock(), request_id(resp.headers.get))
        except EndpointError as e:
            e.timing = state.timing(clock())
            raise
        except StreamFault as e:
            raise state.failure(e.error_type, str(e), 200, clock()) from e
        except (TimeoutError, aiohttp.ServerTimeoutError) as e:
            raise state.failure(ErrorType.TIMEOUT, f"timed out: {e!r}",
                                200 if started else None, clock()) from e
        except aiohttp.ClientConnectorError as e:
            raise state.failure(ErrorType.CONNECTION, f"cannot connect: {e}", None,
                                clock()) from e
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as e:
            if not started and not last:
                raise _StaleConnection from e
            kind = ErrorType.DISCONNECT if started else ErrorType.CONNECTION
            raise state.failure(kind, f"{type(e).__name__}: {e}", 200 if started else None,
                                clock()) from e
        except (aiohttp.ClientError, ConnectionError) as e:
            kind = ErrorType.DISCONNECT if started else ErrorType.CONNECTION
            raise state.failure(kind, f"{type(e).__name__}: {e}", 200 if started else None,
                                clock()) from e


# Sends repeated on a fresh connection when a pooled one proves stale (bounded: each
# failure drops one dead connection from the pool).
_STALE_RETRIES = 8


class _StaleConnection(Exception):
    """The pooled connection was closed by the server before our request was answered."""


async def _status_error(resp: aiohttp.ClientResponse) -> EndpointError:
    """Classify a non-200 reply from its status and (bounded) body text."""
    try:
        raw = await resp.content.read(_ERROR_BODY_LIMIT)
    except (aiohttp.ClientError, TimeoutError):
        raw = b""
    return status_error(resp.status, raw, resp.headers.get)
