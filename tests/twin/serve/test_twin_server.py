"""The HTTP twin end to end: real sockets on 127.0.0.1, the official SDK and raw HTTP."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest

from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import StepShape
from simulator.twin.serve.server import ServerConfig, create_app, serving

CONTEXT = 32_768


class FakePerf:
    """A tiny perf model: 10 ms per step plus 10 µs per token (engine seconds)."""

    block_size = 16

    def step_time(self, shape: StepShape) -> float:
        return 0.01 + 1e-5 * shape.num_tokens

    def kv_capacity_tokens(self) -> int:
        return 200_000


def make_app(**kw: Any) -> Any:
    cfg = ServerConfig(model="qwen3-coder-30b-a3b-awq", hardware="a40",
                       context_window=CONTEXT, time_scale=1000.0, **kw)
    return create_app(TwinEngine(FakePerf()), cfg)


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with serving(make_app()) as base:
        yield base


def body(system: str = "You are a careful coding agent. " * 200, user: str = "hello",
         max_tokens: int = 40, stream: bool = True) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": max_tokens, "stream": stream,
            "system": [{"type": "text", "text": system,
                        "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "Read", "description": "read a file",
                       "input_schema": {"type": "object", "properties": {}}}],
            "messages": [{"role": "user", "content": user}]}


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.split("\n"))
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def metric(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    assert m, name
    return float(m.group(1))


async def test_sdk_stream_event_order_and_usage(url: str) -> None:
    client = anthropic.AsyncAnthropic(base_url=url, api_key="x", max_retries=0)
    kw = body()
    kw.pop("stream")
    stream = await client.messages.create(**kw, stream=True)
    kinds, text, usage = [], "", None
    async for ev in stream:
        kinds.append(ev.type)
        if ev.type == "content_block_delta":
            text += ev.delta.text
        if ev.type == "message_delta":
            usage, stop = ev.usage, ev.delta.stop_reason
        if ev.type == "message_start":
            start_input = ev.message.usage.input_tokens
    await client.close()
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"}
    assert usage is not None and usage.output_tokens == 40 and stop == "max_tokens"
    total = (usage.input_tokens + (usage.cache_read_input_tokens or 0)
             + (usage.cache_creation_input_tokens or 0))
    assert total == start_input            # message_start reports the whole prompt
    assert usage.cache_read_input_tokens == 0 and (usage.cache_creation_input_tokens or 0) > 0
    assert text and len(kinds) - 5 <= 40   # one delta per engine step


async def test_prefix_cache_hit_in_blocks_and_metrics(url: str) -> None:
    async with httpx2.AsyncClient(base_url=url) as c:
        first = parse_sse((await c.post("/v1/messages", json=body(user="a"))).text)
        before = (await c.get("/metrics")).text
        second = parse_sse((await c.post("/v1/messages", json=body(user="b"))).text)
        after = (await c.get("/metrics")).text
    u1, u2 = first[-2][1]["usage"], second[-2][1]["usage"]
    assert u1["cache_read_input_tokens"] == 0
    hit = u2["cache_read_input_tokens"]
    assert hit > 1000 and hit % 16 == 0
    hits = "vllm:prefix_cache_hits_total"
    assert metric(after, hits) - metric(before, hits) == hit
    q = "vllm:prefix_cache_queries_total"
    prompt2 = sum(v for k, v in u2.items() if k != "output_tokens")
    assert metric(after, q) - metric(before, q) == prompt2
    assert metric(after, "vllm:generation_tokens_total") == 80
    assert 'vllm:cache_config_info{block_size="16",num_gpu_blocks="12500"} 1.0' in after
    assert 'simulated="true"' in after and "vllm:time_to_first_token_seconds_count" in after


async def test_non_streaming_and_same_reply_for_same_request(url: str) -> None:
    async with httpx2.AsyncClient(base_url=url) as c:
        r1 = (await c.post("/v1/messages", json=body(stream=False, max_tokens=4000))).json()
        r2 = (await c.post("/v1/messages", json=body(stream=False, max_tokens=4000))).json()
    assert r1["type"] == "message" and r1["content"][0]["type"] == "text"
    assert r1["content"] == r2["content"]
    assert r1["stop_reason"] == "end_turn" and r1["usage"]["output_tokens"] < 4000
    assert r2["usage"]["cache_read_input_tokens"] > 0


async def test_streamed_text_equals_token_count(url: str) -> None:
    from simulator.util import tokens
    async with httpx2.AsyncClient(base_url=url) as c:
        events = parse_sse((await c.post("/v1/messages", json=body(max_tokens=300))).text)
    text = "".join(d["delta"]["text"] for k, d in events if k == "content_block_delta")
    out = events[-2][1]["usage"]["output_tokens"]
    assert abs(tokens.count(text) - out) <= 2


async def test_errors_in_anthropic_shape(url: str) -> None:
    async with httpx2.AsyncClient(base_url=url) as c:
        bad = await c.post("/v1/messages", content=b"{not json")
        no_max = await c.post("/v1/messages", json={"messages": [{"role": "user",
                                                                  "content": "x"}]})
        long = await c.post("/v1/messages", json=body(system="word " * (CONTEXT + 10)))
        missing = await c.get("/v2/nothing")
    for r in (bad, no_max, long):
        assert r.status_code == 400
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "invalid_request_error"
    assert re.match(r"prompt is too long: \d+ tokens > 32768 maximum",
                    long.json()["error"]["message"])
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"


async def test_sdk_maps_context_overflow(url: str) -> None:
    client = anthropic.AsyncAnthropic(base_url=url, api_key="x", max_retries=0)
    kw = body(system="word " * (CONTEXT + 10))
    kw.pop("stream")
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        await client.messages.create(**kw, stream=True)
    await client.close()


async def test_side_endpoints(url: str) -> None:
    async with httpx2.AsyncClient(base_url=url) as c:
        health = await c.get("/health")
        models = (await c.get("/v1/models")).json()
        count = (await c.post("/v1/messages/count_tokens", json=body())).json()
        r = await c.post("/v1/messages", json=body(max_tokens=8))
        events = parse_sse(r.text)
        rid = r.headers["x-endurance-request-id"]
        dbg = (await c.get(f"/debug/requests/{rid}")).json()
    assert health.status_code == 200
    assert models["data"][0]["id"] == "qwen3-coder-30b-a3b-awq"
    assert count["input_tokens"] == events[0][1]["message"]["usage"]["input_tokens"]
    assert dbg["output_tokens"] == 8 and sum(dbg["emit_counts"]) == 8
    assert len(dbg["emit_times_s"]) == len(dbg["emit_counts"])
    assert dbg["emit_times_s"] == sorted(dbg["emit_times_s"])
    assert len(dbg["engine_token_times_s"]) == 8
    # every emission's bytes were written, no earlier than the step that produced them
    assert len(dbg["write_times_s"]) == len(dbg["emit_times_s"])
    assert all(w >= e for w, e in zip(dbg["write_times_s"], dbg["emit_times_s"], strict=True))
    assert dbg["first_write_mono_s"] >= dbg["first_emit_mono_s"] > dbg["received_mono_s"]


async def test_edit_hint_copies_prompt_spans(url: str) -> None:
    code = "\n".join(f"def handler_{i}(value: int) -> int:\n    return value * {i}"
                     for i in range(200))
    async with httpx2.AsyncClient(base_url=url) as c:
        plain = (await c.post("/v1/messages", json=body(user=code, stream=False,
                                                        max_tokens=300))).json()
        edit = (await c.post("/v1/messages", json=body(user=code, stream=False,
                                                       max_tokens=300),
                             headers={"x-endurance-turn-kind": "edit",
                                      "x-endurance-repeat-fraction": "0.9"})).json()
    lines = set(code.splitlines())
    def copied(r: dict[str, Any]) -> int:
        return sum(1 for ln in r["content"][0]["text"].splitlines() if ln in lines)
    assert copied(edit) > copied(plain) + 5


async def test_instant_mode_writes_whole_reply() -> None:
    async with serving(make_app(instant=True)) as base, httpx2.AsyncClient(base_url=base) as c:
        events = parse_sse((await c.post("/v1/messages", json=body(max_tokens=200))).text)
    deltas = [e for k, e in events if k == "content_block_delta"]
    assert len(deltas) == 1
    assert events[-2][1]["usage"]["output_tokens"] == 200


async def test_real_profile_with_ngram_spec_exposes_spec_counters() -> None:
    from simulator.twin.serve.server import twin_app
    app, described = twin_app("a40", "qwen3-coder-30b-a3b-awq", spec="ngram:4",
                              time_scale=1e6)
    code = "\n".join(f"def handler_{i}(value: int) -> int:\n    return value * {i}"
                     for i in range(100))
    async with serving(app) as base, httpx2.AsyncClient(base_url=base) as c:
        await c.post("/v1/messages", json=body(user=code, max_tokens=200),
                     headers={"x-endurance-turn-kind": "edit"})
        text = (await c.get("/metrics")).text
    assert described["simulated"] is True
    assert metric(text, "vllm:spec_decode_num_drafts_total") > 0
    accepted = metric(text, "vllm:spec_decode_num_accepted_tokens_total")
    assert 0 < accepted <= metric(text, "vllm:spec_decode_num_draft_tokens_total")
    per_pos = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:spec_decode_num_accepted_tokens_per_pos_total{")]
    assert len(per_pos) == 4 and sum(per_pos) == accepted
    assert f'num_gpu_blocks="{described["num_blocks"]}"' in text
