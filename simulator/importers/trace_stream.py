"""Stream one JSON object's big array without loading the file (no ijson needed).

A cc-traces file is one object whose `requests` array holds every request with its
full `hash_ids` list: the biggest public ones (1,000+ requests, 900K-token contexts,
64-token blocks) hold ~14M ids, ~500 MB as Python ints. `iter_object` walks the top
level of the object and yields `(key, value)` for scalar and small members and
`(key, ITEMS)` followed by one `(key, item)` per element for the streamed key, each
element decoded alone by the stdlib's `raw_decode` from a sliding buffer — so memory
is one element, not the file.

Bounded (`simulator.util.bounded`): an element of more than MAX_ELEMENT_CHARS, a member
name given twice, data after the object, integers of more than 4,300 digits and nesting
deeper than 64 are a `StreamError` at their byte. Non-finite numbers (`Infinity`, `1e400`)
are passed on to the reader's field checks, whose line names the field.
An element longer than a chunk is read in growing steps (each read as large as what is
buffered), so it is decoded a logarithmic number of times, not once per MiB.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO

from simulator.util.bounded import FIELD_DECODER, JSONLimit, decode_error, depth
from simulator.util.jsontypes import JSONValue

CHUNK = 1 << 20
MAX_ELEMENT_CHARS = 8 << 20    # one request object: a 10M-token prompt in 16-token blocks
#                                is ~6 MB of ids (a 900K-token context in 64-token ones, 0.1 MB)
_WS = " \t\n\r"
class Items:
    """The marker type of `ITEMS`."""


ITEMS = Items()           # marker: the streamed array starts; its items follow


class StreamError(ValueError):
    """Malformed JSON at a byte offset."""

    def __init__(self, offset: int, why: str) -> None:
        super().__init__(f"byte {offset}: {why}")
        self.offset = offset


class _Buffer:
    def __init__(self, fh: IO[str]) -> None:
        self.fh, self.buf, self.pos, self.base, self.eof = fh, "", 0, 0, False

    def _fill(self, size: int | None = None) -> str:
        """Read more (CHUNK, or `size`); what was read, "" at the end of the file."""
        if self.eof:
            return ""
        more = self.fh.read(size or CHUNK)
        if not more:
            self.eof = True
            return ""
        if self.pos > CHUNK:        # drop what was consumed
            self.base += self.pos
            self.buf, self.pos = self.buf[self.pos:], 0
        self.buf += more
        return more

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

    def value(self) -> JSONValue:
        """Decode one JSON value, reading more until it is complete."""
        self.peek()
        while True:
            try:
                val: JSONValue
                val, end = FIELD_DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # Incomplete in the buffer (or truly bad): read more and retry — and
                # while what is read closes no list or object, an incomplete list or
                # object cannot have ended: read on without decoding again.
                opens, bad = self.buf[self.pos] in "[{", self.base + exc.pos
                while True:
                    held = len(self.buf) - self.pos
                    if held > MAX_ELEMENT_CHARS:
                        raise StreamError(self.offset, f"one value longer than "
                                          f"{MAX_ELEMENT_CHARS >> 20} MiB") from None
                    new = self._fill(min(max(CHUNK, held), MAX_ELEMENT_CHARS + 1 - held))
                    if not new:
                        raise StreamError(bad, exc.msg) from None
                    if not opens or "]" in new or "}" in new:
                        break
                continue
            except (JSONLimit, RecursionError, ValueError) as exc:
                raise StreamError(self.offset, decode_error(exc)) from None
            # A number at the buffer's end may continue in the next chunk.
            if end == len(self.buf) and not self.eof and isinstance(val, int | float) \
                    and self._fill():
                continue
            try:
                depth(val)
            except JSONLimit as exc:
                raise StreamError(self.offset, str(exc)) from None
            self.pos = end
            return val


def iter_object(fh: IO[str], stream_key: str) -> Iterator[tuple[str, JSONValue | Items]]:
    """(key, value) for the top-level members; the array at `stream_key` comes as
    (key, ITEMS) and then (key, item) per element, in file order. A member given twice
    and anything after the closing brace are a StreamError."""
    b = _Buffer(fh)
    b.expect("{")
    if b.peek() == "}":
        b.pos += 1
        _end(b)
        return
    seen: set[str] = set()
    while True:
        at = b.offset
        key = b.value()
        if not isinstance(key, str):
            raise StreamError(b.offset, "expected a member name")
        if key in seen:
            raise StreamError(at, f"field {key[:60]!r} given twice")
        seen.add(key)
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
            _end(b)
            return


def _end(b: _Buffer) -> None:
    got = b.peek()
    if got:
        raise StreamError(b.offset, f"data after the object ({got!r})")
