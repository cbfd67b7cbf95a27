"""Compaction policies: pure, structure-preserving, and they reach their target."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.scenario.model import (
    BlockCompaction,
    ClearToolResultsCompaction,
    NoCompaction,
    PruneCompaction,
    SummarizeCompaction,
)
from simulator.session import compaction as comp
from simulator.session.conversation import (
    Conversation,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    validate_structure,
)

PREFIX = 500


def history(sizes: list[tuple[int, int, bool]]) -> Conversation:
    """[task, (assistant with optional tool_use, user with its tool_result or prompt)…]."""
    msgs = [Message("user", (TextBlock("task", 50),))]
    for i, (a_tok, u_tok, tool) in enumerate(sizes):
        if tool:
            tid = f"t{i}"
            msgs.append(Message("assistant", (TextBlock("x", a_tok),
                                              ToolUseBlock(tid, "Read", "{}", 10))))
            msgs.append(Message("user", (ToolResultBlock(tid, f"r{i}", False, "read", u_tok),)))
        else:
            msgs.append(Message("assistant", (TextBlock("x", a_tok),)))
            msgs.append(Message("user", (TextBlock(f"p{i}", u_tok),)))
    return Conversation(tuple(msgs))


units = st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 3000), st.booleans()),
                 min_size=0, max_size=40)
targets = st.integers(600, 40_000)


def _check_invariants(before: Conversation, out: comp.Outcome, target: int) -> None:
    after = out.conversation
    assert validate_structure(after.messages) is None
    assert after.messages[0] is before.messages[0]            # pinned task kept
    assert after.messages[-1] is before.messages[-1]          # message being sent kept
    total = comp.context_tokens(after, PREFIX)
    if out.event is not None:
        assert out.event.reached_target == (total <= target)
        assert out.event.tokens_after == total
        # Either under target, or nothing more could be dropped.
        assert total <= target or comp.droppable_units(after) == 0


@settings(max_examples=200, deadline=None)
@given(units, targets, st.integers(1, 4))
def test_prune_invariants(sizes: list[tuple[int, int, bool]], budget: int, k: int) -> None:
    conv = history(sizes)
    out = comp.apply_policy(PruneCompaction(kind="prune", budget_tokens=budget,
                                            drop_messages=2 * k), conv, PREFIX)
    _check_invariants(conv, out, budget)
    if comp.context_tokens(conv, PREFIX) <= budget:
        assert out.event is None and out.conversation is conv
    else:
        assert out.conversation.pruning


def test_prune_keeps_pruning_every_turn_once_started() -> None:
    conv = history([(400, 400, True)] * 10)
    policy = PruneCompaction(kind="prune", budget_tokens=comp.context_tokens(conv, PREFIX) - 1)
    out = comp.apply_policy(policy, conv, PREFIX)
    assert out.conversation.pruning and out.event is not None
    # Now under budget, yet the next turn drops the two oldest messages again.
    nxt = out.conversation.append(*history([(10, 10, False)]).messages[1:])
    again = comp.apply_policy(policy, nxt, PREFIX)
    assert again.event is not None and again.event.messages_removed == 2


@settings(max_examples=200, deadline=None)
@given(units, targets, st.integers(100, 20_000))
def test_block_invariants(sizes: list[tuple[int, int, bool]], high: int, gap: int) -> None:
    low = max(1, high - gap)
    conv = history(sizes)
    policy = BlockCompaction(kind="block", high_water_tokens=high, low_water_tokens=min(low, high - 1))
    out = comp.apply_policy(policy, conv, PREFIX)
    _check_invariants(conv, out, policy.low_water_tokens)
    fired = comp.context_tokens(conv, PREFIX) > high
    assert (out.event is not None) == (fired and comp.droppable_units(conv) > 0)


@settings(max_examples=200, deadline=None)
@given(units, targets, st.integers(0, 5))
def test_clear_tool_results_invariants(sizes: list[tuple[int, int, bool]], trigger: int,
                                       keep: int) -> None:
    conv = history(sizes)
    policy = ClearToolResultsCompaction(kind="clear_tool_results", trigger_tokens=trigger,
                                        keep_last=keep)
    out = comp.apply_policy(policy, conv, PREFIX)
    _check_invariants(conv, out, trigger)
    if out.event is not None:
        # Older results beyond the newest `keep` are cleared; the message being sent
        # (which the model is about to read) never is.
        last = out.conversation.messages[-1]
        older = [b for m in out.conversation.messages[:-1] for b in m.blocks
                 if isinstance(b, ToolResultBlock)]
        kept = [b for b in older if b.content != policy.placeholder]
        assert len(kept) <= max(0, keep - len(last.tool_result_ids))
        assert all(b.content != policy.placeholder for b in last.blocks
                   if isinstance(b, ToolResultBlock))


def test_prune_drops_two_messages_every_turn_once_over_budget() -> None:
    conv = history([(400, 400, True)] * 10)
    policy = PruneCompaction(kind="prune", budget_tokens=comp.context_tokens(conv, PREFIX) - 1)
    out = comp.apply_policy(policy, conv, PREFIX)
    assert out.event is not None and out.event.messages_removed == 2
    assert out.conversation.messages[1] is conv.messages[3]


def test_block_drops_down_to_low_water_in_one_go() -> None:
    conv = history([(500, 500, True)] * 30)            # ~31k tokens
    policy = BlockCompaction(kind="block", high_water_tokens=25_000, low_water_tokens=15_000)
    out = comp.apply_policy(policy, conv, PREFIX)
    assert out.event is not None
    assert out.event.tokens_after <= 15_000 < out.event.tokens_before
    assert out.event.messages_removed % 2 == 0 and out.event.messages_removed >= 30
    assert comp.apply_policy(policy, out.conversation, PREFIX).event is None


def test_none_never_changes_anything() -> None:
    conv = history([(5000, 5000, True)] * 10)
    assert comp.apply_policy(NoCompaction(), conv, PREFIX).conversation is conv


def test_summarize_asks_then_replaces_history_keeping_tool_pairs() -> None:
    conv = history([(500, 500, True)] * 10)
    policy = SummarizeCompaction(kind="summarize", threshold_tokens=5000, keep_messages=3)
    out = comp.apply_policy(policy, conv, PREFIX)
    assert out.summary_needed and out.event is None
    req = comp.summary_request_messages(conv, policy.prompt)
    assert req[:-1] == conv.messages[:-1] and validate_structure(req) is None
    done = comp.finish_summary(policy, conv, "the summary", PREFIX)
    msgs = done.conversation.messages
    assert validate_structure(msgs) is None
    assert "the summary" in msgs[0].text() and msgs[-1] is conv.messages[-1]
    assert len(msgs) == 1 + 4          # keep 3 → rounded up to whole units
    assert done.event is not None and done.event.kind == "summarize"


def test_force_compaction_on_overflow() -> None:
    conv = history([(1000, 1000, True)] * 20)
    out = comp.force_compaction(conv, PREFIX, 10_000, "none")
    assert out.event is not None and out.event.kind == "overflow:none"
    assert comp.context_tokens(out.conversation, PREFIX) <= 10_000
    assert validate_structure(out.conversation.messages) is None
