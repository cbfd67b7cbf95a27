"""Start a run from a cold prefix cache: `POST /reset_prefix_cache` on the server.

A server keeps its prefix cache across runs, so a second run on the same server reads
its prefix from the first run's blocks (99.9% from cache, above the client's own
"perfect prefix cache" bound) and back-to-back comparisons are skewed. vLLM serves this
endpoint when started with `VLLM_SERVER_DEV_MODE=1` (it answers `{"success": bool}`,
false while requests hold blocks); the HTTP twin always serves it.
"""

from __future__ import annotations

import asyncio
import json
import time

from simulator.endpoints.http import http1
from simulator.errors import InputError, RunError
from simulator.util.redact import redact_url

PATH = "/reset_prefix_cache"
MAX_BODY_BYTES = 64 * 1024     # `{"success": true}`, or vLLM's empty 200
TIMEOUT_S = 5.0                # the whole exchange: a reset answers in milliseconds


def reset_prefix_cache(base_url: str, timeout_s: float = TIMEOUT_S) -> str:
    """POST the reset; returns a line saying it was done. A server without the endpoint
    is an InputError (it cannot do what the flag asks); a refused reset, and a reply
    that is not one (an HTML page, a body over 64 KiB, garbage for a status line, no
    complete answer within `timeout_s` for the whole exchange), a RunError — a lying
    server must not be reported as reset."""
    url = base_url.rstrip("/") + PATH
    shown = redact_url(url)
    where = f"--reset-prefix-cache: {shown}"
    try:
        status, kind, body = asyncio.run(_post(base_url, timeout_s))
    except TimeoutError:
        raise RunError(f"{where}: no complete answer within {timeout_s:g} s") from None
    except (http1.ConnectFailed, OSError) as exc:
        raise RunError(f"{where}: unreachable ({_one_line(str(exc))})") from None
    except http1.HTTPError as exc:
        raise RunError(f"{where}: not an HTTP reply ({_one_line(str(exc))})") from None
    if status in (404, 405):
        raise InputError(f"{where} answered HTTP {status}: the server has no prefix-cache "
                         "reset (vLLM serves it with VLLM_SERVER_DEV_MODE=1)")
    if not 200 <= status < 300:
        raise RunError(f"{where} answered HTTP {status}")
    if len(body) > MAX_BODY_BYTES:
        raise RunError(f"{where}: a reply body over {MAX_BODY_BYTES // 1024} KiB is not a "
                       "prefix-cache reset's answer")
    if body.strip():                   # vLLM answers an empty 200; the twin `{"success": …}`
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            raise RunError(f"{where} answered HTTP {status} {kind or 'with no content type'}"
                           f", not a prefix-cache reset's JSON ({_snippet(body)})")
        if data.get("success", True) is False:
            raise RunError(f"{where} refused the reset (requests in flight hold cache "
                           "blocks); retry when the server is idle")
    return f"prefix cache reset: {shown}"


async def _post(base_url: str, timeout_s: float) -> tuple[int, str, bytes]:
    """(status, content type, body up to MAX_BODY_BYTES + 1), the whole exchange within
    `timeout_s` (TimeoutError): a trickling server cannot stretch it read by read."""
    pool = http1.HTTP1Pool(base_url, max_connections=1, connect_timeout_s=timeout_s,
                           read_timeout_s=timeout_s, clock=time.monotonic)
    try:
        async with asyncio.timeout(timeout_s):
            request = pool.request_bytes(PATH, {"accept": "application/json"}, b"", "POST")
            async with await pool.exchange(request, fresh=True) as ex:
                head = await ex.head()
                body = await ex.read_body(MAX_BODY_BYTES + 1)
                return head.status, (head.get("content-type") or "").split(";")[0], body
    finally:
        await pool.aclose()


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]


def _snippet(body: bytes) -> str:
    return _one_line(body[:60].decode("utf-8", errors="replace"))
