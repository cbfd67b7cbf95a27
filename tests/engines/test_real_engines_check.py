"""`endurance check` against real engines (vLLM on the CPU, llama.cpp's llama-server):
no check may fail, and each engine's known differences must show up as warnings."""

from __future__ import annotations

import pytest
from rich.console import Console

from simulator.check import CheckReport, Status, run_check_async
from simulator.cli.check import report_table
from simulator.engines.server import EngineServer

pytestmark = pytest.mark.real_engine


def _print(report: CheckReport) -> None:
    """Show the table in the test output (pytest -s, or on failure)."""
    Console(width=140, force_terminal=False).print(report_table(report))


def _statuses(report: CheckReport) -> dict[str, Status]:
    return {r.name: r.status for r in report.results}


def _common(report: CheckReport, server: EngineServer, dialect: str) -> None:
    _print(report)
    fails = [(r.name, r.reason) for r in report.results if r.status is Status.FAIL]
    assert fails == []
    statuses = _statuses(report)
    for name in ("messages", "stop_reason", "streaming", "tool_round_trip", "prefix_reuse"):
        assert statuses[name] is Status.PASS, report.by_name(name)
    metrics = report.by_name("metrics")
    assert metrics.status is Status.PASS and metrics.details["dialect"] == dialect
    assert metrics.details["block_size"] == server.block_size
    reuse = report.by_name("prefix_reuse").details
    assert reuse["cache_read_input_tokens"] > 0.5 * reuse["prompt_tokens"]


async def test_check_passes_on_vllm(vllm_server: EngineServer) -> None:
    report = await run_check_async(vllm_server.base_url, model=vllm_server.model)
    _common(report, vllm_server, "vllm")
    assert vllm_server.block_size == 32
    # vLLM streams the total prompt in message_start and the cache split in message_delta
    placement = report.by_name("usage_placement")
    assert placement.status is Status.WARN and "message_delta" in placement.reason
    assert report.by_name("cache_fields").status is Status.PASS
    # vLLM's 400 body is {"error": {...}} without the top-level "type": "error"
    assert report.by_name("error_shape").status in (Status.PASS, Status.WARN)


async def test_check_passes_on_llamacpp(llamacpp_server: EngineServer) -> None:
    report = await run_check_async(llamacpp_server.base_url, model=llamacpp_server.model)
    _common(report, llamacpp_server, "llamacpp")
    assert llamacpp_server.block_size == 1
    cache = report.by_name("cache_fields")
    assert cache.status is Status.WARN and "cache_creation_input_tokens" in cache.reason
    assert report.by_name("usage_placement").status is Status.PASS
    # llama.cpp answers `messages: "not a list"` with 200; invalid JSON gets its 400.
    shape = report.by_name("error_shape")
    assert shape.status is Status.WARN and "lenient" in shape.reason


def _openai_common(report: CheckReport) -> None:
    _print(report)
    fails = [(r.name, r.reason) for r in report.results if r.status is Status.FAIL]
    assert fails == []
    statuses = _statuses(report)
    for name in ("chat", "streaming", "usage_in_stream", "context_overflow"):
        assert statuses[name] is Status.PASS, report.by_name(name)


async def test_openai_check_passes_on_vllm(vllm_server: EngineServer) -> None:
    report = await run_check_async(vllm_server.base_url, model=vllm_server.model,
                                   api="openai-chat")
    _openai_common(report)
    # --enable-prompt-tokens-details: cached_tokens is reported
    assert report.by_name("cached_tokens").status is Status.PASS


async def test_openai_check_passes_on_llamacpp(llamacpp_server: EngineServer) -> None:
    report = await run_check_async(llamacpp_server.base_url, model=llamacpp_server.model,
                                   api="openai-chat")
    _openai_common(report)
