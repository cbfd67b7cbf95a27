"""The reference n-gram meter: what vLLM's n-gram proposer would give a reply."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import EngineRequest
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.spec_decode.predictability import REFERENCE, IndexMeter, ReferenceMeter, tokens_per_pass


def _fresh(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(1_000_000) for _ in range(n)]


def test_fresh_text_gives_one_token_per_pass() -> None:
    rng = random.Random(1)
    context, reply = _fresh(rng, 2000), _fresh(rng, 300)
    assert ReferenceMeter().passes(context, reply) == 300
    assert tokens_per_pass([(context, reply)]) == 1.0


def test_a_verbatim_copy_gives_depth_plus_one_per_pass() -> None:
    # the reply copies 600 tokens of the context after 5 fresh tokens: the prefill pass
    # samples the first, one pass a token until the last 5 emitted are the copied run's
    # first 5 (lookup n = 5), then 24 drafted + 1 a pass
    rng = random.Random(2)
    context = _fresh(rng, 3000)
    reply = _fresh(rng, 5) + context[1000:1600]
    k = REFERENCE.num_speculative_tokens
    assert ReferenceMeter().passes(context, reply) == 1 + 4 + 5 + -(-595 // (k + 1))


def test_known_copying_share_orders_the_figure() -> None:
    rng = random.Random(3)
    context = _fresh(rng, 4000)
    figures = []
    for share in (0.0, 0.5, 0.9):
        reply: list[int] = []
        while len(reply) < 900:
            if rng.random() < share:
                i = rng.randrange(3000)
                reply += context[i:i + 60]
            else:
                reply += _fresh(rng, 60)
        figures.append(tokens_per_pass([(context, reply)]))
    assert figures[0] == 1.0 and figures[0] < figures[1] < figures[2]   # type: ignore[operator]


def test_the_meter_counts_the_engines_passes_for_one_stream() -> None:
    rng = random.Random(4)
    context = _fresh(rng, 1500)
    reply = _fresh(rng, 40) + context[200:500] + _fresh(rng, 30) + context[900:1100]
    eng = TwinEngine(build_perf_model("a40", "qwen3-coder-30b-a3b-awq", spec="ngram:24"))
    eng.submit(EngineRequest("r", tuple(context), tuple(reply), 0.0))
    eng.run_until(float("inf"))
    assert eng.result("r").decode_steps == ReferenceMeter().passes(context, reply)


def test_follow_up_turns_reuse_the_sessions_index_and_sessions_are_capped() -> None:
    rng = random.Random(5)
    meter = ReferenceMeter(max_sessions=1)
    first, reply = _fresh(rng, 500), _fresh(rng, 50)
    assert meter.passes(first, reply, "s0") == 50
    later = first + reply + _fresh(rng, 100)
    assert meter.passes(later, later[10:60], "s0") is not None
    assert meter.passes(first, reply, "s1") is None     # beyond the metered sessions
    assert meter.passes(first, [], "s0") == 0
    assert meter.passes(first, reply, "s1", known=50) is None    # told or not


@st.composite
def _session(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, int, int, int]]]:
    """A small-vocabulary context and turns of (reply length, copy share %, growth,
    what the next prompt does to the history: 0 keeps it, 1 compacts it, 2 rewrites
    the reply's last tokens, as a client's rendering might) — small vocabularies give
    many false n-gram matches."""
    vocab = draw(st.sampled_from([2, 7, 50, 2**31]))
    context = draw(st.lists(st.integers(0, vocab), max_size=120))
    turns = draw(st.lists(st.tuples(st.integers(0, 80), st.integers(0, 100),
                                    st.integers(0, 40), st.integers(0, 2)), max_size=4))
    return context, turns


@settings(max_examples=150, deadline=None)
@given(_session(), st.integers(0, 2**16))
def test_the_bulk_meter_counts_what_the_engines_proposer_counts(
        case: tuple[list[int], list[tuple[int, int, int, int]]], seed: int) -> None:
    """ReferenceMeter (bulk index) against IndexMeter (the engine's NgramIndex, pass by
    pass) over follow-up turns, copies, and compactions that break the prefix; and a
    meter told some of the counts (`known`) counts the rest alike."""
    rng = random.Random(seed)
    context, turns = case
    vocab = max(context, default=1) + 1
    fast, oracle, skipping = ReferenceMeter(), IndexMeter(), ReferenceMeter()
    for n, copy, growth, change in turns:
        reply: list[int] = []
        while len(reply) < n:
            if context and rng.randrange(100) < copy:
                i = rng.randrange(len(context))
                reply += context[i:i + rng.randint(1, 30)]
            else:
                reply += [rng.randrange(vocab) for _ in range(rng.randint(1, 8))]
        counted = oracle.passes(context, reply, "s")
        assert fast.passes(context, reply, "s") == counted
        # a count some turns took from an earlier run's (`known`) leaves the session's
        # index behind: the turns it counts after still come out right
        given = counted if rng.random() < 0.5 else None
        assert skipping.passes(context, reply, "s", known=given) == counted
        said = reply if change != 2 else [*reply[:-3], vocab, vocab + 1]
        context = context + said + [rng.randrange(vocab) for _ in range(growth)]
        if change == 1:
            context = context[len(context) // 2:]


def test_fewer_edits_of_the_copied_lines_give_more_tokens_per_pass(tmp_path: Path) -> None:
    from simulator.run.execute import execute
    from simulator.run.spec import RunSpec
    figures = []
    for share in ("0.08", "0"):
        run = execute(RunSpec("scenarios/calibration/code-edit-single-stream.yaml",
                              ["turns=3", f"turn_templates.0.edit_share={share}"],
                              out_dir=tmp_path, show_progress=False), echo=lambda _: None)
        figures.append(run.summary["ngram_reference_tokens_per_pass"])
    assert figures[1] > 1.3 * figures[0], figures
