"""Lean transport: a hand-written HTTP/1.1 client (`http1`) under `StreamingClient`.

At the least client CPU per token we know how to spend: the event loop hands each
socket read to `http1._Conn.data_received`, which de-chunks it and feeds the dialect's
reply state right there with one clock reading, so a streamed token costs one loop
callback and no coroutine wake-up (`benchmarks/client_ceiling.py` measures it side by
side with the other paths). Timestamps are therefore taken at the earliest point user
space sees the bytes.

Timeouts: `connect_timeout_s` for the TCP (and TLS) connect, `timeout_s` for the longest
silence between two reads (a stalled server), not for the whole reply (see
`transport.AttemptLimits` for that).
"""

from __future__ import annotations

from simulator.endpoints.base import ErrorType
from simulator.endpoints.http import http1
from simulator.endpoints.http import transport as tp
from simulator.endpoints.wire.http_errors import status_error
from simulator.util.jsontypes import JSONObject


class LeanTransport:
    """`Transport` over `http1.HTTP1Pool`; one instance serves all sessions of a run."""

    name = "lean"

    def __init__(self, cfg: tp.TransportSettings) -> None:
        http1.check_url(cfg.base_url)  # fail now, not at the first send
        self._cfg = cfg
        self._clock = cfg.clock
        self._pool: http1.HTTP1Pool | None = None

    def _get_pool(self) -> http1.HTTP1Pool:
        if self._pool is None:  # created lazily: it needs the running loop
            cfg = self._cfg
            self._pool = http1.HTTP1Pool(
                cfg.base_url, max_connections=cfg.max_connections,
                connect_timeout_s=cfg.connect_timeout_s, read_timeout_s=cfg.timeout_s,
                clock=cfg.clock)
        return self._pool

    def describe(self) -> JSONObject:
        return {**self._cfg.describe(), "transport": "http1 (asyncio)"}

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None

    async def post(self, path: str, headers: dict[str, str], body: bytes, sink: tp.Sink,
                   *, fresh: bool) -> None:
        pool = self._get_pool()
        raw = pool.request_bytes(path, headers, body)
        clock = self._clock
        status: int | None = None  # response head received
        try:
            async with await pool.exchange(raw, fresh=fresh) as ex:
                head = await ex.head()
                status = head.status
                sink.head(status, head.get, clock())
                if status != 200:
                    try:
                        err = await ex.read_body(tp.ERROR_BODY_LIMIT)
                    except http1.HTTPError:
                        err = b""
                    raise status_error(status, err, head.get)
                ex.set_sink(sink.feed)
                await ex.body_done()
                sink.end(clock())
        except http1.StaleConnection as e:
            raise tp.StaleConnection from e
        except http1.ConnectTimeout as e:
            raise tp.TransportFailure(ErrorType.TIMEOUT, str(e), None) from e
        except http1.ConnectFailed as e:
            raise tp.TransportFailure(ErrorType.CONNECTION, str(e), None) from e
        except http1.ReadTimeout as e:
            raise tp.TransportFailure(ErrorType.TIMEOUT, f"timed out: {e}", status) from e
        except http1.ProtocolViolation as e:
            raise tp.TransportFailure(ErrorType.MALFORMED, str(e), status) from e
        except (http1.HTTPError, ConnectionError) as e:
            kind = ErrorType.DISCONNECT if status is not None else ErrorType.CONNECTION
            raise tp.TransportFailure(kind, f"{type(e).__name__}: {e}", status) from e


class LeanEndpoint(tp.TransportEndpoint):
    """`Endpoint`: a dialect (Anthropic Messages by default) over `LeanTransport`."""

    transport_class = LeanTransport
