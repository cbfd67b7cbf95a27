"""A bench run's figures by `vllm bench serve`'s definitions (`analysis/bench.py`),
computed by hand here from rows of known times."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from simulator.analysis.bench import bench_figures, format_bench


def _row(session: int, sent: float, ttft: float, e2e: float, out: int, *,
         error: str | None = None, attempt: int = 1, prompt: int = 100) -> dict[str, object]:
    return {"session_id": f"s{session:04d}", "turn_index": 0, "attempt": attempt,
            "turn_kind": "bench", "started_mono_s": sent, "ttft_s": ttft, "e2e_s": e2e,
            "output_tokens": out, "prompt_tokens": prompt, "context_tokens_est": prompt,
            "error_type": error}


def test_definitions_match_vllm_bench_serve() -> None:
    rows = pd.DataFrame([
        _row(0, 0.0, 9.0, 9.0, 10),                       # a warm-up: left out
        _row(1, 1.0, 0.5, 2.5, 11),                        # tpot (2.5-0.5)/10 = 0.2
        _row(2, 1.0, 1.0, 5.0, 5),                         # tpot 4/4 = 1.0
        _row(3, 2.0, 0.2, 0.2, 1),                         # one token: no tpot
        _row(4, 2.0, 0.1, 0.1, 0, error="server"),         # failed
    ])
    f = bench_figures(rows, warmups=1)
    assert (f["completed"], f["failed"]) == (3, 1)
    assert math.isclose(f["mean_ttft_ms"], (0.5 + 1.0 + 0.2) / 3 * 1000)
    assert math.isclose(f["median_ttft_ms"], 500.0)
    assert math.isclose(f["p99_ttft_ms"], float(np.percentile([0.5, 1.0, 0.2], 99)) * 1000)
    assert math.isclose(f["mean_tpot_ms"], (0.2 + 1.0) / 2 * 1000)
    # ITL pooled: (2.0 + 4.0) / (10 + 4) gaps
    assert math.isclose(f["mean_itl_ms"], 6.0 / 14 * 1000)
    assert f["median_itl_ms"] is None and f["p99_itl_ms"] is None
    # duration: first sent (1.0) to last token (1.0 + 5.0)
    assert math.isclose(f["duration_s"], 5.0)
    assert f["total_output_tokens"] == 17 and f["total_input_tokens"] == 300
    assert math.isclose(f["output_throughput"], 17 / 5.0)
    assert math.isclose(f["request_throughput"], 3 / 5.0)


def test_ttft_is_the_first_chunk_as_vllms_client_times_it() -> None:
    """A reasoning model's role chunk (first token) comes before its first text: TTFT
    and TPOT run from the chunk, as vLLM's client times them; a row with no chunk time
    (an older run's journal) falls back to its first text."""
    chunked = {**_row(0, 0.0, 0.4, 1.3, 10), "first_chunk_s": 0.1}
    older = {**_row(1, 0.0, 0.3, 1.2, 10), "first_chunk_s": None}
    f = bench_figures(pd.DataFrame([chunked, older]), warmups=0)
    assert math.isclose(f["mean_ttft_ms"], (0.1 + 0.3) / 2 * 1000)
    assert math.isclose(f["mean_tpot_ms"], ((1.3 - 0.1) / 9 + (1.2 - 0.3) / 9) / 2 * 1000)


def test_a_retried_request_counts_once_by_its_last_attempt() -> None:
    rows = pd.DataFrame([_row(0, 0.0, 0.1, 0.1, 0, error="server"),
                         _row(0, 1.0, 0.3, 1.3, 11, attempt=2)])
    f = bench_figures(rows, warmups=0)
    assert (f["completed"], f["failed"]) == (1, 0)
    assert math.isclose(f["mean_ttft_ms"], 300.0)


def test_no_rows_gives_none_not_zero() -> None:
    f = bench_figures(pd.DataFrame(columns=list(_row(0, 0, 0, 0, 0))), warmups=0)
    assert f["completed"] == 0 and f["mean_ttft_ms"] is None and f["duration_s"] is None
    text = format_bench({"shape": "x", **f}, simulated=True)
    assert "p99" in text and "n/a" in text and "SIMULATED" in text
