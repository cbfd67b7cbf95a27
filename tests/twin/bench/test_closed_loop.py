"""The twin's `vllm bench serve`: vLLM's metric definitions on cases worked by hand, the
semaphore's closed loop, warm-up excluded, the same load giving the same numbers."""

from __future__ import annotations

import pytest

from simulator.errors import InputError
from simulator.twin.bench.closed_loop import BenchLoad, RequestTiming, run_bench, summarize
from simulator.twin.core.types import StepShape


class Steps:
    """Every step takes `fixed` + `per_token` × its tokens (seconds)."""

    def __init__(self, fixed: float = 0.01, per_token: float = 0.0) -> None:
        self.fixed, self.per_token = fixed, per_token

    def step_time(self, shape: StepShape) -> float:
        return self.fixed + self.per_token * shape.num_tokens

    def kv_capacity_tokens(self) -> int:
        return 1 << 20


def test_one_request_by_hand() -> None:
    """Prefill step (10 ms) gives the first token, 4 decode steps the rest."""
    r = run_bench(Steps(), BenchLoad(100, 5, 1, warmups=0))
    assert r.mean_ttft_ms == pytest.approx(10.0)
    assert r.mean_e2el_ms == pytest.approx(50.0)
    assert r.mean_tpot_ms == pytest.approx(10.0)          # (50 − 10) / (5 − 1)
    assert r.requests[0].itl_s == pytest.approx((0.01,) * 4)
    assert r.duration == pytest.approx(0.05)
    assert r.output_throughput == pytest.approx(100.0)    # 5 tokens / 0.05 s
    assert r.total_input_tokens == 100 and r.total_output_tokens == 5


def test_a_client_that_waits_for_text_times_the_token_with_text() -> None:
    """gpt-oss's chat stream carries no text for its 3 header tokens: a client that times
    the first chunk with text (token 4) sees TTFT 40 ms, ITL from token 4 on, the same E2E,
    and TPOT over every generated token (vLLM's usage count)."""
    r = run_bench(Steps(), BenchLoad(100, 6, 1, warmups=0, first_timed_token=4))
    req = r.requests[0]
    assert req.ttft_s == pytest.approx(0.04)
    assert req.e2e_s == pytest.approx(0.06)
    assert req.itl_s == pytest.approx((0.01, 0.01))
    assert req.output_tokens == 6
    assert r.mean_tpot_ms == pytest.approx(4.0)            # (60 − 40) / (6 − 1)
    # a reply shorter than the hidden opening is timed at its last token
    short = run_bench(Steps(), BenchLoad(100, 2, 1, warmups=0, first_timed_token=4))
    assert short.requests[0].ttft_s == pytest.approx(0.02) and short.requests[0].itl_s == ()


def test_closed_loop_lets_the_next_in_at_a_completion() -> None:
    """C=2, 3 requests: two start together, the third when the first pair ends (50 ms)
    and ends 50 ms later; each waits 10 ms for its first token."""
    r = run_bench(Steps(), BenchLoad(100, 5, 3, concurrency=2, warmups=0))
    assert [t.ttft_s for t in r.requests] == pytest.approx([0.01] * 3)
    assert r.duration == pytest.approx(0.10)
    assert r.output_throughput == pytest.approx(150.0)
    assert r.request_throughput == pytest.approx(30.0)


def test_concurrency_one_runs_requests_in_turn() -> None:
    r = run_bench(Steps(), BenchLoad(100, 5, 3, concurrency=1, warmups=0))
    assert r.duration == pytest.approx(0.15)
    assert r.mean_e2el_ms == pytest.approx(50.0)


def test_tpot_excludes_the_first_token_and_one_token_replies() -> None:
    """TPOT per request over its later tokens; ITL pools the gaps; means over requests."""
    reqs = [RequestTiming(10, 3, 0.1, 0.3, (0.15, 0.05)),
            RequestTiming(10, 5, 0.2, 0.6, (0.1, 0.1, 0.1, 0.1)),
            RequestTiming(10, 1, 0.4, 0.4, ())]
    r = summarize(reqs, 1.0)
    assert r.mean_tpot_ms == pytest.approx(100.0)        # (0.2/2 + 0.4/4) / 2
    assert r.median_ttft_ms == pytest.approx(200.0)
    assert r.mean_ttft_ms == pytest.approx(700.0 / 3)
    assert r.mean_itl_ms == pytest.approx(100.0)         # 6 gaps, 0.6 s
    assert r.median_itl_ms == pytest.approx(100.0)
    assert r.mean_e2el_ms == pytest.approx(1300.0 / 3)
    assert r.output_throughput == pytest.approx(9.0)
    assert r.p99_ttft_ms == pytest.approx(200.0 + 0.98 * 200.0)   # numpy's linear p99


def test_warm_up_is_excluded() -> None:
    """Warm-up requests run first and count in no figure: the same numbers as none."""
    load = BenchLoad(100, 5, 4, concurrency=2, warmups=0)
    cold = run_bench(Steps(per_token=1e-4), load)
    warm = run_bench(Steps(per_token=1e-4), BenchLoad(100, 5, 4, concurrency=2, warmups=3))
    assert warm.completed == 4
    assert warm.duration == pytest.approx(cold.duration)
    assert warm.mean_ttft_ms == pytest.approx(cold.mean_ttft_ms)
    assert warm.total_output_tokens == cold.total_output_tokens


def test_shared_prefix_is_reused() -> None:
    """A prefix share makes later prompts hit the cache: a shorter time to first token."""
    random = run_bench(Steps(per_token=1e-4), BenchLoad(2048, 4, 4, concurrency=1))
    shared = run_bench(Steps(per_token=1e-4),
                       BenchLoad(2048, 4, 4, concurrency=1, prefix_share=0.75))
    assert shared.mean_ttft_ms < 0.5 * random.mean_ttft_ms


def test_same_load_same_numbers_and_the_seed_matters() -> None:
    load = BenchLoad(300, 20, 30, request_rate=50.0, range_ratio=0.5, seed=7)
    a, b = run_bench(Steps(per_token=1e-5), load), run_bench(Steps(per_token=1e-5), load)
    assert a == b
    c = run_bench(Steps(per_token=1e-5),
                  BenchLoad(300, 20, 30, request_rate=50.0, range_ratio=0.5, seed=8))
    assert c.total_input_tokens != a.total_input_tokens


def test_request_rate_spreads_arrivals() -> None:
    """At 10 req/s, 20 short requests span about 2 s, where inf starts them together."""
    r = run_bench(Steps(), BenchLoad(100, 2, 20, request_rate=10.0))
    assert 1.0 < r.duration < 4.0
    burst = run_bench(Steps(), BenchLoad(100, 2, 20))
    assert burst.duration < 0.1


def test_burstiness_inf_spaces_arrivals_evenly() -> None:
    """A client that queues one request per 0.5 s tick (burstiness inf): 10-ms requests
    start exactly 0.5 s apart, so the run lasts 9 ticks and one request."""
    r = run_bench(Steps(), BenchLoad(100, 1, 10, request_rate=2.0, burstiness=float("inf"),
                                     warmups=0))
    assert r.duration == pytest.approx(9 * 0.5 + 0.01)
    assert [t.ttft_s for t in r.requests] == pytest.approx([0.01] * 10)


def test_ticks_under_a_cap_break_the_lock_step_of_a_closed_loop() -> None:
    """A closed loop of 16 fed at 2 req/s starts its requests apart and keeps them apart
    (one reply length), where all at once every arrival queues behind 15 prefills."""
    steps = Steps(fixed=0.001, per_token=1e-5)
    burst = run_bench(steps, BenchLoad(1000, 100, 160, concurrency=16, warmups=0))
    ticks = run_bench(steps, BenchLoad(1000, 100, 160, concurrency=16, request_rate=2.0,
                                       burstiness=float("inf"), warmups=0))
    assert ticks.median_ttft_ms < 0.5 * burst.median_ttft_ms


@pytest.mark.parametrize(("load", "field"), [
    (BenchLoad(0, 5, 1), "input_tokens"), (BenchLoad(10, 0, 1), "output_tokens"),
    (BenchLoad(10, 5, 0), "num_prompts"), (BenchLoad(10, 5, 1, concurrency=0), "concurrency"),
    (BenchLoad(10, 5, 1, request_rate=float("inf")), "request_rate"),
    (BenchLoad(10, 5, 1, prefix_share=1.0), "prefix_share"),
    (BenchLoad(10, 5, 1, low_ratio=1.5), "low_ratio"),
    (BenchLoad(10, 5, 1, low_ratio=0.8, range_ratio=0.1), "give one"),
    (BenchLoad(10, 5, 1, request_rate=1.0, burstiness=0.0), "burstiness"),
    (BenchLoad(10, 5, 1, request_rate=1.0, burstiness=float("nan")), "burstiness"),
    (BenchLoad(10, 5, 1, first_timed_token=0), "first_timed_token"),
])
def test_bad_load_is_one_line(load: BenchLoad, field: str) -> None:
    with pytest.raises(InputError, match=field):
        run_bench(Steps(), load)


def test_request_past_the_cache_is_one_line() -> None:
    class Small(Steps):
        def kv_capacity_tokens(self) -> int:
            return 64
    with pytest.raises(InputError, match="exceed the KV cache"):
        run_bench(Small(), BenchLoad(100, 5, 1))


def test_the_older_clients_draw_spans_its_range() -> None:
    """low_ratio 0.8: every length an integer in [int(0.8 n), n] (benchmark_serving's
    `np.random.randint(int(n * r), n + 1)`), both ends reached, the mean near 0.9 n."""
    load = BenchLoad(1024, 40, 2000, concurrency=2000, low_ratio=0.8, warmups=0)
    r = run_bench(Steps(), load)
    ins = [t.input_tokens for t in r.requests]
    outs = [t.output_tokens for t in r.requests]
    assert min(ins) == 819 and max(ins) == 1024
    assert min(outs) == 32 and max(outs) == 40
    assert sum(ins) / len(ins) == pytest.approx(921.5, abs=4)


def test_drawn_replies_break_the_lock_step_of_a_closed_loop() -> None:
    """With one reply length, the C requests of a closed loop end on the same step and the
    next C arrive together, each queued behind the others' prefills; with drawn lengths
    they end apart and a new request's first token comes sooner."""
    steps = Steps(fixed=0.001, per_token=1e-5)
    fixed = run_bench(steps, BenchLoad(1000, 100, 160, concurrency=16, warmups=0))
    drawn = run_bench(steps, BenchLoad(1000, 100, 160, concurrency=16, low_ratio=0.8,
                                       warmups=0))
    assert drawn.median_ttft_ms < 0.5 * fixed.median_ttft_ms
