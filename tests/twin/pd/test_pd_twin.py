"""Prefill/decode disaggregation on the twin (`endpoints/inprocess/pd.py`, `twin/pd`)."""

from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.clock.virtual import run_virtual
from simulator.endpoints.base import LLMRequest, LLMResponse
from simulator.endpoints.inprocess.fleet import InProcessFleet
from simulator.endpoints.inprocess.pd import InProcessPD, infinite_link, link_spec
from simulator.protocol.messages import Message, Prefix, TextBlock
from simulator.twin.core.types import StepShape
from simulator.twin.fleet.router import RouterConfig
from simulator.twin.pd.policy import LinkSpec, PDConfig
from tests.conftest import SCENARIOS, run_scenario, turns_of

TEAM = SCENARIOS / "claude-code-team.yaml"
SMALL = ["sessions=4", "turns=5", "arrival.interval_s=0.5", "seed=11"]
HW, MODEL = "h100", "qwen3-coder-30b-a3b-awq"
PD_COLUMNS = ["prefill_where", "kv_transfer_bytes", "kv_transfer_wait_s"]
LABELS = ["started_at", "run_id"]
PREFIX = Prefix("You are a coding agent.", (), 6, 0)


def test_threshold_above_every_prompt_is_the_aggregated_affinity_fleet(tmp_path: Path) -> None:
    """No remote prefill: the decode instances are an aggregated fleet under session
    affinity on the same cards, row for row (the prefill card idles)."""
    never = PDConfig(1, 2, link_spec(HW, "infiniband"), max_local_prefill=10**9)
    pd_run = run_scenario(TEAM, tmp_path, SMALL, endpoint=InProcessPD(HW, MODEL, config=never,
                                                                      seed=11))
    agg = run_scenario(TEAM, tmp_path, SMALL, endpoint=InProcessFleet(
        HW, MODEL, replicas=2, router=RouterConfig("session_affinity"), seed=11))
    a, b = turns_of(pd_run), turns_of(agg)
    assert (a.prefill_where == "local").all() and a.kv_transfer_bytes.isna().all()
    assert b.prefill_where.isna().all()
    pd.testing.assert_frame_equal(a.drop(columns=LABELS + PD_COLUMNS),
                                  b.drop(columns=LABELS + PD_COLUMNS))
    assert pd_run.summary["engine"]["pd"]["remote_prefills"] == 0


def test_a_pd_run_prefills_long_prompts_remotely_and_pulls_their_kv(tmp_path: Path) -> None:
    res = run_scenario(TEAM, tmp_path, [*SMALL, "fleet.prefill=1", "fleet.replicas=2"],
                       twin=f"{HW}/{MODEL}")
    df = turns_of(res)
    remote = df[df.prefill_where == "remote"]
    assert len(remote) >= 2                          # each decode card's first ~20k prompt
    assert (remote.kv_transfer_bytes > 0).all() and (remote.kv_transfer_wait_s > 0).all()
    local = df[df.prefill_where == "local"]
    assert len(local) > len(remote)                  # follow-up turns: a few new tokens
    pdx = res.summary["engine"]["pd"]
    assert pdx["remote_prefills"] == len(remote) and pdx["kv_transfers"] == len(remote)
    assert pdx["kv_transfer_bytes"] == pytest.approx(remote.kv_transfer_bytes.sum())


def _words(words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(("parse", "lexer", "token", "build", "test", "fix", "diff",
                                "module", "error", "retry")) + str(rng.randrange(100))
                    for _ in range(words))


def _request(words: int, seed: int, session: str) -> LLMRequest:
    return LLMRequest("m", PREFIX, (Message("user", (TextBlock(_words(words, seed)),)),), 16,
                      session_id=session)


def _serve(pd_twin: InProcessPD, requests: list[LLMRequest]) -> list[LLMResponse]:
    """The requests one after another (none overlaps another) on the virtual clock."""
    async def go() -> list[LLMResponse]:
        drivers = [asyncio.create_task(d()) for d in pd_twin.background()]
        try:
            return [await asyncio.wait_for(pd_twin.send(r), 3600) for r in requests]
        finally:
            for d in drivers:
                d.cancel()
            await pd_twin.aclose()
    return run_virtual(go())


def _ttft(r: LLMResponse) -> float:
    assert r.timing.first_token is not None
    return r.timing.first_token - r.timing.sent


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(200, 6000), min_size=1, max_size=4),
       seed=st.integers(0, 1000), same_session=st.booleans())
def test_an_instant_link_adds_nothing_to_ttft(sizes: list[int], seed: int,
                                              same_session: bool) -> None:
    """With an infinitely fast link a remote prefill's TTFT is the prefill instance's
    queue plus compute, plus what the decode side cannot avoid under vLLM's connector:
    the one-token step that recomputes the prompt's last token and samples the first
    (the decode card is otherwise idle here). The transfer wait is 0."""
    twin = InProcessPD(HW, MODEL, config=PDConfig(1, 1, infinite_link(), max_local_prefill=0))
    reqs = [_request(n, seed + i, "s0" if same_session else f"s{i}")
            for i, n in enumerate(sizes)]
    perf = twin.decodes[0].perf
    checked = 0
    for resp in _serve(twin, reqs):
        x: dict[str, Any] = resp.extra
        if x["prefill_where"] != "remote":
            continue
        checked += 1
        assert x["kv_transfer_wait_s"] == 0.0
        n = resp.usage.prompt_tokens or 0
        one_step = perf.step_time(StepShape(1, 1, n))
        assert _ttft(resp) <= x["prefill_queue_s"] + x["prefill_s"] + one_step + 1e-9
    assert checked >= 1                       # the first prompt is cold: always remote


def test_a_finite_link_makes_ttft_pay_the_transfer() -> None:
    req = [_request(4000, 1, "s0")]
    fast = _serve(InProcessPD(HW, MODEL, config=PDConfig(1, 1, infinite_link(), 0)), req)[0]
    slow_link = LinkSpec("slow", 1e9, 1e-3)          # 1 GB/s, 1 ms
    slow = _serve(InProcessPD(HW, MODEL, config=PDConfig(1, 1, slow_link, 0)), req)[0]
    nbytes = slow.extra["kv_transfer_bytes"]
    assert nbytes > 0 and slow.extra["prefill_where"] == "remote"
    want = 1e-3 + nbytes / 1e9
    assert slow.extra["kv_transfer_wait_s"] == pytest.approx(want, rel=1e-6)
    assert _ttft(slow) == pytest.approx(_ttft(fast) + want, rel=1e-6)


def test_the_decode_instance_keeps_the_session_and_pulls_only_what_it_lacks() -> None:
    """Turn 2 repeats turn 1's prompt and adds to it: the decode side's own hit is not
    transferred again (NixlConnector pulls prompt − local hit)."""
    first = _request(3000, 5, "s0")
    more = LLMRequest("m", PREFIX, (*first.messages,
                                    Message("assistant", (TextBlock("ok"),)),
                                    Message("user", (TextBlock(_words(2000, 6)),))), 16,
                      session_id="s0")
    twin = InProcessPD(HW, MODEL, config=PDConfig(1, 1, link_spec(HW, "infiniband"), 500))
    a, b = _serve(twin, [first, more])
    assert a.extra["prefill_where"] == b.extra["prefill_where"] == "remote"
    per_token = twin.link.bytes_per_token
    pulled_b = b.extra["kv_transfer_bytes"] / per_token
    assert pulled_b < (b.usage.prompt_tokens or 0) - 2000     # most of turn 1 stayed on D
    assert math.isclose(twin.link.counters.bytes,
                        a.extra["kv_transfer_bytes"] + b.extra["kv_transfer_bytes"])
