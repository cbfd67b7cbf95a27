"""The fact/probe grammar: statements the twin can read back, questions it can parse,
and the normalised match that judges a reply."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.protocol import facts as fx

keys = st.from_regex(r"[a-z][a-z_]{2,20}[a-z]", fullmatch=True)
values = st.from_regex(r"[A-Z]{3,8}-[0-9]{3,6}[a-z]", fullmatch=True)
filler = st.text(alphabet="abcdefghij klmnop\n=.:0123456789", max_size=300)


@settings(max_examples=50)
@given(keys, values, filler, filler)
def test_twin_reads_back_each_kind_it_is_told(key: str, value: str, before: str,
                                                after: str) -> None:
    for kind in fx.FACT_KINDS:
        if kind == "edited_path":
            value_k = f"src/{key}/{value.lower()}.py"
            carrier = json.dumps({"arguments": fx.edit_input(key, value_k), "name": "Edit"},
                                 sort_keys=True, separators=(",", ":"))
        else:
            value_k, carrier = value, fx.statement(kind, key, value)
        prompt = f"{before}\n{carrier}\n{after}\n{fx.question(kind, key)}\n<|im_end|>"
        answer = fx.answer_from(prompt)
        assert answer == value_k
        assert fx.is_correct(answer, value_k)


@settings(max_examples=50)
@given(keys, values, filler)
def test_no_statement_no_answer(key: str, value: str, text: str) -> None:
    for kind in fx.FACT_KINDS:
        prompt = f"{text}\n{fx.question(kind, key)}"
        assert fx.answer_from(prompt) == fx.UNKNOWN_ANSWER
        assert not fx.is_correct(fx.UNKNOWN_ANSWER, value)


def test_the_question_before_the_statement_does_not_count() -> None:
    # a statement after the question (say, in the reply being written) is not read
    q = fx.question("user_value", "deploy code word")
    assert fx.answer_from(q + "\nthe deploy code word is AMBER-1a.") == fx.UNKNOWN_ANSWER


def test_a_prompt_without_a_question_gets_no_answer() -> None:
    assert fx.answer_from("the deploy code word is AMBER-100a.") is None


def test_earliest_statement_wins_over_an_edited_copy() -> None:
    text = 'x = 1\nledger_address = "10.0.0.1:20001"\n...\nledger_address = "10.0.0.1:29999"\n'
    assert fx.find_value(text, "tool_value", "ledger_address") == "10.0.0.1:20001"


def test_normalised_match() -> None:
    assert fx.is_correct("The code word is `amber-123a`.", "AMBER-123a")
    assert fx.is_correct("**AMBER-123a**", "AMBER-123a")
    assert fx.is_correct("Path: ./src/a/b_1a.py", "src/a/b_1a.py")
    assert fx.is_correct("10.0.0.1:20001.", "10.0.0.1:20001")
    assert not fx.is_correct("AMBER-123ab", "AMBER-123a")        # a longer value
    assert not fx.is_correct("10.0.0.1:200011", "10.0.0.1:20001")
    assert not fx.is_correct("XAMBER-123a", "AMBER-123a")
    assert not fx.is_correct("anything", "")


def test_summary_keeps_user_notes_and_decisions_once_each() -> None:
    user = fx.statement("user_value", "deploy code word", "AMBER-1a")
    dec = fx.statement("decision", "retry strategy", "canary-rollout-2b")
    tool = fx.statement("tool_value", "db_address", "10.0.0.1:20001")
    text = f"a {user} b\n{tool}\n{dec}\nc {user}"
    assert fx.summary_keeps(text) == [user, dec]
    # at the very end of a message, right before the chat template's end marker
    assert fx.summary_keeps(f"x\n\n{user}<|im_end|>\n<|im_start|>") == [user]
