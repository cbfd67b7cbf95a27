"""Engine: vLLM V1 scheduling, prefix caching, preemption, speculation, fast path."""

from __future__ import annotations

import random

import pytest

from simulator.twin.core.config import plain_config
from simulator.twin.core.engine import RequestTooLong, TwinEngine
from simulator.twin.core.types import EngineRequest, StepShape
from simulator.twin.spec_decode.ngram import NgramSpec, parse_spec


class FakePerf:
    """Step time linear in tokens and context; records every shape it is asked about."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self.shapes: list[StepShape] = []

    def step_time(self, shape: StepShape) -> float:
        self.shapes.append(shape)
        return 0.01 + 1e-4 * shape.num_tokens + 1e-7 * shape.kv_tokens_read

    def kv_capacity_tokens(self) -> int:
        return self.capacity


def _toks(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(50_000) for _ in range(n)]


def _run_all(eng: TwinEngine, limit: int = 100_000) -> None:
    for _ in range(limit):
        if eng.is_idle():
            return
        eng.run_until(float("inf"))
    raise AssertionError("engine did not drain")


def test_single_request_emits_plan_with_first_token_at_prefill_end() -> None:
    perf = FakePerf()
    eng = TwinEngine(perf, plain_config(perf, max_num_batched_tokens=512))
    eng.submit(EngineRequest("a", _toks(100, 1), _toks(20, 2), 0.0))
    out = eng.step()
    assert out is not None and out.admitted == ("a",) and out.emitted == (("a", 1),)
    assert perf.shapes[0].prefill_tokens == 100
    _run_all(eng)
    res = eng.pop_result("a")
    assert len(res.token_times) == 20 and res.finished == res.token_times[-1]
    assert res.first_token == out.end and res.cached_tokens == 0
    assert eng.counters.generation_tokens == 20 and eng.counters.prompt_tokens == 100
    assert eng.kv_usage() == 0.0 and eng.counters.requests_finished == 1


def test_follow_up_turn_hits_prompt_and_reply_block_exactly() -> None:
    eng = TwinEngine(FakePerf())
    p1, r1 = _toks(1000, 1), _toks(70, 2)
    eng.submit(EngineRequest("t1", p1, r1, 0.0))
    _run_all(eng)
    p2 = p1 + r1 + _toks(50, 3)
    eng.submit(EngineRequest("t2", p2, _toks(5, 4), eng.now))
    _run_all(eng)
    # the last sampled token of t1 was never computed, so its KV isn't cached
    assert eng.result("t2").cached_tokens == (1000 + 70 - 1) // 16 * 16
    c = eng.counters
    assert c.prefix_cache_queries == 1000 + len(p2)
    assert c.prefix_cache_hits == eng.result("t2").cached_tokens


@pytest.mark.parametrize("x", [0, 15, 16, 17, 500, 999])
def test_prefix_changed_at_x_hits_x_rounded_down(x: int) -> None:
    eng = TwinEngine(FakePerf())
    p1 = _toks(1000, 1)
    eng.submit(EngineRequest("a", p1, [1], 0.0))
    _run_all(eng)
    p2 = list(p1)
    p2[x] = 50_001
    eng.submit(EngineRequest("b", p2, [1], eng.now))
    _run_all(eng)
    assert eng.result("b").cached_tokens == x // 16 * 16


def test_identical_prompt_hit_is_capped_below_prompt_length() -> None:
    eng = TwinEngine(FakePerf())
    p = _toks(64, 1)
    for rid in ("a", "b"):
        eng.submit(EngineRequest(rid, p, [1, 2], eng.now))
        _run_all(eng)
    assert eng.result("b").cached_tokens == 48        # (64 − 1) // 16 blocks


def test_chunked_prefill_obeys_budget_and_seat_cap() -> None:
    perf = FakePerf()
    eng = TwinEngine(perf, plain_config(perf, max_num_batched_tokens=256, max_num_seqs=2))
    for i in range(5):
        eng.submit(EngineRequest(f"r{i}", _toks(700, i), _toks(30, 10 + i), 0.0))
    while not eng.is_idle():
        out = eng.step()
        assert out is not None
        assert eng.num_running() <= 2
    assert all(s.num_tokens <= 256 for s in perf.shapes)
    assert max(s.num_seqs for s in perf.shapes) <= 2
    assert sum(s.prefill_tokens for s in perf.shapes) == 5 * 700
    assert all(len(eng.result(f"r{i}").token_times) == 30 for i in range(5))


def test_preemption_on_block_exhaustion_recomputes_and_finishes() -> None:
    # 24 blocks of 16 = 384 tokens; two requests of 100 + 150 planned can't both fit
    eng = TwinEngine(perf := FakePerf(), plain_config(perf, num_blocks=24))
    eng.submit(EngineRequest("a", _toks(100, 1), _toks(150, 2), 0.0))
    eng.submit(EngineRequest("b", _toks(100, 3), _toks(150, 4), 0.0))
    _run_all(eng)
    a, b = eng.result("a"), eng.result("b")
    assert eng.counters.preemptions >= 1
    assert b.num_preemptions >= 1 and a.num_preemptions == 0   # the later one goes
    assert len(a.token_times) == 150 and len(b.token_times) == 150
    assert b.token_times == sorted(b.token_times)
    assert eng.counters.prefix_cache_queries > 200             # re-admission counted
    assert b.cached_tokens == 0                                 # first admission's hit


def test_request_larger_than_cache_is_refused() -> None:
    eng = TwinEngine(perf := FakePerf(), plain_config(perf, num_blocks=4))
    with pytest.raises(RequestTooLong):
        eng.submit(EngineRequest("a", _toks(60, 1), _toks(10, 2), 0.0))


def test_run_until_idles_to_t_and_waits_for_arrivals() -> None:
    eng = TwinEngine(FakePerf())
    assert eng.run_until(5.0) == [] and eng.now == 5.0
    eng.submit(EngineRequest("a", _toks(50, 1), _toks(3, 2), 8.0))
    assert eng.num_waiting() == 1 and eng.step() is None
    assert eng.run_until(7.0) == [] and eng.now == 7.0
    assert eng.run_until(100.0) == ["a"]
    assert eng.result("a").first_scheduled == 8.0
    eng.pop_result("a")
    with pytest.raises(KeyError):
        eng.result("a")


def _trace(use_step: bool, spec: NgramSpec | None) -> list[list[float]]:
    eng = TwinEngine(perf := FakePerf(), plain_config(
        perf, num_blocks=40, max_num_batched_tokens=128, spec=spec))
    base = _toks(200, 9)
    for i in range(4):
        plan = base[50:50 + 60] + _toks(40, 20 + i)
        eng.submit(EngineRequest(f"r{i}", base + _toks(20, i), plan, 0.05 * i))
    for _ in range(100_000):
        if eng.is_idle():
            break
        if use_step:
            if eng.step() is None:
                eng.run_until(eng.now + 0.01)
        else:
            eng.run_until(float("inf"))
    return [eng.result(f"r{i}").token_times for i in range(4)]


@pytest.mark.parametrize("spec", [None, NgramSpec(4)])
def test_fast_path_matches_step_by_step_and_is_deterministic(spec: NgramSpec | None) -> None:
    slow = _trace(True, spec)
    fast = _trace(False, spec)
    assert fast == _trace(False, spec)
    assert [len(t) for t in fast] == [100] * 4
    assert [[round(x, 9) for x in t] for t in slow] == [[round(x, 9) for x in t] for t in fast]


def _tokens_per_step(plan_from_prompt: bool) -> float:
    eng = TwinEngine(perf := FakePerf(), plain_config(perf, spec=parse_spec("ngram:8")))
    prompt = _toks(2000, 1)
    plan = prompt[1200:1500] if plan_from_prompt else _toks(300, 2)
    eng.submit(EngineRequest("a", prompt, plan, 0.0))
    _run_all(eng)
    res = eng.result("a")
    assert len(res.token_times) == 300
    return len(res.token_times) / len(set(res.token_times))


def test_spec_decode_emits_more_per_step_on_copied_text() -> None:
    copied, fresh = _tokens_per_step(True), _tokens_per_step(False)
    assert copied > 4.0 and fresh < 1.2


def test_parse_spec() -> None:
    assert parse_spec("off") is None and parse_spec(None) is None
    assert parse_spec("ngram:24") == NgramSpec(24)
    with pytest.raises(ValueError, match="ngram:K"):
        parse_spec("eagle:3")
