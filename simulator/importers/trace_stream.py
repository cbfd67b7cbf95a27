"""Stream one JSON object's big array without loading the file (no ijson needed).

A cc-traces file is one object whose `requests` array holds every request with its
full `hash_ids` list: the biggest public ones (1,000+ requests, 900K-token contexts,
64-token blocks) hold ~14M ids, ~500 MB as Python ints. `iter_object` walks the top
level of the object and yields `(key, value)` for scalar and small members and
`(key, ITEMS)` followed by one `(key, item)` per element for the streamed key, each
element decoded alone by the stdlib's `raw_decode` from a sliding buffer — so memory
is one element, not the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

CHUNK = 1 << 20
_DECODER = json.JSONDecoder()
_WS = " \t\n\r"
ITEMS = object()          # marker: the streamed array starts; its items follow


class StreamError(ValueError):
    """Malformed JSON at a byte offset."""

    def __init__(self, offset: int, why: str) -> None:
        super().__init__(f"byte {offset}: {why}")
        self.offset = offset


class _Buffer:
    def __init__(self, fh: IO[str]) -> None:
        self.fh, self.buf, self.pos, self.base, self.eof = fh, "", 0, 0, False

    def _fill(self) -> bool:
        if self.eof:
            return False
        more = self.fh.read(CHUNK)
        if not more:
            self.eof = True
            return False
        if self.pos > CHUNK:        # drop what was consumed
            self.base += self.pos
            self.buf, self.pos = self.buf[self.pos:], 0
        self.buf += more
        return True

    def peek(self) -> str:
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def expect(self, ch: str) -> None:
        got = self.peek()
        if got != ch:
            raise StreamError(self.offset, f"expected {ch!r}, found {got or 'end of file'!r}")
        self.pos += 1

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def value(self) -> Any:
        """Decode one JSON value, reading more until it is complete."""
        self.peek()
        while True:
            try:
                val, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # Incomplete in the buffer (or truly bad): read more and retry.
                if self._fill():
                    continue
                raise StreamError(self.base + exc.pos, exc.msg) from None
            # A number at the buffer's end may continue in the next chunk.
            if end == len(self.buf) and not self.eof and isinstance(val, int | float) \
                    and self._fill():
                continue
            self.pos = end
            return val


def iter_object(fh: IO[str], stream_key: str) -> Iterator[tuple[str, Any]]:
    """(key, value) for the top-level members; the array at `stream_key` comes as
    (key, ITEMS) and then (key, item) per element, in file order."""
    b = _Buffer(fh)
    b.expect("{")
    if b.peek() == "}":
        return
    while True:
        key = b.value()
        if not isinstance(key, str):
            raise StreamError(b.offset, "expected a member name")
        b.expect(":")
        if key == stream_key and b.peek() == "[":
            b.expect("[")
            yield key, ITEMS
            if b.peek() == "]":
                b.pos += 1
            else:
                while True:
                    yield key, b.value()
                    nxt = b.peek()
                    b.expect(nxt if nxt in ",]" else ",")
                    if nxt == "]":
                        break
        else:
            yield key, b.value()
        nxt = b.peek()
        b.expect(nxt if nxt in ",}" else ",")
        if nxt == "}":
            return
