"""textgen builds a reply's ids from its lines' ids (a fresh line from its pieces'
memoised ids, a copied run encoded apart) and draws a fresh line's numbers by hand;
the old way, kept here as the oracle, encoded the whole reply and drew through
`random.choice`: the two must agree on every draw, every character and every id."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.scenario import content
from simulator.twin.serve import textgen
from simulator.twin.serve.textgen import (
    _FUNCS,
    _NAMES,
    _TYPES,
    COPY_RUN_MAX,
    COPY_RUN_MIN,
    EDIT_LINE_PROB,
    SOURCE_WINDOW_TOKENS,
    _edit_line,
    _Pace,
    _source_lines,
    natural_length,
)
from simulator.util import tokens as tok


def _old_fresh_line(rng: random.Random) -> str:
    def name() -> str:
        return f"{rng.choice(_NAMES)}_{rng.randrange(1000)}"
    ind = "    " * rng.randint(0, 3)
    f = f"{rng.choice(_FUNCS)}_{rng.randrange(1000)}"
    n = rng.randrange(100_000)
    forms = (
        f"{ind}{name()} = {f}({name()}, {name()}={n})",
        f"{ind}if {name()} > {n}: {name()}.{f}({name()})",
        f"{ind}for {name()} in {f}({name()}, {n}):",
        f"{ind}return {f}({name()}) + {name()}",
        f"{ind}def {f}({name()}: {rng.choice(_TYPES)}, {name()}={n}):",
        f"{ind}# {name()} {rng.choice(_FUNCS)} {name()} {n} {name()}",
        f"{ind}{name()}[{n}] = {name()}.{f}({name()})",
    )
    return rng.choice(forms) + "\n"


def _old_assemble(rng: random.Random, target: int, source: list[str], copy_frac: float,
                  edit_prob: float = EDIT_LINE_PROB) -> str:
    parts: list[str] = []
    est = 0
    goal = target + 24
    while est < goal:
        if source and rng.random() < copy_frac:
            run = rng.randint(COPY_RUN_MIN, COPY_RUN_MAX)
            i = rng.randrange(max(len(source) - run, 0) + 1)
            for ln in source[i:i + run]:
                if rng.random() < edit_prob:
                    ln = _edit_line(rng, ln)
                parts.append(ln)
                est += max(1, len(ln) // 4)
        else:
            for _ in range(rng.randint(1, 3)):
                ln = _old_fresh_line(rng)
                parts.append(ln)
                est += max(1, len(ln) // 3)
    return "".join(parts)


def _old_paced(rng: random.Random, target: int, source: list[str], prompt: Sequence[int],
               tokens_per_pass: float, edit_prob: float) -> str:
    enc = tok.encoding()
    pace = _Pace(prompt)
    parts: list[str] = []
    emitted = 0
    at: int | None = None
    while emitted < target + 24:
        if source and pace.rate() < tokens_per_pass:
            if at is None or at >= len(source):
                at = rng.randrange(len(source))
            ln = source[at]
            at += 1
            if rng.random() < edit_prob:
                ln = _edit_line(rng, ln)
        else:
            at = None
            ln = _old_fresh_line(rng)
        ids = enc.encode_ordinary(ln)
        pace.extend(ids)
        parts.append(ln)
        emitted += len(ids)
    return "".join(parts)


def _old_plan_reply(prompt_tokens: Sequence[int], max_tokens: int, *, seed: int,
                    natural_tokens: int | None, code_edit: bool, repeat_fraction: float,
                    edit_share: float = EDIT_LINE_PROB,
                    tokens_per_pass: float | None = None) -> tuple[str, list[int]]:
    if max_tokens <= 0:
        return "", []
    rng = random.Random(seed)
    natural = natural_tokens if natural_tokens is not None else natural_length(rng)
    target = max(1, min(max_tokens, natural))
    enc = tok.encoding()
    share = min(max(edit_share, 0.0), 1.0)
    if tokens_per_pass is not None:
        tail = list(prompt_tokens[-SOURCE_WINDOW_TOKENS:])
        text = _old_paced(rng, target, _source_lines(tail), tail, tokens_per_pass, share)
    else:
        frac = min(max(repeat_fraction, 0.0), 1.0) if code_edit else 0.0
        source = _source_lines(prompt_tokens) if frac > 0 else []
        text = _old_assemble(rng, target, source, frac, share)
    ids: list[int] = enc.encode_ordinary(text)
    while len(ids) < target:
        text += _old_assemble(rng, target - len(ids), [], 0.0)
        ids = enc.encode_ordinary(text)
    if len(ids) > target:
        ids = ids[:target]
        text = enc.decode(ids)
    return text, ids


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**64), st.integers(1, 40))
def test_fresh_lines_draw_and_encode_as_before(seed: int, count: int) -> None:
    old, new = random.Random(seed), random.Random(seed)
    lines: list[str] = []
    ids: list[int] = []
    for _ in range(count):
        text, line_ids = textgen._fresh(new)
        assert text == _old_fresh_line(old)
        assert old.getstate() == new.getstate()           # the same draws, in order
        assert line_ids == tok.encode(text)                # alone
        lines.append(text)
        ids += line_ids
    assert ids == tok.encode("".join(lines))               # and joined


def test_every_form_indent_and_number_length_is_met() -> None:
    """The property above, over enough lines that each form meets each indent and each
    length of number (1 to 5 digits) many times."""
    rng = random.Random(36)
    seen: set[tuple[int, int, int]] = set()
    lines: list[str] = []
    for _ in range(6000):
        text, ids = textgen._fresh(rng)
        assert ids == tok.encode(text)
        lines.append(text)
        body = text.lstrip(" ")
        indent = (len(text) - len(body)) // 4
        kind = next((i for i, p in enumerate(("if ", "for ", "return ", "def ", "# "))
                     if body.startswith(p)), 5 if re.match(r"\w+\[", body) else 6)
        digits = max((len(d) for d in re.findall(r"(?<![_\d])\d+", body)), default=0)
        seen.add((kind, indent, digits))
    assert tok.encode("".join(lines)) == [i for ln in lines for i in tok.encode(ln)]
    assert {k for k, _, _ in seen} == set(range(7))
    assert {i for _, i, _ in seen} == {0, 1, 2, 3}
    assert {d for _, _, d in seen} >= {3, 4, 5}


def _prompt(seed: int, odd_breaks: bool) -> list[int]:
    text = content.synth_text("code", 2500, random.Random(seed))
    if odd_breaks:       # line ends `splitlines` knows but a newline-only split does not
        text = text.replace("\n", "\r\n", 3).replace("\n", "\x0c", 2).replace("\n", "\u2028", 1)
    return tok.encode("System: you are a coding agent.\n" + text)


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 1200), st.sampled_from([None, 50, 700]),
       st.booleans(), st.sampled_from([0.0, 0.3, 0.7, 1.0]), st.sampled_from([0.0, 0.08, 1.0]),
       st.booleans())
def test_replies_are_the_old_ones(seed: int, max_tokens: int, natural: int | None,
                                  code_edit: bool, frac: float, share: float,
                                  odd_breaks: bool) -> None:
    prompt = _prompt(seed % 7, odd_breaks)
    kw: dict[str, Any] = {"seed": seed, "natural_tokens": natural, "code_edit": code_edit,
          "repeat_fraction": frac, "edit_share": share}
    assert textgen.plan_reply(prompt, max_tokens, **kw) == \
        _old_plan_reply(prompt, max_tokens, **kw)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 900), st.sampled_from([1.0, 1.5, 3.0]),
       st.booleans())
def test_paced_replies_are_the_old_ones(seed: int, n: int, tokens_per_pass: float,
                                        odd_breaks: bool) -> None:
    prompt = _prompt(seed % 5, odd_breaks)
    kw: dict[str, Any] = {"seed": seed, "natural_tokens": n, "code_edit": False, "repeat_fraction": 0.0,
          "tokens_per_pass": tokens_per_pass}
    assert textgen.plan_reply(prompt, n, **kw) == _old_plan_reply(prompt, n, **kw)


def test_the_str_helpers_draw_as_before() -> None:
    """`_assemble` and a fresh line's text (other modules' callers keep using the rng after)."""
    old, new = random.Random(4), random.Random(4)
    assert textgen._assemble(new, 2000, [], 0.0) == _old_assemble(old, 2000, [], 0.0)
    assert old.getstate() == new.getstate()
    assert textgen._fresh(new)[0] == _old_fresh_line(old)
    assert old.getstate() == new.getstate()
