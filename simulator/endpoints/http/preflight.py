"""Before a run against a URL: is anything listening there, what its `/v1/models` says,
and the URL safe to record.

The probe goes through the project's own HTTP client (`http1`) under the run's limits
(issue 29): the connect timeout, `first_byte_s` to the response head, `idle_s` between
reads, `total_s` for the whole probe and MODELS_BODY_LIMIT bytes — the head within
`preflight_s` (default 30 s, issue 38) and the whole probe within twice that: a listing
needs seconds, not the ten minutes and the hour an attempt's defaults allow a long
prompt, so a server that never answers is reported within a minute. A server that
connects but never answers, trickles bytes forever or sends garbage for a status line
ends the run before any results directory exists, in one line; one that answers with
an error status or no JSON simply lists no models (not every server has the route).

Below `runs` (which re-exports both names) so the resume path can check the endpoint
without importing the run orchestration.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Protocol

from simulator.endpoints.http import http1
from simulator.errors import InputError, RunError
from simulator.util.jsontypes import JSONObject
from simulator.util.redact import check_endpoint_url, redact_url

__all__ = ["models", "preflight", "redact_url"]

MODELS_BODY_LIMIT = 4 * 2**20     # bytes of a /v1/models listing (vLLM's is ~1 KB)


class ProbeLimits(Protocol):
    """What the probe reads of the scenario's `timeouts` (seconds; None = unbounded)."""

    @property
    def first_byte_s(self) -> float | None: ...

    @property
    def idle_s(self) -> float | None: ...

    @property
    def total_s(self) -> float | None: ...

    @property
    def preflight_s(self) -> float: ...


PREFLIGHT_S = 30.0       # the scenario's `timeouts.preflight_s` default


@dataclass(frozen=True)
class _Defaults:
    first_byte_s: float | None = 600.0
    idle_s: float | None = None
    total_s: float | None = 3600.0
    preflight_s: float = PREFLIGHT_S


@dataclass(frozen=True)
class _Bound:
    """The probe's effective limits: the attempt's, capped at `preflight_s` for the
    response head and twice that for the whole reply, with the name the refusal line
    gives each."""

    first_byte_s: float
    first_byte_name: str
    idle_s: float | None
    total_s: float
    total_name: str

    @classmethod
    def of(cls, lim: ProbeLimits) -> _Bound:
        cap = lim.preflight_s
        fb, total = lim.first_byte_s, lim.total_s
        fb_named = (fb, f"first_byte_s={fb:g} s") if fb is not None and fb <= cap \
            else (cap, f"{cap:g} s (timeouts.preflight_s)")
        total_named = (total, f"total_s={total:g} s") \
            if total is not None and total <= 2 * cap \
            else (2 * cap, f"{2 * cap:g} s (2 × timeouts.preflight_s)")
        return cls(fb_named[0], fb_named[1], lim.idle_s, total_named[0], total_named[1])


# The last listing fetched per base URL: `models()` (twin detection, the context
# window) reuses what the pre-flight read instead of asking again.
_LISTED: dict[str, list[JSONObject]] = {}


def preflight(url: str, timeout_s: float, limits: ProbeLimits | None = None) -> None:
    """Fail fast, before any results directory exists, when nothing answers at `url`:
    RunError (one line) for no connection, no response head, a stalled or endless
    reply and a reply that is not HTTP; `timeout_s` bounds the connect."""
    try:
        check_endpoint_url(url)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    _LISTED.pop(url, None)
    _LISTED[url] = _fetch(url, timeout_s, limits or _Defaults())


def models(url: str, timeout_s: float) -> list[JSONObject]:
    """The entries of the server's `/v1/models` (empty when it has none or no answer),
    from the pre-flight when it ran, else fetched now (any failure: empty)."""
    if url in _LISTED:
        return _LISTED[url]
    try:
        return _fetch(url, timeout_s, _Defaults(first_byte_s=timeout_s, total_s=timeout_s,
                                                preflight_s=max(timeout_s, PREFLIGHT_S)))
    except (RunError, InputError):
        return []


def _fetch(url: str, connect_s: float, limits: ProbeLimits) -> list[JSONObject]:
    where = f"endpoint {redact_url(url)}"
    tail = "; no results directory was created"
    lim = _Bound.of(limits)
    try:
        status, body = asyncio.run(_get(url, "/v1/models", connect_s, lim))
    except http1.ConnectTimeout:
        raise RunError(f"{where}: unreachable (connect timed out after {connect_s:g} s)"
                       f"{tail}") from None
    except (http1.ConnectFailed, OSError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise RunError(f"{where}: unreachable ({_one_line(reason)}){tail}") from None
    except _Timeout as exc:
        raise RunError(f"{where}: GET /v1/models {exc}{tail}") from None
    except _TooLarge:
        raise RunError(f"{where}: GET /v1/models sent more than {MODELS_BODY_LIMIT} "
                       f"bytes{tail}") from None
    except http1.ReadTimeout:
        raise RunError(f"{where}: GET /v1/models went silent for longer than "
                       f"idle_s={_idle(lim, connect_s):g} s{tail}") from None
    except http1.HTTPError as exc:
        raise RunError(f"{where}: GET /v1/models: not an HTTP reply "
                       f"({_one_line(str(exc))}){tail}") from None
    if status != 200:
        return []
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return []
    entries = data.get("data") if isinstance(data, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


class _Timeout(Exception):
    pass


class _TooLarge(Exception):
    pass


def _idle(lim: _Bound, connect_s: float) -> float:
    return lim.idle_s if lim.idle_s is not None else max(connect_s, 600.0)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]


async def _get(url: str, path: str, connect_s: float, lim: _Bound) -> tuple[int, bytes]:
    """GET `path`: (status, body) under the limits; _Timeout / _TooLarge / http1 errors."""
    pool = http1.HTTP1Pool(url, max_connections=1, connect_timeout_s=connect_s,
                           read_timeout_s=_idle(lim, connect_s), clock=time.monotonic)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    try:
        async with asyncio.timeout(lim.total_s) as total:
            request = pool.request_bytes(path, {"accept": "application/json"}, b"", "GET")
            async with await pool.exchange(request, fresh=True) as ex:
                try:
                    async with asyncio.timeout(lim.first_byte_s):
                        head = await ex.head()
                except TimeoutError:
                    if total.expired():
                        raise
                    raise _Timeout(f"sent no response head within {lim.first_byte_name}") \
                        from None
                body = await ex.read_body(MODELS_BODY_LIMIT + 1)
                if len(body) > MODELS_BODY_LIMIT:
                    raise _TooLarge
                return head.status, body
    except TimeoutError:
        raise _Timeout(f"did not finish within {lim.total_name} "
                       f"({loop.time() - t0:.1f} s)") from None
    finally:
        await pool.aclose()
