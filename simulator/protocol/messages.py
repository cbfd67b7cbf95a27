"""Messages-API content: blocks, messages and the request prefix (tools, system).

The bottom layer every package may import (endpoints, metrics, importers, session): it
imports nothing of the simulator but `tokens`. A message is a tuple of blocks; each
block knows its token estimate and a stable content hash, computed once when the
block is made, so the per-turn cost is proportional to what changed, not to the
context size.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from simulator.util import tokens

Role = Literal["user", "assistant"]

# Rough per-block framing overhead of the chat template, in tokens (role markers,
# JSON punctuation of tool blocks). Only used for client-side estimates.
BLOCK_OVERHEAD_TOKENS = 3
MESSAGE_OVERHEAD_TOKENS = 4
TOOL_USE_OVERHEAD_TOKENS = 8        # a tool_use block's id and name, beyond its input


def _digest(*parts: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str
    tokens_est: int = -1
    kind: Literal["text"] = "text"

    def __post_init__(self) -> None:
        if self.tokens_est < 0:
            object.__setattr__(self, "tokens_est", tokens.count(self.text))

    def serialize(self) -> str:
        return self.text

    def to_api(self) -> dict[str, object]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    id: str
    name: str
    input_json: str  # serialized once; the dict is rebuilt for the API
    tokens_est: int = -1
    kind: Literal["tool_use"] = "tool_use"

    def __post_init__(self) -> None:
        if self.tokens_est < 0:
            object.__setattr__(self, "tokens_est", tokens.count(self.input_json) + TOOL_USE_OVERHEAD_TOKENS)

    def serialize(self) -> str:
        return f"<tool_use id={self.id} name={self.name}>{self.input_json}"

    def to_api(self) -> dict[str, object]:
        return {"type": "tool_use", "id": self.id, "name": self.name,
                "input": json.loads(self.input_json)}


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    tool_use_id: str
    content: str
    is_error: bool = False
    tool_name: str = ""
    tokens_est: int = -1
    kind: Literal["tool_result"] = "tool_result"

    def __post_init__(self) -> None:
        if self.tokens_est < 0:
            object.__setattr__(self, "tokens_est", tokens.count(self.content) + 6)

    def serialize(self) -> str:
        return f"<tool_result id={self.tool_use_id} error={int(self.is_error)}>{self.content}"

    def to_api(self) -> dict[str, object]:
        d: dict[str, object] = {"type": "tool_result", "tool_use_id": self.tool_use_id,
                             "content": self.content}
        if self.is_error:
            d["is_error"] = True
        return d


Block = TextBlock | ToolUseBlock | ToolResultBlock


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    blocks: tuple[Block, ...]
    tokens_est: int = field(init=False)
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokens_est", MESSAGE_OVERHEAD_TOKENS + sum(
            b.tokens_est + BLOCK_OVERHEAD_TOKENS for b in self.blocks))
        object.__setattr__(self, "digest", _digest(self.role, *(b.serialize() for b in self.blocks)))

    def serialize(self) -> str:
        return f"<{self.role}>" + "".join(b.serialize() for b in self.blocks)

    def to_api(self) -> dict[str, object]:
        return {"role": self.role, "content": [b.to_api() for b in self.blocks]}

    @property
    def tool_use_ids(self) -> tuple[str, ...]:
        return tuple(b.id for b in self.blocks if isinstance(b, ToolUseBlock))

    @property
    def tool_result_ids(self) -> tuple[str, ...]:
        return tuple(b.tool_use_id for b in self.blocks if isinstance(b, ToolResultBlock))

    def text(self) -> str:
        return "".join(b.text for b in self.blocks if isinstance(b, TextBlock))


def user_text(text: str, tokens_est: int = -1) -> Message:
    return Message("user", (TextBlock(text, tokens_est),))


@dataclass(frozen=True, slots=True)
class Prefix:
    """The part of every request that precedes the messages: tools, then system.

    (Anthropic's canonical cache order is tools → system → messages.)
    """

    system: str
    tools: tuple[dict[str, Any], ...]
    system_tokens_est: int
    tools_tokens_est: int
    tools_digest: str = field(init=False)
    system_digest: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools_digest",
                           _digest(json.dumps(self.tools, sort_keys=True, separators=(",", ":"))))
        object.__setattr__(self, "system_digest", _digest(self.system))

    @property
    def tokens_est(self) -> int:
        return self.system_tokens_est + self.tools_tokens_est


def validate_structure(messages: tuple[Message, ...]) -> str | None:
    """Why `messages` is not a valid Messages-API history, or None when it is.

    Rules: starts with user, roles alternate, and every tool_use is answered by a
    tool_result in the very next message (and no tool_result is orphaned).
    """
    if not messages:
        return "history is empty"
    if messages[0].role != "user":
        return "history must start with a user message"
    for i, m in enumerate(messages):
        if i and m.role == messages[i - 1].role:
            return f"messages {i - 1} and {i} have the same role"
        prev_uses = set(messages[i - 1].tool_use_ids) if i else set()
        results = set(m.tool_result_ids)
        if results - prev_uses:
            return f"message {i} answers tool_use ids not in message {i - 1}"
        if m.role == "assistant" and m.tool_use_ids:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            if nxt is not None and set(m.tool_use_ids) - set(nxt.tool_result_ids):
                return f"message {i}'s tool_use is not answered in message {i + 1}"
    return None
