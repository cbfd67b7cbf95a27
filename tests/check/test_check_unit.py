"""`endurance check` against a small fake Anthropic server (aiohttp, 127.0.0.1), one
conformant and several deliberately broken, plus the pure validators."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from click.testing import CliRunner

from simulator.check import CheckReport, Status, run_check_async
from simulator.check.metrics import dialect_of, parse_metrics
from simulator.check.prefix import reuse_verdict
from simulator.check.probes import stop_reason_verdict
from simulator.check.sse import check_stream, parse_sse
from simulator.cli import main
from simulator.errors import InputError

BLOCK = 16


@dataclass(frozen=True)
class Faults:
    """What the fake server gets wrong (all False: a conformant server)."""

    delta_before_start: bool = False     # content_block_delta before content_block_start
    no_event_lines: bool = False         # data: lines without event: lines
    bad_request_500: bool = False        # a malformed request gets HTTP 500
    usage_late: bool = False             # cache split only in message_delta (like vLLM)
    no_cache_creation: bool = False      # no cache_creation_input_tokens (like llama.cpp)
    drop_tool_result: bool = False       # tool_result content not in the prompt
    over_cap: bool = False               # more output tokens than max_tokens
    no_metrics: bool = False             # /metrics is 404
    no_count_tokens: bool = False        # /v1/messages/count_tokens is 404
    unknown_event: bool = False          # an unknown event in the stream (must be ignored)
    openai_error_body: bool = False      # {"error": {...}} without "type": "error" (vLLM)
    sampled_loses_start: bool = False    # no message_start unless temperature is 0 (like
                                         # llama.cpp when a sampled first token is held back)


def _words(content: Any, drop_tool_result: bool) -> list[str]:
    """The fake tokenizer: whitespace words of every text in a content value."""
    if isinstance(content, str):
        return content.split()
    out: list[str] = []
    for block in content if isinstance(content, list) else []:
        if block.get("type") == "tool_result":
            if not drop_tool_result:
                out += _words(block.get("content", ""), drop_tool_result)
        elif block.get("type") == "tool_use":
            out += [block["name"], *json.dumps(block["input"]).split()]
        else:
            out += str(block.get("text", "")).split()
    return out


class FakeAnthropic:
    """Messages API with a token-level (block-rounded) prefix cache and vLLM counters."""

    def __init__(self, faults: Faults) -> None:
        self.f = faults
        self.seen: list[list[str]] = []
        self.hits = self.queries = 0

    def prompt(self, body: dict[str, Any]) -> list[str]:
        words = _words(body.get("system", ""), False)
        words += [json.dumps(t) for t in body.get("tools", [])]
        for m in body["messages"]:
            words += [m["role"], *_words(m["content"], self.f.drop_tool_result)]
        return words

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        words = self.prompt(body)
        best = max((next((i for i, (a, b) in enumerate(zip(words, s, strict=False))
                          if a != b), min(len(words), len(s))) for s in self.seen),
                   default=0)
        cached = min(best, len(words) - 1) // BLOCK * BLOCK
        self.seen.append(words)
        self.hits, self.queries = self.hits + cached, self.queries + len(words)
        usage = {"input_tokens": len(words) - cached, "cache_read_input_tokens": cached,
                 "cache_creation_input_tokens": 0}
        if self.f.no_cache_creation:
            del usage["cache_creation_input_tokens"]
        return usage

    async def messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not isinstance(body.get("messages"), list):
            status = 500 if self.f.bad_request_500 else 400
            err = {"type": "invalid_request_error", "message": "messages: not a list"}
            body_out = {"error": err} if self.f.openai_error_body else {"type": "error",
                                                                       "error": err}
            return web.json_response(body_out, status=status)
        n_out = body["max_tokens"] + (2 if self.f.over_cap else 0)
        usage = {**self.usage(body), "output_tokens": n_out}
        msg = {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
               "content": [{"type": "text", "text": "ok " * n_out}],
               "stop_reason": "max_tokens", "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return web.json_response(msg)
        drop_start = self.f.sampled_loses_start and body.get("temperature", 1.0) != 0
        return await self.stream(request, msg, drop_start=drop_start)

    def events(self, msg: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        usage = msg["usage"]
        start_usage = {**usage, "output_tokens": 0}
        if self.f.usage_late:
            start_usage = {"input_tokens": usage["input_tokens"]
                           + usage["cache_read_input_tokens"], "output_tokens": 0}
        block = [("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}}),
                 ("ping", {"type": "ping"})]
        block += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": "ok "}})
                  for _ in range(usage["output_tokens"])]
        if self.f.delta_before_start:
            block[0], block[2] = block[2], block[0]
        extra = [("vendor_debug", {"type": "vendor_debug"})] if self.f.unknown_event else []
        return [("message_start", {"type": "message_start", "message": {
                    **msg, "content": [], "stop_reason": None, "usage": start_usage}}),
                *extra, *block,
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {
                    "stop_reason": "max_tokens", "stop_sequence": None}, "usage": usage}),
                ("message_stop", {"type": "message_stop"})]

    async def stream(self, request: web.Request, msg: dict[str, Any], *,
                     drop_start: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        for name, data in self.events(msg)[1 if drop_start else 0:]:
            head = "" if self.f.no_event_lines else f"event: {name}\n"
            await resp.write(f"{head}data: {json.dumps(data)}\n\n".encode())
        await resp.write_eof()
        return resp

    async def count_tokens(self, request: web.Request) -> web.Response:
        if self.f.no_count_tokens:
            raise web.HTTPNotFound()
        body = await request.json()
        extra = sorted(set(body) - {"model", "system", "messages", "tools", "tool_choice"})
        if extra:  # Anthropic refuses sampling parameters here
            err = {"type": "invalid_request_error", "message": f"{extra}: extra inputs"}
            return web.json_response({"type": "error", "error": err}, status=400)
        return web.json_response({"input_tokens": len(self.prompt(body))})

    async def metrics(self, _: web.Request) -> web.Response:
        if self.f.no_metrics:
            raise web.HTTPNotFound()
        text = ("# TYPE vllm:prefix_cache_hits counter\n"
                f'vllm:prefix_cache_hits_total{{model_name="fake"}} {self.hits}\n'
                "# TYPE vllm:prefix_cache_queries counter\n"
                f'vllm:prefix_cache_queries_total{{model_name="fake"}} {self.queries}\n'
                "# TYPE vllm:cache_config_info gauge\n"
                f'vllm:cache_config_info{{block_size="{BLOCK}"}} 1.0\n')
        return web.Response(text=text, content_type="text/plain")

    async def models(self, _: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake-model"}]})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_post("/v1/messages/count_tokens", self.count_tokens)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/v1/models", self.models)
        return app


async def _serve(faults: Faults) -> AsyncIterator[str]:
    server = TestServer(FakeAnthropic(faults).app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


@pytest.fixture
async def fake_url() -> AsyncIterator[str]:
    async for url in _serve(Faults()):
        yield url


async def _check(faults: Faults) -> CheckReport:
    async for url in _serve(faults):
        return await run_check_async(url, timeout_s=10)
    raise AssertionError("unreachable")


async def test_conformant_server_passes_every_check(fake_url: str) -> None:
    report = await run_check_async(fake_url, timeout_s=10)
    assert [(r.name, r.status) for r in report.results if r.status is not Status.PASS] == []
    assert [r.name for r in report.results] == [
        "models", "messages", "stop_reason", "cache_fields", "streaming", "usage_placement",
        "tool_round_trip", "count_tokens", "error_shape", "metrics", "prefix_reuse"]
    assert report.model == "fake-model"
    reuse = report.by_name("prefix_reuse").details
    assert reuse["cache_read_input_tokens"] == reuse["metrics_cached_delta"] > 1000
    assert report.by_name("metrics").details == {"dialect": "vllm", "block_size": BLOCK}


@pytest.mark.parametrize(("faults", "name", "needle"), [
    (Faults(usage_late=True), "usage_placement", "message_delta"),
    (Faults(no_cache_creation=True), "cache_fields", "cache_creation_input_tokens"),
    (Faults(no_metrics=True), "metrics", "HTTP 404"),
    (Faults(no_count_tokens=True), "count_tokens", "not implemented"),
    (Faults(openai_error_body=True), "error_shape", "top-level type is None"),
])
async def test_known_differences_are_warnings(faults: Faults, name: str, needle: str) -> None:
    report = await _check(faults)
    assert report.ok
    assert report.by_name(name).status is Status.WARN
    assert needle in report.by_name(name).reason
    others = [r.name for r in report.results if r.status is not Status.PASS]
    assert others == [name] or (name == "metrics" and others == ["metrics"])


async def test_unknown_events_are_ignored() -> None:
    report = await _check(Faults(unknown_event=True))
    streaming = report.by_name("streaming")
    assert streaming.status is Status.PASS
    assert streaming.details["ignored"] == ["vendor_debug"]


@pytest.mark.parametrize(("faults", "name", "needle"), [
    (Faults(delta_before_start=True), "streaming", "out of order"),
    (Faults(no_event_lines=True), "streaming", "without an `event:` line"),
    (Faults(bad_request_500=True), "error_shape", "HTTP 500"),
    (Faults(drop_tool_result=True), "tool_round_trip", "dropped"),
    (Faults(over_cap=True), "stop_reason", "exceed max_tokens"),
])
async def test_broken_server_fails(faults: Faults, name: str, needle: str) -> None:
    report = await _check(faults)
    assert not report.ok
    result = report.by_name(name)
    assert result.status is Status.FAIL, result
    assert needle in result.reason


async def test_unreachable_endpoint_is_one_fail() -> None:
    async for url in _serve(Faults()):
        dead = url   # the server is closed after this loop
    report = await run_check_async(dead, timeout_s=5)
    assert [(r.name, r.status) for r in report.results] == [("reachable", Status.FAIL)]


async def test_cli_exit_codes_and_json(fake_url: str) -> None:
    runner = CliRunner()
    ok = await asyncio.to_thread(runner.invoke, main, ["check", fake_url])
    assert ok.exit_code == 0, ok.output
    assert "prefix_reuse" in ok.output and "11 pass, 0 warn, 0 fail" in ok.output
    as_json = await asyncio.to_thread(runner.invoke, main, ["check", fake_url, "--json"])
    data = json.loads(as_json.output)
    assert as_json.exit_code == 0 and data["ok"] and data["counts"]["fail"] == 0
    bad = runner.invoke(main, ["check", "not-a-url"])
    assert bad.exit_code == 2 and "expected http(s)://host" in bad.output


async def test_cli_exits_1_when_a_check_fails() -> None:
    async for url in _serve(Faults(bad_request_500=True)):
        result = await asyncio.to_thread(CliRunner().invoke, main, ["check", url, "--json"])
        assert result.exit_code == 1
        assert json.loads(result.output)["counts"]["fail"] == 1


def test_sse_parser_handles_crlf_comments_and_multiline_data() -> None:
    raw = b": keepalive\r\nevent: ping\r\ndata: {\"type\":\r\ndata: \"ping\"}\r\n\r\ndata: x"
    (ev,), tail = parse_sse(raw)
    assert ev.event == "ping" and ev.json() == {"type": "ping"}
    assert tail == b"data: x"
    assert any("unterminated" in e for e in check_stream([ev], tail).errors)


async def test_check_samples_greedily() -> None:
    """Verdicts must not depend on a sampled token: the check asks for temperature 0."""
    report = await _check(Faults(sampled_loses_start=True))
    assert report.ok and report.by_name("streaming").status is Status.PASS


def test_stream_without_message_start_is_one_error() -> None:
    fake = FakeAnthropic(Faults())
    events = fake.events({"id": "m", "type": "message", "role": "assistant", "model": "x",
                          "content": [], "usage": {"input_tokens": 3, "output_tokens": 2,
                                                   "cache_read_input_tokens": 0}})
    raw = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events[1:]).encode()
    summary = check_stream(*parse_sse(raw))
    assert len(summary.errors) == 1, summary.errors
    assert summary.errors[0].startswith("no message_start: the stream began with "
                                        "content_block_start")
    assert summary.text == "ok ok " and summary.stop_reason == "max_tokens"


def test_stream_without_message_stop_fails() -> None:
    fake = FakeAnthropic(Faults())
    events = fake.events({"id": "m", "type": "message", "role": "assistant", "model": "x",
                          "content": [], "usage": {"input_tokens": 3, "output_tokens": 2,
                                                   "cache_read_input_tokens": 0}})
    raw = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events[:-1]).encode()
    summary = check_stream(*parse_sse(raw))
    assert summary.errors == ["stream ended in state 'delta' (no message_stop)"]
    assert summary.text == "ok ok "


@pytest.mark.parametrize(("stop", "out", "cap", "verdict"), [
    ("max_tokens", 8, 8, "pass"), ("end_turn", 3, 8, "pass"), ("max_tokens", 3, 8, "warn"),
    ("end_turn", 8, 8, "warn"), ("max_tokens", 9, 8, "fail"), ("max_tokens", None, 8, "fail"),
])
def test_stop_reason_verdict(stop: str, out: int | None, cap: int, verdict: str) -> None:
    assert stop_reason_verdict(stop, out, cap)[0] == verdict


def test_metrics_dialects_and_llamacpp_prompt_total() -> None:
    text = ("# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 70\n"
            "# TYPE llamacpp:prompt_tokens_cached_total counter\n"
            "llamacpp:prompt_tokens_cached_total 30\n")
    snap = parse_metrics(text)
    assert (snap.dialect, snap.cached_tokens, snap.prompt_tokens, snap.block_size) == \
        ("llamacpp", 30.0, 100.0, 1)
    assert dialect_of({"sglang:cached_tokens_total", "python_info"}) == "sglang"
    assert dialect_of({"python_info"}) is None


def test_reuse_verdict_disagreement_is_a_warning() -> None:
    usage = {"input_tokens": 10, "cache_read_input_tokens": 320}
    assert reuse_verdict(usage, 320.0, 16).status is Status.PASS
    assert reuse_verdict(usage, 100.0, 16).status is Status.WARN
    assert reuse_verdict({"input_tokens": 330}, None, None).status is Status.WARN


def test_malformed_url_is_input_error() -> None:
    with pytest.raises(InputError, match="expected http"):
        asyncio.run(run_check_async("ftp://x"))
    assert replace(Faults(), over_cap=True).over_cap


async def test_check_passes_on_the_http_twin() -> None:
    """The twin's HTTP server speaks vLLM's dialect, quirks included."""
    from simulator.twin.serve.server import serving, twin_app

    app, _ = twin_app("a40", "qwen3-coder-30b-a3b-awq", instant=True)
    async with serving(app) as url:
        report = await run_check_async(url, timeout_s=20)
    assert report.ok, [r for r in report.results if r.status is Status.FAIL]
    assert report.by_name("metrics").details["dialect"] == "vllm"
    assert report.by_name("prefix_reuse").status is Status.PASS


def test_check_reads_metrics_through_the_run_s_one_parser() -> None:
    """`check` and the run's scraper share one Prometheus parser and one dialect table
    (`metrics.prometheus`): there were two, with their own names (issue 23)."""
    from pathlib import Path

    import simulator.check.metrics as check_metrics_mod
    from simulator.records import prometheus
    src = Path(check_metrics_mod.__file__).read_text(encoding="utf-8")
    assert "prometheus_client" not in src and "_total" not in src
    text = ('# TYPE vllm:prefix_cache_queries_total counter\n'
            'vllm:prefix_cache_queries_total{model="m"} 500\n'
            '# TYPE vllm:prefix_cache_hits_total counter\n'
            'vllm:prefix_cache_hits_total{model="m"} 320\n'
            '# TYPE vllm:cache_config_info gauge\n'
            'vllm:cache_config_info{block_size="16",num_gpu_blocks="100"} 1\n')
    snap, run_snap = parse_metrics(text), prometheus.parse_metrics(text)
    assert (snap.dialect, snap.cached_tokens, snap.prompt_tokens, snap.block_size,
            snap.samples) == ("vllm", 320.0, 500.0, 16, 3)
    assert run_snap.counters["prefix_cache_hits"] == snap.cached_tokens
    assert run_snap.info["kv_capacity_tokens"] == 1600.0
