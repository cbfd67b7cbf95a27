"""Forced compaction aims at the context limit the server reported (issue 16, item 2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.session.overflow import Overflow, overflow_target, parse_overflow
from tests.conftest import run_scenario, small_scenario, turns_of
from tests.http_twin import twin_in_thread

VLLM = ("HTTP 400: {\"object\":\"error\",\"message\":\"This model's maximum context length is "
        "32768 tokens. However, you requested 40000 tokens (39000 in the messages, 1000 in "
        "the completion). Please reduce the length of the messages or completion.\"}")
VLLM_NEW = ("HTTP 400: {\"error\":{\"message\":\"The decoder prompt (length 40001) is longer "
            "than the maximum context length of 32,768 tokens\"}}")
LLAMA = ("HTTP 400: {\"error\":{\"code\":400,\"message\":\"the request exceeds the available "
         "context size (32768 tokens), try increasing it\",\"type\":\"exceed_context_size_error\","
         "\"n_prompt_tokens\":40000,\"n_ctx\":32768}}")
ANTHROPIC = ("HTTP 400: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
             "\"message\":\"prompt is too long: 210123 tokens > 200000 maximum\"}}")


@pytest.mark.parametrize(("text", "limit", "prompt"), [
    (VLLM, 32768, 39000), (VLLM_NEW, 32768, None), (LLAMA, 32768, 40000),
    (ANTHROPIC, 200000, 210123), ("HTTP 400: context_length_exceeded", None, None),
])
def test_parse_overflow_reads_each_server(text: str, limit: int | None,
                                          prompt: int | None) -> None:
    assert parse_overflow(text) == Overflow(limit, prompt)


def test_target_aims_at_the_server_limit_not_the_scenario_window() -> None:
    # Scenario window 262,144, server 32,768, reply 1,000: half of the server's room.
    assert overflow_target(262_144, Overflow(32_768, None), 40_000, 1_000, 0) == 15_884
    # The server counted more tokens than the client estimates: scale into estimates.
    assert overflow_target(262_144, Overflow(32_768, 40_000), 30_000, 1_000, 0) == 11_913
    # Nothing said: the scenario's window, as before.
    assert overflow_target(262_144, Overflow(None, None), 300_000, 0, 0) == 131_072


@given(st.integers(1_000, 1_000_000), st.integers(500, 1_000_000),
       st.integers(0, 64_000), st.integers(0, 6))
def test_target_fits_and_shrinks_with_each_retry(window: int, limit: int, max_tokens: int,
                                                 forced: int) -> None:
    o = Overflow(limit, None)
    t = overflow_target(window, o, 10**6, max_tokens, forced)
    assert 1 <= t <= min(window, limit)
    assert overflow_target(window, o, 10**6, max_tokens, forced + 1) <= t


@pytest.fixture
def small_window_twin() -> Iterator[str]:
    """The HTTP twin with a 6,000-token context window."""
    with twin_in_thread(time_scale=5000.0, context_window=6_000) as url:
        yield url


def test_overflow_on_a_small_server_window_is_never_a_failure(
        tmp_path: Path, write_scenario, small_window_twin: str) -> None:  # type: ignore[no-untyped-def]
    # No client-side compaction and the scenario's default 262,144-token window: only the
    # server's 6,000-token limit stops the context, and each overflow must be answered by
    # one compaction that fits (a retry budget of 2: no room for a second guess).
    data = small_scenario(turns=40, think_time_s=0, compaction={"kind": "none"},
                          retry={"max_attempts": 2})
    for t in data["turn_templates"]:
        t.get("tool", {})["latency_s"] = 0
    res = run_scenario(write_scenario(data), tmp_path, endpoint_url=small_window_twin)
    assert res.status == "completed", res.outcome.reason
    df = turns_of(res)
    overflows = df[df.error_type == "context_overflow"]
    assert len(overflows) >= 1
    forced = df[df.compaction.fillna("").str.startswith("overflow:")]
    assert len(forced) == len(overflows)
    assert df[df.ok].turn_index.nunique() == 40
    assert (df[df.ok].prompt_tokens < 6_000).all()
    assert res.summary["failed_requests"] == 0
    assert res.manifest.server_max_model_len == 6_000   # from /v1/models: the fallback
    assert res.summary["overflow_requests"] == len(overflows)
