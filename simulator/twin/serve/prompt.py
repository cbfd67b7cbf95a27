"""Anthropic request → the twin engine's prompt token ids.

A deterministic, chat-template-like serialisation: tool definitions first, then the
system prompt, then each message framed by role markers, then the generation prompt.
Each of those *segments* is tokenised on its own (cl100k, `simulator.util.tokens`) and the
ids are cached in a token-bounded LRU keyed by a hash of the segment's canonical text, so an
ever-growing conversation re-tokenises only its new messages. Because segments are
tokenised independently, a request that extends an earlier one shares its token prefix
exactly — what a real chat template gives vLLM's prefix cache.

`cache_control` markers are ignored (self-hosted engines ignore them too), so moving
the marker to the newest message does not change the tokens of older ones.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import lru_cache
from typing import Protocol

from simulator.util import tokens

_GEN_PROMPT = "<|im_start|>assistant\n"
_EMPTY: array[int] = array("I")


class PromptError(ValueError):
    """The request body does not describe a valid prompt (→ HTTP 400)."""


class ApiMessage(Protocol):
    """An immutable message object that renders itself as an API message dict."""

    def to_api(self) -> dict[str, object]: ...


def _dumps(value: object) -> str:
    """Canonical JSON: sorted keys, no whitespace variance, unicode kept."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def content_text(content: object, where: str, part: Callable[[object, str], str],
                 expected: str) -> str:
    """The text of a message's or a tool_result's `content`: none, a string, or a list
    whose items `part` renders (one per line); PromptError naming `expected` else."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part(p, where) for p in content)
    raise PromptError(f"{where}.content: expected {expected}")


def _text_of_result(content: object, where: str) -> str:
    """The text of a tool_result's content (a string or a list of text blocks)."""
    return content_text(content, where, lambda b, w: _render_block(b, f"{w}.content"),
                        "a string or a list of blocks")


def _render_block(block: object, where: str) -> str:
    """One content block as template text."""
    if not isinstance(block, dict):
        raise PromptError(f"{where}: expected a content block object")
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise PromptError(f"{where}.text: expected a string")
        return text
    if kind == "tool_use":
        call = {"name": block.get("name"), "arguments": block.get("input", {})}
        return f"<tool_call>\n{_dumps(call)}\n</tool_call>"
    if kind == "tool_result":
        body = _text_of_result(block.get("content"), where)
        return f"<tool_response>\n{body}\n</tool_response>"
    if kind in ("thinking", "redacted_thinking"):
        return f"<think>\n{block.get('thinking', '')}\n</think>"
    if kind in ("image", "document"):
        return f"<{kind}>"
    raise PromptError(f"{where}.type: unknown content block type {kind!r}")


def render_reply(content: Sequence[object]) -> str:
    """A reply's content blocks (API dicts) as the text the next prompt frames in its
    assistant message: what the model generated, template markers of tool calls
    included, role markers not."""
    return "\n".join(_render_block(b, f"content.{i}") for i, b in enumerate(content))


def message_pieces(message: object, where: str = "messages") -> list[str]:
    """`render_message`'s text as the pieces it joins, each content text (a text block's,
    a tool result's) a piece of its own, as the message holds it: its ids may be known
    (`tokens.encode_pieces`)."""
    if not isinstance(message, dict):
        raise PromptError(f"{where}: expected a message object")
    role = message.get("role")
    content = message.get("content")
    if role not in ("user", "assistant") or not isinstance(content, list):
        return [render_message(message, where)]
    pieces = [f"<|im_start|>{role}\n"]
    for i, block in enumerate(content):
        if i:
            pieces.append("\n")
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            pieces.append(block["text"])
        elif kind == "tool_result" and isinstance(block.get("content"), str):
            pieces += ["<tool_response>\n", block["content"], "\n</tool_response>"]
        else:
            pieces.append(_render_block(block, f"{where}.content.{i}"))
    pieces.append("<|im_end|>\n")
    return pieces


def render_message(message: object, where: str = "messages") -> str:
    """One API message as framed template text (role markers included)."""
    if not isinstance(message, dict):
        raise PromptError(f"{where}: expected a message object")
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise PromptError(f"{where}.role: expected 'user' or 'assistant', got {role!r}")
    content = message.get("content")
    if isinstance(content, str):
        body = content
    elif isinstance(content, list):
        body = "\n".join(_render_block(b, f"{where}.content.{i}")
                         for i, b in enumerate(content))
    else:
        raise PromptError(f"{where}.content: expected a string or a list of blocks")
    return f"<|im_start|>{role}\n{body}<|im_end|>\n"


def render_system(system: object) -> str:
    """The system prompt (a string or a list of text blocks) as framed text."""
    if system is None:
        return ""
    if isinstance(system, str):
        body = system
    elif isinstance(system, list):
        body = "\n".join(_render_block(b, f"system.{i}") for i, b in enumerate(system))
    else:
        raise PromptError("system: expected a string or a list of text blocks")
    return f"<|im_start|>system\n{body}<|im_end|>\n" if body else ""


def render_tools(tools: object) -> str:
    """Tool definitions as a framed block of one JSON line per tool."""
    if not tools:
        return ""
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise PromptError("tools: expected a list of tool objects")
    lines = "\n".join(_dumps({k: v for k, v in t.items() if k != "cache_control"})
                      for t in tools)
    return f"<|im_start|>tools\n<tools>\n{lines}\n</tools><|im_end|>\n"


class _TokenLRU:
    """LRU of token-id arrays bounded by the number of tokens held, not of entries: a
    few long sessions and many short ones cost the same (4 bytes per token)."""

    __slots__ = ("_d", "_max", "held")

    def __init__(self, max_tokens: int) -> None:
        self._d: OrderedDict[Hashable, tuple[object, array[int]]] = OrderedDict()
        self._max = max_tokens
        self.held = 0

    def get(self, key: Hashable, owner: object = None) -> array[int] | None:
        hit = self._d.get(key)
        if hit is None or hit[0] is not owner:
            return None
        self._d.move_to_end(key)
        return hit[1]

    def put(self, key: Hashable, ids: array[int], owner: object = None) -> None:
        old = self._d.pop(key, None)
        if old is not None:
            self.held -= len(old[1])
        self._d[key] = (owner, ids)
        self.held += len(ids)
        while self.held > self._max and len(self._d) > 1:
            _, (_, gone) = self._d.popitem(last=False)
            self.held -= len(gone)

    def __len__(self) -> int:
        return len(self._d)


class PromptTokenizer:
    """Segment-wise tokeniser with token-bounded LRUs of ids (uint32 arrays).

    Two caches: segment text (by a hash of it) → ids, and immutable objects (by
    identity, for the in-process twin) → ids. Each holds at most `max_tokens` tokens
    (4 bytes each): the default, 16M, keeps the live histories of a few hundred long
    sessions without re-tokenising any. `encode_calls` counts calls into the underlying
    encoder (cache misses), so tests and benchmarks can check that a grown conversation
    only encodes its new messages.
    """

    def __init__(self, max_tokens: int = 16_000_000,
                 encode: Callable[[str], Sequence[int]] | None = None) -> None:
        self._encode = encode or tokens.encoding().encode_ordinary
        self._cl100k = encode is None       # known ids (`tokens.remember`) are cl100k's
        self._cache = _TokenLRU(max_tokens)
        self._objects = _TokenLRU(max_tokens)
        self.encode_calls = 0
        # the last prompt built from objects: a fleet's router and the replica it picks
        # ask for the same request's ids one after the other (arrays are never mutated)
        self._last: tuple[object, tuple[ApiMessage, ...], array[int]] | None = None

    def _segment(self, text: str) -> array[int]:
        """Token ids of one segment's text, from the cache when seen before."""
        if not text:
            return _EMPTY
        key = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
        ids = self._cache.get(key)
        if ids is not None:
            return ids
        self.encode_calls += 1
        ids = array("I", self._encode(text))
        self._cache.put(key, ids)
        return ids

    def encode_request(self, *, system: object = None, tools: object = None,
                       messages: object) -> array[int]:
        """Prompt token ids of a Messages request as a uint32 array (raises PromptError
        when malformed)."""
        if not isinstance(messages, list) or not messages:
            raise PromptError("messages: expected a non-empty list")
        out = array("I")
        out.extend(self._segment(render_tools(tools)))
        out.extend(self._segment(render_system(system)))
        for i, message in enumerate(messages):
            out.extend(self._segment(render_message(message, f"messages.{i}")))
        out.extend(self._segment(_GEN_PROMPT))
        return out

    def _object(self, obj: object, render: Callable[[], array[int]]) -> array[int]:
        """Ids of an immutable object's segment(s), looked up by identity (the entry
        holds the object, so its id cannot be reused while the entry lives); `render`
        computes them on a miss."""
        key = id(obj)
        ids = self._objects.get(key, obj)
        if ids is None:
            ids = render()
            self._objects.put(key, ids, obj)
        return ids

    def _message(self, m: ApiMessage, i: int) -> array[int]:
        pieces = message_pieces(m.to_api(), f"messages.{i}")
        if self._cl100k and any(map(tokens.known, pieces)):   # synthesised: ends only
            self.encode_calls += 1
            return array("I", tokens.encode_pieces(pieces))
        return self._segment("".join(pieces))

    def encode_objects(self, head: object, head_api: Callable[[], tuple[object, object]],
                       messages: Sequence[ApiMessage]) -> array[int]:
        """The ids `encode_request` gives for (system, tools) = `head_api()` and
        `[m.to_api() for m in messages]`, as a uint32 array; segments of
        objects seen before (the immutable `head` and messages) are found by identity,
        so a turn renders, hashes and encodes only its new messages."""
        if not messages:
            raise PromptError("messages: expected a non-empty list")
        last = self._last
        if last is not None and last[0] is head and last[1] is messages:
            return last[2]

        def render_head() -> array[int]:
            system, tools = head_api()
            return self._segment(render_tools(tools)) + self._segment(render_system(system))

        parts = [self._object(head, render_head)]
        objects = self._objects
        for i, m in enumerate(messages):            # `_object`, inlined: ~20 a request
            ids = objects.get(id(m), m)
            if ids is None:
                ids = self._message(m, i)
                objects.put(id(m), ids, m)
            parts.append(ids)
        parts.append(self._object(_GEN_PROMPT, lambda: self._segment(_GEN_PROMPT)))
        arr = array("I")
        arr.frombytes(b"".join(parts))      # one copy of each part, no regrowth
        if isinstance(messages, tuple):                 # immutable: safe to remember
            self._last = (head, messages, arr)
        return arr

    def encode_body(self, body: Mapping[str, object]) -> array[int]:
        """Same as `encode_request`, from a decoded JSON request body."""
        return self.encode_request(system=body.get("system"), tools=body.get("tools"),
                                   messages=body.get("messages"))


@lru_cache(maxsize=1)
def shared_tokenizer() -> PromptTokenizer:
    """The process's tokenizer for in-process twins: the runs of a search in this
    process (its serial points) find the messages and segments earlier runs encoded,
    e.g. a warm-started session's history, which those runs share (`session.agent`);
    bounded as any `PromptTokenizer` (16M tokens of ids per cache)."""
    return PromptTokenizer()
