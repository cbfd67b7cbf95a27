"""The request/response checks: message shape, streaming grammar, usage placement,
cache fields, stop reasons, the tool round trip, count_tokens and the error shape.

Each check sends a few small requests (max_tokens ≤ 8) and returns `CheckResult`s; the
pure validators take decoded JSON so the unit tests can feed them directly.
"""

from __future__ import annotations

from collections.abc import Mapping

from simulator.check.client import Body, CheckClient, RawReply
from simulator.check.report import CheckResult, failed, passed, warned
from simulator.check.sse import check_stream, parse_sse
from simulator.util.jsontypes import JSONObject, as_list, as_object
from simulator.util.numbers import to_int

STOP_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence", "tool_use",
                          "pause_turn", "refusal"})
CACHE_FIELDS = ("cache_read_input_tokens", "cache_creation_input_tokens")
CAP = 8   # max_tokens for the short replies (tokens)


def message_problems(msg: object) -> list[str]:
    """What is wrong with a non-streaming Messages reply (empty list: nothing)."""
    if not isinstance(msg, dict):
        return ["reply is not a JSON object"]
    problems = [f"{k} is {msg.get(k)!r}, expected {v!r}"
                for k, v in (("type", "message"), ("role", "assistant")) if msg.get(k) != v]
    if not isinstance(msg.get("id"), str):
        problems.append("no message id")
    content = msg.get("content")
    if not isinstance(content, list):
        return [*problems, "content is not a list of blocks"]
    for i, block in enumerate(content):
        problems += [f"content[{i}]: {p}" for p in _block_problems(block)]
    if msg.get("stop_reason") not in STOP_REASONS:
        problems.append(f"stop_reason {msg.get('stop_reason')!r} is not an Anthropic one")
    return problems + usage_problems(msg.get("usage"), ("input_tokens", "output_tokens"))


def usage_problems(usage: object, keys: tuple[str, ...]) -> list[str]:
    """What a reply's `usage` lacks: each of `keys` as an integer (both APIs' checks)."""
    return [f"usage.{key} missing or not an integer" for key in keys
            if not isinstance(usage, dict) or not isinstance(usage.get(key), int)]


def _block_problems(block: object) -> list[str]:
    if not isinstance(block, dict):
        return ["not an object"]
    btype = block.get("type")
    if btype == "text" and not isinstance(block.get("text"), str):
        return ["text block without text"]
    if btype == "tool_use" and not (isinstance(block.get("id"), str)
                                    and isinstance(block.get("name"), str)
                                    and isinstance(block.get("input"), dict)):
        return ["tool_use block needs id, name and an input object"]
    if btype not in ("text", "tool_use", "thinking", "redacted_thinking"):
        return [f"unknown block type {btype!r}"]
    return []


def stop_reason_verdict(stop_reason: object, output_tokens: object, cap: int
                        ) -> tuple[str, str]:
    """('pass'|'warn'|'fail', reason) for a reply requested with max_tokens=cap."""
    if not isinstance(output_tokens, int):
        return "fail", "no integer usage.output_tokens"
    if output_tokens > cap:
        return "fail", f"{output_tokens} output tokens exceed max_tokens={cap}"
    if stop_reason == "max_tokens":
        if output_tokens < cap:
            return "warn", f"stop_reason max_tokens after {output_tokens} < {cap} tokens"
        return "pass", f"max_tokens after exactly {cap} tokens"
    if output_tokens == cap:
        return "warn", f"{cap} tokens (the cap) but stop_reason {stop_reason!r}"
    return "pass", f"{stop_reason} after {output_tokens} tokens (stopped before the cap)"


def cache_fields_result(usage: Mapping[str, object]) -> CheckResult:
    """Which of the two cache fields the server reports (absent or null = unknown)."""
    present = [k for k in CACHE_FIELDS if isinstance(usage.get(k), int)]
    missing = [k for k in CACHE_FIELDS if k not in present]
    if not missing:
        return passed("cache_fields", "cache_read and cache_creation both reported",
                      present=present)
    if present:
        return warned("cache_fields", f"no {', '.join(missing)} (treat as unknown, not zero)",
                      present=present, missing=missing)
    return warned("cache_fields", "no cache fields in usage: cache reuse is not reported",
                  missing=missing)


def usage_placement_result(start: Mapping[str, object] | None,
                           delta: Mapping[str, object] | None) -> CheckResult:
    """Where streaming usage arrives: input/cache in message_start, output in message_delta."""
    name = "usage_placement"
    final = {**(start or {}), **(delta or {})}
    details = {"message_start": start, "message_delta": delta}
    if not isinstance((delta or {}).get("output_tokens"), int):
        return failed(name, "message_delta carries no output_tokens", **details)
    if not isinstance(final.get("input_tokens"), int):
        return failed(name, "no input_tokens in message_start or message_delta", **details)
    if start is None:
        return warned(name, "message_start has no usage; input only in message_delta",
                      **details)
    late = [k for k in ("input_tokens", *CACHE_FIELDS)
            if k in (delta or {}) and (delta or {}).get(k) != start.get(k)]
    if late:
        return warned(name, f"{', '.join(late)} final only in message_delta (message_start "
                            "differs): read both, later wins", late=late, **details)
    return passed(name, "input and cache fields in message_start, output in message_delta",
                  **details)


def _http_fail(name: str, what: str, reply: RawReply) -> CheckResult:
    return failed(name, f"{what}: HTTP {reply.status} {reply.snippet()}",
                  status=reply.status)


async def check_non_streaming(c: CheckClient, body: Body) -> list[CheckResult]:
    """A plain reply: its shape, its stop reason under a cap, and its cache fields."""
    reply = await c.post("/v1/messages", body)
    msg = reply.json_object()
    if reply.status != 200:
        return [_http_fail("messages", "non-streaming request", reply)]
    problems = message_problems(msg)
    if problems:
        return [failed("messages", "; ".join(problems[:3]), problems=problems)]
    usage = as_object(msg.get("usage"))           # message_problems checked both
    results = [passed("messages", f"{len(as_list(msg.get('content')))} block(s), "
                                  f"{reply.elapsed_s:.2f} s", usage=usage)]
    results.append(await _stop_reason(c, body, msg))
    results.append(cache_fields_result(usage))
    return results


async def _stop_reason(c: CheckClient, body: Body, msg: JSONObject) -> CheckResult:
    """Judge the stop reason; if the model stopped early, retry once with max_tokens=1."""
    cap = to_int(body["max_tokens"])
    verdict, reason = stop_reason_verdict(msg.get("stop_reason"),
                                          as_object(msg.get("usage")).get("output_tokens"), cap)
    if verdict == "pass" and msg.get("stop_reason") != "max_tokens":
        retry = (await c.post("/v1/messages", {**body, "max_tokens": 1})).json_object()
        out = as_object(retry.get("usage")).get("output_tokens")
        verdict, reason = stop_reason_verdict(retry.get("stop_reason"), out, 1)
        reason = f"retried with max_tokens=1: {reason}"
    make = {"pass": passed, "warn": warned, "fail": failed}[verdict]
    return make("stop_reason", reason, stop_reason=msg.get("stop_reason"))


async def check_streaming(c: CheckClient, body: Body) -> list[CheckResult]:
    """A streamed reply: the event grammar, and where usage arrives."""
    reply = await c.post("/v1/messages", {**body, "stream": True})
    if reply.status != 200:
        return [_http_fail("streaming", "streaming request", reply)]
    if not reply.content_type.startswith("text/event-stream"):
        return [failed("streaming", f"content-type {reply.content_type!r}, "
                                    "expected text/event-stream")]
    s = check_stream(*parse_sse(reply.body))
    order = _compress(s.names)
    if s.errors:
        return [failed("streaming", "; ".join(s.errors[:2]), errors=s.errors, events=order)]
    verdict, reason = stop_reason_verdict(s.stop_reason, (s.usage_delta or {}).get(
        "output_tokens"), to_int(body["max_tokens"]))
    first = (warned if s.notes or verdict != "pass" else passed)(
        "streaming", f"{' '.join(order)}; {reason}" + (f"; {s.notes[0]}" if s.notes else ""),
        events=order, blocks=s.block_types, notes=s.notes, ignored=s.ignored)
    return [first, usage_placement_result(s.usage_start, s.usage_delta)]


def _compress(names: list[str]) -> list[str]:
    """Event names with runs collapsed: `content_block_delta×7`."""
    out: list[str] = []
    for name in names:
        if out and out[-1].split("×")[0] == name:
            n = int(out[-1].split("×")[1]) if "×" in out[-1] else 1
            out[-1] = f"{name}×{n + 1}"
        else:
            out.append(name)
    return out
