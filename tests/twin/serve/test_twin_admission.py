"""The one admission rule of both twin fronts (in-process endpoint and HTTP server)."""

from __future__ import annotations

import pytest

from simulator.twin.serve import reply


def test_a_prompt_that_fills_the_window_is_refused() -> None:
    reply.check_window(99, 100)
    with pytest.raises(reply.PromptTooLong, match="prompt is too long: 100 tokens > 100 maximum"):
        reply.check_window(100, 100)


def test_the_reply_is_capped_by_the_room_left_in_the_window() -> None:
    prompt = list(range(1000, 1090))
    capped = reply.plan_for(prompt, 500, {"output-tokens": "400"}, context_window=100, seed=1)
    assert len(capped.token_ids) == 10 and capped.stop_reason == "max_tokens"
    free = reply.plan_for(prompt, 500, {"x-endurance-output-tokens": "40"},
                          context_window=10_000, seed=1)
    assert len(free.token_ids) == 40 and free.stop_reason == "end_turn"
    # same request, same reply: what lets the two fronts answer alike
    assert reply.plan_for(prompt, 500, {"output-tokens": "40"}, context_window=10_000,
                          seed=1) == free
