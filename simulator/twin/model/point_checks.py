"""What a fit point must be for its prediction to mean something (issue 49): the unit
its kind is predicted in (a point in seconds is never compared with a rate), and for a
spec_replay point an n-gram setting, a prompt lookup and a number of streams the twin
can replay in bounded time. Pure; `fit.Observation` calls it as it is validated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from simulator.twin.spec_decode.ngram import NgramSpec, parse_spec

if TYPE_CHECKING:
    from simulator.twin.bench.closed_loop import BenchResult

# vLLM's prompt lookup is a few tokens (default 5; each step tries every length from
# max down to min); streams are what one server runs at once
MAX_PROMPT_LOOKUP = 128
MAX_REPLAY_STREAMS = 1024
# the unit each kind's prediction is in (`fit.predict`), and what it is
UNITS: dict[str, tuple[str, ...]] = {
    "decode": ("tok_s",), "prefill": ("s", "tok_s"), "kv_capacity": ("tokens",),
    "spec_decode": ("tok_s", "ratio"), "spec_replay": ("tok_s",), "bench": ("s", "tok_s")}
UNIT_MEANS = {
    "decode": "decode tokens/s", "prefill": "TTFT seconds or prompt tokens/s",
    "kv_capacity": "KV cache tokens", "spec_decode": "the run's figure or its ratio to "
    "speculation off", "spec_replay": "Σ output tokens / Σ request seconds (tok_s)",
    "bench": "a `vllm bench serve` figure (`metric`)"}
# a bench point's figure (vLLM's result JSON: mean_ttft_ms, median_ttft_ms, mean_tpot_ms,
# median_tpot_ms, mean_itl_ms, mean_e2el_ms, output_throughput), in s or tok/s
BenchMetric = Literal["ttft_mean", "ttft_p50", "tpot_mean", "tpot_p50", "itl_mean",
                      "e2e_mean", "output_tok_s"]
BENCH_FIELDS: dict[str, str] = {
    "ttft_mean": "mean_ttft_ms", "ttft_p50": "median_ttft_ms", "tpot_mean": "mean_tpot_ms",
    "tpot_p50": "median_tpot_ms", "itl_mean": "mean_itl_ms", "e2e_mean": "mean_e2el_ms",
    "output_tok_s": "output_throughput"}


def check_point(kind: str, unit: str, *, spec: str, batch: int, lookup: tuple[int, int],
                exchanges: str | None) -> None:
    """ValueError (one line) when a point of `kind` cannot be predicted as given."""
    units = UNITS[kind]
    if unit not in units:
        raise ValueError(f"a {kind} point is measured in {' or '.join(units)}, not {unit}: "
                         f"the twin predicts {UNIT_MEANS[kind]}")
    if kind != "spec_replay":
        return
    if not isinstance(parse_spec(spec), NgramSpec):   # parse_spec: ValueError naming the forms
        raise ValueError(f"spec_replay replays n-gram speculation: spec must be ngram:K, "
                         f"not {spec!r}")
    if lookup[0] > lookup[1]:
        raise ValueError(f"prompt_lookup_min {lookup[0]} is above prompt_lookup_max {lookup[1]}")
    if batch > MAX_REPLAY_STREAMS:
        raise ValueError(f"spec_replay with {batch:,} streams: at most {MAX_REPLAY_STREAMS:,} "
                         "(each replays every exchange)")
    if exchanges is None:
        raise ValueError("a spec_replay point needs an exchanges file")


def check_bench(metric: str | None, unit: str, input_tokens: int, output_tokens: int,
                num_prompts: int) -> None:
    """ValueError (one line) when a bench point cannot be run or compared as given."""
    if metric is None:
        raise ValueError(f"a bench point needs a metric ({', '.join(BENCH_FIELDS)})")
    want = "tok_s" if metric == "output_tok_s" else "s"
    if unit != want:
        raise ValueError(f"a bench point's {metric} is measured in {want}, not {unit}")
    for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens),
                        ("num_prompts", num_prompts)):
        if value <= 0:
            raise ValueError(f"a bench point needs {name} > 0 (the run it measured)")
    if metric.startswith("tpot") and output_tokens < 2:
        raise ValueError("TPOT needs output_tokens >= 2 (it excludes the first token)")


def bench_figure(result: BenchResult, metric: str) -> float:
    """The bench run's figure for `metric`, in the point's unit (s or tok/s)."""
    value = float(getattr(result, BENCH_FIELDS[metric]))
    return value if metric == "output_tok_s" else value / 1000.0
