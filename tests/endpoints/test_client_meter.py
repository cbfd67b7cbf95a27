"""The client-side reference n-gram meter: what n-gram speculation would see on a real
server's replies, from the client's own tokens."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest

from simulator.analysis.summary import ngram_reference, ngram_reference_basis
from simulator.endpoints.base import LLMRequest, LLMResponse, Timing, Usage
from simulator.endpoints.client_meter import ClientMeter
from simulator.protocol.messages import Message, Prefix, TextBlock
from simulator.twin.spec_decode.predictability import REFERENCE
from simulator.util import tokens

PREFIX = Prefix("You edit code.", (), 4, 0)
WORDS = ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "zeta")


def _code(rng: random.Random, lines: int) -> str:
    return "".join(f"def {rng.choice(WORDS)}_{rng.randrange(10**6)}(x_{i}): "
                   f"return {rng.randrange(10**9)} * x_{i}\n" for i in range(lines))


def _request(messages: tuple[Message, ...], session: str = "s0") -> LLMRequest:
    return LLMRequest("m", PREFIX, messages, 1000, session_id=session)


def _reply(text: str, **extra: int | None) -> LLMResponse:
    return LLMResponse((TextBlock(text),), "end_turn", Usage.from_mapping({}),
                       Timing(0.0, None, None, None, 0), 0, extra=dict(extra))


def test_a_verbatim_copy_is_drafted_and_fresh_text_is_not() -> None:
    rng = random.Random(1)
    file = _code(rng, 60)
    history = (Message("user", (TextBlock("Rewrite this file:\n" + file),)),)
    meter = ClientMeter()
    copied = meter.extra(_request(history), _reply(file))
    fresh = meter.extra(_request(history, "s1"), _reply(_code(rng, 60)))
    n = copied["ngram_ref_tokens"]
    assert n == len(tokens.encode(file))
    # a copy of the prompt: drafted 24 + 1 a pass after the first few tokens
    assert copied["ngram_ref_passes"] <= 8 + -(-n // (REFERENCE.num_speculative_tokens + 1))
    # fresh code repeats only its line frame ("def ", "(x_", "): return "), so far
    # fewer tokens are drafted
    assert fresh["ngram_ref_tokens"] / fresh["ngram_ref_passes"] < 2.0
    assert n / copied["ngram_ref_passes"] > 15.0


def test_a_follow_up_turn_tokenises_only_its_new_messages() -> None:
    rng = random.Random(2)
    meter = ClientMeter()
    first = (Message("user", (TextBlock(_code(rng, 40)),)),)
    reply = _code(rng, 5)
    meter.extra(_request(first), _reply(reply))
    calls = meter.tokenizer.encode_calls
    later = (*first, Message("assistant", (TextBlock(reply),)),
             Message("user", (TextBlock("again"),)))
    assert meter.extra(_request(later), _reply("ok"))["ngram_ref_tokens"] == 1
    assert meter.tokenizer.encode_calls - calls == 2    # the assistant and the user message


def test_sessions_beyond_the_cap_and_self_metered_replies_are_left_alone() -> None:
    meter = ClientMeter(max_sessions=1)
    msgs = (Message("user", (TextBlock("hello there"),)),)
    assert meter.extra(_request(msgs, "a"), _reply("hi"))
    assert meter.extra(_request(msgs, "b"), _reply("hi")) == {}
    assert meter.extra(_request(msgs, "a"), _reply("hi", ngram_ref_passes=3)) == {}
    resp = _reply("hi")
    annotated = meter.annotate(_request(msgs, "a"), resp)
    assert annotated.extra["ngram_ref_passes"] == 1 and resp.extra == {}
    assert meter.annotate(_request(msgs, "b"), resp) is resp


def test_the_summary_divides_client_tokens_by_client_passes() -> None:
    # a real server's rows: server output tokens 100, the client counted 90 in 30 passes
    real = pd.DataFrame({"output_tokens": [100, 100], "ngram_ref_passes": [30, 30],
                         "ngram_ref_tokens": [90, 90]})
    assert ngram_reference(real) == pytest.approx(3.0)
    assert ngram_reference_basis(real) == "client tokens (estimate)"
    twin = pd.DataFrame({"output_tokens": [100, 50], "ngram_ref_passes": [50, None],
                         "ngram_ref_tokens": [None, None]})
    assert ngram_reference(twin) == pytest.approx(2.0)
    assert ngram_reference_basis(twin) == "twin tokens"
    assert ngram_reference_basis(pd.DataFrame({"output_tokens": [1]})) is None


@pytest.mark.slow
def test_the_client_estimate_on_the_http_twin_is_near_the_twins_own_figure(
        tmp_path: Path) -> None:
    """Same scenario, in-process (the twin counts its ids) and over HTTP (the client
    counts its own tokens of the same text): the two figures agree closely."""
    from tests.conftest import SCENARIOS, run_scenario
    from tests.http_twin import twin_server
    sets = ["turns=12", "sessions=2", "think_time_s=0",
            *(f"turn_templates.{i}.tool.latency_s=0" for i in range(5))]
    own = run_scenario(SCENARIOS / "claude-code-endurance.yaml", tmp_path, sets)
    with twin_server(time_scale=2000.0) as url:
        est = run_scenario(SCENARIOS / "claude-code-endurance.yaml", tmp_path, sets,
                           endpoint_url=url)
    a, b = own.summary, est.summary
    assert a["ngram_reference_tokens"] == "twin tokens"
    assert b["ngram_reference_tokens"] == "client tokens (estimate)"
    assert b["ngram_reference_tokens_per_pass"] == pytest.approx(
        a["ngram_reference_tokens_per_pass"], rel=0.05)
