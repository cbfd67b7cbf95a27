"""The twin's planned replies are shared by the runs of one process (`reply._planned`):
a request planned before with the same arguments gets the same reply as a fresh plan,
and arguments that differ in anything `plan_reply` reads plan their own."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simulator.twin.serve import reply, textgen
from simulator.util import tokens
from tests.warm_runs import team_rows


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    reply._planned.clear()
    reply._planned_held[0] = 0
    yield
    reply._planned.clear()
    reply._planned_held[0] = 0


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
