"""`util.draws`: the generators' hand-made draws are `Random.choice`'s and `randint`'s."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.scenario import content
from simulator.util.draws import below, pick


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 5000))
def test_draws_are_choice_and_randint(seed: int, n: int) -> None:
    """Value for value and state for state, over the makers' vocabularies and any n."""
    fast, plain = random.Random(seed), random.Random(seed)
    for seq in (content._IDENTS, content._TYPES, content._VERBS, content._WORDS):
        assert pick(fast.getrandbits, seq) == plain.choice(seq)
    assert below(fast.getrandbits, n) == plain.randint(0, n - 1)
    assert below(fast.getrandbits, n) == plain.randrange(n)
    assert fast.getstate() == plain.getstate()
