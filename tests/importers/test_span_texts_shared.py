"""Span texts are kept across the runs of one process (issue 58: a size search replays
the same scenario once per probe): the text is the one a fresh draw gives, the same
object the next run, and the shared store stays within its bound."""

from __future__ import annotations

import random

import pytest

from simulator.importers import anonymize
from simulator.importers.anonymize import SpanTexts, synth_line


@pytest.fixture(autouse=True)
def _empty_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(anonymize, "_shared", type(anonymize._shared)())
    monkeypatch.setattr(anonymize, "_shared_chars", [0])


def test_a_second_run_gets_the_first_runs_text_which_is_a_fresh_draws() -> None:
    sizes, kinds = (40, 7, 300), "pcg"
    first = [SpanTexts(5, sizes, kinds).line(i, copy=1) for i in range(3)]
    again = [SpanTexts(5, sizes, kinds).line(i, copy=1) for i in range(3)]
    assert all(a is b for a, b in zip(first, again, strict=True))
    fresh = [synth_line(k, n, random.Random(f"5:1:span:{i}"))
             for i, (k, n) in enumerate(zip(("prose", "code", "grep"), sizes, strict=True))]
    assert first == fresh
    # another seed, copy or size is another text, never the stored one
    assert SpanTexts(6, sizes, kinds).line(0, copy=1) != first[0]
    assert SpanTexts(5, sizes, kinds).line(0, copy=2) != first[0]
    assert SpanTexts(5, (41, 7, 300), kinds).line(0, copy=1) != first[0]


def test_the_store_keeps_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(anonymize, "SHARED_CHARS", 2_000)
    texts = SpanTexts(1, (100,) * 50, "p" * 50)
    made = [texts.line(i) for i in range(50)]
    assert sum(map(len, made)) > 4_000
    assert 0 < anonymize._shared_chars[0] <= 2_000
    assert anonymize._shared_chars[0] == sum(map(len, anonymize._shared.values()))
