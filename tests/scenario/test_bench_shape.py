"""The benchmark load shape as a scenario (`scenario/bench.py`): what the `bench:` block
sets, and what it refuses in one line."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from simulator.scenario.bench import BenchSpec, expand
from simulator.scenario.model import Constant, Scenario, Uniform


def _scenario(**bench: object) -> Scenario:
    return Scenario.model_validate({"name": "b", "bench": {"input_tokens": 1000,
                                                          "output_tokens": 100, **bench}})


def test_closed_loop_is_all_at_once_under_a_semaphore_of_c() -> None:
    s = _scenario(concurrency=16, requests=40, warmups=4)
    assert (s.sessions, s.turns) == (44, 1)
    assert s.arrival.pattern == "all_at_once"
    assert s.limits.max_in_flight == 16
    assert s.retry.max_attempts == 1            # a failed request counts as failed
    assert s.sampling.sent() == {"ignore_eos": True}
    assert s.output_control == "max_tokens"
    assert s.tools.count == 0 and s.tools.tokens == 0 and s.system.tokens == 0
    assert isinstance(s.first_prompt_tokens, Constant) and s.first_prompt_tokens.value == 1000
    out = s.turn_templates[0].output_tokens
    assert isinstance(out, Constant) and out.value == 100 and s.turn_templates[0].tool is None


def test_request_rate_is_poisson_and_no_limit_without_concurrency() -> None:
    s = _scenario(request_rate=2.5)
    assert (s.arrival.pattern, s.arrival.rate_per_s) == ("poisson", 2.5)
    assert s.limits.max_in_flight is None


def test_shared_prefix_is_the_system_prompt_and_the_rest_is_per_request() -> None:
    s = _scenario(prefix_share=0.25)
    assert s.system.tokens == 250
    assert isinstance(s.first_prompt_tokens, Constant) and s.first_prompt_tokens.value == 750


def test_range_ratio_draws_lengths_uniformly_around_the_mean() -> None:
    s = _scenario(range_ratio=0.5)
    d = s.first_prompt_tokens
    assert isinstance(d, Uniform) and (d.low, d.high) == (500, 1500)
    assert math.isclose(d.mean, 1000)


def test_the_workload_of_a_scenario_file_is_replaced_its_model_kept() -> None:
    data = {"name": "b", "model": "m", "sessions": 3, "turns": 9,
            "limits": {"max_in_flight": 2, "requests_per_s": 5.0},
            "bench": {"input_tokens": 10, "output_tokens": 5, "concurrency": 4}}
    s = Scenario.model_validate(data)
    assert (s.model, s.sessions, s.turns) == ("m", 100, 1)
    assert s.limits.max_in_flight == 4 and s.limits.requests_per_s == 5.0


@pytest.mark.parametrize(("extra", "needle"), [
    ({"load": {"duration_s": 60}}, "duration_s"),
    ({"probes": {"every_turns": 1}}, "probes"),
])
def test_what_cannot_be_a_benchmark_is_refused(extra: dict[str, object], needle: str) -> None:
    data = {"name": "b", "bench": {"input_tokens": 10, "output_tokens": 5}, **extra}
    with pytest.raises((ValueError, ValidationError), match=needle):
        Scenario.model_validate(data)


@pytest.mark.parametrize("bad", [
    {"input_tokens": 0, "output_tokens": 5}, {"input_tokens": 10, "output_tokens": True},
    {"input_tokens": 10, "output_tokens": 5, "request_rate": float("nan")},
    {"input_tokens": 10, "output_tokens": 5, "range_ratio": 1.0},
    {"input_tokens": 10, "output_tokens": 5, "requests": 100_000, "warmups": 1},
    {"input_tokens": 10, "output_tokens": 5, "concurrency": "8"},
    {"input_tokens": 10, "output_tokens": 5, "speed": 1},
])
def test_bad_blocks_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        BenchSpec.model_validate(bad)


def test_data_without_a_bench_block_is_unchanged() -> None:
    data = {"name": "x", "sessions": 3}
    assert expand(data) == data
