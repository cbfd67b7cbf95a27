"""Planted facts: seeded, unique per session, planted where their kind fits; retention
classified from the context a probe was sent."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.protocol import facts as fx
from simulator.scenario.probes import ProbesSpec
from simulator.session import recall
from simulator.session.compaction import SUMMARY_HEAD
from simulator.session.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock


def test_plan_is_seeded_and_sorted() -> None:
    spec = ProbesSpec(facts=12)
    a = recall.plan_facts(spec, 7, "s0001", 1, 200)
    assert a == recall.plan_facts(spec, 7, "s0001", 1, 200)
    assert a != recall.plan_facts(spec, 8, "s0001", 1, 200)
    assert [f.turn for f in a] == sorted(f.turn for f in a)
    assert all(0 <= f.turn <= int(0.8 * 199) for f in a)
    assert sorted(f.kind for f in a) == sorted(list(fx.FACT_KINDS) * 3)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 40), st.integers(2, 60))
def test_values_and_keys_unique_across_sessions(seed: int, n: int, sessions: int) -> None:
    spec = ProbesSpec(facts=n)
    values: list[str] = []
    for i in range(sessions):
        fs = recall.plan_facts(spec, seed, f"s{i:04d}", i, 100)
        keys = [f.key for f in fs]
        assert len(set(keys)) == len(keys)          # one question, one fact
        values += [f.value for f in fs]
    assert len(set(values)) == len(values)


def test_chosen_facts_are_planned_too() -> None:
    spec = ProbesSpec(facts=0, plant=({"kind": "decision", "turn": 5},    # type: ignore[arg-type]
                                      {"kind": "user_value", "turn": 2}))
    fs = recall.plan_facts(spec, 0, "s0000", 0, 10)
    assert [(f.kind, f.turn) for f in fs] == [("user_value", 2), ("decision", 5)]


def _fact(kind: fx.FactKind) -> fx.Fact:
    return recall.make_fact(kind, 3, "ledger_sync", random.Random(1), "s0000", 0, 0)


def test_retention_verbatim_summary_dropped() -> None:
    f = _fact("user_value")
    said = Message("user", (TextBlock("hi " + fx.statement(f.kind, f.key, f.value)),))
    summary = Message("user", (TextBlock(SUMMARY_HEAD + "keys: " + f.value),))
    other = Message("assistant", (TextBlock("nothing"),))
    assert recall.retention(f, (said, other)) == "verbatim"
    assert recall.retention(f, (summary, other, said)) == "verbatim"
    assert recall.retention(f, (summary, other)) == "summary"
    assert recall.retention(f, (other,)) == "dropped"
    # the bare value outside a summary is not the fact (its key is gone)
    assert recall.retention(f, (Message("user", (TextBlock(f.value),)),)) == "dropped"


def test_retention_of_a_file_value_and_an_edit() -> None:
    t = _fact("tool_value")
    body = recall.plant_in_file("a\nb\nc", [t], random.Random(0))
    msg = Message("user", (ToolResultBlock("t1", body, False, "read"),))
    assert recall.retention(t, (msg,)) == "verbatim"
    cleared = Message("user", (ToolResultBlock("t1", "[Old tool result content cleared]"),))
    assert recall.retention(t, (cleared,)) == "dropped"
    e = _fact("edited_path")
    call = ToolUseBlock("t2", "Edit", json.dumps(fx.edit_input(e.key, e.value),
                                                 separators=(",", ":")))
    assert recall.retention(e, (Message("assistant", (call,)),)) == "verbatim"


def test_probe_reasons() -> None:
    spec = ProbesSpec(at_turns=(4,), every_turns=10)
    assert recall.probe_reasons(spec, 3, 29, False) is None
    assert recall.probe_reasons(spec, 4, 29, False) == "turn"
    assert recall.probe_reasons(spec, 20, 29, True) == "compaction+turn"
    assert recall.probe_reasons(spec, 29, 29, False) == "end"
    off = ProbesSpec(after_compaction=False, at_end=False)
    assert recall.probe_reasons(off, 29, 29, True) is None


def test_factbook_plants_once_and_counts_crossings() -> None:
    f_user = recall.make_fact("user_value", 2, "a_b", random.Random(0), "s", 0, 0)
    f_dec = recall.make_fact("decision", 2, "c_d", random.Random(0), "s", 0, 1)
    book = recall.FactBook((f_user, f_dec))
    assert book.due("user_value", 1) == []
    assert book.due("user_value", 3) == [f_user]
    assert book.due("user_value", 4) == []                  # planted once
    assert book.due("decision", 3) == [f_dec]
    # the prompt goes out with turn 3, the reply with turn 4
    assert [f for f, _ in book.askable(3)] == [f_user]
    assert {f.fact_id for f, _ in book.askable(4)} == {f_user.fact_id, f_dec.fact_id}
    book.compaction_turns += [3, 4, 9]
    assert book.crossed(f_user, 3, 9) == 3
    assert book.crossed(f_dec, 3, 9) == 2
    assert book.crossed(f_dec, 3, 8) == 1
