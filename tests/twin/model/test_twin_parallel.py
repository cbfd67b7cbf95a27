"""A replica of TP GPUs (`twin/model/parallel`): shards, refusals, vLLM's all-reduce choice."""

from __future__ import annotations

import pytest

from simulator.errors import InputError
from simulator.scenario.model import TwinSpec
from simulator.twin.core.decode_burst import decode_terms
from simulator.twin.core.types import StepShape
from simulator.twin.model import parallel
from simulator.twin.model.perf_model import build_perf_model, routing_probabilities
from simulator.twin.model.profiles import KV_DTYPE_BYTES, load_hardware, load_model

MIB = 1 << 20


def _tp(hw: str, model: str, tp: int, **over: object) -> object:
    return build_perf_model(hw, model, overrides={"tensor_parallel_size": tp, **over})


def test_tp1_is_the_one_card_model() -> None:
    one = build_perf_model("h100", "gpt-oss-120b")
    same = _tp("h100", "gpt-oss-120b", 1)
    shape = StepShape(num_seqs=8, num_tokens=520, kv_tokens_read=40_000, prefill_tokens=512,
                      attn_token_pairs=512 * 3000)
    assert same.step_time(shape) == one.step_time(shape)
    assert same.kv_capacity_tokens() == one.kv_capacity_tokens()
    assert same.describe() == one.describe()
    assert "parallel" not in one.describe()


def test_kv_pool_is_each_gpus_room_after_its_shard_times_tp() -> None:
    pm = _tp("h100", "llama-3.1-70b", 4)
    hw, m = pm.hardware, pm.model
    mem = pm.memory_terms()       # h100: vLLM's accounting per GPU (`twin/model/memory`)
    assert mem is not None and mem.term("weights_loaded") == pm.weights.total / 4
    room = mem.available
    kv = m.kv_bytes_per_token_bf16 * KV_DTYPE_BYTES[pm.engine.kv_dtype] / 2
    tokens = room * 4 / kv
    assert abs(pm.kv_capacity_tokens() - tokens) <= pm.block_size
    assert pm.describe()["hardware"]["usd_per_hour"] == pytest.approx(4 * hw.usd_per_hour)


def test_kv_heads_replicate_past_their_count() -> None:
    m = load_model("qwen3-coder-30b-a3b-awq")          # 4 KV heads
    assert m.num_kv_heads == 4
    assert parallel.kv_share(m, 2) == 0.5
    assert parallel.kv_share(m, 8) == 0.25             # one head each, replicated twice
    four, eight = _tp("h100", m.name, 4), _tp("h100", m.name, 8)
    assert eight.kv_bytes_per_token == four.kv_bytes_per_token


def test_refusals_name_the_fix() -> None:
    with pytest.raises(InputError, match=r"66\.\d GB short.*twin.tp 2 fits"):
        build_perf_model("h100", "llama-3.1-70b")
    with pytest.raises(InputError, match="64 attention heads do not divide by 3"):
        _tp("h100", "llama-3.1-70b", 3)
    with pytest.raises(InputError, match="no tp_link"):
        _tp("mi300x", "llama-3.1-70b", 2)
    with pytest.raises(InputError, match=r"needs 70\.\d GB of weights per GPU.*twin.tp 4 fits"):
        _tp("l40s", "llama-3.1-70b", 2)
    with pytest.raises(InputError, match="has no experts"):
        _tp("h100", "llama-3.1-70b", 2, enable_expert_parallel=True)
    with pytest.raises(InputError, match="domain holds"):
        _tp("h100", "gpt-oss-120b", 16)


def test_all_reduce_follows_vllms_choice() -> None:
    nv = load_hardware("h100").tp_link
    pcie = load_hardware("l40s").tp_link
    assert nv is not None and pcie is not None
    hopper = (9, 0)
    assert parallel.all_reduce(nv, 8, 100_000, hopper).algorithm == "custom one-shot"
    # Hopper with symmetric memory: 8 GPUs take the custom kernel under 256 KiB only
    assert parallel.all_reduce(nv, 8, 300_000, hopper).algorithm == "nccl"
    assert parallel.all_reduce(nv, 2, 4 * MIB, hopper).algorithm == "custom one-shot"
    assert parallel.all_reduce(nv, 4, MIB, hopper).algorithm == "custom two-shot"
    assert parallel.all_reduce(nv, 4, 9 * MIB, hopper).algorithm == "nccl"   # over 8 MiB
    assert parallel.all_reduce(pcie, 4, 1000, (8, 9)).algorithm == "nccl"    # PCIe, > 2
    assert parallel.all_reduce(pcie, 2, 1000, (8, 9)).algorithm == "custom one-shot"
    big = parallel.all_reduce(nv, 8, 64 * MIB, hopper).seconds
    assert big == pytest.approx(nv.nccl_latency_s + 2 * 7 / 8 * 64 * MIB / nv.nccl_bus_bytes_s)


def test_tp_step_divides_the_work_and_adds_the_all_reduces() -> None:
    one, two = build_perf_model("h100", "llama-3.1-8b"), _tp("h100", "llama-3.1-8b", 2)
    shape = StepShape(num_seqs=1, num_tokens=1, kv_tokens_read=3000)
    assert one.step_time(shape) / 2 < two.step_time(shape) < one.step_time(shape)
    calls = parallel.all_reduces_per_step(two.model)
    assert calls == 64
    # the priced all-reduce plus the card's fitted residual per call (`allreduce_s`)
    residual = two.efficiency.allreduce_s
    assert two.comm_time(1) == pytest.approx(calls * (parallel.all_reduce(
        two.hardware.tp_link, 2, 4096 * 2.0, (9, 0)).seconds + residual))
    # the engine's decode fast path reproduces step_time bit for bit at TP 2
    for n in (1, 7, 64):
        terms = decode_terms(two, n)
        assert terms is not None
        assert terms.step(n * 2000) == two.step_time(StepShape(n, n, n * 2000, 0, 0.0))


def test_expert_parallel_waits_for_the_hottest_gpu() -> None:
    even = parallel.expert_split(tuple(routing_probabilities(128, 4, 0.0).tolist()), 8, 4096)
    assert even.token_share == pytest.approx(1 / 8)
    assert even.touched[4096] == pytest.approx(16.0, abs=1e-6)
    skewed = parallel.expert_split(tuple(routing_probabilities(128, 4, 1.0).tolist()), 8, 64)
    assert skewed.token_share > 1 / 8
    assert skewed.touched[0] == 0.0
    tp, ep = _tp("h100", "gpt-oss-120b", 4), _tp("h100", "gpt-oss-120b", 4,
                                                  enable_expert_parallel=True)
    assert ep.kv_capacity_tokens() == tp.kv_capacity_tokens()
    assert ep.describe()["parallel"]["ep"] is True


def test_twin_settings_reach_the_engine() -> None:
    assert TwinSpec(tp=4, ep=True).engine_overrides()["tensor_parallel_size"] == 4
    assert TwinSpec(tp=4, ep=True).engine_overrides()["enable_expert_parallel"] is True
    assert "tensor_parallel_size" not in TwinSpec().engine_overrides()
