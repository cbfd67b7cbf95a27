"""Synthesised text: the incremental encode and the exact counts give what encoding
the whole text gives (the rows' token estimates and every later draw depend on it)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.scenario import content
from simulator.util import tokens

KINDS = st.sampled_from(["code", "prose", "grep", "bash"])


def _synth_ids_whole(kind: str, n_tokens: int, rng: random.Random) -> list[int]:
    """The synthesis as it was: the whole text encoded again on every top-up."""
    make = content._LINE_MAKERS[kind]
    lines: list[str] = []
    est = 0
    while est < n_tokens + 8:
        line = make(rng)
        lines.append(line)
        est += content._TOKENS_PER_LINE[kind] if len(lines) > 4 else tokens.count(line) + 1
    ids = tokens.encode("\n".join(lines))
    while len(ids) < n_tokens:
        lines.extend(make(rng) for _ in range(max(4, (n_tokens - len(ids)) // 8)))
        ids = tokens.encode("\n".join(lines))
    return ids


@settings(max_examples=120, deadline=None)
@given(KINDS, st.integers(1, 3000), st.integers(0, 2**32))
def test_incremental_encode_is_the_whole_encode(kind: str, n: int, seed: int) -> None:
    fast_rng, whole_rng = random.Random(seed), random.Random(seed)
    assert content._synth_ids(kind, n, fast_rng) == _synth_ids_whole(kind, n, whole_rng)
    assert fast_rng.getstate() == whole_rng.getstate()       # the same draws, too


@settings(max_examples=200, deadline=None)
@given(KINDS, st.integers(1, 2000), st.integers(0, 2**32))
def test_counted_text_is_synth_text_and_its_count(kind: str, n: int, seed: int) -> None:
    text, count = content.synth_text_counted(kind, n, random.Random(seed))
    assert text == content.synth_text(kind, n, random.Random(seed))
    assert count == tokens.count(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["code", "prose", "grep", "bash"]), min_size=1, max_size=30),
       st.integers(0, 2**32), st.data())
def test_count_of_any_cut(kinds: list[str], seed: int, data: st.DataObject) -> None:
    rng = random.Random(seed)
    ids = tokens.encode("\n".join(content._LINE_MAKERS[k](rng) for k in kinds))
    n = data.draw(st.integers(1, len(ids)))
    text = tokens.decode(ids[:n])
    assert content.count_of_cut(ids[:n], text) == tokens.count(text)


def test_lines_encode_apart_at_newlines() -> None:
    """The property `_encode_more` rests on, for every line maker and the twin's own
    reply lines: a line's encoding after a newline is its encoding alone."""
    from simulator.twin.serve import textgen

    def fresh(r: random.Random) -> str:
        return textgen._fresh_line(r).rstrip("\n")
    rng = random.Random(7)
    makers = [*content._LINE_MAKERS.values(), fresh]
    for _ in range(300):
        a, b = rng.choice(makers)(rng), rng.choice(makers)(rng)
        assert tokens.encode(a + "\n" + b) == tokens.encode(a + "\n") + tokens.encode(b)
