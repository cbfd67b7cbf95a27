"""aiohttp transport under `StreamingClient` (`--client aiohttp`).

The previous default client, kept as a selectable path and as the benchmark's reference
for what the hand-written transport (`lean.py`) saves: one `ClientSession` (keep-alive
connections, pool sized for the concurrency), each raw body chunk handed to the
dialect's reply state with one timestamp (`time.monotonic`, the clock `asyncio`'s
default loop uses).

Timeouts: `connect_timeout_s` for the TCP connect, `timeout_s` for the longest silence
between two reads (a stalled server), not for the whole reply.
"""

from __future__ import annotations

import aiohttp

from simulator.endpoints.base import ErrorType
from simulator.endpoints.http import transport as tp
from simulator.endpoints.wire.http_errors import status_error
from simulator.util.jsontypes import JSONObject


class AiohttpTransport:
    """`Transport` over one aiohttp `ClientSession`."""

    name = "aiohttp"

    def __init__(self, cfg: tp.TransportSettings) -> None:
        self._cfg = cfg
        self._base = cfg.base_url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=None, connect=cfg.connect_timeout_s,
                                              sock_read=cfg.timeout_s)
        self._clock = cfg.clock
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            conn = aiohttp.TCPConnector(limit=self._cfg.max_connections, limit_per_host=0,
                                        ttl_dns_cache=None, enable_cleanup_closed=False)
            self._session = aiohttp.ClientSession(
                connector=conn, timeout=self._timeout, auto_decompress=True,
                skip_auto_headers=("User-Agent",))
        return self._session

    def describe(self) -> JSONObject:
        return {**self._cfg.describe(), "aiohttp": aiohttp.__version__}

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post(self, path: str, headers: dict[str, str], body: bytes, sink: tp.Sink,
                   *, fresh: bool) -> None:
        clock = self._clock
        started = False  # response headers received
        try:
            async with self._client().post(self._base + path, data=body,
                                           headers=headers) as resp:
                started = True
                sink.head(resp.status, resp.headers.get, clock())
                if resp.status != 200:
                    try:
                        err = await resp.content.read(tp.ERROR_BODY_LIMIT)
                    except (aiohttp.ClientError, TimeoutError):
                        err = b""
                    raise status_error(resp.status, err, resp.headers.get)
                feed = sink.feed
                async for chunk in resp.content.iter_any():
                    feed(chunk, clock())
                sink.end(clock())
        except (TimeoutError, aiohttp.ServerTimeoutError) as e:
            raise tp.TransportFailure(ErrorType.TIMEOUT, f"timed out: {e!r}",
                                   200 if started else None) from e
        except aiohttp.ClientConnectorError as e:
            raise tp.TransportFailure(ErrorType.CONNECTION, f"cannot connect: {e}", None) from e
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as e:
            if not started:
                raise tp.StaleConnection from e
            raise tp.TransportFailure(ErrorType.DISCONNECT, f"{type(e).__name__}: {e}",
                                   200) from e
        except aiohttp.ClientResponseError as e:
            # not an HTTP response at all (a garbage status line, a broken head)
            raise tp.TransportFailure(ErrorType.MALFORMED, "malformed HTTP response: "
                                      + " ".join(str(e.message).split())[:200],
                                      200 if started else None) from e
        except aiohttp.ClientPayloadError as e:
            # a body that cannot be de-chunked or decompressed: the server's bytes are bad
            bad = "decode" in str(e).lower() or "compress" in str(e).lower()
            raise tp.TransportFailure(ErrorType.MALFORMED if bad else ErrorType.DISCONNECT,
                                      f"{type(e).__name__}: {e}", 200) from e
        except (aiohttp.ClientError, ConnectionError) as e:
            kind = ErrorType.DISCONNECT if started else ErrorType.CONNECTION
            raise tp.TransportFailure(kind, f"{type(e).__name__}: {e}",
                                   200 if started else None) from e


class AiohttpEndpoint(tp.TransportEndpoint):
    """`Endpoint`: a dialect (Anthropic Messages by default) over `AiohttpTransport`."""

    transport_class = AiohttpTransport
