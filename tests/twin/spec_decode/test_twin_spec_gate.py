"""Batch-gated speculation (issue 48 item 6): `ngram:K@N` drafts only while the running
batch holds at most N requests, as vLLM V1's `num_speculative_tokens_per_batch_size`
with K 0 above N (and V0's `speculative_disable_by_batch_size`, SGLang PR 13376)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.errors import InputError
from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import EngineRequest
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.spec_decode.ngram import ModelDraftSpec, NgramSpec, parse_spec

HW, MODEL = "a40", "qwen3-coder-30b-a3b-awq"


def test_the_gate_is_part_of_the_spec_setting() -> None:
    assert parse_spec("ngram:24@8") == NgramSpec(24, max_batch_size=8)
    assert parse_spec("mtp:3@4") == ModelDraftSpec("mtp", 3, max_batch_size=4)
    assert parse_spec("ngram:24") == NgramSpec(24)
    for bad in ("ngram:5@0", "ngram:5@x", "ngram:5@", "ngram:5@70000", "ngram:5@-1"):
        with pytest.raises(ValueError, match="gate"):
            parse_spec(bad)
    assert build_perf_model(HW, MODEL, spec="ngram:5@4").spec == NgramSpec(5, max_batch_size=4)
    with pytest.raises(InputError, match="spec"):
        build_perf_model(HW, MODEL, spec="ngram:5@0")
    # a drafter's acceptance curve from the profile keeps the gate
    drafted = build_perf_model(HW, "qwen3.8-27b-awq", spec="mtp:2@3").spec
    assert isinstance(drafted, ModelDraftSpec) and drafted.max_batch_size == 3
    assert drafted.acceptance


def _run(spec: str) -> tuple[TwinEngine, list[tuple[int, list[int]]]]:
    """Four requests that copy their prompt (the n-gram proposer finds drafts), of
    different lengths so the batch shrinks; per step: (running before it, tokens each
    request emitted)."""
    eng = TwinEngine(build_perf_model(HW, MODEL, spec=spec))
    rng = random.Random(7)
    for i, n in enumerate((120, 200, 300, 500)):
        prompt = [rng.randrange(50_000) for _ in range(2000)]
        eng.submit(EngineRequest(f"r{i}", prompt, prompt[500:500 + n], 0.0))
    steps: list[tuple[int, list[int]]] = []
    for _ in range(10_000):
        running = eng.num_running()
        out = eng.step()
        if out is None:
            break
        steps.append((running, [e for _, e in out.emitted]))
    assert eng.is_idle()
    return eng, steps


def test_the_gate_stops_drafts_above_it_and_changes_nothing_below() -> None:
    free, free_steps = _run("ngram:8")
    assert any(r == 4 and max(es, default=0) > 1 for r, es in free_steps)   # drafts at 4
    # a gate at or above the batch: the very same run
    same, _ = _run("ngram:8@4")
    assert same.counters == free.counters
    assert [same.result(f"r{i}").token_times for i in range(4)] == \
        [free.result(f"r{i}").token_times for i in range(4)]
    # a gate of 2: no drafts while 3 or 4 run, drafts again once 2 are left
    gated, steps = _run("ngram:8@2")
    above = [es for r, es in steps if r > 2]
    below = [es for r, es in steps if 0 < r <= 2]
    assert above and all(max(es, default=0) <= 1 for es in above)
    assert any(max(es, default=0) > 1 for es in below)
    assert 0 < gated.counters.spec_drafts < free.counters.spec_drafts
    assert gated.counters.generation_tokens == free.counters.generation_tokens


def test_sweep_over_gates_on_the_twin(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["sweep", "scenarios/claude-code-team.yaml",
                                    "--spec", "off,ngram:24,ngram:24@1", "--sessions", "1,2",
                                    "--turns", "2", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "ngram:24@1 vs off" in res.output
    bad = CliRunner().invoke(main, ["sweep", "scenarios/claude-code-team.yaml",
                                    "--spec", "off,ngram:24@0", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "gate" in bad.output
