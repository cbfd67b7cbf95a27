"""Before a run against a URL: is anything listening there, and the URL safe to record.

Below `runs` (which re-exports both names) so the resume path can check the endpoint
without importing the run orchestration.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from simulator.errors import InputError, RunError
from simulator.redact import check_endpoint_url, redact_url

__all__ = ["preflight", "redact_url"]


def preflight(url: str, timeout_s: float) -> None:
    """Fail fast, before any results directory exists, when nothing listens at `url`."""
    try:
        check_endpoint_url(url)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RunError(f"endpoint {redact_url(url)}: unreachable ({reason}); "
                       "no results directory was created") from None
