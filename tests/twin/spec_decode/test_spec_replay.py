"""The twin's n-gram proposer on a scripted exchange (a given prompt and reply)."""

from __future__ import annotations

from simulator.twin.spec_decode.ngram import NgramSpec
from simulator.twin.spec_decode.replay import SpecCounts, replay
from simulator.util import tokens

SPEC = NgramSpec(8, prompt_lookup_min=2, prompt_lookup_max=4)
CODE = "\n".join(f"def f{i}(x: int) -> int:\n    return x * {i} + {i * 7}" for i in range(40))


def test_a_copied_reply_is_drafted_and_mostly_accepted() -> None:
    prompt, reply = tokens.encode("Repeat exactly:\n" + CODE), tokens.encode(CODE)
    got = replay([(prompt, reply)], SPEC)
    assert got.output_tokens == len(reply)
    assert got.drafts > 0 and got.acceptance > 0.5 and got.tokens_per_pass > 3


def test_a_reply_with_nothing_to_copy_drafts_nothing() -> None:
    got = replay([(list(range(100, 200)), list(range(1000, 1040)))], SPEC)
    assert got == SpecCounts(0, 0, 0, 40) and got.tokens_per_pass == 1.0


def test_exchanges_add_up() -> None:
    one = (tokens.encode("Repeat:\n" + CODE[:400]), tokens.encode(CODE[:400]))
    two = (tokens.encode("Again:\n" + CODE[400:900]), tokens.encode(CODE[400:900]))
    assert replay([one, two], SPEC) == replay([one], SPEC) + replay([two], SPEC)
