"""A model whose chat stream opens with tokens that carry no text (gpt-oss: harmony's
`<|channel|>analysis<|message|>`, `ModelProfile.chat_first_text_token` 4) streams from
the twin as vLLM streams it: the role chunk (OpenAI) or `message_start` (Messages) with
the first token, the first text with the 4th. Before, the twin sent text from token 1,
so a session's TTFT on a gpt-oss twin was three decode steps shorter than the same
client measures against vLLM."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest

from simulator.clock.virtual import run_virtual
from simulator.endpoints.base import LLMRequest, LLMResponse
from simulator.endpoints.inprocess.twin import InProcessTwin
from simulator.protocol.messages import Message, Prefix, TextBlock
from simulator.twin.serve.server import serving, twin_app

PREFIX = Prefix("You are a careful coding agent.", (), 7, 0)
OUT = 40
HINTS = {"x-endurance-output-tokens": str(OUT)}


def _send(model: str) -> LLMResponse:
    twin = InProcessTwin("h100", model)
    request = LLMRequest("m", PREFIX, (Message("user", (TextBlock("fix parser.py"),)),),
                         OUT, hints=dict(HINTS))

    async def go() -> LLMResponse:
        drivers = [asyncio.create_task(d()) for d in twin.background()]
        try:
            return await asyncio.wait_for(twin.send(request), 600)
        finally:
            for d in drivers:
                d.cancel()
            await twin.aclose()
    return run_virtual(go())


def test_in_process_first_text_comes_with_the_fourth_token() -> None:
    r = _send("gpt-oss-20b")
    t, n = r.timing, r.usage.output_tokens
    assert n is not None and n >= 4
    assert t.first_chunk is not None and t.first_token is not None
    assert t.first_chunk < t.first_token          # three decode steps later
    assert t.n_deltas == n - 3                    # the opening streams no text of its own
    assert "".join(b.text for b in r.content if isinstance(b, TextBlock))   # text kept


def test_in_process_model_without_hidden_opening_unchanged() -> None:
    r = _send("qwen3-coder-30b-a3b-awq")
    assert r.timing.first_chunk is None            # as before: no earlier chunk known
    assert r.timing.n_deltas == r.usage.output_tokens   # one delta per token, as before


def _sse_data(text: str) -> list[dict[str, Any]]:
    out = []
    for block in text.strip().split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: ") and line != "data: [DONE]":
                out.append(json.loads(line[6:]))
    return out


@pytest.mark.parametrize(("model", "hidden"), [("gpt-oss-20b", 3),
                                               ("qwen3-coder-30b-a3b-awq", 0)])
async def test_http_chat_stream_opens_with_a_textless_header(model: str, hidden: int) -> None:
    app, _ = twin_app("h100", model, time_scale=1000.0)
    body = {"model": model, "max_tokens": OUT, "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "fix parser.py"}]}
    async with serving(app) as base, httpx2.AsyncClient(base_url=base) as c:
        r = await c.post("/v1/chat/completions", json=body, headers=HINTS)
        plain = await c.post("/v1/chat/completions", json={**body, "stream": False},
                             headers=HINTS)
    chunks = _sse_data(r.text)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    texts = [c["choices"][0]["delta"]["content"] for c in chunks[1:]
             if c["choices"] and c["choices"][0]["delta"].get("content")]
    n = chunks[-1]["usage"]["completion_tokens"]
    assert len(texts) == n - hidden                # one delta per token after the opening
    # the whole reply is still sent: the opening's text goes out with the first text
    assert "".join(texts) == plain.json()["choices"][0]["message"]["content"]


async def test_http_messages_stream_first_text_with_the_fourth_token() -> None:
    app, _ = twin_app("h100", "gpt-oss-20b", time_scale=1000.0)
    body = {"model": "m", "max_tokens": OUT, "stream": True,
            "messages": [{"role": "user", "content": "fix parser.py"}]}
    async with serving(app) as base, httpx2.AsyncClient(base_url=base) as c:
        r = await c.post("/v1/messages", json=body, headers=HINTS)
    events = [line[7:] for line in r.text.split("\n") if line.startswith("event: ")]
    deltas = events.count("content_block_delta")
    usage = next(d for d in _sse_data(r.text) if d.get("type") == "message_delta")["usage"]
    assert deltas == usage["output_tokens"] - 3


async def test_http_reply_shorter_than_its_opening_sends_its_text_at_the_end() -> None:
    app, _ = twin_app("h100", "gpt-oss-20b", time_scale=1000.0)
    body = {"model": "m", "max_tokens": 2, "stream": True,
            "messages": [{"role": "user", "content": "fix parser.py"}]}
    async with serving(app) as base, httpx2.AsyncClient(base_url=base) as c:
        r = await c.post("/v1/chat/completions", json=body)
        plain = await c.post("/v1/chat/completions", json={**body, "stream": False})
    texts = [c["choices"][0]["delta"].get("content", "") for c in _sse_data(r.text)[1:]
             if c["choices"]]
    assert "".join(texts) == plain.json()["choices"][0]["message"]["content"]
