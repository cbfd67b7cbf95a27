"""What the two official SDK paths (`anthropic`, `openai`) share: one attempt's error
classification and limits around an SDK-decoded stream.

Both SDKs are Stainless clients on httpx2 with the same exception tree
(`APIStatusError`, `APITimeoutError`, `APIConnectionError`), so one `send` serves both:
a subclass only opens the stream and feeds its decoded events to the dialect's reply
state (`_stream`). Retries are the driver's (`max_retries=0`); limits are the same
`transport.AttemptLimits` as the byte transports (except the byte count, which the SDK
does not expose).
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Literal

import httpx2

from simulator.endpoints.base import EndpointError, ErrorType, LLMRequest, LLMResponse
from simulator.endpoints.http.transport import AttemptDeadline, AttemptLimits, AttemptTimeout
from simulator.endpoints.wire.dialects import Dialect, ReplyState
from simulator.endpoints.wire.http_errors import status_error
from simulator.endpoints.wire.sse import StreamFault
from simulator.util.jsontypes import JSONObject

Backend = Literal["httpx", "aiohttp"]


def create_params(create: Callable[..., object]) -> frozenset[str]:
    """The keyword parameters an SDK's `create` method accepts."""
    return frozenset(inspect.signature(create).parameters) - {"self"}


def split_kwargs(kw: Mapping[str, object],
                 params: frozenset[str]) -> tuple[dict[str, object], dict[str, object]]:
    """(what `create` accepts, the rest for `extra_body`): SDK versions drop parameters
    (anthropic 2.x has no `temperature`) that servers still honour."""
    known = {k: v for k, v in kw.items() if k in params}
    return known, {k: v for k, v in kw.items() if k not in params}


def wire_fault(e: BaseException, sdk: ModuleType, *,
               status_seen: bool) -> tuple[ErrorType, str]:
    """The type and message of a transport fault, by what happened on the wire.

    The SDKs wrap the same wire event differently by version: anthropic <= 2.16 lets
    httpx2's error out of a failed body read, >= 2.17 wraps it in its `APIConnectionError`
    or `APITimeoutError` (the kinds it raises before any reply). So the SDK's class is not
    the record: a timeout anywhere in the cause chain is a timeout, and whether the status
    line had been seen (the stream was open) tells a cut reply (`DISCONNECT`, status 200,
    partial timing kept) from a server never reached (`CONNECTION`).
    """
    chain: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    timed_out = any(isinstance(x, (sdk.APITimeoutError, httpx2.TimeoutException, TimeoutError))
                    for x in chain)
    raw = next((x for x in chain if isinstance(x, httpx2.TransportError)), None)
    what = f"{type(raw).__name__}: {raw}" if raw is not None else f"{type(e).__name__}: {e}"
    if status_seen:
        kind = ErrorType.TIMEOUT if timed_out else ErrorType.DISCONNECT
        return kind, f"{'timed out' if timed_out else 'cut'} after HTTP 200: {what}"
    if timed_out:
        return ErrorType.TIMEOUT, f"timed out before the reply: {what}"
    return ErrorType.CONNECTION, f"cannot connect: {what}"


class SDKEndpoint:
    """Base of the SDK endpoints; subclasses set `_sdk` and implement `_stream`."""

    name = "sdk"
    simulated = False
    _sdk: ModuleType
    dialect: Dialect

    def __init__(self, base_url: str, api_key: str, *, timeout_s: float = 600.0,
                 connect_timeout_s: float = 10.0, backend: Backend = "httpx",
                 max_connections: int = 1024, http_client: httpx2.AsyncClient | None = None,
                 limits: AttemptLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        dialect = self.dialect
        self.limits = limits or AttemptLimits()
        self._clock = clock
        self._started = False
        self.timeout = httpx2.Timeout(timeout_s, connect=connect_timeout_s)
        if http_client is None:
            lim = httpx2.Limits(max_connections=max_connections,
                                max_keepalive_connections=max_connections)
            make = (self._sdk.DefaultAioHttpClient if backend == "aiohttp"
                    else self._sdk.DefaultAsyncHttpxClient)
            http_client = make(timeout=self.timeout, limits=lim)
        self.http_client = http_client
        self._desc = {"kind": self.name, "api": dialect.name, "base_url": base_url,
                      "backend": backend, "timeout_s": timeout_s,
                      "connect_timeout_s": connect_timeout_s,
                      self._sdk.__name__: self._sdk.__version__}
        self._client: Any = self._open(base_url, api_key or "none")

    def _open(self, base_url: str, api_key: str) -> object:
        """The SDK's async client on `self.http_client` (no retries, our timeout)."""
        raise NotImplementedError

    def describe(self) -> JSONObject:
        return {**self._desc, "limits": self.limits.describe()}

    async def aclose(self) -> None:
        await self._client.close()

    async def _stream(self, request: LLMRequest, state: ReplyState) -> str | None:
        """Open the stream, feed every event to `state`; the server's request id."""
        raise NotImplementedError

    def _stream_error(self, e: Exception) -> ErrorType:
        """The type of an error the SDK raised for an in-stream error event."""
        return ErrorType.STREAM_ERROR

    async def send(self, request: LLMRequest) -> LLMResponse:
        """One streamed attempt; raises `EndpointError` (never retries)."""
        clock, sdk = self._clock, self._sdk
        state = self.dialect.new_state(clock())
        self._started = False
        try:
            async with AttemptDeadline(self.limits, lambda: self._started):
                rid = await self._stream(request, state)
            return state.response(clock(), rid)
        except StreamFault as e:
            raise state.failure(e.error_type, str(e), 200, clock()) from e
        except AttemptTimeout as e:
            raise state.failure(e.error_type, str(e), 200 if self._started else None,
                                clock()) from e
        except sdk.APIStatusError as e:
            raise self._status_error(state, e) from e
        except (sdk.APIConnectionError, httpx2.TransportError) as e:
            kind, message = wire_fault(e, sdk, status_seen=self._started)
            raise state.failure(kind, message, 200 if self._started else None,
                                clock()) from e
        except sdk.APIError as e:  # openai: an error chunk inside a 200 stream
            raise state.failure(self._stream_error(e), f"error after HTTP 200: {e}", 200,
                                clock()) from e
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise state.failure(ErrorType.MALFORMED, "unparseable JSON in the stream", 200,
                                clock()) from e

    def _status_error(self, state: ReplyState, e: Any) -> EndpointError:
        """HTTP error status, or (status 200) an `error` event inside the stream."""
        clock = self._clock
        status = e.status_code
        if status == 200:
            return state.failure(self._stream_error(e),
                                 f"error event after HTTP 200: {e.message}", 200, clock())
        try:
            text = e.response.text
        except httpx2.ResponseNotRead:
            text = json.dumps(e.body) if e.body is not None else ""
        err = status_error(status, text, e.response.headers.get, state.timing(clock()))
        if err.retry_after_s is not None:
            err.retry_after_s = min(err.retry_after_s, self.limits.retry_after_max_s)
        return err
