"""Live turns' draws are shared by the runs of one process (`agent._draws`): a turn
whose draws an earlier run made from the same state takes them, and gives what a
fresh draw gives; a state that differs in anything the draw reads draws its own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simulator.clock import RunClock
from simulator.endpoints.fake import FakeEndpoint
from simulator.records.prefix import PrefixTracker
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario.model import Scenario
from simulator.session import agent
from simulator.session.agent import Agent, _Pending
from simulator.session.context import RunContext
from simulator.session.limiter import Limiter
from simulator.session.prefix import build_base_prefix, tools_json
from simulator.session.resume import StoredReply
from tests.conftest import small_scenario

ROOT = Path(__file__).resolve().parents[2]
TEAM = str(ROOT / "scenarios" / "claude-code-team.yaml")


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    agent._draws.clear()
    agent._draws_held[0] = 0
    yield
    agent._draws.clear()
    agent._draws_held[0] = 0


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


def _rows(tmp: Path, *overrides: str) -> pd.DataFrame:
    res = execute(RunSpec(TEAM, ["turns=12", "load.warm_start=true", *overrides], out_dir=tmp,
                          show_progress=False), echo=lambda s: None)
    assert res.status == "completed", res.outcome.reason
    t = pd.read_parquet(res.run_dir / "turns.parquet")
    return t.drop(columns=["run_id", "started_at"]).reset_index(drop=True)


def test_a_run_on_shared_draws_is_the_run_alone(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    draw = Agent._next_user_message

    def counted(self: Agent, turn: int, rng: Any) -> Any:
        calls.append(turn)
        return draw(self, turn, rng)
    monkeypatch.setattr(Agent, "_next_user_message", counted)
    alone = _rows(tmp_path, "sessions=3")
    _rows(tmp_path, "sessions=4")
    drawn = len(agent._draws)
    calls.clear()
    shared = _rows(tmp_path, "sessions=3")
    assert calls == [] and len(agent._draws) == drawn   # every live draw was a hit
    pd.testing.assert_frame_equal(shared, alone)
