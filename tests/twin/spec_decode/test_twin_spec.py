"""Speculative decoding in the twin: cost terms, losslessness, content-driven proposals."""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import InputError
from simulator.twin.core.config import plain_config
from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import EngineRequest, StepShape
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.serve import textgen
from simulator.twin.spec_decode.ngram import (
    ModelDraftSpec,
    NgramIndex,
    NgramSpec,
    accepted_length,
    parse_spec,
)
from simulator.twin.spec_decode.whatif import run_sessions

HW, MODEL = "a40", "qwen3-coder-30b-a3b-awq"


def _shape(n: int, k: int, ctx: int) -> StepShape:
    """n decoding sequences at `ctx` tokens, each verifying k draft tokens."""
    return StepShape(n, n * (1 + k), n * (ctx + 1 + k), 0, 0.0, n * k, n, n * ctx)


@pytest.mark.parametrize(("n", "k", "ctx"), [(1, 5, 3000), (8, 12, 20_000), (32, 5, 3000)])
def test_ngram_step_costs_what_the_formula_says(n: int, k: int, ctx: int) -> None:
    """Each term of `spec_time`, from its own inputs: host work per step and sequence,
    the n-gram scan, the rejection sampler's bytes per draft row (30 B per vocabulary
    entry over the card's bandwidth), and the verification attention beyond its KV read;
    the LM head per verified row is inside the roofline (spec on or off)."""
    on = build_perf_model(HW, MODEL, spec=f"ngram:{k}")
    off = build_perf_model(HW, MODEL, overrides={"max_num_batched_tokens": 2048})
    eff = on.efficiency
    q = 1 + k
    rows = on.verify_rows[q]
    shape = replace(_shape(n, k, ctx), verify_pairs=n * rows * (ctx + q / 2),
                    verify_context=n * ctx)
    vocab = on.model.params.lm_head / on.model.hidden_size
    rs = 30.0 * vocab / on.hardware.bandwidth_bytes_s
    attn = (on._t_pair * shape.verify_pairs
            - on._t_kv_tok * shape.verify_context * (1 + eff.kv_half_seqs / n))
    extra = (eff.spec_step_s + (eff.spec_seq_s + eff.spec_req_s) * n
             + (eff.spec_verify_tok_s + rs) * n * k
             + eff.ngram_ctx_tok_s * n * ctx + max(attn, 0.0))
    assert extra > 0
    assert on.verify_attention_time(shape) == pytest.approx(max(attn, 0.0), rel=1e-12)
    assert on.step_time(shape) == pytest.approx(off.step_time(shape) + extra, rel=1e-12)
    # the verification tokens are in the roofline too: more tokens, more experts read
    assert off.step_time(shape) > off.step_time(_shape(n, 0, ctx))
    assert on.experts_touched(n * (1 + k)) > on.experts_touched(n)


def test_lm_head_runs_on_every_verified_row() -> None:
    """logits_indices covers all 1 + k positions of a drafted request: a compute-bound
    step pays 2 · N_head FLOPs per draft token on top of one row per sequence."""
    pm = build_perf_model(HW, MODEL)
    n, t = 64, 2048                       # compute-bound: many tokens in the step
    with_drafts = StepShape(n, t, n * 3000, draft_tokens=t - n)
    without = StepShape(n, t, n * 3000)
    head = 2.0 * pm.model.params.lm_head / (pm.efficiency.eta_c * pm.peak_flops)
    assert pm.step_time(with_drafts) - pm.step_time(without) == pytest.approx(
        head * (t - n), rel=1e-9)


def test_drafter_step_adds_its_passes() -> None:
    """A draft model keeps async scheduling (vLLM 0.32 config/vllm.py), so no host terms;
    its first pass runs over every token of the step, then k − 1 one-token passes."""
    over = {"quantization": "nvfp4"}
    on = build_perf_model("gb10", "qwen3.8-27b-awq", spec="draft:7", overrides=over)
    off = build_perf_model("gb10", "qwen3.8-27b-awq",
                           overrides={**over, "max_num_batched_tokens": 2048})
    eff = on.efficiency
    shape = replace(_shape(2, 7, 1000), uniform_decode=True)
    vocab = on.model.params.lm_head / on.model.hidden_size
    rs = 30.0 * vocab / on.hardware.bandwidth_bytes_s
    drafter = on.drafter_pass_time(2 + 14) + 6 * on.drafter_pass_time(2)
    extra = (eff.spec_verify_tok_s + rs) * 14 + drafter     # full graphs: FA2, uniform
    assert on.mode_time(shape) == 0.0
    assert on.step_time(shape) == pytest.approx(off.step_time(shape) + extra, rel=1e-12)
    d = on.model.drafters["draft"]
    assert on.drafter_pass_time(1) == pytest.approx(
        d.bytes_per_pass / (eff.eta_w * on.hardware.bandwidth_bytes_s))
    # a batch of unequal drafts loses the full graph on GB10 (FA2: UNIFORM_BATCH)
    assert on.mode_time(replace(shape, uniform_decode=False)) == eff.piecewise_step_s > 0


def test_spec_settings_budget_and_errors() -> None:
    assert build_perf_model(HW, MODEL, spec="ngram:5").max_num_batched_tokens == 2048
    assert build_perf_model(HW, MODEL).max_num_batched_tokens == 8192
    kept = build_perf_model(HW, MODEL, spec="ngram:5",
                            overrides={"max_num_batched_tokens": 16384})
    assert kept.max_num_batched_tokens == 16384
    assert parse_spec("draft:7") == ModelDraftSpec("draft", 7)
    assert parse_spec("mtp:2") == ModelDraftSpec("mtp", 2)
    with pytest.raises(InputError, match="no 'mtp' drafter"):
        build_perf_model(HW, MODEL, spec="mtp:2")
    with pytest.raises(ValueError, match="ngram:K"):
        parse_spec("draft:0")


@pytest.mark.parametrize("text", ["ngram:1000000000", "ngram:33", "draft:33", "mtp:64",
                                  "ngram:²", "ngram:-1"])
def test_spec_depth_is_bounded_as_vllm_bounds_it(text: str) -> None:
    """vLLM drafts at most 32 tokens per request (speculation.md §2): a larger K is one
    clear input error, at parse time and in the engine settings (CLI exit 2)."""
    with pytest.raises(ValueError, match="1 <= K <= 32"):
        parse_spec(text)
    with pytest.raises(InputError, match="spec"):
        build_perf_model(HW, MODEL, spec=text)
    assert parse_spec("ngram:32") == NgramSpec(32)


def _emit_all(spec: NgramSpec | ModelDraftSpec | None, prompt: list[int],
              plans: list[list[int]]) -> tuple[list[list[int]], int]:
    """Run requests step by step; rebuild each one's emitted tokens from the per-step
    counts (the twin streams plan[emitted:emitted + e] for each step's e)."""
    from tests.twin.core.test_twin_engine import FakePerf
    eng = TwinEngine(perf := FakePerf(), plain_config(perf, num_blocks=400, spec=spec))
    for i, plan in enumerate(plans):
        eng.submit(EngineRequest(f"r{i}", prompt, plan, 0.0))
    got: list[list[int]] = [[] for _ in plans]
    max_per_step = 0
    for _ in range(100_000):
        if eng.is_idle():
            break
        out = eng.step()
        if out is None:
            eng.run_until(eng.now + 1.0)
            continue
        for rid, e in out.emitted:
            i = int(rid[1:])
            got[i].extend(plans[i][len(got[i]):len(got[i]) + e])
            max_per_step = max(max_per_step, e)
    return got, max_per_step


@settings(max_examples=40, deadline=None)
@given(prompt=st.lists(st.integers(0, 3), min_size=1, max_size=120),
       plans=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=80),
                      min_size=1, max_size=3),
       kind=st.sampled_from(["ngram", "draft"]), k=st.integers(1, 8))
def test_speculation_never_changes_the_emitted_text(prompt: list[int], plans: list[list[int]],
                                                    kind: str, k: int) -> None:
    """Lossless: whatever is drafted and accepted, each request emits exactly its plan, in
    order, at most 1 + k tokens a step; and with spec off it emits the same."""
    spec: NgramSpec | ModelDraftSpec = (
        NgramSpec(k, 1, 3) if kind == "ngram"
        else ModelDraftSpec("draft", k, (0.9, 0.6, 0.3)))
    got, most = _emit_all(spec, prompt, plans)
    assert got == plans and most <= 1 + k
    assert _emit_all(None, prompt, plans)[0] == got


@given(tokens=st.lists(st.integers(0, 2), min_size=2, max_size=60), data=st.data())
def test_accepted_tokens_are_the_planned_tokens(tokens: list[int], data: st.DataObject) -> None:
    length = data.draw(st.integers(1, len(tokens) - 1))
    start = data.draw(st.integers(0, length - 1))
    count = data.draw(st.integers(0, length - start))
    limit = len(tokens) - length - 1
    acc = accepted_length(tokens, start, count, length, limit)
    assert 0 <= acc <= min(count, max(limit, 0))
    assert tokens[start:start + acc] == tokens[length:length + acc]


def test_no_repetition_means_no_proposals() -> None:
    seq = list(range(5000))                     # no n-gram occurs twice
    idx = NgramIndex(NgramSpec(5), seq, 100)
    assert all(idx.propose(n) == (0, 0) for n in range(100, 5000))


def test_fresh_text_gives_the_proposer_almost_nothing() -> None:
    """The twin's own fresh replies (no copying) must not repeat themselves: over a few
    turns of 900 tokens the n-gram proposer drafts on < 2% of emitted tokens; code edits
    that copy the prompt draft often and get long accepted runs."""
    pm = build_perf_model(HW, MODEL, spec="ngram:5")
    fresh = run_sessions(pm, 1, turns=3, code_edit=False)
    assert fresh.drafts_per_token < 0.02
    edit = run_sessions(pm, 1, turns=3, code_edit=True)
    assert edit.drafts_per_token > 0.05 and edit.accepted_per_draft > 3.0
    assert edit.tokens_per_pass > 3.0 > 1.1 > fresh.tokens_per_pass


def test_fresh_reply_has_no_repeated_5grams() -> None:
    _, ids = textgen.plan_reply([1, 2, 3], 2000, seed=5, natural_tokens=2000,
                                code_edit=False, repeat_fraction=0.0)
    grams = [tuple(ids[i:i + 5]) for i in range(len(ids) - 4)]
    assert len(set(grams)) / len(grams) > 0.97


def test_direction_single_stream_and_concurrency() -> None:
    """The twin answers "should I turn speculation on?" the way calibration.md measured:
    on for one stream copying code, off for fresh text and for many sessions."""
    off, on = build_perf_model(HW, MODEL), build_perf_model(HW, MODEL, spec="ngram:5")
    assert run_sessions(on, 1).per_session_tok_s > 1.5 * run_sessions(off, 1).per_session_tok_s
    assert (run_sessions(on, 1, code_edit=False).per_session_tok_s
            < run_sessions(off, 1, code_edit=False).per_session_tok_s)
    assert (run_sessions(on, 16, turns=1, code_edit=False).aggregate_tok_s
            < 0.6 * run_sessions(off, 16, turns=1, code_edit=False).aggregate_tok_s)


def test_per_position_counters_are_cumulative() -> None:
    pm = build_perf_model(HW, MODEL, spec="ngram:5")
    eng = TwinEngine(pm)
    rng = random.Random(1)
    prompt = [rng.randrange(50_000) for _ in range(3000)]
    eng.submit(EngineRequest("a", prompt, prompt[1000:1400], 0.0))
    eng.run_until(float("inf"))
    c = eng.counters
    pos = c.spec_accepted_per_pos
    assert len(pos) == 5 and sum(pos) == c.spec_accepted_tokens > 0
    assert all(a >= b for a, b in itertools.pairwise(pos))
    res = eng.result("a")
    assert res.decode_steps < len(res.token_times) == 400


def test_twin_paths_and_engine_flags() -> None:
    from simulator.twin.model.profiles import PROFILE_DIR, parse_twin
    hw, model = PROFILE_DIR / "hardware" / "a40.yaml", PROFILE_DIR / "models" / "x.yaml"
    assert parse_twin(f"{hw}/{model}") == (str(hw), str(model))
    assert parse_twin("a40/dir/model.yaml") == ("a40", "dir/model.yaml")
    assert parse_twin("a40/qwen3-coder-30b-a3b-awq") == ("a40", "qwen3-coder-30b-a3b-awq")
    kimi = "kimi-linear-48b-a3b-awq"
    auto = build_perf_model(HW, kimi, overrides={"kv_dtype": "auto"})
    fp8 = build_perf_model(HW, kimi, overrides={"kv_dtype": "fp8"})
    assert auto.engine.kv_dtype == "bf16" and fp8.engine.kv_dtype == "fp8"
    assert build_perf_model(HW, MODEL, overrides={"kv_dtype": "auto"}).engine.kv_dtype == "fp8"
    fixed = build_perf_model(HW, MODEL, overrides={"kv_cache_gib": 10})
    assert fixed.kv_capacity_tokens() == pytest.approx(10 * 2**30 / fixed.kv_bytes_per_token,
                                                       rel=0.01)
    no_cache = build_perf_model(HW, MODEL, overrides={"enable_prefix_caching": False})
    eng = TwinEngine(no_cache)
    prompt = list(range(3000))
    for i in range(2):
        eng.submit(EngineRequest(f"r{i}", prompt, [1, 2, 3], eng.now))
        eng.run_until(float("inf"))
    assert eng.result("r1").cached_tokens == 0 and eng.counters.prefix_cache_queries > 0


def test_spec_sweep_table_and_bad_settings() -> None:
    from simulator.analysis.run_summary import RunSummary
    from simulator.report.sweeps import format_spec_table
    from simulator.sweep.fanout import Serial
    from simulator.sweep.pipeline import run_profile
    from simulator.sweep.point import Point, PointResult
    from simulator.sweep.profiles import Specs, Sweep, parse_specs
    from tests.sweep.toy import BASE
    assert parse_specs("off, ngram:5,ngram:24") == ("off", "ngram:5", "ngram:24")
    for bad in ("ngram:5", "off,eagle:3", "off,off"):
        with pytest.raises(InputError, match="--spec"):
            parse_specs(bad)
    fake = {"off": 100.0, "ngram:5": 50.0}

    def run(p: Point) -> PointResult:
        n, s = p.coords["requested_sessions"], p.coords["spec"]
        assert p.target.spec == s
        return PointResult(p, "", "completed", "", RunSummary.from_json({
            "requested_sessions": n, "window_per_session_tok_s": fake[s] / n,
            "window_n_x_per_session_tok_s": fake[s]}), 0.0, 0.0)
    rows = run_profile(Sweep(BASE, Specs(("off", "ngram:5"), (1, 4))), Serial(),
                       runner=run).rows
    assert [r["window_n_x_per_session_tok_s"] for r in rows] == [100.0, 100.0, 50.0, 50.0]
    table = format_spec_table(rows).splitlines()
    assert "ngram:5 vs off" in table[0] and table[1].split()[-1] == "0.50×"


def test_sweep_cli_over_spec_settings(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from simulator.cli import main
    res = CliRunner().invoke(main, ["sweep", "scenarios/claude-code-endurance.yaml",
                                    "--spec", "off,ngram:5", "--sessions", "1,2",
                                    "--turns", "2", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "ngram:5 vs off" in res.output
    assert list(tmp_path.glob("sweep-*/spec-sweep.png"))
    bad = CliRunner().invoke(main, ["sweep", "scenarios/claude-code-endurance.yaml",
                                    "--spec", "off,bogus", "--out", str(tmp_path)])
    assert bad.exit_code == 2


@pytest.mark.slow
def test_spec_calibration_points_within_10_percent() -> None:
    """The shipped A40 terms reproduce calibration.md's n-gram rows (twin fit's points,
    each an `endurance run` of its scenario): depth 5, 12, 24 single stream and 32
    streams at depth 5, each within 10%. The isolated 20k turn (8 seeds, fitted too)
    stays about 16% high on its mean: its content, one 900-token reply that copies more
    than the measured one (docs/twin-fidelity.md), not a cost term, so it is held to 20%."""
    from simulator.sweep.calibration import point_runner
    from simulator.twin.model.fit import evaluate, load_points
    from simulator.twin.model.profiles import PROFILE_DIR
    pf = load_points(PROFILE_DIR / "calibration" / "a40-qwen3-coder-30b-a3b-awq-spec.yaml")
    rows = evaluate(pf.points, build_perf_model(HW, MODEL),
                    runner=point_runner(f"{HW}/{MODEL}"))
    assert len(rows) == 12
    iso = [row for row in rows if "isolated" in row.obs.label]
    for row in rows:
        if row not in iso:
            assert abs(row.error_pct) < 10, (row.obs.label, row.predicted)
    mean = sum(row.predicted for row in iso) / len(iso)
    assert 0 < mean / 421 - 1 < 0.20, mean


def test_an_edit_changes_one_word_of_the_copied_line() -> None:
    """textgen's edit: one identifier or number replaced in place, the rest of the copied
    line kept (so the n-gram proposer resyncs 5 tokens after it, as after a real rename)."""
    rng = random.Random(7)
    line = "    result = compute_total(items, limit=40)\n"
    for _ in range(50):
        edited = textgen._edit_line(rng, line)
        assert edited != line and edited.endswith("\n")
        a, b = line.split(), edited.split()
        assert len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) == 1
    assert textgen._edit_line(rng, "    ()\n").startswith("    ()  # ")


def test_deeper_drafts_emit_more_per_pass_on_code_edits() -> None:
    """calibration.md: depth 24 ran 2.2× depth 5 on code edits; the twin's code-edit
    content gives long enough copied runs that depth 24 more than doubles the tokens
    emitted per forward pass of depth 5."""
    w5 = run_sessions(build_perf_model(HW, MODEL, spec="ngram:5"), 1, turns=3)
    w24 = run_sessions(build_perf_model(HW, MODEL, spec="ngram:24"), 1, turns=3)
    assert w5.tokens_per_pass > 3.0
    assert w24.tokens_per_pass > 2 * w5.tokens_per_pass


def test_adopted_index_indexes_the_new_prompt_in_bulk() -> None:
    """A follow-up turn adopts the previous turn's index and indexes its new tokens in
    bulk; with prompt_lookup_min == max (vLLM's default 5/5) that must still index."""
    rng = random.Random(3)
    first = [rng.randrange(50_000) for _ in range(500)]
    idx = NgramIndex(NgramSpec(5), first, len(first))
    later = first + [rng.randrange(50_000) for _ in range(400)]
    seq = later + later[600:640]            # the reply copies tokens 600..640
    assert idx.adopt(seq, len(later) + 5)
    start, count = idx.propose(len(later) + 5)
    assert (start, count) == (605, 5)


def test_debug_record_carries_speculation_per_request() -> None:
    from simulator.twin.serve.service import RequestStream
    s = RequestStream("r", 3, (1, 2, 3, 4), 0.0, emitted=4, spec_drafts=1,
                      spec_draft_tokens=5, spec_accepted_tokens=2,
                      emit_times=[0.1, 0.2], emit_counts=[1, 3])
    rec = s.record()
    assert rec["tokens_per_forward_pass"] == 2.0
    assert (rec["spec_drafts"], rec["spec_draft_tokens"], rec["spec_accepted_tokens"]) == (1, 5, 2)


def test_spec_columns_from_reply_extras() -> None:
    """The twin's reply extras become the per-request columns; anything else (a real
    server's reply) leaves them None."""
    from simulator.records.rows import spec_columns
    got = spec_columns({"spec_drafts": 3, "spec_draft_tokens": 15,
                        "spec_accepted_tokens": 9, "forward_passes": 7})
    assert got == {"spec_drafts": 3, "spec_draft_tokens": 15, "spec_accepted_tokens": 9,
                   "spec_forward_passes": 7, "ngram_ref_passes": None,
                   "ngram_ref_tokens": None}
    assert set(spec_columns({}).values()) == {None}
    assert spec_columns({"forward_passes": True})["spec_forward_passes"] is None


def test_twin_run_records_speculation_per_turn(tmp_path: Path) -> None:
    """An in-process twin run with n-gram speculation fills the per-turn columns, and the
    summary's tokens per forward pass is Σ output / Σ passes (> 1 with accepted drafts)."""
    import pandas as pd

    from simulator.analysis.summary import spec_figures
    from simulator.report.console import format_summary
    from tests.conftest import SCENARIOS, run_scenario
    res = run_scenario(SCENARIOS / "claude-code-endurance.yaml", tmp_path, ["turns=6"],
                       spec="ngram:24")
    assert res.status == "completed"
    df = pd.read_parquet(res.run_dir / "turns.parquet")
    ok = df[df.ok]
    assert ok.spec_forward_passes.notna().all() and (ok.spec_forward_passes >= 1).all()
    assert (ok.spec_accepted_tokens <= ok.spec_draft_tokens).all()
    assert (ok.output_tokens == ok.spec_forward_passes + ok.spec_accepted_tokens).all()
    figs = spec_figures(ok)
    assert figs["tokens_per_forward_pass"] == pytest.approx(
        ok.output_tokens.sum() / ok.spec_forward_passes.sum())
    assert figs["tokens_per_forward_pass"] > 1.0
    summary = json.loads((res.run_dir / "summary.json").read_text())
    assert summary["tokens_per_forward_pass"] == pytest.approx(figs["tokens_per_forward_pass"])
    assert "tokens per forward pass" in format_summary(summary)
    # a frame without the columns (older runs, real servers): no figure, no row
    assert set(spec_figures(ok.drop(columns=["spec_forward_passes"])).values()) == {None}


def test_proposer_takes_the_earliest_occurrence() -> None:
    """vLLM proposes what followed the earliest occurrence of the suffix (speculation.md
    §1), whether the occurrences were indexed at build time, in bulk or one by one."""
    ngram = [1, 2, 3, 4, 5]
    seq = [9] + ngram + [10, 11] + [8] * 3 + ngram + [20, 21] + [7] * 70 + ngram
    idx = NgramIndex(NgramSpec(2), seq, len(seq))
    start, count = idx.propose(len(seq))
    assert seq[start:start + count] == [10, 11]
    short = seq[:9]                                  # only the first occurrence known
    later = NgramIndex(NgramSpec(2), seq, len(short))
    assert later.propose(len(seq)) == (start, count)     # the rest indexed in bulk
    step = NgramIndex(NgramSpec(2), seq, len(short))
    for n in range(len(short) + 1, len(seq)):            # one position at a time
        step.propose(n)
    assert step.propose(len(seq)) == (start, count)
