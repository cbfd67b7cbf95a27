"""Start a run from a cold prefix cache: `POST /reset_prefix_cache` on the server.

A server keeps its prefix cache across runs, so a second run on the same server reads
its prefix from the first run's blocks (99.9% from cache, above the client's own
"perfect prefix cache" bound) and back-to-back comparisons are skewed. vLLM serves this
endpoint when started with `VLLM_SERVER_DEV_MODE=1` (it answers `{"success": bool}`,
false while requests hold blocks); the HTTP twin always serves it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from simulator.errors import InputError, RunError
from simulator.util.redact import redact_url

PATH = "/reset_prefix_cache"


def reset_prefix_cache(base_url: str, timeout_s: float = 30.0) -> str:
    """POST the reset; returns a line saying it was done. A server without the endpoint
    is an InputError (it cannot do what the flag asks); a refused reset a RunError."""
    url = base_url.rstrip("/") + PATH
    req = urllib.request.Request(url, data=b"", method="POST")
    shown = redact_url(url)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            body = r.read(65536)
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 405):
            raise InputError(f"--reset-prefix-cache: {shown} answered HTTP {exc.code}: the "
                             "server has no prefix-cache reset (vLLM serves it with "
                             "VLLM_SERVER_DEV_MODE=1)") from None
        raise RunError(f"--reset-prefix-cache: {shown} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise RunError(f"--reset-prefix-cache: {shown}: {getattr(exc, 'reason', exc)}") from None
    try:
        success = json.loads(body or b"{}").get("success", True)
    except (ValueError, AttributeError):
        success = True          # a 2xx without JSON: the server says nothing more
    if success is False:
        raise RunError(f"--reset-prefix-cache: {shown} refused the reset (requests in "
                       "flight hold cache blocks); retry when the server is idle")
    return f"prefix cache reset: {shown}"
