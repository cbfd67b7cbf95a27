"""The twin's planned replies are shared by the runs of one process (`reply._planned`,
and by request in the in-process twin: `twin._plans`): a request planned before with
the same arguments gets the same reply as a fresh plan, and arguments that differ in
anything `plan_reply` (`plan_for`) reads plan their own."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simulator.endpoints.base import LLMRequest
from simulator.endpoints.inprocess import twin as twin_mod
from simulator.endpoints.inprocess.twin import InProcessTwin
from simulator.protocol.messages import Message, Prefix, TextBlock
from simulator.twin.serve import reply, textgen
from simulator.util import tokens
from tests.warm_runs import team_rows


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    for memo, held in ((reply._planned, reply._planned_held),
                       (twin_mod._plans, twin_mod._plans_held)):
        memo.clear()
        held[0] = 0
    yield
    for memo, held in ((reply._planned, reply._planned_held),
                       (twin_mod._plans, twin_mod._plans_held)):
        memo.clear()
        held[0] = 0


def _prompt(seed: int) -> array[int]:
    code = textgen.plan_reply([], 1500, seed=seed, natural_tokens=1500, code_edit=False,
                              repeat_fraction=0.0)[1]
    return array("I", [*tokens.encode("<|im_start|>user\n"), *code])


PROMPT, OTHER_TAIL = _prompt(1), _prompt(2)
BASE: dict[str, Any] = {"prompt": PROMPT, "limit": 400, "seed": 7, "natural_tokens": 300,
                        "code_edit": True, "repeat_fraction": 0.7, "edit_share": 0.08,
                        "tokens_per_pass": None}
PACED = {**BASE, "code_edit": False, "tokens_per_pass": 3.0}
# pairs that differ in one argument `plan_reply` reads, and plan different replies
PAIRS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    (BASE, {**BASE, "prompt": OTHER_TAIL}), (BASE, {**BASE, "limit": 250}),
    (BASE, {**BASE, "seed": 8}), (BASE, {**BASE, "natural_tokens": 200}),
    (BASE, {**BASE, "code_edit": False}), (BASE, {**BASE, "repeat_fraction": 0.3}),
    (BASE, {**BASE, "edit_share": 0.5}), (BASE, {**BASE, "tokens_per_pass": 3.0}),
    (PACED, {**PACED, "prompt": OTHER_TAIL})]


def _plan(kw: dict[str, Any]) -> tuple[str, list[int]]:
    args = dict(kw)
    prompt = args.pop("prompt")
    return reply._plan_reply(prompt, args.pop("limit"), **args)


def _fresh(kw: dict[str, Any]) -> tuple[str, list[int]]:
    args = dict(kw)
    prompt = args.pop("prompt")
    return textgen.plan_reply(prompt, args.pop("limit"), **args)


def test_every_argument_plan_reply_reads_keys_its_own_entry() -> None:
    for first, second in PAIRS:
        reply._planned.clear()
        expected = _fresh(second)
        assert _fresh(first) != expected
        _plan(first)
        assert _plan(second) == expected          # not the first's reply
        assert _plan(second) == expected          # a hit: the same reply
        assert len(reply._planned) == 2
    text, ids = _plan(BASE)
    assert _plan(BASE)[0] is text                 # the same text object
    ids.append(0)                                 # a caller's list is its own
    assert _plan(BASE) == _fresh(BASE)


def test_a_reply_that_copies_nothing_is_keyed_without_the_prompt() -> None:
    plain = {**BASE, "code_edit": False}
    first = _plan(plain)
    assert _plan({**plain, "prompt": OTHER_TAIL}) == first == _fresh({**plain, "prompt": OTHER_TAIL})
    assert len(reply._planned) == 1


def test_the_memo_is_bounded_by_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reply, "PLANNED_TOKENS", 1)
    for seed in range(4):
        _plan({**BASE, "seed": seed})
    assert len(reply._planned) == 1
    assert reply._planned_held[0] == len(next(iter(reply._planned.values()))[1])


def test_a_run_on_shared_replies_is_the_run_alone(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    plan_reply = textgen.plan_reply

    def counted(*args: Any, **kw: Any) -> tuple[str, list[int]]:
        calls.append(1)
        return plan_reply(*args, **kw)
    monkeypatch.setattr(textgen, "plan_reply", counted)
    alone = team_rows(tmp_path, "sessions=3")
    assert calls
    team_rows(tmp_path, "sessions=4")
    calls.clear()
    shared = team_rows(tmp_path, "sessions=3")
    assert calls == []                                        # every reply from the memo
    pd.testing.assert_frame_equal(shared, alone)


# -- by request, in the in-process twin ---------------------------------------------
PREFIX = Prefix("You are a coding agent.", (), 6, 0)


def _request(text: str, max_tokens: int = 300, hints: dict[str, str] | None = None,
             ) -> LLMRequest:
    return LLMRequest("m", PREFIX, (Message("user", (TextBlock(text),)),), max_tokens,
                      hints=dict(hints or {}))


def _planned_fresh(twin: InProcessTwin, request: LLMRequest) -> reply.PlannedReply:
    return reply.plan_for(twin.prompt_of(request), request.max_tokens, request.hints,
                          context_window=twin.context_window, seed=twin.seed)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    plan_for = reply.plan_for

    def counted(*args: Any, **kw: Any) -> reply.PlannedReply:
        calls.append(1)
        return plan_for(*args, **kw)
    monkeypatch.setattr(reply, "plan_for", counted)
    return calls


def test_a_request_met_again_is_planned_once_and_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    twin = InProcessTwin("h100", "qwen3-coder-30b-a3b-awq")
    request = _request("fix the failing test in parser.py", hints={"x-endurance-turn-kind": "edit"})
    expected = _planned_fresh(twin, request)
    calls = _counting(monkeypatch)
    first = twin._plan(request, twin.prompt_of(request))[0]
    other_run = InProcessTwin("h100", "qwen3-coder-30b-a3b-awq")     # a later probe's
    again = other_run._plan(request, other_run.prompt_of(request))[0]
    assert calls == [1]                                  # the second from the memo
    assert first == again == expected
    again.token_ids.append(0)                            # a caller's list is its own
    assert other_run._plan(request, other_run.prompt_of(request))[0] == expected
    held = next(iter(twin_mod._plans.values()))[0]
    assert held[0] is request.prefix and held[1] is request.messages   # ids stay theirs


def test_every_argument_plan_for_reads_keys_its_own_entry(
        monkeypatch: pytest.MonkeyPatch) -> None:
    twin = InProcessTwin("h100", "qwen3-coder-30b-a3b-awq")
    base = _request("rename the cache helper", hints={"x-endurance-output-tokens": "400"})
    variants = [
        (twin, _request("rename the cache helper", hints={"x-endurance-output-tokens": "400"})),
        (twin, _request("rename the cache helper", 200, {"x-endurance-output-tokens": "400"})),
        (twin, _request("rename the cache helper", hints={"x-endurance-output-tokens": "90"})),
        (InProcessTwin("h100", "qwen3-coder-30b-a3b-awq", seed=1), base),
        (InProcessTwin("h100", "qwen3-coder-30b-a3b-awq", context_window=20_000), base)]
    expected = [_planned_fresh(t, request) for t, request in variants]
    twin._plan(base, twin.prompt_of(base))
    calls = _counting(monkeypatch)
    assert [t._plan(r, t.prompt_of(r))[0] for t, r in variants] == expected
    assert len(calls) == len(variants)                   # none taken from base's entry
    assert len(twin_mod._plans) == 1 + len(variants)


def test_the_plans_are_bounded_by_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(twin_mod, "PLANS_HELD_TOKENS", 1)
    twin = InProcessTwin("h100", "qwen3-coder-30b-a3b-awq")
    for word in ("one", "two", "three"):
        r = _request(f"explain {word}")
        twin._plan(r, twin.prompt_of(r))
    assert len(twin_mod._plans) == 1
    assert twin_mod._plans_held[0] == len(next(iter(twin_mod._plans.values()))[1][0])


def test_a_request_met_again_takes_its_reference_passes_along(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A later run's twin gives the reply's reference passes (`ngram_ref_passes`) of the
    earlier count, without counting again."""
    import asyncio

    from simulator.clock.virtual import run_virtual
    from simulator.twin.spec_decode import predictability
    request = _request("fix the failing test in parser.py",
                       hints={"x-endurance-turn-kind": "edit"})

    async def send(twin: InProcessTwin) -> Any:
        drivers = [asyncio.create_task(d()) for d in twin.background()]
        try:
            return (await asyncio.wait_for(twin.send(request), 600)).extra["ngram_ref_passes"]
        finally:
            for d in drivers:
                d.cancel()
            await twin.aclose()

    first = run_virtual(send(InProcessTwin("h100", "qwen3-coder-30b-a3b-awq")))
    counts: list[int] = []
    common = predictability._common
    monkeypatch.setattr(predictability, "_common",
                        lambda *a: counts.append(1) or common(*a))
    again = run_virtual(send(InProcessTwin("h100", "qwen3-coder-30b-a3b-awq")))
    assert isinstance(first, int) and first > 0 and again == first and not counts
