"""The benchmark load shape against a real server: `endurance run --bench` on vLLM (CPU,
the tiny model the engine tests start), over the OpenAI endpoint as `vllm bench serve
--backend openai-chat` sends it, beside the same shape on the twin of that server
(`cpu-2core/tiny-llama-2l`). The shape runs end to end on both, the output length is
enforced on the real server (max_tokens with ignore_eos), warm-ups are left out, and the
figures come back under vLLM's names; the side-by-side is printed (pytest -s)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.engines.server import EngineServer

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]

ISL, OSL, CONCURRENCY, REQUESTS, WARMUPS = 256, 32, 4, 16, 4
TWIN = "cpu-2core/tiny-llama-2l"
SHAPE = ["--bench", f"{ISL}:{OSL}", "--concurrency", str(CONCURRENCY), "--requests",
         str(REQUESTS), "--num-warmups", str(WARMUPS), "--quiet"]


def _run(args: list[str], out: Path) -> tuple[dict[str, object], pd.DataFrame]:
    r = CliRunner().invoke(main, ["run", *SHAPE, *args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    run_dir = Path(r.output.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    return summary["bench"], pd.read_parquet(run_dir / "turns.parquet")


def test_bench_shape_on_vllm_cpu_and_its_twin(vllm_server: EngineServer,
                                              tmp_path: Path) -> None:
    real, rows = _run(["--endpoint", vllm_server.base_url, "--api", "openai-chat",
                       "--model", vllm_server.model], tmp_path / "real")
    twin, _ = _run(["--twin", TWIN], tmp_path / "twin")
    keys = ("completed", "failed", "mean_input_tokens", "mean_output_tokens", "mean_ttft_ms",
            "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "mean_itl_ms",
            "mean_e2el_ms", "output_throughput", "duration_s")
    print("\n| figure | vLLM CPU | twin |\n|---|---|---|", file=sys.stderr)
    for k in keys:
        print(f"| {k} | {real[k]} | {twin[k]} |", file=sys.stderr)
    for figures in (real, twin):
        assert figures["completed"] == REQUESTS and figures["failed"] == 0
        assert figures["percentile"] == 99
        for k in ("mean_ttft_ms", "mean_e2el_ms", "output_throughput"):
            assert isinstance(figures[k], float) and figures[k] > 0, (k, figures[k])
        assert figures["median_ttft_ms"] <= figures["p99_ttft_ms"]
        # TPOT as vLLM defines it, per request (E2E − TTFT)/(output − 1), every request
        # OSL tokens: its mean is the means' difference over OSL − 1. Zero is a true
        # figure on the real server when the tiny model's 32 tokens reach a client that a
        # busy machine did not schedule in between (one read: CI saw TTFT = E2E)
        tpot, e2el, ttft = (float(str(figures[k])) for k in
                            ("mean_tpot_ms", "mean_e2el_ms", "mean_ttft_ms"))
        assert tpot == pytest.approx((e2el - ttft) / (OSL - 1), rel=1e-6, abs=1e-9)
    assert float(str(twin["mean_tpot_ms"])) > 0
    # every request, warm-ups included, got exactly OSL tokens from the real server
    ok = rows[rows.error_type.isna()]
    assert len(ok) == REQUESTS + WARMUPS
    assert (ok.output_tokens == OSL).all(), ok.output_tokens.value_counts().to_dict()
    assert (ok.max_tokens == OSL).all()
    # the real server counted each prompt with its own tokenizer: a prompt of about ISL
    assert 0.5 * ISL < float(str(real["mean_input_tokens"])) < 2 * ISL
