"""A benchmark run's figures, defined as `vllm bench serve` defines them, so a run of
the benchmark load shape (`scenario/bench.py`) reads against its result JSON key by key.

Per successful measured request (warm-ups left out): TTFT = first streamed chunk − sent
(`first_chunk_s`: vLLM's client times the first chunk with choices, an OpenAI chat role
chunk sent with the first token, not the first text, which a reasoning model's header
delays; rows without it, `ttft_s`); E2E
(vLLM's E2EL) = last token − sent; TPOT, excluding the first token,
= (E2E − TTFT) / (output tokens − 1), for replies of more than one token. `sent` is
when the request left the client's semaphore, as vLLM times it (its client queue time
is not in TTFT). Aggregates as vLLM's: mean, median and the 99th percentile (NumPy's
linear interpolation), in milliseconds; throughput over the measured requests' span
(first sent to last token), vLLM's `duration`.

ITL: vLLM's is the gap between streamed chunks, pooled over all requests; the run's rows
keep each request's first and last token times, not every gap, so `mean_itl_ms` is the
pooled mean Σ(E2E − TTFT) / Σ(output − 1), equal to vLLM's mean ITL when each chunk
carries one token (vLLM streams one per step without speculation), and the median and
p99 ITL are not given (None), not guessed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pandas as pd

PERCENTILE = 99      # the tail percentile reported (vLLM's default --metric-percentiles)


def _stats(values: npt.NDArray[np.float64], name: str) -> dict[str, float | None]:
    """mean, median and p99 of `values` (seconds) in ms, vLLM's key names; None when
    no request gave one."""
    if values.size == 0:
        return {f"mean_{name}_ms": None, f"median_{name}_ms": None,
                f"p{PERCENTILE}_{name}_ms": None}
    return {f"mean_{name}_ms": float(np.mean(values)) * 1000,
            f"median_{name}_ms": float(np.median(values)) * 1000,
            f"p{PERCENTILE}_{name}_ms": float(np.percentile(values, PERCENTILE)) * 1000}


def _column(rows: pd.DataFrame, name: str) -> npt.NDArray[np.float64]:
    """A column as floats (NaN where absent or not a number)."""
    if name not in rows.columns:
        return np.full(len(rows), np.nan)
    return np.asarray(pd.to_numeric(rows[name], errors="coerce"), dtype=np.float64)


def bench_figures(turns: pd.DataFrame, warmups: int) -> dict[str, float | int | None]:
    """The bench figures from a run's turns table (one row per attempt): the requests of
    sessions `warmups` and later (`s0007` is session 7), each by its last attempt."""
    if turns.empty:
        rows = turns
    else:
        index = turns["session_id"].str.slice(1).astype(int)
        rows = turns[(index >= warmups) & (turns["turn_kind"] != "summary")]
        rows = rows.sort_values("attempt").groupby(["session_id", "turn_index"]).tail(1)
    ok = rows[rows["error_type"].isna()] if not rows.empty else rows
    ttft, e2e = _column(ok, "first_chunk_s"), _column(ok, "e2e_s")
    ttft = np.where(np.isnan(ttft), _column(ok, "ttft_s"), ttft)
    n_out = np.nan_to_num(_column(ok, "output_tokens"))
    prompt = _column(ok, "prompt_tokens")
    prompt = np.where(np.isnan(prompt), _column(ok, "context_tokens_est"), prompt)
    multi = n_out > 1
    tpot = (e2e[multi] - ttft[multi]) / (n_out[multi] - 1)
    total_in, total_out = float(np.nansum(prompt)), float(n_out.sum())
    duration: float | None = None
    if len(ok):
        start = _column(ok, "started_mono_s")
        duration = float(np.max(start + e2e) - np.min(start))

    def rate(x: float) -> float | None:
        return x / duration if duration else None

    decode_s, decode_tokens = float(np.sum((e2e - ttft)[multi])), float(np.sum(n_out[multi] - 1))
    return {
        "completed": int(len(ok)), "failed": int(len(rows) - len(ok)),
        "duration_s": duration,
        "total_input_tokens": int(total_in), "total_output_tokens": int(total_out),
        "mean_input_tokens": total_in / len(ok) if len(ok) else None,
        "mean_output_tokens": total_out / len(ok) if len(ok) else None,
        "request_throughput": rate(float(len(ok))),
        "output_throughput": rate(total_out),
        "total_token_throughput": rate(total_in + total_out),
        **_stats(ttft, "ttft"), **_stats(tpot, "tpot"),
        "mean_itl_ms": decode_s / decode_tokens * 1000 if decode_tokens else None,
        "median_itl_ms": None, f"p{PERCENTILE}_itl_ms": None,
        **_stats(e2e, "e2el"),
        "percentile": PERCENTILE,
    }


def format_bench(fact: Mapping[str, object], simulated: bool) -> str:
    """The console block: vLLM's figures under its names, the percentile said."""
    def ms(key: str) -> str:
        v = fact.get(key)
        return "n/a" if v is None else f"{v:,.1f}"

    def num(key: str, fmt: str = ",.1f") -> str:
        v = fact.get(key)
        return "n/a" if v is None else format(v, fmt)

    p = fact.get("percentile", PERCENTILE)
    lines = [f"=== bench (vllm bench serve's definitions){' — SIMULATED' if simulated else ''} ===",
             f"shape: {fact.get('shape', '')}",
             f"successful / failed requests (warm-ups excluded)   {fact.get('completed')} / "
             f"{fact.get('failed')}",
             f"benchmark duration (s)                             {num('duration_s', ',.2f')}",
             f"mean input / output tokens per request             {num('mean_input_tokens')} / "
             f"{num('mean_output_tokens')}",
             f"request throughput (req/s)                         {num('request_throughput', ',.3f')}",
             f"output token throughput (tok/s)                    {num('output_throughput')}",
             f"total token throughput (tok/s)                     {num('total_token_throughput')}",
             f"{'':<32}{'mean':>12}{'median':>12}{f'p{p}':>12}"]
    for label, name in (("TTFT (ms)", "ttft"), ("TPOT excl. 1st token (ms)", "tpot"),
                        ("ITL (ms)", "itl"), ("E2E latency (ms)", "e2el")):
        lines.append(f"{label:<32}{ms(f'mean_{name}_ms'):>12}{ms(f'median_{name}_ms'):>12}"
                     f"{ms(f'p{p}_{name}_ms'):>12}")
    lines.append("(ITL median/p99 n/a: the rows keep first and last token times, not each gap)")
    return "\n".join(lines)
