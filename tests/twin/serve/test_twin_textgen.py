"""Text the twin emits: lengths, determinism, round trip, code-edit copying."""

from __future__ import annotations

import random

from simulator.twin.serve import textgen
from simulator.util import tokens as tok


def _prompt() -> list[int]:
    text, _ = textgen.plan_reply([], 3000, seed=99, natural_tokens=3000, code_edit=False,
                                 repeat_fraction=0.0)
    return tok.encode("System: you are a coding agent.\n" + text)


def test_length_is_min_of_max_tokens_and_natural() -> None:
    _, ids = textgen.plan_reply([1, 2, 3], 50, seed=1, natural_tokens=400, code_edit=False,
                                repeat_fraction=0.0)
    assert len(ids) == 50
    _, ids = textgen.plan_reply([1, 2, 3], 4096, seed=1, natural_tokens=400,
                                code_edit=False, repeat_fraction=0.0)
    assert len(ids) == 400
    assert textgen.plan_reply([1], 0, seed=1, natural_tokens=None, code_edit=False,
                              repeat_fraction=0.0) == ("", [])


def test_natural_lengths_centre_near_700() -> None:
    import random
    rng = random.Random(5)
    draws = [textgen.natural_length(rng) for _ in range(4000)]
    assert 600 < sum(draws) / len(draws) < 800


def test_round_trip_and_determinism() -> None:
    prompt = _prompt()
    for code_edit in (False, True):
        a = textgen.plan_reply(prompt, 900, seed=7, natural_tokens=None, code_edit=code_edit,
                               repeat_fraction=0.8)
        b = textgen.plan_reply(prompt, 900, seed=7, natural_tokens=None, code_edit=code_edit,
                               repeat_fraction=0.8)
        assert a == b
        text, ids = a
        assert tok.decode(ids) == text
        again = tok.encode(text)
        assert abs(len(again) - len(ids)) <= 2 and again[:-2] == ids[:len(again) - 2]
    other = textgen.plan_reply(prompt, 900, seed=8, natural_tokens=None, code_edit=False,
                               repeat_fraction=0.0)
    assert other[0] != a[0]


def test_code_edit_reply_reproduces_prompt_lines() -> None:
    prompt = _prompt()
    src = set(tok.decode(prompt).splitlines())
    def copied_share(code_edit: bool) -> float:
        text, _ = textgen.plan_reply(prompt, 2000, seed=3, natural_tokens=800,
                                     code_edit=code_edit, repeat_fraction=0.8)
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return sum(ln in src for ln in lines) / len(lines)
    # fresh lines come from the same pool, so some coincide; copying must dominate
    assert copied_share(True) > copied_share(False) + 0.3


def test_a_paced_reply_runs_at_its_target_tokens_per_pass_at_any_length() -> None:
    """textgen's closed loop (issue 37): a reply paced to a reference tokens per pass
    meets it within 10% whether it is 600 or 2,000 tokens long; an open-loop copy share
    does not (a copied run is hundreds of tokens, so its figure grows with the length)."""
    from simulator.twin.spec_decode.predictability import REFERENCE, tokens_per_pass
    assert textgen.PACE_SPEC == REFERENCE
    context = tok.encoding().encode_ordinary(
        textgen._assemble(random.Random(11), 3000, [], 0.0))
    for target in (1.0, 1.35, 2.0, 4.0):
        for n in (600, 2000):
            got = []
            for seed in range(3):
                _, ids = textgen.plan_reply(context, n, seed=seed, natural_tokens=n,
                                            code_edit=False, repeat_fraction=0.0,
                                            tokens_per_pass=target)
                assert len(ids) == n
                got.append(tokens_per_pass([(context, ids)]) or 1.0)
            mean = sum(got) / len(got)
            assert abs(mean / target - 1) < 0.10, (target, n, got)
    again = textgen.plan_reply(context, 600, seed=1, natural_tokens=600, code_edit=False,
                               repeat_fraction=0.0, tokens_per_pass=2.0)
    assert again == textgen.plan_reply(context, 600, seed=1, natural_tokens=600,
                                       code_edit=False, repeat_fraction=0.0,
                                       tokens_per_pass=2.0)


def test_the_tokens_per_pass_hint() -> None:
    from simulator.twin.serve.reply import parse_tokens_per_pass
    assert parse_tokens_per_pass({"x-endurance-tokens-per-pass": "1.35"}) == 1.35
    assert parse_tokens_per_pass({"tokens-per-pass": "0.5"}) == 1.0
    assert parse_tokens_per_pass({"x-endurance-tokens-per-pass": "nan"}) is None
    assert parse_tokens_per_pass({"x-endurance-tokens-per-pass": "bogus"}) is None
    assert parse_tokens_per_pass({}) is None
