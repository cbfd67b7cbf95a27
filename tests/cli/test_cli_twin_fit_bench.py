"""`endurance twin fit FILE... --out card.yaml` from `vllm bench serve` result files: a
synthetic result made by the twin's closed loop at known terms fits back to them (within
5%), the card profile it writes runs with `--twin`, and a hostile file is one line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from click.testing import CliRunner

from simulator.cli import main
from simulator.twin.bench.closed_loop import BenchLoad, run_bench
from simulator.twin.model.perf_model import RooflinePerfModel
from simulator.twin.model.profiles import (
    Efficiency,
    efficiency_for,
    kernel_family,
    load_engine_settings,
    load_hardware,
    load_model,
)

HW, MODEL = "h100", "llama-3.1-8b"
# the known card: the base terms moved well away from where the fit starts
SCALE = {"t0_s": 1.4, "eta_w": 0.8, "eta_c": 0.7}
LOADS = [(512, 64, 1), (4096, 64, 1), (1024, 64, 8), (2048, 64, 32)]   # ISL, OSL, C


def _vllm_results(folder: Path) -> dict[str, float]:
    """`vllm bench serve --save-result` files of LOADS run on the known card (the
    result dict's keys, as vLLM writes them); the known terms."""
    hw, mp = load_hardware(HW), load_model(MODEL)
    base, _ = efficiency_for(hw, kernel_family(mp))
    known = {k: getattr(base, k) * f for k, f in SCALE.items()}
    pm = RooflinePerfModel(hw, mp, load_engine_settings(hw, {}),
                           Efficiency.model_validate({**base.model_dump(), **known}))
    for isl, osl, c in LOADS:
        n = max(8, 2 * c)
        r = run_bench(pm, BenchLoad(isl, osl, n, concurrency=c))
        d = {k: v for k, v in dataclasses.asdict(r).items() if k != "requests"}
        d.update(date="20261206-120000", backend="openai-chat", num_prompts=n,
                 model_id="meta-llama/Llama-3.1-8B-Instruct", request_rate="inf",
                 burstiness=1.0, max_concurrency=c)
        (folder / f"openai-chat-infqps-concurrency{c}-{isl}.json").write_text(json.dumps(d))
    return known


def test_a_synthetic_vllm_result_fits_back_to_its_known_terms(tmp_path: Path) -> None:
    known = _vllm_results(tmp_path)
    card = tmp_path / "my-h100.yaml"
    r = CliRunner().invoke(main, ["twin", "fit", *sorted(map(str, tmp_path.glob("*.json"))),
                                  "--hardware", HW, "--model", MODEL, "--out", str(card),
                                  "--vllm-version", "0.11.0"])
    assert r.exit_code == 0, r.output
    fitted = load_hardware(card)
    assert fitted.efficiency is not None and fitted.name == "my-h100"
    for term, value in known.items():
        got = getattr(fitted.efficiency, term)
        assert abs(got / value - 1) < 0.05, (term, got, value)
    assert "vllm-bench-serve" in fitted.efficiency.source
    assert "0.11.0" in fitted.efficiency.source
    # the profile runs: the benchmark shape on the fitted card
    out = CliRunner().invoke(main, ["run", "--bench", "512:64", "--concurrency", "1",
                                    "--requests", "4", "--twin", f"{card}/{MODEL}",
                                    "--quiet", "--out", str(tmp_path / "runs")])
    assert out.exit_code == 0, out.output
    bench = json.loads((Path(out.output.strip().splitlines()[-1]) / "summary.json")
                       .read_text())["bench"]
    assert bench["completed"] == 4 and bench["mean_tpot_ms"] > 0


def test_a_hostile_result_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "result.json"
    bad.write_text(json.dumps({"completed": 4, "total_input_tokens": 4,
                               "total_output_tokens": 4, "mean_ttft_ms": [1]}))
    r = CliRunner().invoke(main, ["twin", "fit", str(bad), "--hardware", HW,
                                  "--model", MODEL])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "mean_ttft_ms" in lines[0], r.output
