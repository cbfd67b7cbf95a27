"""`endurance check --api openai-chat`: the validators on decoded data, the whole check
on the HTTP twin, and the streamed-tool-call check on a server that makes one."""

from __future__ import annotations

from click.testing import CliRunner

from simulator.check import Status, run_check_async
from simulator.check.openai_checks import (
    cached_verdict,
    completion_problems,
    error_body_problems,
    stream_chunks,
    tool_calls_of,
)
from simulator.cli import main
from tests.endpoints.test_endpoints_openai import chat_server, reply_chunks


def test_validators() -> None:
    chunks, done, problems = stream_chunks(b"".join(reply_chunks()))
    assert done and not problems
    assert tool_calls_of(chunks) == {0: {"id": "call_9", "name": "Read",
                                         "arguments": '{"path": "b.py"}'}}
    _, done, problems = stream_chunks(b'data: {"error": {"message": "x"}}\n\ndata: nope')
    assert not done and len(problems) == 2
    assert completion_problems({"object": "chat.completion", "choices": []}) == [
        "choices is not a non-empty list"]
    assert error_body_problems({"error": {"message": "m"}}) == []
    assert error_body_problems({"message": "m"}) == ["no error object"]
    assert cached_verdict({"prompt_tokens": 9}, None).status is Status.WARN
    assert cached_verdict({"prompt_tokens": 9, "prompt_tokens_details": {
        "cached_tokens": 0}}, None).status is Status.WARN
    assert cached_verdict({"prompt_tokens": 9, "prompt_tokens_details": {
        "cached_tokens": 8}}, 8.0).status is Status.PASS


async def test_check_on_the_http_twin() -> None:
    from simulator.twin.serve.server import serving, twin_app

    app, _ = twin_app("a40", "qwen3-coder-30b-a3b-awq", instant=True, context_window=4096)
    async with serving(app) as url:
        report = await run_check_async(url, timeout_s=20, api="openai-chat")
    assert report.ok, [r for r in report.results if r.status is Status.FAIL]
    for name in ("chat", "streaming", "usage_in_stream", "error_shape", "context_overflow",
                 "cached_tokens"):
        assert report.by_name(name).status is Status.PASS, report.by_name(name)
    # The twin plans text replies only: no tool call to stream (an honest warn).
    assert report.by_name("streamed_tool_calls").status is Status.WARN


async def test_streamed_tool_calls_pass_on_a_server_that_makes_them() -> None:
    async with chat_server() as (url, cs):
        report = await run_check_async(url, model="m", timeout_s=5, api="openai-chat")
    assert report.by_name("streamed_tool_calls").status is Status.PASS
    assert report.by_name("tool_round_trip").status is Status.PASS
    assert report.by_name("usage_in_stream").status is Status.PASS
    assert cs.bodies[1]["stream_options"] == {"include_usage": True}  # [0]: chat


def test_cli_rejects_an_unknown_api() -> None:
    res = CliRunner().invoke(main, ["check", "http://127.0.0.1:1", "--api", "grpc"])
    assert res.exit_code == 2 and "Traceback" not in res.output
