"""`--api openai-chat`: every client path (lean, aiohttp, the official `openai` SDK)
against one in-test Chat Completions server that can misbehave, the rendering of the
conversation in OpenAI's shape, and the HTTP twin serving both protocols alike."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import click
import pandas as pd
import pytest
from aiohttp import web
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from simulator.cli.run import common_run_options, scenario_overrides
from simulator.endpoints.base import EndpointError, ErrorType, LLMRequest, LLMResponse
from simulator.endpoints.http.aiohttp_client import AiohttpEndpoint
from simulator.endpoints.http.lean import LeanEndpoint
from simulator.endpoints.sdk.openai import OpenAISDKEndpoint
from simulator.endpoints.wire import openai_chat
from simulator.endpoints.wire.dialects import OPENAI_CHAT
from simulator.session.conversation import (
    Message,
    Prefix,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    user_text,
)
from simulator.twin.serve.openai_wire import as_messages_body
from simulator.twin.serve.prompt import PromptTokenizer
from tests.conftest import SCENARIOS, run_scenario, turns_of
from tests.http_twin import twin_server

TOOLS = ({"name": "Read", "description": "Read a file",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},)
HISTORY = (user_text("fix the bug"),
           Message("assistant", (TextBlock("Reading."),
                                 ToolUseBlock("call_1", "Read", '{"path": "a.py"}'))),
           Message("user", (ToolResultBlock("call_1", "print(1)"), TextBlock("go on"))))
REQ = LLMRequest(model="m", prefix=Prefix("You are terse.", TOOLS, 4, 20), messages=HISTORY,
                 max_tokens=64, temperature=0.5, hints={"turn_kind": "edit"})


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


USAGE = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49,
         "prompt_tokens_details": {"cached_tokens": 32}}


def reply_chunks(usage: bool = True) -> list[bytes]:
    """Role chunk, reasoning, text, a tool call streamed in pieces, finish, usage, DONE."""
    out = [_chunk({"role": "assistant", "content": ""}),
           _chunk({"reasoning_content": "think"}),
           *(_chunk({"content": t}) for t in ["Hel", "lo ✓"]),
           _chunk({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                   "function": {"name": "Read", "arguments": ""}}]}),
           *(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]})
             for a in ['{"path": ', '"b.py"}']),
           _chunk({}, "tool_calls")]
    if usage:
        out.append(b"data: " + json.dumps({"id": "c1", "choices": [], "usage": USAGE}).encode()
                   + b"\n\n")
    return [*out, b"data: [DONE]\n\n"]


class ChatServer:
    """`POST /v1/chat/completions`; the fault comes in the `x-endurance-fault` header."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.json())
        self.headers.append(dict(request.headers))
        fault = request.headers.get("x-endurance-fault", "")
        if fault == "overflow":
            return web.json_response({"error": {
                "message": "This model's maximum context length is 4096 tokens.",
                "type": "invalid_request_error", "code": "context_length_exceeded"}},
                status=400)
        if fault == "429":
            return web.json_response({"error": {"message": "slow down"}}, status=429,
                                     headers={"retry-after": "7"})
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        chunks = reply_chunks(usage=fault != "no_usage")
        if fault == "error_chunk":
            chunks = [*chunks[:3], b'data: {"error": {"message": "boom", "type": "server"}}\n\n']
        if fault == "cut":
            chunks = chunks[:4]
        for c in chunks:
            await resp.write(c)
        await resp.write_eof()
        return resp


@contextlib.asynccontextmanager
async def chat_server() -> AsyncIterator[tuple[str, ChatServer]]:
    """A `ChatServer` on 127.0.0.1 (port 0, read back); stopped on exit."""
    cs = ChatServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", cs.handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", cs
    finally:
        await runner.cleanup()


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, ChatServer]]:
    async with chat_server() as served:
        yield served


FACTORIES: dict[str, Callable[..., Any]] = {
    "lean": lambda url: LeanEndpoint(url, "sk-test", timeout_s=5, dialect=OPENAI_CHAT),
    "aiohttp": lambda url: AiohttpEndpoint(url, "sk-test", timeout_s=5, dialect=OPENAI_CHAT),
    "sdk": lambda url: OpenAISDKEndpoint(url, "sk-test", timeout_s=5),
}


async def _send(kind: str, url: str, req: LLMRequest) -> LLMResponse:
    ep = FACTORIES[kind](url)
    try:
        resp: LLMResponse = await ep.send(req)
        return resp
    finally:
        await ep.aclose()


def _with_fault(fault: str) -> LLMRequest:
    return LLMRequest(REQ.model, REQ.prefix, REQ.messages, REQ.max_tokens,
                      hints={"fault": fault})


def test_conversation_in_openai_shape() -> None:
    kw = openai_chat.chat_kwargs(REQ)
    assert kw["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "fix the bug"},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "Read", "arguments": '{"path": "a.py"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
        {"role": "user", "content": "go on"}]
    assert kw["tools"] == [{"type": "function", "function": {
        "name": "Read", "description": "Read a file",
        "parameters": TOOLS[0]["input_schema"]}}]
    body = json.loads(openai_chat.stream_body(REQ))
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_twin_tokenises_both_shapes_alike() -> None:
    """The twin turns a chat request back into the Messages shape: same prompt tokens."""
    tok = PromptTokenizer()
    chat = as_messages_body(openai_chat.chat_kwargs(REQ))
    messages = json.loads(json.dumps(REQ.to_api_kwargs()))
    assert tok.encode_body(chat).tolist() == tok.encode_body(messages).tolist()


@pytest.mark.parametrize("kind", list(FACTORIES))
async def test_reply_is_reconstructed(server: tuple[str, ChatServer], kind: str) -> None:
    url, cs = server
    resp = await _send(kind, url, REQ)
    assert resp.content == (TextBlock("Hello ✓"), ToolUseBlock("call_9", "Read",
                                                              '{"path": "b.py"}'))
    assert resp.stop_reason == "tool_use"
    u = resp.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_input_tokens) == (8, 9, 32)
    assert u.cache_creation_input_tokens is None and u.prompt_tokens == 40
    assert resp.timing.n_deltas == 5  # reasoning, two text, two argument pieces
    assert len(resp.extra["token_times"]) == 5
    assert cs.headers[-1]["x-endurance-turn-kind"] == "edit"
    assert cs.headers[-1]["Authorization"] == "Bearer sk-test"
    assert cs.bodies[-1]["stream_options"] == {"include_usage": True}
    assert cs.bodies[-1]["messages"][3]["role"] == "tool"


async def test_paths_produce_identical_records(server: tuple[str, ChatServer]) -> None:
    url, _ = server
    got = [await _send(k, url, REQ) for k in FACTORIES]
    keys = {(r.content, r.usage, r.stop_reason, r.output_tokens_est, r.timing.n_deltas)
            for r in got}
    assert len(keys) == 1


@pytest.mark.parametrize("kind", list(FACTORIES))
async def test_no_usage_in_the_stream_is_unknown(server: tuple[str, ChatServer],
                                                 kind: str) -> None:
    url, _ = server
    resp = await _send(kind, url, _with_fault("no_usage"))
    assert resp.usage.input_tokens is None and resp.usage.output_tokens is None
    assert resp.usage.cache_read_input_tokens is None


@pytest.mark.parametrize("kind", list(FACTORIES))
@pytest.mark.parametrize(("fault", "expected", "status"), [
    ("overflow", ErrorType.CONTEXT_OVERFLOW, 400),
    ("429", ErrorType.RATE_LIMITED, 429),
    ("error_chunk", ErrorType.STREAM_ERROR, 200),
    ("cut", ErrorType.DISCONNECT, 200),
])
async def test_faults_are_classified_alike(server: tuple[str, ChatServer], kind: str,
                                           fault: str, expected: ErrorType,
                                           status: int) -> None:
    url, _ = server
    with pytest.raises(EndpointError) as info:
        await _send(kind, url, _with_fault(fault))
    assert info.value.error_type is expected, str(info.value)
    assert info.value.status == status
    if fault == "429":
        assert info.value.retry_after_s == 7.0


def test_the_first_chunk_is_timed_apart_from_the_first_text() -> None:
    """vLLM's chat stream of gpt-oss: the role chunk with the first token (content ""),
    nothing for two header tokens, an empty reasoning delta, then text. The first chunk
    (vLLM's bench TTFT) is the role chunk; the first token (our TTFT) the first text."""
    st = openai_chat.ChatStreamState(0.0)
    st.feed_bytes(_chunk({"role": "assistant", "content": ""}), 1.0)
    st.feed_bytes(_chunk({"reasoning_content": ""}), 3.0)
    st.feed_bytes(_chunk({"reasoning_content": "We"}), 4.0)
    st.feed_bytes(_chunk({}, "length") + b"data: [DONE]\n\n", 4.5)
    t = st.response(5.0).timing
    assert (t.first_chunk, t.first_token, t.n_deltas) == (1.0, 4.0, 1)
    plain = openai_chat.ChatStreamState(0.0)
    plain.feed_bytes(_chunk({"content": "x"}, "stop") + b"data: [DONE]\n\n", 2.0)
    assert plain.response(3.0).timing.first_chunk == 2.0


def test_finish_reasons_map_to_stop_reasons() -> None:
    st = openai_chat.ChatStreamState(0.0)
    st.feed_bytes(_chunk({"content": "x"}, "length") + b"data: [DONE]\n\n", 1.0)
    assert st.response(2.0).stop_reason == "max_tokens"
    assert openai_chat.usage_of({"prompt_tokens": 5}).cache_read_input_tokens is None


ENDURANCE = SCENARIOS / "claude-code-endurance.yaml"
FAST = ["think_time_s=0", *(f"turn_templates.{i}.tool.latency_s=0" for i in range(5))]


@pytest.mark.slow
def test_runs_over_both_protocols_record_the_same_turns(tmp_path: Path) -> None:
    """The same scenario on a fresh HTTP twin each: Anthropic (lean) and OpenAI (lean,
    SDK) give the same prompts and cache reads; OpenAI's cache creation is missing."""
    runs = {}
    for api, client in (("anthropic", "lean"), ("openai-chat", "lean"),
                        ("openai-chat", "sdk")):
        with twin_server(time_scale=2000.0) as url:
            res = run_scenario(ENDURANCE, tmp_path, ["turns=6", f"endpoint.api={api}", *FAST],
                               endpoint_url=url, client=client)
            assert res.status == "completed", res.outcome.reason
            runs[api, client] = turns_of(res)
    cols = ["turn_index", "context_tokens_est", "prompt_tokens", "cache_read_tokens",
            "output_tokens", "stop_reason"]
    base = runs["anthropic", "lean"][cols]
    pd.testing.assert_frame_equal(base, runs["openai-chat", "lean"][cols])
    pd.testing.assert_frame_equal(base, runs["openai-chat", "sdk"][cols])
    assert runs["openai-chat", "lean"].cache_creation_tokens.isna().all()
    assert runs["openai-chat", "lean"].cache_read_tokens.notna().all()


@given(pieces=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=12),
       cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=6),
       ascii_only=st.booleans())
def test_fast_framing_reconstructs_any_text(pieces: list[str], cuts: list[int],
                                            ascii_only: bool) -> None:
    """Chunks taken by their learned framing (no json.loads) give the same text as
    decoding each, whatever the text (quotes, backslashes, newlines, non-ASCII) and
    however the bytes are split across reads."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {"id": "x", "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                        "finish_reason": finish}]}
        return b"data: " + json.dumps(body, ensure_ascii=ascii_only).encode() + b"\n\n"

    raw = b"".join([*(chunk({"content": p}) for p in pieces), chunk({}, "stop"),
                    b"data: [DONE]\n\n"])
    state = openai_chat.ChatStreamState(0.0)
    bounds = sorted({min(c, len(raw)) for c in cuts} | {0, len(raw)})
    for a, b in itertools.pairwise(bounds):
        state.feed_bytes(raw[a:b], 1.0)
    resp = state.response(2.0)
    text = "".join(pieces)
    assert resp.text == text
    assert resp.timing.n_deltas == len(pieces)
    assert resp.stop_reason == "end_turn"


def test_api_flag_becomes_an_override() -> None:
    """`--api` (on run, sweep and size) is sugar for `--set endpoint.api=…`, before --set."""
    @click.command()
    @common_run_options
    def cmd(**_: Any) -> None:
        click.echo(" ".join(scenario_overrides(None, 3, None, None, ("seed=1",))))

    res = CliRunner().invoke(cmd, ["--api", "openai-chat"])
    assert res.output.split() == ["turns=3", "endpoint.api=openai-chat", "seed=1"]
    assert CliRunner().invoke(cmd, []).output.split() == ["turns=3", "seed=1"]
    bad = CliRunner().invoke(cmd, ["--api", "grpc"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
