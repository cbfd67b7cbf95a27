"""Checks that go beyond one plain reply: a tool_use → tool_result round trip,
`/v1/messages/count_tokens`, and the error body of a bad request."""

from __future__ import annotations

from simulator.check.client import Body, CheckClient
from simulator.check.probes import message_problems
from simulator.check.report import CheckResult, failed, passed, warned
from simulator.util.jsontypes import JSONValue, as_object

READ_TOOL = {
    "name": "read_file",
    "description": "Read a UTF-8 text file from the workspace and return its content.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                     "required": ["path"]},
}
_LONG_RESULT = " ".join(f"line {i}: def handler_{i}(request): return respond({i})"
                        for i in range(40))


def tool_history(result_text: str) -> list[JSONValue]:
    """user → assistant tool_use → user tool_result, as Claude Code sends it."""
    return [
        {"role": "user", "content": "Open README.md and summarise it."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "I will read the file."},
            {"type": "tool_use", "id": "toolu_check_01", "name": "read_file",
             "input": {"path": "README.md"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_check_01",
             "content": [{"type": "text", "text": result_text}]},
            {"type": "text", "text": "Now summarise."}]},
    ]


def prompt_tokens(usage: object) -> int | None:
    """input + cache_read + cache_creation (the whole prompt), None when unknown."""
    if not isinstance(usage, dict) or not isinstance(usage.get("input_tokens"), int):
        return None
    return int(usage["input_tokens"]) + sum(
        int(usage.get(k) or 0) for k in ("cache_read_input_tokens",
                                          "cache_creation_input_tokens"))


async def check_tool_round_trip(c: CheckClient, base: Body) -> CheckResult:
    """The server must accept tools + a tool_use/tool_result history, and must read the
    tool result (a longer result must cost more prompt tokens)."""
    name = "tool_round_trip"
    replies = []
    for text in ("# endurance", "# endurance\n" + _LONG_RESULT):
        reply = await c.post("/v1/messages", {**base, "tools": [READ_TOOL],
                                              "messages": tool_history(text)})
        if reply.status != 200:
            return failed(name, f"HTTP {reply.status} {reply.snippet()}", status=reply.status)
        problems = message_problems(reply.json())
        if problems:
            return failed(name, "; ".join(problems[:3]), problems=problems)
        replies.append(reply.json_object())
    short, long = (prompt_tokens(r.get("usage")) for r in replies)
    if short is None or long is None:
        return warned(name, "accepted, but usage does not say whether the result was read")
    if long - short < 50:
        return failed(name, f"a ~400-token longer tool_result changed the prompt by only "
                            f"{long - short} tokens: tool_result content dropped?",
                      short=short, long=long)
    return passed(name, f"accepted; tool_result read (+{long - short} prompt tokens for "
                        "the longer result)", short=short, long=long,
                  stop_reason=replies[-1].get("stop_reason"))


async def check_count_tokens(c: CheckClient, base: Body,
                             prompt_tokens_seen: int | None) -> CheckResult:
    """`POST /v1/messages/count_tokens` → {"input_tokens": n}; compare with the usage
    the same request reported (`prompt_tokens_seen`)."""
    name = "count_tokens"
    body = {k: v for k, v in base.items() if k not in ("max_tokens", "stream", "temperature")}
    reply = await c.post("/v1/messages/count_tokens", body)
    if reply.status in (404, 405, 501):
        return warned(name, f"not implemented (HTTP {reply.status}): clients must estimate")
    data = reply.json()
    if reply.status != 200 or not isinstance(data, dict):
        return failed(name, f"HTTP {reply.status} {reply.snippet()}", status=reply.status)
    n = data.get("input_tokens")
    if not isinstance(n, int) or n <= 0:
        return failed(name, f"input_tokens is {n!r}, expected a positive integer")
    if prompt_tokens_seen is not None and n != prompt_tokens_seen:
        return warned(name, f"{n} tokens, but /v1/messages used {prompt_tokens_seen} for the "
                            "same request", input_tokens=n, usage_prompt=prompt_tokens_seen)
    return passed(name, f"{n} tokens" + (", equal to the usage of the same request"
                                         if prompt_tokens_seen is not None else ""),
                  input_tokens=n)


def error_body_problems(data: object) -> list[str]:
    """How an error body departs from {"type":"error","error":{"type":..,"message":..}}."""
    if not isinstance(data, dict):
        return ["body is not a JSON object"]
    err = data.get("error")
    problems = [] if data.get("type") == "error" else [
        f"top-level type is {data.get('type')!r}, not 'error'"]
    if not isinstance(err, dict):
        return [*problems, "no error object"]
    problems += [f"error.{k} is not a string" for k in ("type", "message")
                 if not isinstance(err.get(k), str)]
    return problems


async def check_error_shape(c: CheckClient, model: str) -> CheckResult:
    """A malformed request must get a 4xx with Anthropic's error body.

    First a schema violation (`messages` not a list); a lenient server that answers it
    with 200 (llama.cpp does) gets a warn, and the check falls back to a body that is
    not JSON at all, which every server must refuse with a 4xx."""
    name = "error_shape"
    reply = await c.post("/v1/messages", {"model": model, "max_tokens": 8,
                                          "messages": "not a list"})
    lenient = ""
    if 200 <= reply.status < 300:
        lenient = "accepted `messages` that is not a list (lenient validation); "
        reply = await c.post("/v1/messages", b"{not json")
    if not 400 <= reply.status < 500:
        return failed(name, f"{lenient}a malformed request got HTTP {reply.status}, expected 4xx",
                      status=reply.status, body=reply.snippet())
    problems = error_body_problems(reply.json())
    if problems or lenient:
        shape = f"HTTP {reply.status} but not Anthropic's error shape: {'; '.join(problems)}" \
            if problems else f"HTTP {reply.status} in Anthropic's error shape for invalid JSON"
        return warned(name, lenient + shape, status=reply.status, body=reply.snippet())
    err = as_object(reply.json_object().get("error"))    # its shape checked above
    return passed(name, f"HTTP {reply.status} {err.get('type')}: {str(err.get('message'))[:60]}",
                  status=reply.status)
