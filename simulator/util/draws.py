"""`random.Random`'s `choice`/`randrange`/`randint` draws, made by hand.

All three come down to CPython's `Random._randbelow(n)`: getrandbits(n.bit_length())
until the number is below n. The text generators draw about 10^6 times a run; taking the
same 32-bit words from the generator, in the same order, without the call chains costs
half as much and leaves the generator in the same state (the tests check values and
state against `choice` and `randint`). The guard below fails at import on a Python whose
`Random` draws another way, rather than letting the runs change silently.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

if random.Random._randbelow is not random.Random._randbelow_with_getrandbits:  # type: ignore[attr-defined]
    raise ImportError("simulator.util.draws: this Python's random.Random does not draw "
                      "with _randbelow_with_getrandbits; the generators' hand-made draws "
                      "would differ from choice/randint")


def below(bits: Callable[[int], int], n: int) -> int:
    """`rng.randrange(n)` (n > 0) from `bits = rng.getrandbits`."""
    k = n.bit_length()
    r = bits(k)
    while r >= n:
        r = bits(k)
    return r


def pick(bits: Callable[[int], int], seq: Sequence[T]) -> T:
    """`rng.choice(seq)` from `bits = rng.getrandbits` (inlined `below`: the hot call)."""
    n = len(seq)
    k = n.bit_length()
    r = bits(k)
    while r >= n:
        r = bits(k)
    return seq[r]
