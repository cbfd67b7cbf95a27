"""`run_check`: every conformance check against one endpoint, in a fixed order.

A request that fails at the transport level (refused, reset, timed out) fails the check
that sent it, with the reason; the other checks still run. An endpoint that cannot be
reached at all gives a single `reachable` fail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp

from simulator.check import DEFAULT_TIMEOUT_S
from simulator.check.client import CheckClient, listed_ids
from simulator.check.openai_checks import all_checks
from simulator.check.prefix import check_metrics, check_prefix_reuse
from simulator.check.probes import CAP, check_non_streaming, check_streaming
from simulator.check.report import CheckReport, CheckResult, failed, passed, warned
from simulator.check.roundtrip import (
    check_count_tokens,
    check_error_shape,
    check_tool_round_trip,
    prompt_tokens,
)
from simulator.errors import InputError
from simulator.util.jsontypes import JSONObject
from simulator.util.redact import check_endpoint_url

SYSTEM = ("You are a coding agent working in a Python repository. Answer briefly. "
          "Use the tools when you need to read files. ") * 12


def validate_base_url(base_url: str) -> str:
    """The base URL without a trailing slash; InputError when it is not http(s)://host."""
    try:
        check_endpoint_url(base_url, "endpoint URL")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return base_url.rstrip("/")


async def _discover_model(c: CheckClient, model: str | None) -> tuple[str, CheckResult]:
    """The model to use: the given one, else the first listed by /v1/models."""
    reply = await c.get("/v1/models")
    ids = listed_ids(reply.json())
    if model:
        listed = "listed" if model in ids else "not listed"
        return model, passed("models", f"using {model!r} ({listed} by /v1/models)", ids=ids)
    if reply.status == 200 and ids and isinstance(ids[0], str):
        return ids[0], passed("models", f"using {ids[0]!r}, the first of {len(ids)} "
                                        "in /v1/models", ids=ids)
    return "default", warned("models", f"/v1/models gave HTTP {reply.status} and no model; "
                                       "using 'default' (pass --model)")


async def _guard(name: str, step: Awaitable[list[CheckResult]]) -> list[CheckResult]:
    """Turn a transport failure of one check into a fail line for that check."""
    try:
        return await step
    except (aiohttp.ClientError, TimeoutError) as exc:
        return [failed(name, _why(exc))]


def _why(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".strip(": ").split())[:300]


async def _one(make: Callable[[], Awaitable[CheckResult]]) -> list[CheckResult]:
    return [await make()]


async def _all_checks(c: CheckClient, model: str | None,
                      api: str = "anthropic") -> tuple[str, list[CheckResult]]:
    """(the model used, every result in order)."""
    try:
        used_model, models = await _discover_model(c, model)
    except (aiohttp.ClientError, TimeoutError) as exc:
        used_model, models = model or "default", failed("models", _why(exc))
    if api == "openai-chat":
        return used_model, [models, *await all_checks(c, used_model, _guard, _one)]
    # Greedy sampling: the same server gives the same verdicts run after run (a sampled
    # first token can change the stream, e.g. llama.cpp's lost message_start).
    base: JSONObject = {"model": used_model, "max_tokens": CAP, "temperature": 0,
                            "system": SYSTEM,
                            "messages": [{"role": "user", "content": "List the files."}]}
    results = [models]
    results += await _guard("messages", check_non_streaming(c, base))
    first = next((r for r in results if r.name == "messages"), None)
    usage = first.details.get("usage") if first else None
    results += await _guard("streaming", check_streaming(c, base))
    results += await _guard("tool_round_trip", _one(lambda: check_tool_round_trip(c, base)))
    results += await _guard("count_tokens", _one(
        lambda: check_count_tokens(c, base, prompt_tokens(usage))))
    results += await _guard("error_shape", _one(lambda: check_error_shape(c, used_model)))
    metrics_result, snap = await check_metrics(c)     # a failed scrape is a result
    results.append(metrics_result)
    results += await _guard("prefix_reuse", _one(lambda: check_prefix_reuse(c, base, snap)))
    return used_model, results


async def run_check_async(base_url: str, *, api_key: str | None = None,
                          model: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                          api: str = "anthropic",
                          wall_s: float | None = None) -> CheckReport:
    """Run every check against `base_url` (e.g. http://127.0.0.1:8000); `timeout_s` bounds
    each HTTP request, `wall_s` the whole check (seconds): once it is spent, the checks
    left fail as not run."""
    url = validate_base_url(base_url)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        c = CheckClient(session, url, api_key=api_key,
                        deadline=None if wall_s is None else t0 + wall_s)
        try:
            await c.get("/v1/models")
        except (aiohttp.ClientError, TimeoutError) as exc:
            why = " ".join(f"{type(exc).__name__} {exc}".split())[:200]
            results = [failed("reachable", f"cannot reach {url}: {why}")]
            return CheckReport(url, model or "", tuple(results), loop.time() - t0)
        used, results = await _all_checks(c, model, api)
        if c.stale_connections:
            results.append(warned(
                "keep_alive", f"the server closed {c.stale_connections} kept-alive "
                "connection(s) without `Connection: close` (requests were re-sent on new "
                "connections; endurance's clients do the same)"))
    return CheckReport(url, used, tuple(results), loop.time() - t0)


def run_check(base_url: str, *, api_key: str | None = None, model: str | None = None,
              timeout_s: float = DEFAULT_TIMEOUT_S, api: str = "anthropic",
              wall_s: float | None = None) -> CheckReport:
    """Blocking wrapper of `run_check_async` (for the CLI and notebooks); `api` is
    "anthropic" (Messages) or "openai-chat" (Chat Completions)."""
    return asyncio.run(run_check_async(base_url, api_key=api_key, model=model,
                                       timeout_s=timeout_s, api=api, wall_s=wall_s))
