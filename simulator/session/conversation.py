"""Immutable conversation history with cached token estimates and content hashes.

The message and block types live in `simulator.protocol.messages` (the bottom layer
that endpoints, metrics and importers import); they are re-exported here so session
code can keep importing them from the conversation.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.protocol.messages import (
    BLOCK_OVERHEAD_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    Block,
    Message,
    Prefix,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    user_text,
    validate_structure,
)

__all__ = ["BLOCK_OVERHEAD_TOKENS", "MESSAGE_OVERHEAD_TOKENS", "Block", "Conversation", "Message",
           "Prefix", "Role", "TextBlock", "ToolResultBlock", "ToolUseBlock", "user_text",
           "validate_structure"]


@dataclass(frozen=True, slots=True)
class Conversation:
    """History of one session. `pinned` leading messages are never dropped."""

    messages: tuple[Message, ...] = ()
    pinned: int = 1
    # Set once a per-turn pruning policy has fired: from then on it prunes every turn
    # (the seed harness's behaviour). Kept in the history so policies stay pure.
    pruning: bool = False

    @property
    def tokens_est(self) -> int:
        return sum(m.tokens_est for m in self.messages)

    def append(self, *msgs: Message) -> Conversation:
        return Conversation(self.messages + msgs, self.pinned, self.pruning)

    def replace(self, messages: tuple[Message, ...]) -> Conversation:
        return Conversation(messages, self.pinned, self.pruning)

    def to_api(self) -> list[dict[str, object]]:
        return [m.to_api() for m in self.messages]
