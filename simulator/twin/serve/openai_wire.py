"""OpenAI Chat Completions wire shapes for the HTTP twin (`POST /v1/chat/completions`).

The same engine serves both protocols: a chat request is first turned back into the
Messages shape (`as_messages_body`: system message → `system`, `function` tools →
`input_schema` tools, assistant `tool_calls` → `tool_use` blocks, `role: tool` messages
→ `tool_result` blocks of the next user turn), so the prompt tokenises exactly as the
same conversation sent to `/v1/messages` and the prefix cache behaves the same. `ChatWire`
has the functions `simulator.twin.serve.wire` has (the `ReplyWriter` takes either), writing
`chat.completion.chunk` events, a usage chunk (`stream_options.include_usage`), `[DONE]`
and OpenAI error bodies.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from simulator.twin.serve.prompt import PromptError, content_text
from simulator.twin.serve.wire import ReplyUsage

# The twin plans replies with Anthropic stop reasons; OpenAI's finish_reason for each.
FINISH_REASONS = {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                  "stop_sequence": "stop"}


def error_body(kind: str, message: str) -> dict[str, object]:
    """OpenAI's error shape (`code` carries `context_length_exceeded` for overflows)."""
    code = "context_length_exceeded" if "too long" in message else None
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _tool(t: object, i: int) -> dict[str, object]:
    fn = t.get("function") if isinstance(t, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise PromptError(f"tools.{i}: expected {{'type': 'function', 'function': {{'name': …}}}}")
    out: dict[str, object] = {"name": fn["name"]}
    if fn.get("description"):
        out["description"] = fn["description"]
    out["input_schema"] = fn.get("parameters") or {"type": "object"}
    return out


_TEXT_PARTS = "a string or a list of text parts"


def _text_part(part: object, where: str) -> str:
    text = part.get("text") if isinstance(part, dict) else None
    if not isinstance(text, str):
        raise PromptError(f"{where}.content: expected {_TEXT_PARTS}")
    return text


def _text(content: object, where: str) -> str:
    """A Chat message's content: a string, or its text parts one per line (items that
    are not objects are skipped)."""
    if isinstance(content, list):
        content = [p for p in content if isinstance(p, dict)]
    return content_text(content, where, _text_part, _TEXT_PARTS)


def _assistant(m: Mapping[str, object], where: str) -> dict[str, object]:
    blocks: list[dict[str, object]] = []
    text = _text(m.get("content"), where)
    if text:
        blocks.append({"type": "text", "text": text})
    calls = m.get("tool_calls") or []
    if not isinstance(calls, list):      # a text or an object: its first item is no call
        raise PromptError(f"{where}.tool_calls.0: expected a function call")
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            raise PromptError(f"{where}.tool_calls.{j}: expected a function call")
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except (TypeError, ValueError):
            raise PromptError(f"{where}.tool_calls.{j}.function.arguments: not JSON") from None
        blocks.append({"type": "tool_use", "id": call.get("id", ""),
                       "name": fn.get("name", ""), "input": args})
    return {"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]}


def as_messages_body(body: Mapping[str, object]) -> dict[str, object]:
    """The Messages-shaped equivalent of a chat request (raises PromptError)."""
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise PromptError("messages: expected a non-empty list")
    system: list[str] = []
    out: list[dict[str, object]] = []
    pending: list[dict[str, object]] = []  # tool results waiting for their user turn
    for i, m in enumerate(msgs):
        where = f"messages.{i}"
        role = m.get("role") if isinstance(m, dict) else None
        if role in ("system", "developer"):
            system.append(_text(m.get("content"), where))
        elif role == "tool":
            pending.append({"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""),
                            "content": _text(m.get("content"), where)})
        elif role == "user":
            out.append({"role": "user", "content": [
                *pending, {"type": "text", "text": _text(m.get("content"), where)}]})
            pending = []
        elif role == "assistant":
            if pending:
                out.append({"role": "user", "content": pending})
                pending = []
            out.append(_assistant(m, where))
        else:
            raise PromptError(f"{where}.role: unknown role {role!r}")
    if pending:
        out.append({"role": "user", "content": pending})
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise PromptError("tools: expected a list")
    result: dict[str, object] = {"messages": out, "tools": [_tool(t, i) for i, t in enumerate(tools)],
                              "model": body.get("model"), "stream": body.get("stream")}
    if system:
        result["system"] = [{"type": "text", "text": "\n".join(system)}]
    mt = body.get("max_completion_tokens", body.get("max_tokens"))
    result["max_tokens"] = mt
    return result


def _sse(data: Mapping[str, object]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def _usage(usage: ReplyUsage) -> dict[str, object]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.prompt_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens}}


class ChatWire:
    """The chunk writer of one reply (holds the id, model and creation time)."""

    MALFORMED_EVENT = b'data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"te\n\n'

    def __init__(self, include_usage: bool) -> None:
        self.include_usage = include_usage
        self._rid = ""
        self._model = ""
        self._created = int(time.time())

    def _chunk(self, delta: Mapping[str, object], finish: str | None = None) -> bytes:
        return _sse({"id": self._rid, "object": "chat.completion.chunk",
                     "created": self._created, "model": self._model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def message_start(self, rid: str, model: str, prompt_tokens: int) -> bytes:
        self._rid, self._model = f"chatcmpl-{rid}", model
        return self._chunk({"role": "assistant", "content": ""})

    def text_delta(self, text: str) -> bytes:
        return self._chunk({"content": text})

    def message_end(self, stop_reason: str, usage: ReplyUsage) -> bytes:
        out = self._chunk({}, FINISH_REASONS.get(stop_reason, "stop"))
        if self.include_usage:
            out += _sse({"id": self._rid, "object": "chat.completion.chunk",
                         "created": self._created, "model": self._model, "choices": [],
                         "usage": _usage(usage)})
        return out + b"data: [DONE]\n\n"

    def error_event(self, kind: str = "overloaded_error", message: str = "Overloaded") -> bytes:
        return _sse(error_body(kind, message))

    def error_body(self, kind: str, message: str) -> dict[str, object]:
        return error_body(kind, message)

    def message_body(self, rid: str, model: str, text: str, stop_reason: str,
                     usage: ReplyUsage) -> dict[str, object]:
        return {"id": f"chatcmpl-{rid}", "object": "chat.completion", "created": self._created,
                "model": model, "choices": [{
                    "index": 0, "message": {"role": "assistant", "content": text},
                    "finish_reason": FINISH_REASONS.get(stop_reason, "stop")}],
                "usage": _usage(usage)}
