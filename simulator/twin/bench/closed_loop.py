"""`vllm bench serve` on the twin engine, in virtual time: the load every published figure uses.

How vLLM's client starts its requests (`vllm/benchmarks/serve.py`, `benchmark()`): one
untimed test request first (and `--num-warmups` more), then every one of the N requests
is created at once as a task that waits on `asyncio.Semaphore(max_concurrency)`; with
`--request-rate inf` (the default) there is no pause between them, so a closed loop of C
starts C requests together and each completion lets the next one in at that instant. With
a finite rate the arrivals are a gamma process (`--burstiness`, 1: Poisson) from a seeded
generator, still capped by the semaphore when a concurrency is given; a burstiness of inf
(the gamma's limit, which vLLM's flag cannot reach) spaces them evenly, as a client that
queues one request per tick does. The duration runs
from the first measured request's start to the last one's end.

The metrics follow `calculate_metrics` by name: TTFT per request; TPOT per request =
(E2E − TTFT) / (output − 1), only for requests of more than one token; ITL every gap
between consecutive tokens of a request, pooled; E2E = last token − start. Means, medians
and p99 (numpy's linear percentile) over requests (ITL: over gaps), in milliseconds;
output_throughput = Σ output tokens / duration. The twin emits one token per event, so
its ITL is per token where a server's stream may group several tokens into one chunk.
A client that times its first token at the first chunk with text, on a model whose chat
replies open with tokens that stream none (gpt-oss's harmony header), times token k > 1
(`first_timed_token`): TTFT runs to it and ITL from it; TPOT keeps the full count.

Prompts are token ids only: "random" prompts are distinct from their first token, so no
request hits another's prefix (vLLM's random dataset draws random ids: a hit is as
unlikely); `prefix_share` > 0 gives every prompt the same leading ids (that many of its
tokens). Warm-up requests run first on the same engine and are excluded from every figure.
Pure: no I/O, the same load gives the same numbers.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from simulator.errors import InputError
from simulator.twin.core.config import engine_config
from simulator.twin.core.engine import RequestTooLong, TwinEngine
from simulator.twin.core.types import EngineRequest, PerfModel
from simulator.twin.model.perf_model import RooflinePerfModel

# bounds of a load: past any published run, and what one simulation may cost
MAX_PROMPTS = 100_000
MAX_TOKENS = 1_000_000
MAX_CONCURRENCY = 1 << 16
# ids of shared prefixes, random prompts and outputs: apart, within uint32
_SHARED_BASE, _PROMPT_BASE, _OUTPUT_BASE = 1, 1 << 24, 1 << 31


@dataclass(frozen=True, slots=True)
class BenchLoad:
    """One `vllm bench serve` run: `--random-input-len`, `--random-output-len`,
    `--random-range-ratio` (`range_ratio`: today's ±r around the length; `low_ratio`: the
    older client's [int(r × n), n], which InferenceX's copy keeps), `--num-prompts`,
    `--max-concurrency` (None: no cap),
    `--request-rate` (None: inf), `--burstiness` (inf: evenly spaced), `--num-warmups`,
    `--seed`, the
    share of each prompt that is a prefix shared by all (0: random prompts), and the token
    whose chunk the client times as its first (1: vLLM's client, whose first chunk comes
    with the first token)."""

    input_tokens: int
    output_tokens: int
    num_prompts: int
    concurrency: int | None = None
    request_rate: float | None = None
    prefix_share: float = 0.0
    range_ratio: float = 0.0
    low_ratio: float = 0.0
    burstiness: float = 1.0
    warmups: int = 1
    seed: int = 0
    first_timed_token: int = 1

    def check(self) -> None:
        """One InputError line naming the setting out of bounds."""
        if not 0 < self.input_tokens <= MAX_TOKENS:
            raise InputError(f"bench: input_tokens {self.input_tokens} must be in 1..{MAX_TOKENS}")
        if not 0 < self.output_tokens <= MAX_TOKENS:
            raise InputError(f"bench: output_tokens {self.output_tokens} must be in "
                             f"1..{MAX_TOKENS}")
        if not 0 < self.num_prompts <= MAX_PROMPTS:
            raise InputError(f"bench: num_prompts {self.num_prompts} must be in 1..{MAX_PROMPTS}")
        if self.concurrency is not None and not 0 < self.concurrency <= MAX_CONCURRENCY:
            raise InputError(f"bench: concurrency {self.concurrency} must be in "
                             f"1..{MAX_CONCURRENCY}")
        if self.request_rate is not None and not (self.request_rate > 0
                                                  and math.isfinite(self.request_rate)):
            raise InputError(f"bench: request_rate {self.request_rate} must be a finite "
                             "number > 0 (leave it out for vLLM's inf)")
        if not 0.0 <= self.prefix_share < 1.0:
            raise InputError(f"bench: prefix_share {self.prefix_share} must be in [0, 1)")
        if not 0.0 <= self.range_ratio < 1.0:
            raise InputError(f"bench: range_ratio {self.range_ratio} must be in [0, 1)")
        if not 0.0 <= self.low_ratio <= 1.0:
            raise InputError(f"bench: low_ratio {self.low_ratio} must be in [0, 1]")
        if self.low_ratio > 0 and self.range_ratio > 0:
            raise InputError("bench: range_ratio (±r) and low_ratio ([r·n, n]) are two "
                             "clients' draws; give one")
        if not self.burstiness > 0:     # NaN fails too; inf: evenly spaced arrivals
            raise InputError(f"bench: burstiness {self.burstiness} must be a number > 0 "
                             "(inf: evenly spaced)")
        if not 0 <= self.warmups <= MAX_PROMPTS:
            raise InputError(f"bench: warmups {self.warmups} must be in 0..{MAX_PROMPTS}")
        if not 1 <= self.first_timed_token <= MAX_TOKENS:
            raise InputError(f"bench: first_timed_token {self.first_timed_token} must be in "
                             f"1..{MAX_TOKENS}")


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """One measured request (seconds from its start, which is its arrival)."""

    input_tokens: int
    output_tokens: int
    ttft_s: float
    e2e_s: float
    itl_s: tuple[float, ...]

    @property
    def tpot_s(self) -> float | None:
        """(E2E − TTFT) / (output − 1); None for a one-token reply (vLLM skips it)."""
        if self.output_tokens <= 1:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass(frozen=True, slots=True)
class BenchResult:
    """The measured requests and the aggregates by the names of vLLM's result JSON."""

    requests: tuple[RequestTiming, ...]
    duration: float
    completed: int
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    mean_ttft_ms: float
    median_ttft_ms: float
    std_ttft_ms: float
    p99_ttft_ms: float
    mean_tpot_ms: float
    median_tpot_ms: float
    std_tpot_ms: float
    p99_tpot_ms: float
    mean_itl_ms: float
    median_itl_ms: float
    std_itl_ms: float
    p99_itl_ms: float
    mean_e2el_ms: float
    median_e2el_ms: float
    std_e2el_ms: float
    p99_e2el_ms: float


def _stats(values: Sequence[float]) -> tuple[float, float, float, float]:
    """(mean, median, std, p99) in ms; zeros for no values, as vLLM's `or 0`."""
    if not values:
        return 0.0, 0.0, 0.0, 0.0
    a = np.asarray(values, dtype=float) * 1000.0
    return (float(a.mean()), float(np.median(a)), float(a.std()),
            float(np.percentile(a, 99)))


def summarize(requests: Sequence[RequestTiming], duration: float) -> BenchResult:
    """vLLM's `calculate_metrics` over measured requests and the run's duration."""
    if not requests or duration <= 0:
        raise InputError("bench: no measured request completed")
    tpots = [t for r in requests if (t := r.tpot_s) is not None]
    itls = [g for r in requests for g in r.itl_s]
    out = sum(r.output_tokens for r in requests)
    inp = sum(r.input_tokens for r in requests)
    return BenchResult(
        tuple(requests), duration, len(requests), inp, out, len(requests) / duration,
        out / duration, (inp + out) / duration,
        *_stats([r.ttft_s for r in requests]), *_stats(tpots), *_stats(itls),
        *_stats([r.e2e_s for r in requests]))


def _lengths(load: BenchLoad, rng: np.random.Generator, n: int) -> tuple[list[int], list[int]]:
    """Input and output lengths: uniform within ±range_ratio (vLLM's random dataset), or
    uniform integers in [int(low_ratio × n), n] (its `sample_random_requests` before the
    ±r form: `np.random.randint(int(n × r), n + 1)`), or n itself."""
    def draw(length: int) -> list[int]:
        if 0 < load.low_ratio < 1:
            return [int(x) for x in rng.integers(max(1, int(length * load.low_ratio)), length + 1,
                                                 size=n)]
        if load.range_ratio <= 0:
            return [length] * n
        lo = max(1, math.floor(length * (1 - load.range_ratio)))
        hi = max(lo, math.ceil(length * (1 + load.range_ratio)))
        return [int(x) for x in rng.integers(lo, hi + 1, size=n)]
    return draw(load.input_tokens), draw(load.output_tokens)


def _arrivals(load: BenchLoad, rng: np.random.Generator, n: int) -> list[float]:
    """Offsets (s) at which each request is released: 0 for a rate of inf, else the
    cumulative gamma intervals of mean 1/rate (vLLM's `get_request`), or 1/rate apart
    for a burstiness of inf."""
    if load.request_rate is None:
        return [0.0] * n
    if math.isinf(load.burstiness):
        return [i / load.request_rate for i in range(n)]
    theta = 1.0 / (load.request_rate * load.burstiness)
    gaps = rng.gamma(shape=load.burstiness, scale=theta, size=n)
    return [float(x) for x in np.concatenate(([0.0], np.cumsum(gaps)[:-1]))]


class _Prompts:
    """Token ids of each prompt and reply: distinct past the shared prefix."""

    def __init__(self, load: BenchLoad) -> None:
        self.shared_len = int(load.prefix_share * load.input_tokens)
        self.shared = array("I", range(_SHARED_BASE, _SHARED_BASE + self.shared_len))
        self._next = _PROMPT_BASE
        self._out = _OUTPUT_BASE

    def prompt(self, length: int) -> array[int]:
        own = max(1, length - self.shared_len)
        if self._next + own >= _OUTPUT_BASE:
            self._next = _PROMPT_BASE       # past 2^31 − 2^24 ids: wrap (never in bounds)
        ids = self.shared + array("I", range(self._next, self._next + own))
        self._next += own
        return ids

    def reply(self, length: int) -> array[int]:
        if self._out + length >= 1 << 32:
            self._out = _OUTPUT_BASE
        ids = array("I", range(self._out, self._out + length))
        self._out += length
        return ids


def _timing(prompt_len: int, times: Sequence[float], start: float,
            first_timed: int) -> RequestTiming:
    """A request as its client times it: from its first timed token (the last one, for a
    reply shorter than that), with every generated token in its count."""
    seen = times[min(first_timed, len(times)) - 1:]
    gaps = tuple(b - a for a, b in pairwise(seen))
    return RequestTiming(prompt_len, len(times), seen[0] - start, times[-1] - start, gaps)


def _drain(engine: TwinEngine) -> list[tuple[str, float]]:
    """Run until at least one request finishes: (id, its last token's time) of each
    request the first finishing step ends."""
    done: list[tuple[str, float]] = []
    while not done and not engine.is_idle():
        for rid in engine.run_until(engine.now + 3600.0):
            res = engine.result(rid)
            done.append((rid, res.token_times[-1] if res.token_times else engine.now))
    return done


def run_bench(perf: PerfModel, load: BenchLoad) -> BenchResult:
    """Run `load` on a fresh twin engine of `perf` and measure it as vLLM's client does."""
    load.check()
    engine = (TwinEngine(perf, engine_config(perf)) if isinstance(perf, RooflinePerfModel)
              else TwinEngine(perf))
    rng = np.random.default_rng(load.seed)
    prompts = _Prompts(load)
    try:
        _warm_up(engine, load, prompts)
        return _measure(engine, load, prompts, rng)
    except RequestTooLong as exc:
        raise InputError(f"bench: {exc}") from None


def _warm_up(engine: TwinEngine, load: BenchLoad, prompts: _Prompts) -> None:
    """The untimed requests before the run, one after another (vLLM's test prompt and
    warm-ups: never counted)."""
    for i in range(load.warmups):
        rid = f"warmup{i}"
        engine.submit(EngineRequest(rid, prompts.prompt(load.input_tokens),
                                    prompts.reply(load.output_tokens), engine.now))
        while not engine.is_idle():
            for done in engine.run_until(engine.now + 3600.0):
                engine.pop_result(done)


def _measure(engine: TwinEngine, load: BenchLoad, prompts: _Prompts,
             rng: np.random.Generator) -> BenchResult:
    n = load.num_prompts
    ins, outs = _lengths(load, rng, n)
    offsets = _arrivals(load, rng, n)
    t0 = engine.now
    cap = load.concurrency if load.concurrency is not None else n
    starts: dict[str, float] = {}
    nxt, in_flight = 0, 0

    def release(at: float) -> None:
        """Start every request whose turn has come and that a semaphore slot admits."""
        nonlocal nxt, in_flight
        while nxt < n and in_flight < cap:
            start = max(at, t0 + offsets[nxt])
            rid = f"b{nxt}"
            starts[rid] = start
            engine.submit(EngineRequest(rid, prompts.prompt(ins[nxt]),
                                        prompts.reply(outs[nxt]), start))
            nxt += 1
            in_flight += 1

    release(t0)
    timings: list[RequestTiming] = []
    end = t0
    while in_flight:
        finished = _drain(engine)
        if not finished:
            raise InputError("bench: the twin engine stopped with requests in flight")
        for rid, at in finished:
            res = engine.pop_result(rid)
            start = starts.pop(rid)
            timings.append(_timing(res.prompt_len, res.token_times, start,
                                   load.first_timed_token))
            in_flight -= 1
            end = max(end, at)
            release(at)
    return summarize(timings, end - t0)
