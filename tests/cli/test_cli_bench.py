"""`endurance run --bench ISL:OSL …` on the in-process twin: the product's path end to
end, vLLM's figures in the console and summary.json; bad options one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main


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
