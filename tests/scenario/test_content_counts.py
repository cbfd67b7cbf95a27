"""Synthesised text: the incremental encode and the exact counts give what encoding
the whole text gives (the rows' token estimates and every later draw depend on it)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.scenario import content
from simulator.util import tokens

KINDS = st.sampled_from(["code", "prose", "grep", "bash"])


# The line makers as they were (plain f-strings, the text encoded whole): the oracle the
# piece makers must match draw for draw, character for character and id for id.
_IDENTS, _TYPES, _VERBS, _WORDS = content._IDENTS, content._TYPES, content._VERBS, content._WORDS


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(_IDENTS)}_{rng.choice(_IDENTS)}"


def _code_line(rng: random.Random) -> str:
    r = rng.random()
    ind = "    " * rng.randint(0, 3)
    if r < 0.15:
        args = ", ".join(f"{_ident(rng)}: {rng.choice(_TYPES)}" for _ in range(rng.randint(0, 3)))
        return f"{ind}def {rng.choice(_VERBS)}_{rng.choice(_IDENTS)}({args}) -> {rng.choice(_TYPES)}:"
    if r < 0.45:
        return f"{ind}{_ident(rng)} = self.{rng.choice(_VERBS)}({_ident(rng)}, {rng.randint(0, 4096)})"
    if r < 0.6:
        return f"{ind}if {_ident(rng)} > {rng.choice(_IDENTS)}.{rng.choice(_IDENTS)}:"
    if r < 0.7:
        return f"{ind}return {_ident(rng)}"
    if r < 0.8:
        return f"{ind}# {' '.join(rng.choice(_WORDS) for _ in range(rng.randint(4, 10)))}"
    if r < 0.9:
        return f"{ind}for {rng.choice(_IDENTS)} in {_ident(rng)}:"
    return f"{ind}raise ValueError(f\"{rng.choice(_VERBS)} {{{_ident(rng)}}} failed\")"


def _prose_line(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 16))]
    words.insert(rng.randint(0, len(words)), f"`{rng.choice(_VERBS)}_{rng.choice(_IDENTS)}`")
    return " ".join(words).capitalize() + "."


def _grep_line(rng: random.Random) -> str:
    return f"src/{rng.choice(_IDENTS)}/{rng.choice(_IDENTS)}.py:{rng.randint(1, 2000)}:" \
        + _code_line(rng).strip()


def _bash_line(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        return (f"tests/test_{rng.choice(_IDENTS)}.py::test_{rng.choice(_VERBS)}_"
                f"{rng.choice(_IDENTS)} {'PASSED' if rng.random() < 0.8 else 'FAILED'}")
    return f"[{rng.randint(0, 99):02d}:{rng.randint(0, 59):02d}] {_prose_line(rng)}"


_LINE_MAKERS = {"code": _code_line, "prose": _prose_line, "grep": _grep_line,
                "bash": _bash_line}


def _synth_ids_whole(kind: str, n_tokens: int, rng: random.Random) -> list[int]:
    """The synthesis as it was: plain lines, the whole text encoded again on every top-up."""
    make = _LINE_MAKERS[kind]
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
def test_piece_ids_are_the_whole_encode(kind: str, n: int, seed: int) -> None:
    fast_rng, whole_rng = random.Random(seed), random.Random(seed)
    assert content._synth(kind, n, fast_rng)[0] == _synth_ids_whole(kind, n, whole_rng)
    assert fast_rng.getstate() == whole_rng.getstate()       # the same draws, too


@settings(max_examples=120, deadline=None)
@given(KINDS, st.integers(1, 3000), st.integers(0, 2**32))
def test_text_is_the_decoded_cut(kind: str, n: int, seed: int) -> None:
    """The text is cut from the joined pieces, not decoded: the same as decoding."""
    text = content.synth_text(kind, n, random.Random(seed))
    assert text == tokens.decode(_synth_ids_whole(kind, n, random.Random(seed))[:n])


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
    ids = tokens.encode("\n".join(_LINE_MAKERS[k](rng) for k in kinds))
    n = data.draw(st.integers(1, len(ids)))
    text = tokens.decode(ids[:n])
    assert content.count_of_cut(ids[:n], text) == tokens.count(text)


def test_lines_encode_apart_at_newlines() -> None:
    """The property known texts rest on (`tokens.remember`), for every line maker and the
    twin's own reply lines: a line's encoding after a newline is its encoding alone."""
    from simulator.twin.serve import textgen

    def fresh(r: random.Random) -> str:
        return textgen._fresh(r)[0].rstrip("\n")
    rng = random.Random(7)
    makers = [*_LINE_MAKERS.values(), fresh]
    for _ in range(300):
        a, b = rng.choice(makers)(rng), rng.choice(makers)(rng)
        assert tokens.encode(a + "\n" + b) == tokens.encode(a + "\n") + tokens.encode(b)


@settings(max_examples=400, deadline=None)
@given(KINDS, st.integers(0, 2**32), st.sampled_from([0, 1, 2, 3, 20]))
def test_piece_makers_are_the_plain_makers(kind: str, seed: int, lines: int) -> None:
    """Each line as pieces: the plain maker's text from the same draws, and its pieces'
    ids (each line's last with the newline after it) are `encode_ordinary`'s."""
    piece_rng, plain_rng = random.Random(seed), random.Random(seed)
    made = [content._PIECE_MAKERS[kind](piece_rng) for _ in range(lines + 1)]
    plain = [_LINE_MAKERS[kind](plain_rng) for _ in range(lines + 1)]
    assert ["".join(p) for p in made] == plain
    assert piece_rng.getstate() == plain_rng.getstate()
    ids = [i for n, line in enumerate(made) for k, piece in enumerate(line)
           for i in tokens.piece_ids(piece + ("\n" if k == len(line) - 1 and n < lines else ""))]
    assert ids == tokens.encode("\n".join(plain))
    assert all(piece for line in made for piece in line)     # no empty piece
