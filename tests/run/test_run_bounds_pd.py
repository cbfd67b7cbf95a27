"""Issue 57 item 2: the in-process twin's fleet memory bound counts every instance of a
P/D fleet, prefill and decode (it counted the decode instances only, so `--pd 1024:1`
was accepted and peaked at 5 GB)."""

from __future__ import annotations

import pytest

from simulator.errors import InputError
from simulator.run.bounds import MAX_FLEET_KV_BLOCKS, check_runnable
from simulator.scenario.model import Scenario
from simulator.twin.model.perf_model import build_perf_model
from tests.conftest import small_scenario


def _fleet(**fleet: int) -> Scenario:
    return Scenario.model_validate(small_scenario(turns=1, compaction={"kind": "none"},
                                                  fleet=fleet))


def test_prefill_instances_count_toward_the_fleet_memory_bound() -> None:
    per = build_perf_model("a40", "qwen3-coder-30b-a3b-awq").num_blocks
    most = MAX_FLEET_KV_BLOCKS // per
    check_runnable(_fleet(prefill=most - 1, replicas=1))
    with pytest.raises(InputError) as err:
        check_runnable(_fleet(prefill=most, replicas=1))
    msg = str(err.value)
    assert f"{most:,} prefill + 1 decode" in msg and f"at most {most:,} instances" in msg
    with pytest.raises(InputError, match="1,024 prefill"):
        check_runnable(_fleet(prefill=1024, replicas=1))


def test_a_prefill_tp_changes_the_prefill_instances_blocks() -> None:
    """A prefill instance of TP 2 holds the blocks of two cards' memory: counted as its
    own perf model says, not as a decode instance's."""
    one = build_perf_model("a40", "qwen3-coder-30b-a3b-awq").num_blocks
    two = build_perf_model("a40", "qwen3-coder-30b-a3b-awq",
                           overrides={"tensor_parallel_size": 2}).num_blocks
    assert two > one
    n = (MAX_FLEET_KV_BLOCKS - one) // two + 1       # fits at TP 1, not at TP 2
    assert one * (n + 1) <= MAX_FLEET_KV_BLOCKS
    check_runnable(_fleet(prefill=n, replicas=1))
    with pytest.raises(InputError, match="prefill"):
        check_runnable(_fleet(prefill=n, replicas=1, prefill_tp=2))
