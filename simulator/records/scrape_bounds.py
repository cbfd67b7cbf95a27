"""The bounds of one /metrics scrape (issue 49): a scrape is a side channel and its
target may lie — a 1 GB body, a 64 MB line, bytes that are not UTF-8. `checked_text`
refuses each before the Prometheus parser (pure Python, on the run's event loop) sees
it; `records/prometheus.py` reads the body up to `MAX_BODY_BYTES` only. Pure."""

from __future__ import annotations

# a scrape's bounds: a vLLM /metrics is ~100 KB, a DCGM exporter's for 8 GPUs less; a
# 2 MiB body parses in ~0.6 s on the run's loop, a longer one would stall the sessions
MAX_BODY_BYTES = 2 << 20
MAX_LINE_CHARS = 64 << 10


class ScrapeRefused(ValueError):
    """A scrape body refused before it is parsed: too big, a line too long, not UTF-8."""


def checked_text(body: str | bytes) -> str:
    """The scrape body as text, or ScrapeRefused (see the module docstring)."""
    size = len(body)
    if size > MAX_BODY_BYTES:
        raise ScrapeRefused(f"body over {MAX_BODY_BYTES >> 20} MiB")
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScrapeRefused(f"not UTF-8 text (byte {exc.start:,})") from None
    longest = max(map(len, body.split("\n")), default=0)
    if longest > MAX_LINE_CHARS:
        raise ScrapeRefused(f"a line of {longest:,} characters (limit {MAX_LINE_CHARS:,})")
    return body
