"""Live turns' draws and replies-as-history are shared by the runs of one process
(`agent._draws`, `agent._replies`): a turn whose draws (history) an earlier run made
from the same state takes them, and gives what a fresh draw gives; a state that
differs in anything the draw (`_append_reply`) reads makes its own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simulator.clock import RunClock
from simulator.endpoints.base import LLMResponse, Timing, Usage
from simulator.endpoints.fake import FakeEndpoint
from simulator.records.prefix import PrefixTracker
from simulator.scenario.model import Scenario
from simulator.session import agent
from simulator.session.agent import Agent, _Pending
from simulator.session.context import RunContext
from simulator.session.conversation import TextBlock
from simulator.session.limiter import Limiter
from simulator.session.prefix import build_base_prefix, tools_json
from simulator.session.resume import StoredReply
from tests.conftest import small_scenario
from tests.warm_runs import team_rows


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    for memo, held in ((agent._draws, agent._draws_held), (agent._replies, agent._replies_held)):
        memo.clear()
        held[0] = 0
    yield
    for memo, held in ((agent._draws, agent._draws_held), (agent._replies, agent._replies_held)):
        memo.clear()
        held[0] = 0


def _agent(s: Scenario, index: int = 0, **ctx_kw: Any) -> Agent:
    base = build_base_prefix(s)
    clock = RunClock()
    ctx = RunContext("r", s, FakeEndpoint(), None, PrefixTracker(), clock,  # type: ignore[arg-type]
                     Limiter(None, None), base, tools_json(base), asyncio.Event(),
                     0.0, **ctx_kw)
    return Agent(ctx, index, base)


def _draw(s: Scenario, index: int, turn: int, pending: tuple[int, str] | None,
          last_read: str = "") -> tuple[Any, ...]:
    """A fresh agent's live draw of `turn` after the tool call `pending` (template
    index, id), with everything it leaves behind."""
    a = _agent(s, index)
    a.last_read = last_read
    if pending is not None:
        a.pending = _Pending(s.turn_templates[pending[0]], pending[1])
    msg, wait_s, template, max_tokens = a._live_draw(turn)
    return msg, wait_s, template.name, max_tokens, a.last_read


def _scenario(**over: Any) -> Scenario:
    grep = {"name": "grep", "weight": 1, "output_tokens": 80,
            "tool": {"kind": "grep", "result_tokens": 200, "latency_s": 0.3}}
    data = small_scenario(**{"compaction": {"kind": "none"}, **over})
    data["turn_templates"] = [*data["turn_templates"], grep]
    return Scenario.model_validate(data)


def test_every_state_the_draw_reads_keys_its_own_entry() -> None:
    s, other_seed = _scenario(), _scenario(seed=4)
    # (scenario, session, turn, pending): each differs from the first in one component
    states = [(s, 0, 5, (0, "toolu_a")), (s, 0, 5, (0, "toolu_b")), (s, 0, 5, (3, "toolu_a")),
              (s, 0, 5, None), (s, 1, 5, (0, "toolu_a")), (s, 0, 6, (0, "toolu_a")),
              (other_seed, 0, 5, (0, "toolu_a"))]
    cold = []
    for state in states:
        agent._draws.clear()
        cold.append(_draw(*state, last_read="before"))
    assert len({repr(c) for c in cold}) == len(states)   # each state draws differently
    agent._draws.clear()
    for state in states:                                  # one memo for all of them
        _draw(*state, last_read="before")
    assert len(agent._draws) == len(states)
    for state, expected in zip(states, cold, strict=True):
        assert _draw(*state, last_read="before") == expected   # hits, same draws
    hit = _draw(*states[0], last_read="before")
    assert _draw(*states[0])[0] is hit[0]                 # the same object each time
    # a read's body becomes last_read on a hit too; other tools leave it as it was
    assert hit[4] is hit[0].blocks[0].content
    assert _draw(*states[2], last_read="before")[4] == "before"


def test_a_warm_histories_pending_template_matches_by_value() -> None:
    s, again = _scenario(), _scenario()        # an earlier run's scenario object
    a = _agent(s)
    a.pending = _Pending(again.turn_templates[0], "toolu_a")
    key = a._draw_key(5)
    assert key is not None and key[3] == 0


def test_no_memo_with_planted_facts_or_on_resume() -> None:
    probes = Scenario.model_validate(small_scenario(probes={}, compaction={"kind": "none"}))
    assert _agent(probes)._draw_key(3) is None
    s = _scenario()
    resumed = _agent(s, replay={"s0000": {(0, "turn"): StoredReply((), 1, 1)}})
    assert resumed._draw_key(3) is None
    assert _agent(s)._draw_key(3) is not None


def test_the_memo_is_bounded_by_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent, "LIVE_DRAW_TOKENS", 1)
    s = _scenario()
    for turn in range(1, 5):
        _draw(s, 0, turn, None)
    assert len(agent._draws) == 1
    assert agent._draws_held[0] == next(iter(agent._draws.values())).message.tokens_est


def _reply(s: Scenario, index: int, turn: int, template: int, text: str,
           last_read: str = "") -> tuple[Any, ...]:
    """What a fresh agent's history and pending call are after a live reply `text`."""
    a = _agent(s, index)
    a.last_read = last_read
    resp = LLMResponse((TextBlock(text, 3),), "end_turn", Usage(output_tokens=3),
                       Timing(sent=0.0), 3)
    a._append_live_reply(resp, s.turn_templates[template], turn)
    return a.conv.messages, a.pending


def test_every_state_append_reply_reads_keys_its_own_entry() -> None:
    s, other_seed = _scenario(), _scenario(seed=5)
    read, edit = 0, 1
    first = (s, 0, 5, read, "def f():\n    pass", "src = 1")
    # each differs from the first in one component
    others = [(s, 0, 5, read, "def g():\n    pass", "src = 1"), (s, 1, 5, read, *first[4:]),
              (s, 0, 6, read, *first[4:]), (s, 0, 5, 3, *first[4:]),
              (other_seed, 0, 5, read, *first[4:])]
    edits = [(s, 0, 5, edit, "x", "src = 1"), (s, 0, 5, edit, "x", "src = 2")]
    for a, b in [*((first, o) for o in others), edits]:
        agent._replies.clear()
        expected = _reply(*b)
        assert _reply(*a) != expected
        assert _reply(*b) == expected              # not a's history
        hit = _reply(*b)
        assert hit == expected and len(agent._replies) == 2
        assert hit[0][-1] is _reply(*b)[0][-1]     # the same Message object
    # an answer leaves nothing pending, and its entry says so
    agent._replies.clear()
    assert _reply(s, 0, 5, 2, "done")[1] is None and _reply(s, 0, 5, 2, "done")[1] is None


def test_no_reply_memo_with_scripted_history() -> None:
    _reply(_scenario(history="scripted"), 0, 5, 0, "x")
    assert not agent._replies


@pytest.fixture
def drawn_turns(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The turns `Agent._next_user_message` draws from here on (a memo hit draws none)."""
    calls: list[int] = []
    draw = Agent._next_user_message

    def counted(self: Agent, turn: int, rng: Any) -> Any:
        calls.append(turn)
        return draw(self, turn, rng)
    monkeypatch.setattr(Agent, "_next_user_message", counted)
    return calls


def test_a_run_on_shared_draws_is_the_run_alone(tmp_path: Path, drawn_turns: list[int]) -> None:
    calls = drawn_turns
    alone = team_rows(tmp_path, "sessions=3")
    team_rows(tmp_path, "sessions=4")
    drawn, replied = len(agent._draws), len(agent._replies)
    calls.clear()
    shared = team_rows(tmp_path, "sessions=3")
    assert calls == [] and len(agent._draws) == drawn   # every live draw was a hit
    assert len(agent._replies) == replied                # and every reply
    pd.testing.assert_frame_equal(shared, alone)


def test_fleets_of_other_sizes_share_their_sessions_draws(tmp_path: Path,
                                                          drawn_turns: list[int]) -> None:
    """The fleet search's probes differ in `fleet.replicas` only, which no session reads:
    the second fleet neither draws a turn nor synthesises a warm history again."""
    calls = drawn_turns
    agent._warm.clear()
    team_rows(tmp_path, "sessions=4", "fleet.replicas=2", "fleet.router=prefix_aware")
    assert calls
    calls.clear()
    team_rows(tmp_path, "sessions=4", "fleet.replicas=3", "fleet.router=prefix_aware")
    assert calls == []
