"""What an HTTP reply's status line and headers say: a classified error, the server's
retry-after hint, its request id; and the hint headers a request carries."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

from simulator.endpoints.base import EndpointError, Timing, classify_status


def request_id(get: Callable[[str], str | None]) -> str | None:
    """The server's id for a request: the twin's `x-endurance-request-id`, else Anthropic's
    `request-id` (for the twin's `/debug/requests/{id}`)."""
    return get("x-endurance-request-id") or get("request-id")


def hint_headers(hints: Mapping[str, str]) -> dict[str, str]:
    """`{"turn_kind": "edit"}` → `{"x-endurance-turn-kind": "edit"}`."""
    return {f"x-endurance-{k.replace('_', '-').lower()}": str(v) for k, v in hints.items()}


def status_error(status: int, body: bytes | str, get: Callable[[str], str | None],
                 timing: Timing | None = None) -> EndpointError:
    """A non-200 reply, classified from its status and (bounded) body text, with the
    server's retry-after hint."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return EndpointError(classify_status(status, text), f"HTTP {status}: {text[:200]}",
                         status=status, retry_after_s=parse_retry_after(get, time.time()),
                         timing=timing)


def parse_retry_after(get: Callable[[str], str | None], now_epoch: float) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` (seconds or HTTP date)."""
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(ra).timestamp() - now_epoch)
    except (TypeError, ValueError, IndexError):
        return None
