"""Server-sent events, framing only: a byte stream split into event blocks, each block
into its name and data, with the limits every dialect's stream is held to.

Pure (no I/O). The Anthropic event grammar lives in `wire.anthropic`, OpenAI's chunks in
`wire.openai_chat`; both feed their blocks through `SSEParser` and `parse_block`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from simulator.endpoints.base import ErrorType


class StreamFault(Exception):
    """The stream said or did something that ends the attempt (classified)."""

    def __init__(self, error_type: ErrorType, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


# The longest SSE event (bytes up to its blank line) a stream may send: a delta is tens
# of bytes, a whole tool call sent as one chunk some hundreds of kilobytes. Enforced as
# bytes arrive, so a stream with no line feed ends here, not at the response limit.
MAX_EVENT_BYTES = 8 * 2**20


# The most reply content (text and tool input, bytes) decoded and token-counted: 16 MiB
# is ~4M tokens, far past any max_tokens; counting more would take minutes and
# gigabytes (the 1 GB delta stream), so a larger reply is RESPONSE_TOO_LARGE.
MAX_REPLY_CONTENT_BYTES = 16 * 2**20

# json.dumps(obj, separators=(",", ":")) without building an encoder per request body
COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def check_content_size(pieces: Iterable[list[bytes] | list[str]]) -> None:
    """StreamFault (RESPONSE_TOO_LARGE) when the pieces add up past the content cap."""
    total = sum([sum(map(len, parts)) for parts in pieces])
    if total > MAX_REPLY_CONTENT_BYTES:
        raise StreamFault(ErrorType.RESPONSE_TOO_LARGE, f"reply content of {total} bytes "
                          f"(more than {MAX_REPLY_CONTENT_BYTES})")


class SSEParser:
    """Splits a byte stream into complete SSE event blocks (blank-line separated)."""

    __slots__ = ("limit", "pending")

    def __init__(self, limit: int = MAX_EVENT_BYTES) -> None:
        # Bytes received but not yet part of a complete event (read-only outside; a
        # plain attribute, not a property: the paced fast path reads it once a token).
        self.pending = b""
        self.limit = limit

    def feed(self, chunk: bytes) -> list[bytes]:
        """Complete event blocks in `chunk` (plus what was buffered); keeps the tail.
        StreamFault (MALFORMED) once the unfinished event passes `limit` bytes."""
        old = self.pending
        if old and 13 not in chunk and not old.endswith(b"\r") \
                and b"\n\n" not in old[-1:] + chunk[:1] and b"\n\n" not in chunk:
            # no event ends in this chunk: append without rescanning what was buffered
            if len(old) + len(chunk) > self.limit:
                raise StreamFault(ErrorType.MALFORMED, f"an SSE event longer than "
                                  f"{self.limit} bytes (no blank line)")
            self.pending = old + chunk
            return []
        buf = old + chunk if old else chunk
        if 13 in buf:  # b"\r" (an int is found without the buffer protocol)
            buf = _normalise_newlines(buf)
        end = buf.rfind(b"\n\n")
        if end < 0:
            if len(buf) > self.limit:
                raise StreamFault(ErrorType.MALFORMED, f"an SSE event longer than "
                                  f"{self.limit} bytes (no blank line)")
            self.pending = buf
            return []
        if len(buf) - end - 2 > self.limit:
            raise StreamFault(ErrorType.MALFORMED, f"an SSE event longer than "
                              f"{self.limit} bytes (no blank line)")
        self.pending = buf[end + 2:]
        return buf[:end].split(b"\n\n")


def _normalise_newlines(buf: bytes) -> bytes:
    """CRLF / CR → LF, leaving a trailing CR alone (its LF may be in the next chunk)."""
    tail = b"\r" if buf.endswith(b"\r") else b""
    body = buf[:-1] if tail else buf
    return body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail


def parse_block(block: bytes) -> tuple[str, bytes]:
    """(event name, data) of one SSE event block, per the WHATWG field rules."""
    if block.startswith(b"event: "):
        # The common block, `event: NAME` then one `data: ...` line: same result as
        # the general loop below without splitting it into lines.
        nl = block.find(b"\n")
        if nl > 0 and block.startswith(b"data: ", nl + 1) and block.find(b"\n", nl + 1) < 0:
            return block[7:nl].decode("utf-8", "replace"), block[nl + 7:]
    name = ""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[0] == 58:  # b":" comment line
            continue
        field, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"event":
            name = value.decode("utf-8", "replace")
        elif field == b"data":
            data.append(value)
    return name, b"\n".join(data)


# The C scanner json.loads ends in (its default decoder's settings), called directly for
# the bytes of every rare event and every reply's joined deltas.
_SCAN: Callable[[str, int], tuple[Any, int]] = (
    json.JSONDecoder().scan_once)  # type: ignore[attr-defined]  # not in typeshed
_JSON_WS = " \t\n\r"


def loads_event(data: bytes | str, what: str) -> Any:
    try:
        if isinstance(data, bytes) and data[:1] in (b"{", b'"') and data[1:2] != b"\x00":
            # json.loads(data) for bytes it detects as UTF-8 (an object or a string:
            # "{" or '"' and no NUL after it) without its Python layers: the same
            # decode, the same scanner, "Extra data" past trailing JSON whitespace.
            text = data.decode("utf-8", "surrogatepass")
            obj, end = _SCAN(text, 0)
            if end != len(text) and text[end:].strip(_JSON_WS):
                raise ValueError("extra data after the JSON value")
            return obj
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, StopIteration) as e:
        raise StreamFault(ErrorType.MALFORMED, f"unparseable JSON in {what} event") from e
