"""The benchmark files users already have, read into one shape (`BenchResult`) and into
calibration points of kind "bench" (`bench_points`) for `endurance twin fit`.

Three tools, their own names (checked against their sources):

* `vllm bench serve --save-result` (vllm/benchmarks/serve.py): one JSON object with
  `model_id`, `num_prompts`, `request_rate` (a number, or "inf"), `max_concurrency`
  (null when unset), `burstiness` (the arrivals' gamma shape at a finite rate),
  `completed`, `total_input_tokens`, `total_output_tokens`,
  `output_throughput`, and `mean_/median_/p99_{ttft,tpot,itl,e2el}_ms` (with
  `--save-detailed` also `input_lens`, `output_lens`, `ttfts`, `itls`, not needed here).
  TPOT excludes the first token: (latency − TTFT) / (output − 1) per request.
* AIPerf's `profile_export_aiperf.json`: one object of metrics by tag, each
  `{"unit": "ms", "avg": …, "p50": …}` (at the top, or under `records` in some
  versions): `time_to_first_token`, `inter_token_latency`, `request_latency`,
  `output_token_throughput`, `input_sequence_length`, `output_sequence_length`,
  `request_count`; the load in `input_config.loadgen` (`concurrency`, `request_rate`).
  AIPerf's inter-token latency is per request (latency − TTFT) / (output − 1): vLLM's
  TPOT, so it is read as TPOT (and as the ITL mean, equal when one token per chunk).
* GuideLLM's benchmarks JSON: `{"benchmarks": [...]}`, one per strategy of a sweep,
  each with `metrics.<name>.successful.{mean, median}` for `time_to_first_token_ms`,
  `inter_token_latency_ms` (vLLM's TPOT, as AIPerf's), `request_latency` (s),
  `output_tokens_per_second`, `prompt_token_count`, `output_token_count`, and
  `request_totals.successful`; the load in the benchmark's `config.strategy` (older
  files: `args.strategy`): `concurrent` with `streams`, `synchronous` (1), `constant`
  (evenly spaced: burstiness inf) or `poisson` with `rate`, `throughput` (all at once).

What each tool times as the first token, on a chat stream: vLLM's client the first chunk
(the role chunk, sent with the first token); AIPerf (`content_responses[0]`) and GuideLLM
(`first_token_iteration`) the first chunk with text, reasoning included (GuideLLM since
0.7; before, `content` only, after any reasoning, which no point can repeat). Their points
say so (`first_text`): on a model whose chat stream opens with tokens that carry no text
(gpt-oss: three), the twin times its first token with text.

Every file is read bounded (`util/bounded.py`): a FIFO or device, a file over
MAX_FILE_BYTES, text that is not UTF-8 or not JSON, nesting past the bound, a number
that is not finite, negative, absurdly large or of the wrong type, a missing field —
each ends in one InputError line naming the file and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simulator.errors import InputError
from simulator.util import bounded
from simulator.util.jsontypes import JSONObject

MAX_FILE_BYTES = 512 * 2**20     # a --save-detailed result holds every reply's text
MAX_TOKENS = 10_000_000          # a request's mean prompt or reply (the scenario's bound)
MAX_REQUESTS = 100_000_000       # requests in one benchmark
MAX_MS = 86_400_000.0            # a latency figure: at most a day
MAX_TOK_S = 1e9                  # an output throughput
MAX_CONCURRENCY = 1_000_000
MAX_RATE = 1e6                   # requests/s
MAX_BURSTINESS = 1e6             # vLLM's gamma shape: past this the arrivals are even

Tool = Literal["vllm-bench-serve", "aiperf", "guidellm"]

BenchMetric = Literal["ttft_mean", "ttft_p50", "tpot_mean", "tpot_p50", "itl_mean",
                      "e2e_mean", "output_tok_s"]


@dataclass(frozen=True, slots=True)
class BenchResult:
    """One measured benchmark point: the load (mean tokens per request, closed loop of
    `concurrency` or `request_rate` req/s, `num_prompts`) and its figures in seconds
    (None: the file does not give it). `concurrency` and `request_rate` both None
    never happens: a run that sent all at once is a closed loop of `num_prompts`."""

    source: str
    tool: Tool
    model: str | None
    input_tokens: float
    output_tokens: float
    concurrency: int | None
    request_rate: float | None
    num_prompts: int
    ttft_mean_s: float | None
    ttft_p50_s: float | None
    tpot_mean_s: float | None
    tpot_p50_s: float | None
    itl_mean_s: float | None
    e2e_mean_s: float | None
    output_tok_s: float | None
    vllm_version: str | None = None
    burstiness: float = 1.0      # gamma shape of the arrivals at request_rate (inf: even)

    @property
    def first_text(self) -> bool:
        """Whether its tool times TTFT at the first chunk with text (AIPerf: the first
        response with content, reasoning or tool-call text; GuideLLM: the first line
        its handler counts, reasoning included since 0.7), not at the first chunk (vLLM's
        client, whose first chunk is the role chunk sent with the first token)."""
        return self.tool != "vllm-bench-serve"

    def figures(self) -> dict[BenchMetric, float | None]:
        """The figures by the metric names of a "bench" observation."""
        return {"ttft_mean": self.ttft_mean_s, "ttft_p50": self.ttft_p50_s,
                "tpot_mean": self.tpot_mean_s, "tpot_p50": self.tpot_p50_s,
                "itl_mean": self.itl_mean_s, "e2e_mean": self.e2e_mean_s,
                "output_tok_s": self.output_tok_s}


def read_bench_file(path: str | Path, *, vllm_version: str | None = None) -> list[BenchResult]:
    """The benchmark points of one file (GuideLLM's may hold several), its tool told
    by its keys; InputError (one line, naming the file and the field) otherwise."""
    p = Path(path)
    data = _load(p)
    try:
        if "benchmarks" in data:
            out = _guidellm(data, str(p))
        elif "mean_ttft_ms" in data or "completed" in data or "num_prompts" in data:
            out = [_vllm(data, str(p))]
        elif _aiperf_metrics(data) is not None:
            out = [_aiperf(data, str(p))]
        else:
            raise bounded.FieldError(
                "not a vllm bench serve result (no 'completed'), an AIPerf profile export "
                "(no 'time_to_first_token') or GuideLLM benchmarks (no 'benchmarks')")
    except bounded.FieldError as exc:
        raise InputError(f"{p}: {exc}") from None
    if vllm_version is not None:
        from dataclasses import replace
        out = [replace(r, vllm_version=vllm_version) for r in out]
    return out


def bench_points(results: Sequence[BenchResult]) -> list[JSONObject]:
    """Observations of kind "bench" (one per figure a result gives), ready for a points
    file's `points:`: times in seconds (unit "s"), output throughput in tok/s."""
    points: list[JSONObject] = []
    for r in results:
        for metric, value in r.figures().items():
            if value is None or not value > 0:
                continue
            points.append({
                "kind": "bench", "metric": metric, "measured": value,
                "unit": "tok_s" if metric == "output_tok_s" else "s",
                "input_tokens": max(1, round(r.input_tokens)),
                "output_tokens": max(1, round(r.output_tokens)),
                "concurrency": r.concurrency, "request_rate": r.request_rate,
                "num_prompts": r.num_prompts, "prefix_share": 0.0,
                **({"burstiness": r.burstiness} if r.burstiness != 1.0 else {}),
                **({"first_text": True} if r.first_text else {}),
                "label": f"{Path(r.source).name} {metric}"
                         + (f" c={r.concurrency}" if r.concurrency is not None else "")
                         + (f" r={r.request_rate:g}" if r.request_rate is not None else "")
                         + (f" burstiness={r.burstiness:g}" if r.burstiness != 1.0 else ""),
            })
    return points


# ---------------------------------------------------------------- reading
def _load(p: Path) -> dict[str, object]:
    text = bounded.text_file(p, "benchmark file", MAX_FILE_BYTES)
    # non-finite numbers reach the field checks, whose line names the field
    return bounded.json_object(text, str(p), what="a JSON object (a benchmark result)",
                               finite=False)


def _get(d: Mapping[str, object], *path: str) -> object:
    """`d[path[0]][path[1]]…`, None when any step is absent; FieldError when a step
    that should be an object is not one."""
    node: object = d
    for i, key in enumerate(path):
        if node is None:
            return None
        if not isinstance(node, Mapping):
            raise bounded.FieldError(f"field {'.'.join(path[:i])!r}: expected an object, "
                                     f"got {bounded.shown(node)}")
        node = node.get(key)
    return node


def _number(v: object, field: str, hi: float, unit: str, *,
            required: bool = False) -> float | None:
    if v is None:
        if required:
            raise bounded.FieldError(f"field {field!r}: missing")
        return None
    return bounded.seconds(v, field, hi, unit)


def _ms(v: object, field: str, *, unit: str = "ms") -> float | None:
    """A latency in `unit` (ms, s, us, ns) as seconds."""
    scale = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "us": 1e-6, "ns": 1e-9}.get(unit)
    if scale is None:
        raise bounded.FieldError(f"field {field!r}: unit {bounded.shown(unit)} is not a "
                                 "time unit (ms, s, us, ns)")
    x = _number(v, field, MAX_MS * 1e-3 / scale, unit)
    return None if x is None else x * scale


def _count(v: object, field: str, hi: int, unit: str) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)                     # AIPerf writes counts as floats (200.0)
    return bounded.count(v, field, unit, 0, hi)


def _rate(v: object, field: str) -> float | None:
    """A request rate in req/s; "inf" / null (all at once) is None."""
    if v is None or (isinstance(v, str) and v.strip().lower() in ("inf", "infinity")):
        return None
    if isinstance(v, float) and math.isinf(v) and v > 0:
        return None
    x = bounded.seconds(v, field, MAX_RATE, "requests/s")
    if x == 0:
        raise bounded.FieldError(f"field {field!r}: a request rate of 0")
    return x


def _burstiness(v: object, field: str) -> float:
    """vLLM's `--burstiness`, the gamma shape of its arrivals (1: Poisson; absent: 1)."""
    if v is None:
        return 1.0
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= MAX_BURSTINESS:
        raise bounded.FieldError(f"field {field!r}: the gamma shape of the arrivals, a "
                                 f"finite number in (0, {MAX_BURSTINESS:g}] (1: Poisson), "
                                 f"got {bounded.shown(v)}")
    return float(v)


def _concurrency(v: object, field: str) -> int | None:
    return None if v is None else bounded.count(v, field, "requests", 1, MAX_CONCURRENCY)


def _model(v: object, field: str) -> str | None:
    if isinstance(v, list):
        v = v[0] if v else None
    return None if v is None else bounded.text(v, field, 400)


def _load_shape(concurrency: int | None, rate: float | None,
                n: int) -> tuple[int | None, float | None]:
    """All at once (no rate, no concurrency) is a closed loop of every request."""
    if concurrency is None and rate is None:
        return max(1, n), None
    return concurrency, rate


def _vllm(d: Mapping[str, object], source: str) -> BenchResult:
    completed = _count(_get(d, "completed"), "completed", MAX_REQUESTS, "requests")
    if completed == 0:
        raise bounded.FieldError("field 'completed': 0 requests completed (nothing measured)")
    n = _count(d["num_prompts"], "num_prompts", MAX_REQUESTS, "requests") \
        if d.get("num_prompts") is not None else completed
    tin = _number(d.get("total_input_tokens"), "total_input_tokens", MAX_TOKENS * MAX_REQUESTS,
                  "tokens", required=True)
    tout = _number(d.get("total_output_tokens"), "total_output_tokens",
                   MAX_TOKENS * MAX_REQUESTS, "tokens", required=True)
    assert tin is not None and tout is not None
    conc, rate = _load_shape(_concurrency(d.get("max_concurrency"), "max_concurrency"),
                             _rate(d.get("request_rate"), "request_rate"), n)
    burstiness = _burstiness(d.get("burstiness"), "burstiness") if rate is not None else 1.0
    figures = {k: _ms(d.get(f"{k}_ms"), f"{k}_ms") for k in
               ("mean_ttft", "median_ttft", "mean_tpot", "median_tpot", "mean_itl",
                "mean_e2el")}
    if figures["mean_ttft"] is None and figures["mean_tpot"] is None:
        raise bounded.FieldError("field 'mean_ttft_ms': missing (and no 'mean_tpot_ms')")
    return BenchResult(
        source=source, tool="vllm-bench-serve", model=_model(d.get("model_id"), "model_id"),
        input_tokens=tin / completed, output_tokens=tout / completed,
        concurrency=conc, request_rate=rate, num_prompts=n,
        ttft_mean_s=figures["mean_ttft"], ttft_p50_s=figures["median_ttft"],
        tpot_mean_s=figures["mean_tpot"], tpot_p50_s=figures["median_tpot"],
        itl_mean_s=figures["mean_itl"], e2e_mean_s=figures["mean_e2el"],
        output_tok_s=_number(d.get("output_throughput"), "output_throughput", MAX_TOK_S,
                             "tok/s"), burstiness=burstiness)


def _aiperf_metrics(d: Mapping[str, object]) -> Mapping[str, object] | None:
    """Where the metric objects are: the top level, or `records` (some versions)."""
    for node in (d, d.get("records")):
        if isinstance(node, Mapping) and isinstance(node.get("time_to_first_token"), Mapping):
            return node
    return None


def _aiperf(d: Mapping[str, object], source: str) -> BenchResult:
    m = _aiperf_metrics(d)
    assert m is not None

    def stat(tag: str, key: str) -> object:
        return _get(m, tag, key)

    def unit(tag: str) -> str:
        u = stat(tag, "unit")
        return "ms" if u is None else bounded.text(u, f"{tag}.unit", 40)

    def latency(tag: str, key: str) -> float | None:
        return _ms(stat(tag, key), f"{tag}.{key}", unit=unit(tag))

    n = _count(stat("request_count", "avg"), "request_count.avg", MAX_REQUESTS, "requests") \
        if stat("request_count", "avg") is not None else 0
    tokens = [_number(stat(tag, "avg"), f"{tag}.avg", MAX_TOKENS, "tokens", required=True)
              for tag in ("input_sequence_length", "output_sequence_length")]
    loadgen = _get(d, "input_config", "loadgen")
    conc = rate = None
    if isinstance(loadgen, Mapping):
        conc = _concurrency(loadgen.get("concurrency"), "input_config.loadgen.concurrency")
        rate = _rate(loadgen.get("request_rate"), "input_config.loadgen.request_rate")
    conc, rate = _load_shape(conc, rate, n)
    tpot = latency("inter_token_latency", "avg")
    assert tokens[0] is not None and tokens[1] is not None
    return BenchResult(
        source=source, tool="aiperf",
        model=_model(_get(d, "input_config", "endpoint", "model_names"),
                     "input_config.endpoint.model_names"),
        input_tokens=tokens[0], output_tokens=tokens[1], concurrency=conc,
        request_rate=rate, num_prompts=n,
        ttft_mean_s=latency("time_to_first_token", "avg"),
        ttft_p50_s=latency("time_to_first_token", "p50"),
        tpot_mean_s=tpot, tpot_p50_s=latency("inter_token_latency", "p50"), itl_mean_s=tpot,
        e2e_mean_s=latency("request_latency", "avg"),
        output_tok_s=_number(stat("output_token_throughput", "avg"),
                             "output_token_throughput.avg", MAX_TOK_S, "tok/s"))


def _guidellm(d: Mapping[str, object], source: str) -> list[BenchResult]:
    benchmarks = d.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise bounded.FieldError(f"field 'benchmarks': expected a non-empty list, got "
                                 f"{bounded.shown(benchmarks)}")
    model = _model(_get(d, "args", "model"), "args.model") \
        if isinstance(d.get("args"), Mapping) else None
    return [_guidellm_one(b, f"benchmarks.{i}", source, model)
            for i, b in enumerate(benchmarks)]


def _guidellm_one(b: object, where: str, source: str, model: str | None) -> BenchResult:
    if not isinstance(b, Mapping):
        raise bounded.FieldError(f"field {where!r}: expected an object, got {bounded.shown(b)}")

    def ok(name: str, key: str) -> object:
        return _get(b, "metrics", name, "successful", key)

    def field(name: str, key: str) -> str:
        return f"{where}.metrics.{name}.successful.{key}"

    def ms(name: str, key: str, unit: str = "ms") -> float | None:
        return _ms(ok(name, key), field(name, key), unit=unit)

    n = _count(_get(b, "metrics", "request_totals", "successful"),
               f"{where}.metrics.request_totals.successful", MAX_REQUESTS, "requests")
    if n == 0:
        raise bounded.FieldError(f"field '{where}.metrics.request_totals.successful': 0 "
                                 "requests succeeded (nothing measured)")
    tokens = [_number(ok(name, "mean"), field(name, "mean"), MAX_TOKENS, "tokens",
                      required=True) for name in ("prompt_token_count", "output_token_count")]
    strategy = _get(b, "config", "strategy") if isinstance(b.get("config"), Mapping) \
        else _get(b, "args", "strategy")
    conc, rate, burstiness = _guidellm_strategy(strategy, f"{where}.config.strategy", n)
    tpot = ms("inter_token_latency_ms", "mean")
    assert tokens[0] is not None and tokens[1] is not None
    return BenchResult(
        source=source, tool="guidellm", model=model,
        input_tokens=tokens[0], output_tokens=tokens[1], concurrency=conc,
        request_rate=rate, num_prompts=n,
        ttft_mean_s=ms("time_to_first_token_ms", "mean"),
        ttft_p50_s=ms("time_to_first_token_ms", "median"),
        tpot_mean_s=tpot, tpot_p50_s=ms("inter_token_latency_ms", "median"),
        itl_mean_s=tpot, e2e_mean_s=ms("request_latency", "mean", "s"),
        output_tok_s=_number(ok("output_tokens_per_second", "mean"),
                             field("output_tokens_per_second", "mean"), MAX_TOK_S, "tok/s"),
        burstiness=burstiness)


def _guidellm_strategy(s: object, where: str,
                       n: int) -> tuple[int | None, float | None, float]:
    """GuideLLM's scheduling strategy as (concurrency, request rate, burstiness):
    `constant` sends its requests evenly spaced (burstiness inf), `poisson` as vLLM's 1."""
    if not isinstance(s, Mapping):
        raise bounded.FieldError(f"field {where!r}: expected the benchmark's strategy "
                                 f"object, got {bounded.shown(s)}")
    kind = s.get("type_", s.get("type"))
    if kind == "synchronous":
        return 1, None, 1.0
    if kind == "concurrent":
        return _concurrency(s.get("streams"), f"{where}.streams") or 1, None, 1.0
    if kind in ("constant", "poisson", "async"):
        rate = _rate(s.get("rate"), f"{where}.rate")
        if rate is None:
            raise bounded.FieldError(f"field '{where}.rate': missing")
        return (_concurrency(s.get("max_concurrency"), f"{where}.max_concurrency"), rate,
                float("inf") if kind == "constant" else 1.0)
    if kind == "throughput":
        return (*_load_shape(_concurrency(s.get("max_concurrency"),
                                          f"{where}.max_concurrency"), None, n), 1.0)
    raise bounded.FieldError(f"field '{where}.type_': {bounded.shown(kind)} is not a "
                             "strategy read here (synchronous, concurrent, constant, "
                             "poisson, throughput)")
