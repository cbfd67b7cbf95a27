"""Context-compaction policies as pure functions of (policy, history, prefix size).

Every policy keeps the system prompt and tools (they are not messages), never drops
the pinned head or the message being sent, never splits a tool_use from its
tool_result, and — when it fires — brings the context under its target whenever
that is possible at all.

History shape: ``[pinned…, a, u, a, u, …, a, u]``. After the pinned head the
messages pair up as (assistant, user) *units*; a user message holds the results of
the tool calls in the assistant message just before it, so dropping whole units
from the front keeps every tool_use with its tool_result and keeps the roles
alternating.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.scenario.model import (
    BlockCompaction,
    ClearToolResultsCompaction,
    Compaction,
    NoCompaction,
    PruneCompaction,
    SummarizeCompaction,
)
from simulator.session.conversation import Conversation, Message, TextBlock, ToolResultBlock

# The first words of the message a summary replaces the history with.
SUMMARY_HEAD = "This session is being continued from a previous conversation. Summary:\n"


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    kind: str                 # policy kind, prefixed "overflow:" when forced by the server
    messages_removed: int
    tokens_before: int
    tokens_after: int
    reached_target: bool

    @property
    def tokens_removed(self) -> int:
        return self.tokens_before - self.tokens_after


@dataclass(frozen=True, slots=True)
class Outcome:
    conversation: Conversation
    event: CompactionEvent | None = None
    summary_needed: bool = False


def context_tokens(conv: Conversation, prefix_tokens: int) -> int:
    return prefix_tokens + conv.tokens_est


def droppable_units(conv: Conversation) -> int:
    """How many (assistant, user) units can go: all but the last one."""
    body = len(conv.messages) - conv.pinned
    return max(0, body // 2 - 1)


def drop_units(conv: Conversation, n: int) -> Conversation:
    """Drop the `n` oldest units after the pinned head."""
    n = min(n, droppable_units(conv))
    if n <= 0:
        return conv
    p = conv.pinned
    return conv.replace(conv.messages[:p] + conv.messages[p + 2 * n:])


def _drop_until(conv: Conversation, prefix_tokens: int, target: int, step_units: int) -> Conversation:
    """Drop units `step_units` at a time until the context is ≤ target (or nothing is left)."""
    p = conv.pinned
    msgs = conv.messages
    total = context_tokens(conv, prefix_tokens)
    max_units = droppable_units(conv)
    dropped = 0
    while total > target and dropped < max_units:
        k = min(step_units, max_units - dropped)
        for j in range(2 * k):
            total -= msgs[p + 2 * dropped + j].tokens_est
        dropped += k
    return drop_units(conv, dropped)


def _event(kind: str, before: Conversation, after: Conversation, prefix_tokens: int,
           target: int) -> CompactionEvent:
    t_after = context_tokens(after, prefix_tokens)
    return CompactionEvent(kind, len(before.messages) - len(after.messages),
                           context_tokens(before, prefix_tokens), t_after, t_after <= target)


def clear_tool_results(conv: Conversation, keep_last: int, placeholder: str) -> Conversation:
    """Replace the content of every tool_result but the last `keep_last` (newest).
    The message being sent is never touched: the model is about to read it."""
    positions = [(i, j) for i, m in enumerate(conv.messages[:-1]) for j, b in enumerate(m.blocks)
                 if isinstance(b, ToolResultBlock)]
    keep_last = max(0, keep_last - len(conv.messages[-1].tool_result_ids))
    to_clear = positions[:max(0, len(positions) - keep_last)]
    if not to_clear:
        return conv
    msgs = list(conv.messages)
    by_msg: dict[int, list[int]] = {}
    for i, j in to_clear:
        by_msg.setdefault(i, []).append(j)
    changed = False
    for i, js in by_msg.items():
        blocks = list(msgs[i].blocks)
        for j in js:
            b = blocks[j]
            assert isinstance(b, ToolResultBlock)
            if b.content != placeholder:
                blocks[j] = replace(b, content=placeholder, tokens_est=-1)
                changed = True
        msgs[i] = Message(msgs[i].role, tuple(blocks))
    return conv.replace(tuple(msgs)) if changed else conv


def apply_policy(policy: Compaction, conv: Conversation, prefix_tokens: int) -> Outcome:
    """Run `policy` before a request is sent. Pure: returns the new history and what
    happened. A summarize policy over its threshold only *asks* for a summary (the
    agent sends it and then calls `finish_summary`)."""
    total = context_tokens(conv, prefix_tokens)
    if isinstance(policy, NoCompaction):
        return Outcome(conv)
    if isinstance(policy, PruneCompaction):
        return _prune(policy, conv, prefix_tokens, total)
    if isinstance(policy, BlockCompaction):
        if total <= policy.high_water_tokens:
            return Outcome(conv)
        new = _drop_until(conv, prefix_tokens, policy.low_water_tokens, 1)
        return _outcome("block", conv, new, prefix_tokens, policy.low_water_tokens)
    if isinstance(policy, ClearToolResultsCompaction):
        if total <= policy.trigger_tokens:
            return Outcome(conv)
        new = clear_tool_results(conv, policy.keep_last, policy.placeholder)
        if context_tokens(new, prefix_tokens) > policy.trigger_tokens:
            new = _drop_until(new, prefix_tokens, policy.trigger_tokens, 1)
        return _outcome("clear_tool_results", conv, new, prefix_tokens, policy.trigger_tokens)
    if isinstance(policy, SummarizeCompaction):
        return Outcome(conv, summary_needed=total > policy.threshold_tokens
                       and len(conv.messages) > 2)
    raise TypeError(f"unknown compaction policy {policy!r}")  # pragma: no cover


def _prune(policy: PruneCompaction, conv: Conversation, prefix_tokens: int,
           total: int) -> Outcome:
    """Once the budget has been exceeded, drop `drop_messages` every turn (more while
    still over budget): the per-turn sliding window of simple harnesses."""
    k = policy.drop_messages // 2
    if total <= policy.budget_tokens and not conv.pruning:
        return Outcome(conv)
    new = _drop_until(conv, prefix_tokens, policy.budget_tokens, k)
    if new is conv:
        new = drop_units(conv, k)
    new = Conversation(new.messages, new.pinned, pruning=True)
    if len(new.messages) == len(conv.messages):
        return Outcome(new)
    return Outcome(new, _event("prune", conv, new, prefix_tokens, policy.budget_tokens))


def _outcome(kind: str, before: Conversation, after: Conversation, prefix_tokens: int,
             target: int) -> Outcome:
    if after is before:
        return Outcome(before)
    return Outcome(after, _event(kind, before, after, prefix_tokens, target))


def summary_request_messages(conv: Conversation, prompt: str) -> tuple[Message, ...]:
    """The summary call's messages: the history with the instruction appended to the
    last user message (roles keep alternating, and the cached prefix is shared)."""
    last = conv.messages[-1]
    return (*conv.messages[:-1], Message(last.role, (*last.blocks, TextBlock(prompt))))


def finish_summary(policy: SummarizeCompaction, conv: Conversation, summary_text: str,
                   prefix_tokens: int) -> Outcome:
    """History := [summary] + the last `keep_messages` messages (at least the last
    unit, so the message being sent keeps its tool_use partner)."""
    keep = max(2, policy.keep_messages + (policy.keep_messages % 2))
    keep = min(keep, len(conv.messages) - 1 - ((len(conv.messages) - 1 - keep) % 2))
    tail = conv.messages[-keep:] if keep > 0 else ()
    if tail and tail[0].role != "assistant":
        tail = tail[1:]
    head = Message("user", (TextBlock(SUMMARY_HEAD + summary_text),))
    new = Conversation((head, *tail), pinned=1)
    return Outcome(new, _event("summarize", conv, new, prefix_tokens, policy.threshold_tokens))


def force_compaction(conv: Conversation, prefix_tokens: int, target: int,
                     policy_kind: str) -> Outcome:
    """The server said the prompt is too long: drop oldest units to `target`."""
    new = _drop_until(conv, prefix_tokens, target, 1)
    return _outcome(f"overflow:{policy_kind}", conv, new, prefix_tokens, target)
