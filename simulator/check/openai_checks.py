"""`endurance check URL --api openai-chat`: the OpenAI Chat Completions points a load
generator and a coding agent rely on, in the same pass / warn / fail table.

Checks: the non-streaming reply's shape and usage; the streamed chunk grammar and the
usage chunk that `stream_options.include_usage` asks for (without it endurance records
usage as unknown); streamed tool calls (id, name, arguments that join into JSON) and the
tool round trip; `prompt_tokens_details.cached_tokens` on a repeated long prefix (with
the /metrics counter when there is one); the error body shape; and a prompt over the
context window, which must come back as an error endurance recognises as an overflow
(that is what triggers its forced compaction). Requests are small (max_tokens ≤ 48).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping

from simulator.check.client import Body, CheckClient, RawReply
from simulator.check.metrics import MetricsSnapshot
from simulator.check.prefix import check_metrics, long_prefix, scrape
from simulator.check.probes import CAP, usage_problems
from simulator.check.report import CheckResult, Guard, One, failed, passed, warned
from simulator.check.sse import parse_sse
from simulator.endpoints.base import ErrorType, classify_status
from simulator.endpoints.wire.openai_chat import PATH, STOP_REASONS
from simulator.util.jsontypes import JSONObject, as_list, as_object

FINISH_REASONS = frozenset(STOP_REASONS)
TOOL_CAP = 48  # tokens: room for one tool call
READ_TOOL = {"type": "function", "function": {
    "name": "Read", "description": "Read a file of the repository and return its text.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}


def _http_fail(name: str, what: str, reply: RawReply) -> CheckResult:
    return failed(name, f"{what}: HTTP {reply.status} {reply.snippet()}")


def completion_problems(body: object) -> list[str]:
    """What is wrong with a non-streaming chat completion (empty list: nothing)."""
    if not isinstance(body, dict):
        return ["reply is not a JSON object"]
    problems = [] if body.get("object") == "chat.completion" else [
        f"object is {body.get('object')!r}, expected 'chat.completion'"]
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return [*problems, "choices is not a non-empty list"]
    msg = choices[0].get("message")
    if not isinstance(msg, dict) or msg.get("role") != "assistant":
        problems.append("choices[0].message is not an assistant message")
    if choices[0].get("finish_reason") not in FINISH_REASONS:
        problems.append(f"finish_reason {choices[0].get('finish_reason')!r} is unknown")
    return problems + usage_problems(body.get("usage"), ("prompt_tokens", "completion_tokens"))


async def check_chat(c: CheckClient, base: Body) -> CheckResult:
    reply = await c.post(PATH, base)
    if reply.status != 200:
        return _http_fail("chat", "non-streaming request", reply)
    problems = completion_problems(reply.json())
    if problems:
        return failed("chat", "; ".join(problems[:3]))
    usage = as_object(reply.json_object().get("usage"))   # checked by completion_problems
    return passed("chat", f"chat.completion with usage ({usage.get('prompt_tokens')} prompt, "
                          f"{usage.get('completion_tokens')} completion tokens)", usage=usage)


def stream_chunks(raw: bytes) -> tuple[list[JSONObject], bool, list[str]]:
    """(decoded chunks, saw [DONE], problems) of a whole streamed body."""
    events, tail = parse_sse(raw)
    chunks: list[JSONObject] = []
    done, problems = False, []
    for ev in events:
        if ev.data.strip() == "[DONE]":
            done = True
            continue
        try:
            data = ev.json()
        except ValueError:
            problems.append(f"unparseable chunk {ev.data[:40]!r}")
            continue
        if not isinstance(data, dict):
            problems.append("a chunk is not a JSON object")
        elif "error" in data:
            problems.append(f"error chunk: {json.dumps(data['error'])[:80]}")
        else:
            chunks.append(data)
    if tail.strip():
        problems.append("the body ends without a blank line")
    return chunks, done, problems


def finish_reasons(chunks: list[JSONObject]) -> list[str]:
    firsts = (as_list(ch.get("choices"))[:1] for ch in chunks)
    return [str(reason) for first in firsts if first and isinstance(first[0], dict)
            and (reason := first[0].get("finish_reason"))]


async def check_streaming(c: CheckClient, base: Body) -> list[CheckResult]:
    """The chunk grammar, and usage in the stream (`stream_options.include_usage`)."""
    reply = await c.post(PATH, {**base, "stream": True,
                                "stream_options": {"include_usage": True}})
    if reply.status != 200:
        return [_http_fail("streaming", "streamed request", reply)]
    chunks, done, problems = stream_chunks(reply.body)
    if "text/event-stream" not in reply.content_type:
        problems.append(f"content-type {reply.content_type!r}")
    finish = finish_reasons(chunks)
    if not finish:
        problems.append("no chunk carries a finish_reason")
    if problems:
        grammar = failed("streaming", "; ".join(problems[:3]), chunks=len(chunks))
    elif not done:
        grammar = warned("streaming", f"{len(chunks)} chunks, finish_reason {finish[-1]!r}, "
                                      "but no data: [DONE]")
    else:
        grammar = passed("streaming", f"{len(chunks)} chunks, finish_reason {finish[-1]!r}, "
                                      "[DONE]")
    usages = [u for ch in chunks if isinstance(u := ch.get("usage"), dict)]
    if not usages:
        use = failed("usage_in_stream", "no usage chunk despite stream_options.include_usage "
                                        "(endurance records usage as unknown)")
    elif not isinstance(usages[-1].get("prompt_tokens"), int):
        use = failed("usage_in_stream", "usage chunk without prompt_tokens")
    else:
        use = passed("usage_in_stream", f"usage chunk: {usages[-1].get('prompt_tokens')} "
                                        f"prompt, {usages[-1].get('completion_tokens')} "
                                        "completion tokens", usage=usages[-1])
    return [grammar, use]


def tool_calls_of(chunks: list[JSONObject]) -> dict[int, dict[str, str]]:
    """Streamed tool-call deltas joined per index: {index: {id, name, arguments}}."""
    calls: dict[int, dict[str, str]] = {}
    for ch in chunks:
        choices = ch.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            continue
        delta = as_object(choices[0].get("delta"))
        for i, tc in enumerate(as_list(delta.get("tool_calls"))):
            if not isinstance(tc, dict):
                continue
            index = tc.get("index", i)
            call = calls.setdefault(index if isinstance(index, int) else i,
                                    {"id": "", "name": "", "arguments": ""})
            call["id"] = call["id"] or str(tc.get("id") or "")
            fn = as_object(tc.get("function"))
            call["name"] = call["name"] or str(fn.get("name") or "")
            call["arguments"] += str(fn.get("arguments") or "")
    return calls


async def check_tool_calls(c: CheckClient, base: Body) -> list[CheckResult]:
    """A streamed tool call (tool_choice required, else auto), then the round trip."""
    asked = [{"role": "user", "content": "Read the file setup.py with the Read tool."}]
    ask = {**base, "max_tokens": TOOL_CAP, "stream": True, "tools": [READ_TOOL],
           "messages": asked}
    reply = await c.post(PATH, {**ask, "tool_choice": "required"})
    if reply.status != 200:
        reply = await c.post(PATH, ask)
    if reply.status != 200:
        return [_http_fail("streamed_tool_calls", "request with tools", reply)]
    chunks = stream_chunks(reply.body)[0]
    calls = tool_calls_of(chunks)
    if not calls:
        why = ("the twin plans text replies only" if reply.twin
               else "tool parser off? endurance sends tools")
        return [warned("streamed_tool_calls", f"the model answered without a tool call ({why})")]
    call = calls[min(calls)]
    try:
        args = json.loads(call["arguments"] or "{}")
    except ValueError:
        if "length" in finish_reasons(chunks):
            return [warned("streamed_tool_calls", f"the tool call was cut at max_tokens="
                                                  f"{TOOL_CAP} (arguments incomplete)")]
        return [failed("streamed_tool_calls", f"arguments are not JSON: "
                                              f"{call['arguments'][:60]!r}")]
    if not call["id"] or call["name"] != "Read" or not isinstance(args, dict):
        return [failed("streamed_tool_calls", f"incomplete tool call {call}")]
    first = passed("streamed_tool_calls", f"{call['name']}({json.dumps(args)[:40]}) with id "
                                          f"{call['id'][:24]!r}, arguments streamed as JSON")
    history = [*asked,
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": call["id"], "type": "function",
                    "function": {"name": "Read", "arguments": call["arguments"] or "{}"}}]},
               {"role": "tool", "tool_call_id": call["id"], "content": "print('hello')"},
               {"role": "user", "content": "Now summarise."}]
    back = await c.post(PATH, {**base, "tools": [READ_TOOL], "messages": history})
    if back.status != 200:
        return [first, _http_fail("tool_round_trip", "history with a tool result", back)]
    return [first, passed("tool_round_trip", "assistant tool_calls + role tool result "
                                             "accepted")]


def cached_verdict(usage: Mapping[str, object], counter_delta: float | None) -> CheckResult:
    """Judge `prompt_tokens_details.cached_tokens` of a request repeating a long prefix."""
    name = "cached_tokens"
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    total = usage.get("prompt_tokens")
    info = {"prompt_tokens": total, "cached_tokens": cached,
            "metrics_cached_delta": counter_delta}
    if not isinstance(cached, int):
        if counter_delta:
            return warned(name, f"no cached_tokens in usage, but /metrics counted "
                                f"{counter_delta:.0f} (endurance records cache reads as "
                                "unknown)", **info)
        return warned(name, "no prompt_tokens_details.cached_tokens (endurance records "
                            "cache reads as unknown)", **info)
    if cached == 0:
        return warned(name, "cached_tokens is 0 on a repeated prefix (is prefix caching "
                            "on?)", **info)
    return passed(name, f"{cached}/{total} prompt tokens from cache"
                        + (f"; /metrics delta {counter_delta:.0f}" if counter_delta else ""),
                  **info)


async def check_cached_tokens(c: CheckClient, base: Body,
                              metrics: MetricsSnapshot | None) -> CheckResult:
    system = long_prefix(secrets.token_hex(6))
    usage: JSONObject = {}
    before = None
    for i, q in enumerate(("What does this configure?", "Which part is slowest?")):
        if i == 1 and metrics is not None:
            before = (await scrape(c))[0]
        reply = await c.post(PATH, {**base, "max_tokens": 1, "messages": [
            {"role": "system", "content": system}, {"role": "user", "content": q}]})
        if reply.status != 200:
            return _http_fail("cached_tokens", f"request {i + 1}", reply)
        usage = as_object(reply.json_object().get("usage"))
    after = (await scrape(c))[0] if before is not None else None
    delta = (after.cached_tokens - before.cached_tokens
             if after is not None and before is not None and after.cached_tokens is not None
             and before.cached_tokens is not None else None)
    return cached_verdict(usage, delta)


def error_body_problems(data: object) -> list[str]:
    """OpenAI's error shape: {"error": {"message": str, "type": …}}."""
    err = data.get("error") if isinstance(data, dict) else None
    if not isinstance(err, dict):
        return ["no error object"]
    return [] if isinstance(err.get("message"), str) else ["error.message is not a string"]


async def check_error_shape(c: CheckClient, model: str) -> CheckResult:
    reply = await c.post(PATH, {"model": model, "max_tokens": CAP, "messages": "nope"})
    if reply.status < 400 or reply.status >= 500:
        return failed("error_shape", f"a malformed request got HTTP {reply.status} "
                                     "(expected 4xx)")
    problems = error_body_problems(reply.json())
    data = reply.json()
    if problems and isinstance(data, dict) and isinstance(data.get("message"), str):
        return warned("error_shape", f"HTTP {reply.status} with a top-level message "
                                     "(not OpenAI's error object)")
    if problems:
        return failed("error_shape", f"HTTP {reply.status}: {problems[0]}: {reply.snippet()}")
    return passed("error_shape", f"HTTP {reply.status} with an OpenAI error object")


async def context_window(c: CheckClient, model: str) -> int | None:
    """The server's context length: /v1/models `max_model_len` (vLLM, the twin), else
    llama.cpp's /props `n_ctx`."""
    for m in as_list((await c.get("/v1/models")).json_object().get("data")):
        if isinstance(m, dict) and m.get("id") == model and isinstance(
                n := m.get("max_model_len"), int):
            return n
    props = (await c.get("/props")).json_object()
    n_ctx = as_object(props.get("default_generation_settings")).get("n_ctx")
    return n_ctx if isinstance(n_ctx, int) else None


async def check_context_overflow(c: CheckClient, base: Body) -> CheckResult:
    """A prompt over the window must fail in a way endurance classifies as an overflow."""
    name = "context_overflow"
    window = await context_window(c, str(base["model"]))
    if window is None:
        return warned(name, "context window unknown (no max_model_len / n_ctx); not probed")
    words = " ".join(f"w{i % 97}" for i in range(window + 256))
    reply = await c.post(PATH, {**base, "max_tokens": 1,
                                "messages": [{"role": "user", "content": words}]})
    text = reply.body.decode("utf-8", errors="replace")
    if reply.status == 200:
        return warned(name, f"a prompt over the {window}-token window was accepted "
                            "(truncated?); endurance cannot force a compaction")
    kind = classify_status(reply.status, text)
    if kind is ErrorType.CONTEXT_OVERFLOW:
        return passed(name, f"HTTP {reply.status} recognised as context overflow "
                            f"(window {window}); endurance force-compacts on it")
    return warned(name, f"HTTP {reply.status} not recognisable as an overflow "
                        f"({reply.snippet(80)}); endurance would not compact")


async def all_checks(c: CheckClient, used_model: str, guard: Guard, one: One
                     ) -> list[CheckResult]:
    """Every OpenAI check in order (`guard`/`one`: the runner's transport-failure
    wrappers)."""
    base: JSONObject = {"model": used_model, "max_tokens": CAP, "temperature": 0,
                            "messages": [{"role": "system", "content": "Answer briefly."},
                                         {"role": "user", "content": "List the files."}]}
    results: list[CheckResult] = []
    results += await guard("chat", one(lambda: check_chat(c, base)))
    results += await guard("streaming", check_streaming(c, base))
    results += await guard("streamed_tool_calls", check_tool_calls(c, base))
    results += await guard("error_shape", one(lambda: check_error_shape(c, used_model)))
    results += await guard("context_overflow", one(lambda: check_context_overflow(c, base)))
    metrics_result, snap = await check_metrics(c)
    results.append(metrics_result)
    results += await guard("cached_tokens", one(lambda: check_cached_tokens(c, base, snap)))
    return results
