"""`/metrics` (present? which dialect?) and whether a shared prefix is actually reused.

Reuse is judged two ways that must agree: the usage of the second of two requests that
share a long prefix (`cache_read_input_tokens`), and the server's cached-token counter
delta over that request. A server without prefix caching is not broken, only slow, so
no reuse is a warn; so is a disagreement (other traffic can move the counters).
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import Mapping

import aiohttp

from simulator.check.client import Body, CheckClient
from simulator.check.metrics import MetricsSnapshot, delta, parse_metrics
from simulator.check.report import CheckResult, failed, passed, warned
from simulator.check.roundtrip import prompt_tokens
from simulator.util.jsontypes import JSONObject, as_object

_WORDS = ("buffer", "cache", "token", "request", "server", "client", "prefix", "block",
          "engine", "stream", "session", "compaction", "context", "tool", "result",
          "message", "handler", "config", "parser", "scheduler", "worker", "queue", "latency")
PREFIX_WORDS = 1500   # ≈ 2,000–4,000 tokens depending on the tokenizer


def long_prefix(seed: str, n_words: int = PREFIX_WORDS) -> str:
    """Deterministic filler text for a given seed, started by the seed itself so that no
    earlier request can have cached it."""
    rng = random.Random(seed)
    return f"[{seed}] " + " ".join(rng.choice(_WORDS) for _ in range(n_words))


async def scrape(c: CheckClient) -> tuple[MetricsSnapshot | None, str]:
    """One scrape of /metrics → (snapshot or None, why not)."""
    try:
        reply = await c.get("/metrics")
    except (aiohttp.ClientError, TimeoutError) as exc:   # no answer is "no /metrics"
        return None, " ".join(f"{type(exc).__name__} {exc}".split())[:200]
    if reply.status != 200:
        return None, f"HTTP {reply.status}"
    try:
        return parse_metrics(reply.body.decode("utf-8", errors="replace")), ""
    except ValueError as exc:
        return None, f"unparseable Prometheus text: {exc}"


async def check_metrics(c: CheckClient) -> tuple[CheckResult, MetricsSnapshot | None]:
    """Is /metrics there, and in which dialect (vLLM, SGLang, llama.cpp)?"""
    snap, why = await scrape(c)
    if snap is None:
        make = failed if why.startswith("unparseable") else warned
        return make("metrics", f"no usable /metrics ({why})"), None
    if snap.dialect is None:
        return warned("metrics", f"{snap.samples} samples but no known dialect "
                                 "(vllm:, sglang:, llamacpp:)"), snap
    if snap.cached_tokens is None:
        return warned("metrics", f"{snap.dialect} dialect, but no prefix-cache counter",
                      dialect=snap.dialect), snap
    block = f", block size {snap.block_size}" if snap.block_size else ""
    return passed("metrics", f"{snap.dialect} dialect, {snap.samples} samples, "
                             f"prefix-cache counters present{block}",
                  dialect=snap.dialect, block_size=snap.block_size), snap


async def _settled_delta(c: CheckClient, before: MetricsSnapshot | None,
                         expect: int | None) -> float | None:
    """Cached-token counter delta since `before`; re-scrapes (≤ 3×, 0.2 s apart) while it
    differs from `expect`, since some servers update counters just after replying."""
    got: float | None = None
    for attempt in range(3):
        if attempt:
            await asyncio.sleep(0.2)
        after, _ = await scrape(c)
        got = delta(before.cached_tokens if before else None,
                    after.cached_tokens if after else None)
        if got is None or expect is None or got == expect:
            break
    return got


async def check_prefix_reuse(c: CheckClient, base: Body,
                             metrics: MetricsSnapshot | None) -> CheckResult:
    """Two requests sharing a long system prompt; the second should read it from cache.
    The counter delta is taken over the second request only."""
    system = long_prefix(secrets.token_hex(6))
    usages: list[JSONObject] = []
    before: MetricsSnapshot | None = None
    for i, question in enumerate(("What does this configure?", "Which part is slowest?")):
        if i == 1 and metrics is not None:
            before = (await scrape(c))[0]
        reply = await c.post("/v1/messages", {**base, "max_tokens": 1, "system": system,
                                              "messages": [{"role": "user",
                                                            "content": question}]})
        if reply.status != 200:
            return failed("prefix_reuse", f"request {i + 1}: HTTP {reply.status} "
                                          f"{reply.snippet()}")
        usages.append(as_object(reply.json_object().get("usage")))
    read = usages[1].get("cache_read_input_tokens")
    counter = await _settled_delta(c, before, read if isinstance(read, int) else None)
    return reuse_verdict(usages[1], counter, metrics.block_size if metrics else None)


def reuse_verdict(usage: Mapping[str, object], counter_delta: float | None,
                  block_size: int | None) -> CheckResult:
    """Judge reuse from the second request's usage and the counter delta over it."""
    name = "prefix_reuse"
    total = prompt_tokens(usage)
    read = usage.get("cache_read_input_tokens")
    details = {"prompt_tokens": total, "cache_read_input_tokens": read,
               "metrics_cached_delta": counter_delta, "block_size": block_size}
    seen_usage = isinstance(read, int) and read > 0
    seen_metrics = counter_delta is not None and counter_delta > 0
    if not seen_usage and not seen_metrics:
        return warned(name, "the shared prefix was not reused (is prefix caching on?)",
                      **details)
    share = f"{read}/{total} prompt tokens from cache" if seen_usage else ""
    if seen_usage and counter_delta is None:
        return passed(name, f"{share} (usage; no counter to compare)", **details)
    if not seen_usage:
        return warned(name, f"/metrics shows {counter_delta:.0f} cached tokens but usage "
                            "does not report them", **details)
    tolerance = block_size or 1
    if abs((read if isinstance(read, int) else 0) - float(counter_delta or 0)) > tolerance:
        return warned(name, f"{share}, but /metrics counted {counter_delta:.0f} "
                            "(other traffic?)", **details)
    return passed(name, f"{share}; /metrics delta agrees ({counter_delta:.0f})", **details)
