"""`endurance run --bench ISL:OSL …` on the in-process twin: the product's path end to
end, vLLM's figures in the console and summary.json; bad options one line each."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.analysis.load import load_turns
from simulator.cli import main
from tests import lying_servers


def test_bench_runs_on_the_twin_with_vllm_figures(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["run", "--bench", "256:32", "--concurrency", "4",
                                  "--requests", "12", "--num-warmups", "2", "--quiet",
                                  "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "TPOT excl. 1st token (ms)" in r.output and "p99" in r.output
    run_dir = Path(r.output.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    bench = summary["bench"]
    assert bench["completed"] == 12 and bench["failed"] == 0      # warm-ups left out
    assert bench["mean_output_tokens"] == 32                      # length enforced
    assert bench["percentile"] == 99
    assert 0 < bench["median_ttft_ms"] <= bench["p99_ttft_ms"]
    assert bench["mean_tpot_ms"] > 0 and bench["output_throughput"] > 0
    # the twin was asked for exactly 32 tokens and ignore_eos went on the wire
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["sampling"]["sent"]["ignore_eos"] is True


@pytest.mark.parametrize(("args", "needle"), [
    (["--bench", "8k:1k"], "expected ISL:OSL"),
    (["--concurrency", "4"], "give --bench"),
    (["--bench", "8:8", "--lengths", "normal"], "--lengths"),
    (["--bench", "8:8", "--sessions", "3"], "--sessions with --bench"),
    (["--bench", "8:8", "--warmup", "10"], "--num-warmups"),
    (["--bench", "8:8", "--duration", "10"], "--duration"),
])
def test_bad_bench_options_are_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    r = CliRunner().invoke(main, ["run", *args, "--out", str(tmp_path / "r")])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.output
    assert not (tmp_path / "r").exists()


def _harmony_like(delay_s: float) -> lying_servers.Reply:
    """A chat stream as vLLM sends gpt-oss's: the role chunk with the first token, then
    nothing for the header tokens (`delay_s`), then reasoning text, usage, [DONE]."""
    def sse(body: dict[str, object]) -> bytes:
        return lying_servers.chunk(b"data: " + json.dumps(body).encode() + b"\n\n")

    def choice(delta: dict[str, object], finish: str | None = None) -> bytes:
        return sse({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    async def reply(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
        w.write(lying_servers.SSE + b"transfer-encoding: chunked\r\n\r\n"
                + choice({"role": "assistant", "content": ""}))
        await w.drain()
        await asyncio.sleep(delay_s)
        w.write(choice({"reasoning_content": ""}) + choice({"reasoning_content": "We"})
                + choice({"reasoning_content": " go"}, "length")
                + sse({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                       "choices": [], "usage": {"prompt_tokens": 64, "completion_tokens": 5,
                                                "total_tokens": 69}})
                + lying_servers.chunk(b"data: [DONE]\n\n") + lying_servers.chunk(b""))
        await w.drain()
    return reply


def test_bench_ttft_is_the_first_chunk_as_vllms_client_times_it(tmp_path: Path) -> None:
    """Against a server streaming as vLLM streams gpt-oss (the role chunk with the first
    token, the first text 1 s later), the bench TTFT is the role chunk's, as `vllm bench
    serve` times it; the turn rows keep the first text's (`ttft_s`) beside it."""
    with lying_servers.lying_server(_harmony_like(1.0), lying_servers.models_ok) as url:
        r = CliRunner().invoke(main, ["run", "--bench", "64:5", "--concurrency", "2",
                                      "--requests", "2", "--num-warmups", "0", "--quiet",
                                      "--endpoint", url, "--api", "openai-chat",
                                      "--model", "m", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    run_dir = Path(r.output.strip().splitlines()[-1])
    bench = json.loads((run_dir / "summary.json").read_text())["bench"]
    turns = load_turns(run_dir)
    assert bench["completed"] == 2 and len(turns) == 2
    # the text came a second after the role chunk (less any delay in reading the chunk)
    assert (turns["ttft_s"] - turns["first_chunk_s"] > 0.5).all()
    assert bench["mean_ttft_ms"] == pytest.approx(turns["first_chunk_s"].mean() * 1000)
    assert bench["mean_tpot_ms"] == pytest.approx(
        ((turns["e2e_s"] - turns["first_chunk_s"]) / 4).mean() * 1000)
