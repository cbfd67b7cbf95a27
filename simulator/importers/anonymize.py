"""Replace transcript text by seeded synthetic text of the same token length.

Repeats must survive (a file read twice, an Edit's `old_string` quoting an earlier
Read), because prefix caching and n-gram speculation live on them. Texts are cut into
lines; each distinct line (after stripping Read's "   N→" number prefix) becomes one
*span* with its token size; a text is stored as the list of its span ids. Span ids are
handed out in order of first appearance and the synthetic text of a span is drawn from
(seed, copy, span id) only — never from the original — so the scenario reveals nothing
but sizes and the repetition structure (seeding from a hash of the line would let
anyone confirm a guessed secret).
"""

from __future__ import annotations

import random
import re
from collections import OrderedDict

from simulator.scenario import content
from simulator.scenario.replay import format_spans, parse_spans
from simulator.util import tokens

_NUMBERED = re.compile(r"^ *(\d+)(?:→|\t)(.*)$", re.DOTALL)
KIND_LETTERS = {"code": "c", "prose": "p", "grep": "g", "bash": "b"}
_LETTER_KINDS = {v: k for k, v in KIND_LETTERS.items()}


def split_numbered(text: str) -> tuple[int | None, list[str], int | None]:
    """(first line number, lines, how many leading lines were numbered) for Read-style
    output — numbers stripped from the numbered head, an un-numbered tail (Claude Code
    appends a <system-reminder>, or a blank line) kept as is; (None, lines, None) when
    the text does not start with numbered lines. The count is None when all are."""
    lines = text.split("\n")
    bodies: list[str] = []
    first: int | None = None
    for i, line in enumerate(lines):
        m = _NUMBERED.match(line)
        n = int(m.group(1)) if m is not None else None
        if first is None and n is not None:
            first = n
        if m is None or first is None or n != first + i:
            break
        bodies.append(m.group(2))
    numbered = len(bodies)
    if numbered == 0 or (numbered == 1 and "→" not in lines[0]):   # "1<tab>x": not Read
        return None, lines, None
    return first, bodies + lines[numbered:], None if numbered == len(lines) else numbered


def number_lines(first: int, bodies: list[str], count: int | None = None) -> str:
    """Claude Code's Read format: right-aligned line number, an arrow, the line (the
    first `count` lines only when given; the rest as they are)."""
    k = len(bodies) if count is None else count
    return "\n".join([f"{first + i:>6}→{b}" for i, b in enumerate(bodies[:k])] + bodies[k:])


class Anonymizer:
    """The span table of one import: distinct original line → span id and size."""

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self._ids: dict[str, int] = {}
        self.span_tokens: list[int] = []
        self.span_kinds: list[str] = []

    def _span(self, line: str, kind: str) -> int:
        sid = self._ids.get(line)
        if sid is None:
            sid = len(self.span_tokens)
            self._ids[line] = sid
            n = tokens.count(line) if line else 0
            self.span_tokens.append(max(1, round(n * self.scale)) if n else 0)
            self.span_kinds.append(KIND_LETTERS.get(kind, "p"))
        return sid

    def spans(self, text: str, kind: str) -> tuple[str, int | None, int | None]:
        """(span ranges, first line number when the text is numbered Read output, how
        many lines are numbered when not all)."""
        first, lines, count = split_numbered(text)
        return format_spans([self._span(line, kind) for line in lines]), first, count


def synth_line(kind: str, n_tokens: int, rng: random.Random) -> str:
    """One line (no newline) of about `n_tokens` tokens of synthetic `kind` text."""
    if n_tokens <= 0:
        return ""
    text = content.synth_text(kind, n_tokens + 4, rng).replace("\n", " ").strip()
    return tokens.decode(tokens.encode(text)[:n_tokens])


# A span's text is a function of (seed, copy, span id, kind, tokens) alone, so the
# texts are kept across runs in this process: a size search replays the same scenario
# once per probe, and drawing its span texts again was a fifth of each probe's CPU
# (issue 58). Bounded by the characters held.
SHARED_CHARS = 64 << 20
_shared: OrderedDict[tuple[int, int, int, str, int], str] = OrderedDict()
_shared_chars = [0]


def _remember_line(key: tuple[int, int, int, str, int], text: str) -> None:
    _shared[key] = text
    _shared_chars[0] += len(text)
    while _shared_chars[0] > SHARED_CHARS and _shared:
        _shared_chars[0] -= len(_shared.popitem(last=False)[1])


class SpanTexts:
    """Regenerates span texts at replay time (cached per run, and across the runs of
    this process up to `SHARED_CHARS`)."""

    def __init__(self, seed: int, span_tokens: tuple[int, ...], span_kinds: str) -> None:
        self.seed, self.span_tokens, self.span_kinds = seed, span_tokens, span_kinds
        self._cache: dict[tuple[int, int], str] = {}

    def line(self, sid: int, copy: int = 0) -> str:
        key = (copy, sid)
        text = self._cache.get(key)
        if text is None:
            kind = _LETTER_KINDS.get(self.span_kinds[sid], "prose")
            shared = (self.seed, copy, sid, kind, self.span_tokens[sid])
            text = _shared.get(shared)
            if text is not None:
                _shared.move_to_end(shared)
            else:
                rng = random.Random(f"{self.seed}:{copy}:span:{sid}")
                text = synth_line(kind, self.span_tokens[sid], rng)
                _remember_line(shared, text)
            self._cache[key] = text
        return text

    def text(self, ranges: str, numbered_from: int | None = None, copy: int = 0,
             numbered_lines: int | None = None) -> str:
        bodies = [self.line(sid, copy) for sid in parse_spans(ranges)]
        if numbered_from is not None:
            return number_lines(numbered_from, bodies, numbered_lines)
        return "\n".join(bodies)
