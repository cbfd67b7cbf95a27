"""The twin answers a probe from the prompt it was sent and from nothing else; its
summaries carry the user's notes and the stated decisions."""

from __future__ import annotations

from simulator.protocol import facts as fx
from simulator.twin.serve import reply
from simulator.twin.serve.recall_reply import SUMMARY_LEAD
from simulator.util import tokens

KEY, VALUE = "ledger-sync release code word", "AMBER-4821a"
WINDOW = 100_000


def _plan(text: str, hints: dict[str, str] | None = None, max_tokens: int = 32) -> str:
    planned = reply.plan_for(tokens.encode(text), max_tokens, hints or {},
                             context_window=WINDOW, seed=0)
    out = tokens.decode(planned.token_ids)
    assert planned.text in (None, out)       # the text carried along is the ids' text
    return out


def test_answer_comes_from_the_prompt() -> None:
    q = fx.question("user_value", KEY)
    said = f"def f():\n    pass\n{fx.statement('user_value', KEY, VALUE)}\nmore\n{q}<|im_end|>\n"
    assert _plan(said) == VALUE
    assert _plan(f"def f():\n    pass\nmore\n{q}<|im_end|>\n") == fx.UNKNOWN_ANSWER
    # the hint that a request is a probe carries no answer: the prompt decides
    assert _plan(f"nothing here\n{q}", {"x-endurance-turn-kind": "probe"}) == fx.UNKNOWN_ANSWER


def test_a_prompt_without_a_question_gets_the_usual_reply() -> None:
    text = "def f():\n    return 1\n" * 20
    assert _plan(text, max_tokens=64) == _plan(text, {"x-endurance-turn-kind": "probe"},
                                               max_tokens=64) != fx.UNKNOWN_ANSWER


def test_summary_keeps_notes_and_decisions_not_tool_values() -> None:
    user = fx.statement("user_value", KEY, VALUE)
    dec = fx.statement("decision", "auth proxy failure strategy", "canary-rollout-1b")
    tool = fx.statement("tool_value", "auth_proxy_address", "10.0.0.1:20001")
    text = f"{user}\n{tool}\n{dec}\nPlease summarise the conversation."
    out = _plan(text, {"x-endurance-turn-kind": "summary", "x-endurance-output-tokens": "300"},
                max_tokens=300)
    assert out.startswith(SUMMARY_LEAD + user + "\n" + dec)
    assert "10.0.0.1:20001" not in out
    plain = _plan(text, {"x-endurance-output-tokens": "300"}, max_tokens=300)
    assert len(tokens.encode(out)) <= len(tokens.encode(plain)) + 2   # the planned length


def test_the_reply_text_comes_with_the_ids() -> None:
    """The in-process twin builds its response from the text the plan had at hand:
    the ids' very text, whether the reply was planned, cut or a probe's answer."""
    q = fx.question("user_value", KEY)
    said = f"{fx.statement('user_value', KEY, VALUE)}\n{q}"
    for text, hints, max_tokens in [(said, {}, 32), ("def f():\n    pass\n" * 30, {}, 64),
                                    ("x\n" * 50, {"output-tokens": "300"}, 40),
                                    ("x\n" * 50, {"turn-kind": "edit"}, 900)]:
        planned = reply.plan_for(tokens.encode(text), max_tokens, hints,
                                 context_window=WINDOW, seed=3)
        assert planned.text == tokens.decode(planned.token_ids)
    cut = reply.plan_for(tokens.encode(said), 1, {}, context_window=WINDOW, seed=0)
    assert cut.text is None and len(cut.token_ids) == 1
