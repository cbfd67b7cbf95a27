"""Prompt serialisation and the per-segment token cache."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.twin.serve.prompt import PromptError, PromptTokenizer, render_message
from simulator.util import tokens

SYSTEM = [{"type": "text", "text": "You are a coding agent. " * 50,
           "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": "Bash", "description": "run a command",
          "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]


def convo(turns: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for i in range(turns):
        msgs.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Running step {i}."},
            {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"cmd": f"ls {i}"}}]})
        msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}",
             "content": [{"type": "text", "text": f"file_{i}.py\n" * 20}]}]})
    return msgs


def counting_tokenizer() -> tuple[PromptTokenizer, list[str]]:
    seen: list[str] = []

    def enc(text: str) -> list[int]:
        seen.append(text)
        return tokens.encode(text)
    return PromptTokenizer(encode=enc), seen


def test_grown_conversation_only_encodes_new_messages() -> None:
    tok, seen = counting_tokenizer()
    first = tok.encode_request(system=SYSTEM, tools=TOOLS, messages=convo(10))
    calls = tok.encode_calls
    assert calls == len(seen) == 1 + 1 + 21 + 1     # tools, system, messages, gen prompt
    grown = tok.encode_request(system=SYSTEM, tools=TOOLS, messages=convo(12))
    assert tok.encode_calls - calls == 4             # the four new messages only
    gen = len(tokens.encode("<|im_start|>assistant\n"))
    # the old prompt minus its generation prompt is a prefix of the new one
    assert grown[: len(first) - gen] == first[: len(first) - gen]
    assert len(grown) > len(first)


def test_cache_control_does_not_change_tokens() -> None:
    tok = PromptTokenizer()
    msgs = convo(2)
    marked = [dict(m) for m in msgs]
    marked[-1] = {"role": "user", "content": [
        {**msgs[-1]["content"][0], "cache_control": {"type": "ephemeral"}}]}
    assert (tok.encode_request(system=SYSTEM, messages=msgs)
            == tok.encode_request(system=SYSTEM, messages=marked))


def test_serialisation_is_deterministic_and_ordered() -> None:
    a = PromptTokenizer().encode_request(system="sys", tools=TOOLS, messages=convo(1))
    b = PromptTokenizer().encode_request(system=[{"type": "text", "text": "sys"}],
                                         tools=TOOLS, messages=convo(1))
    assert a == b
    text = tokens.decode(a)
    assert text.index("<tools>") < text.index("system\nsys") < text.index("Fix the failing")
    assert text.endswith("<|im_start|>assistant\n")
    assert '"arguments":{"cmd":"ls 0"}' in text and "<tool_response>" in text


def test_lru_is_bounded_by_tokens() -> None:
    one = len(tokens.encode(render_message({"role": "user", "content": "m0"})))
    gen = len(tokens.encode("<|im_start|>assistant\n"))
    tok = PromptTokenizer(max_tokens=3 * one + gen)
    for i in range(10):
        tok.encode_request(messages=[{"role": "user", "content": f"m{i}"}])
    assert tok._cache.held <= 3 * one + gen
    calls = tok.encode_calls
    tok.encode_request(messages=[{"role": "user", "content": "m9"}])
    assert tok.encode_calls == calls        # recent: still cached
    tok.encode_request(messages=[{"role": "user", "content": "m0"}])
    assert tok.encode_calls == calls + 1    # m0 was evicted


@pytest.mark.parametrize("messages", [
    [], "hi", [{"role": "system", "content": "x"}], [{"role": "user", "content": 3}],
    [{"role": "user", "content": [{"type": "video"}]}], [["not a dict"]]])
def test_malformed_messages(messages: Any) -> None:
    with pytest.raises(PromptError):
        PromptTokenizer().encode_request(messages=messages)


def test_render_message_frames_roles() -> None:
    assert render_message({"role": "user", "content": "hi"}) == "<|im_start|>user\nhi<|im_end|>\n"
