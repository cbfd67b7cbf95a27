"""The twin's speed work keeps results exact: inline decode terms equal `step_time`, the
burst path equals the general step loop, the engine tracks its own KV peak, and the
identity-cached prompt encoding equals the plain one."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from simulator.session.conversation import Message, Prefix, TextBlock, ToolResultBlock, ToolUseBlock
from simulator.twin.core.config import TwinEngineConfig, engine_config
from simulator.twin.core.decode_burst import decode_terms
from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import EngineRequest, StepShape
from simulator.twin.model.perf_model import RooflinePerfModel, build_perf_model
from simulator.twin.serve.prompt import PromptTokenizer


def _toks(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(50_000) for _ in range(n)]


@pytest.mark.parametrize("profile", [("a40", "qwen3-coder-30b-a3b-awq"), ("h100", "llama-3.1-8b")])
def test_decode_terms_equal_step_time_bit_for_bit(profile: tuple[str, str]) -> None:
    perf = build_perf_model(*profile)
    rng = random.Random(3)
    for n in (1, 2, 7, 32, 128, 256):
        terms = decode_terms(perf, n)
        assert terms is not None, f"inline terms rejected for {profile} n={n}"
        for kv in [rng.randrange(0, 2_000_000) for _ in range(200)]:
            assert terms.step(kv) == perf.step_time(StepShape(n, n, kv, 0, 0.0))


def test_decode_terms_refuse_other_models() -> None:
    class Other:
        def step_time(self, shape: StepShape) -> float:
            return 0.01

    assert decode_terms(Other(), 4) is None


class _NoTerms:
    """A roofline model seen through a wrapper: the engine must use `step_time`."""

    def __init__(self, perf: object) -> None:
        self._perf = perf

    def __getattr__(self, name: str) -> object:
        if name == "decode_terms":      # a model without the public terms method
            raise AttributeError(name)
        return getattr(self._perf, name)


def _pool(perf: RooflinePerfModel, num_blocks: int, block_size: int) -> TwinEngineConfig:
    """`perf`'s engine settings with a KV pool of `num_blocks` blocks of `block_size`."""
    cfg = engine_config(perf)
    return replace(cfg, cache=replace(cfg.cache, num_gpu_blocks=num_blocks,
                                      block_size=block_size))


def _drain(eng: TwinEngine, reqs: list[EngineRequest]) -> dict[str, list[float]]:
    for r in reqs:
        eng.submit(r)
    for _ in range(100_000):
        if eng.is_idle():
            break
        eng.run_until(float("inf"))
    return {r.request_id: eng.pop_result(r.request_id).token_times for r in reqs}


def test_inline_burst_equals_step_time_burst() -> None:
    perf = build_perf_model("a40", "qwen3-coder-30b-a3b-awq")

    def reqs() -> list[EngineRequest]:
        return [EngineRequest(f"r{i}", _toks(3000 + 500 * i, i), _toks(300 + 40 * i, 50 + i),
                              0.05 * i) for i in range(6)]

    fast = _drain(TwinEngine(perf), reqs())
    slow_engine = TwinEngine(_NoTerms(perf), engine_config(perf))   # type: ignore[arg-type]
    slow = _drain(slow_engine, reqs())
    assert slow_engine._terms and all(t is None for t in slow_engine._terms.values())
    assert fast == slow


def test_engine_tracks_kv_usage_peak() -> None:
    perf = build_perf_model("h100", "llama-3.1-8b")
    eng = TwinEngine(perf, _pool(perf, 400, 16))
    assert eng.kv_usage_peak == 0.0
    _drain(eng, [EngineRequest("a", _toks(2000, 1), _toks(400, 2), 0.0),
                 EngineRequest("b", _toks(1500, 3), _toks(300, 4), 0.0)])
    # the peak is b's last step (token 300): b holds ⌈1800/16⌉ = 113 blocks and a, with
    # 300 of its tokens out, ⌈2300/16⌉ = 144; sampling after the pool drained says 0
    assert eng.kv_usage() == 0.0
    assert eng.kv_usage_peak == (113 + 144) / 400


def _conversation(n: int) -> tuple[Message, ...]:
    msgs: list[Message] = [Message("user", (TextBlock("please fix the failing test"),))]
    for i in range(n):
        msgs.append(Message("assistant", (TextBlock(f"Reading file {i}.\n    x = {i}"),
                                          ToolUseBlock(f"toolu_{i}", "Read",
                                                       f'{{"path": "src/m{i}.py"}}'))))
        msgs.append(Message("user", (ToolResultBlock(f"toolu_{i}", f"def f{i}():\n    return {i}\n",
                                                     i % 3 == 0, "Read"),)))
    return tuple(msgs)


def test_identity_cached_encoding_equals_plain_encoding() -> None:
    prefix = Prefix("You are a coding agent.", ({"name": "Read", "description": "read",
                                                 "input_schema": {"type": "object"}},), 6, 20)
    plain, cached = PromptTokenizer(), PromptTokenizer()
    conv = _conversation(6)
    for upto in range(1, len(conv) + 1):
        msgs = conv[:upto]

        def head() -> tuple[object, object]:
            return ([{"type": "text", "text": prefix.system,
                      "cache_control": {"type": "ephemeral"}}], list(prefix.tools))

        system, tools = head()
        want = plain.encode_request(system=system, tools=tools,
                                    messages=[m.to_api() for m in msgs])
        assert cached.encode_objects(prefix, head, msgs) == want
    # every message was encoded once, however often the conversation was re-sent
    assert cached.encode_calls == len(conv) + 3


def test_prefix_tracker_heads_stay_bounded() -> None:
    from simulator.records.prefix import PrefixTracker
    tracker = PrefixTracker(max_heads=6)
    conv = _conversation(1)
    for i in range(50):     # a per-request cache-buster: every request a new head
        prefix = Prefix(f"nonce {i}; you are a coding agent.", (), 9, 0)
        tracker.observe(f"s{i}", prefix, conv[:1], "")
        assert tracker.observe(f"s{i}", prefix, conv, "") >= prefix.tokens_est
        tracker.forget(f"s{i}")
    assert len(tracker._heads) <= 6 and len(tracker._head_segs) <= 6


@pytest.mark.parametrize("block_size", [1, 2, 3, 16])
def test_burst_at_any_block_size_equals_the_step_loop(block_size: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A block size of 1 used to crash the burst: it registered the block of the token
    still to compute (vLLM caches only tokens scheduled so far), which had no slot yet."""
    import simulator.twin.core.engine as engine_module
    perf = build_perf_model("h100", "llama-3.1-8b")

    def reqs() -> list[EngineRequest]:
        return [EngineRequest(f"r{i}", _toks(200 + 37 * i, i), _toks(60 + 11 * i, 50 + i),
                              0.01 * i) for i in range(4)]

    burst = _drain(TwinEngine(perf, _pool(perf, 20_000, block_size)), reqs())
    monkeypatch.setattr(engine_module, "burst_len", lambda *_: 0)   # one step at a time
    stepped = _drain(TwinEngine(perf, _pool(perf, 20_000, block_size)), reqs())
    assert burst == stepped
    assert [len(t) for t in burst.values()] == [60 + 11 * i for i in range(4)]


@pytest.mark.parametrize("num_blocks", [20_000, 200])
def test_bursts_cut_by_many_horizons_equal_the_step_loop(
        num_blocks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet's drivers stop each engine at every other engine's wake-up, so one batch
    runs as many short bursts that carry what `burst_len` and the block room gave the
    first; arrivals between them, requests finishing and (with a small pool) blocks
    running out change the batch. Token times equal the one-step-at-a-time loop's."""
    import simulator.twin.core.engine as engine_module
    perf = build_perf_model("h100", "llama-3.1-8b")

    def reqs() -> list[EngineRequest]:
        return [EngineRequest(f"r{i}", _toks(150 + 37 * i, i), _toks(90 + 13 * i, 50 + i),
                              0.004 * i * i) for i in range(7)]

    def cut(eng: TwinEngine) -> tuple[dict[str, list[float]], int]:
        waiting = reqs()
        for r in waiting[:3]:
            eng.submit(r)
        later, horizons = waiting[3:], 0
        for i in range(100_000):
            if eng.is_idle() and not later:
                break
            if later and i % 5 == 4:             # an arrival between two horizons
                eng.submit(later.pop(0))
            eng.run_until(eng.now + 0.0037)      # shorter than most batches' bursts
            horizons += 1
        return {r.request_id: eng.pop_result(r.request_id).token_times
                for r in reqs()}, horizons

    burst, horizons = cut(TwinEngine(perf, _pool(perf, num_blocks, 4)))
    assert horizons > 100
    monkeypatch.setattr(engine_module, "burst_len", lambda *_: 0)   # one step at a time
    stepped, _ = cut(TwinEngine(perf, _pool(perf, num_blocks, 4)))
    assert burst == stepped
    assert [len(t) for t in burst.values()] == [90 + 13 * i for i in range(7)]
