"""The trace → replay builder's bookkeeping, and incremental block hashes."""

from __future__ import annotations

import json
import random
from array import array
from pathlib import Path
from typing import Any, Literal

import pytest

from simulator.importers.trace_build import (
    HashScope,
    SpanTable,
    TraceRequest,
    TraceSession,
    common_prefix,
    drop_kind,
    hit_tokens,
    replay_sessions,
)
from simulator.protocol.messages import (
    BLOCK_OVERHEAD_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    Message,
    Prefix,
    TextBlock,
)
from simulator.records.blocks import BlockRecorder, chain
from simulator.util import tokens


def _planned(calls: list[dict[str, Any]], prefix: int) -> list[int]:
    """Each call's context as the replay agent builds it, by the client's estimate."""
    hist: list[int] = []
    out = []
    for c in calls:
        point = c.get("compaction")
        if point is not None:
            hist = hist[: point["keep_messages"]]
        hist.append(MESSAGE_OVERHEAD_TOKENS
                    + sum(BLOCK_OVERHEAD_TOKENS + b["tokens"] for b in c["user"]))
        out.append(prefix + sum(hist))
        hist.append(MESSAGE_OVERHEAD_TOKENS
                    + sum(BLOCK_OVERHEAD_TOKENS + b["tokens"] for b in c["assistant"]))
    return out


def _random_session(rng: random.Random, n: int) -> TraceSession:
    s = TraceSession("x", 64, 9000)
    ins, blocks = 12000, 12000 // 64
    for k in range(n):
        shared = blocks
        if k and rng.random() < 0.1:                     # a drop
            shared = rng.choice([9000 // 64, blocks // 3])
            ins = max(shared * 64, 9000) + rng.randint(500, 5000)
        elif k:
            ins += rng.randint(200, 6000)
            shared = blocks - 1
        blocks = ins // 64
        s.requests.append(TraceRequest(float(k), ins, rng.randint(20, 2000), blocks,
                                       shared if k else 0, 0, stop="tool_use"))
    return s


@pytest.mark.parametrize("seed", range(8))
def test_planned_sizes_are_the_recorded_ones(seed: int) -> None:
    rng = random.Random(seed)
    s = _random_session(rng, 60)
    drops: dict[str, int] = {}
    calls = replay_sessions([s], None, SpanTable(), drops)[0]["calls"]
    assert _planned(calls, s.prefix_tokens) == [r.in_tokens for r in s.requests]
    assert all(c["assistant"][0]["tokens"] <= r.out_tokens for c, r in zip(calls, s.requests,
                                                                          strict=True))
    kept = [c["compaction"]["keep_messages"] for c in calls if "compaction" in c]
    assert all(m % 2 == 0 for m in kept)                 # the kept head ends on a reply
    assert sum(drops.values()) == len(kept)


def test_drop_kinds_and_prefix_matching() -> None:
    assert drop_kind(False, True) == "summarize"
    assert drop_kind(True, True) == "clear_tool_results"
    assert drop_kind(False, False) == "restart"
    assert drop_kind(True, False) == "rewrite"
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    h = HashScope()
    assert h.observe([1, 2, 3]) == 0
    assert h.observe([1, 2, 9]) == 2 and h.observe([1, 2, 9, 10]) == 3


def test_hit_tokens_spec_blocks_and_foreign_tokenisation() -> None:
    assert hit_tokens(3, 4, 4 * 64 + 10, 64) == 192          # cc-traces: full blocks
    assert hit_tokens(4, 4, 4 * 64 + 10, 64) == 256
    assert hit_tokens(2, 2, 1000, 512) == 1000               # Mooncake: a partial tail
    # ids over another tokenisation than `in` (an endurance export): the share of `in`
    assert hit_tokens(99, 100, 100 * 64 * 11 // 10, 64) == round(7040 * 0.99)


def _from_scratch(texts: list[str], bs: int) -> list[str]:
    flat = array("I")
    for t in texts:
        flat.extend(tokens.encode(t))
    out: list[str] = []
    prev = ""
    for j in range(0, len(flat) - bs + 1, bs):
        prev = chain(prev, flat[j:j + bs])
        out.append(prev)
    return out


def test_incremental_block_hashes_equal_a_full_recompute(tmp_path: Path) -> None:
    rec = BlockRecorder(tmp_path / "blocks.jsonl", block_size=16)
    prefix = Prefix("system prompt " * 20, (), 60, 0)
    rng = random.Random(3)
    msgs: list[Message] = []
    chains: list[str] = []
    for k in range(12):
        if k == 7:
            msgs = msgs[:2]                               # a compaction keeps the head
        role: Literal["user", "assistant"] = "user" if len(msgs) % 2 == 0 else "assistant"
        msgs.append(Message(role, (TextBlock(" ".join(str(rng.random()) for _ in range(30))),)))
        rec.observe("s0", prefix, tuple(msgs), "[]")
        row = json.loads((tmp_path / "blocks.jsonl").read_text().splitlines()[-1])
        chains = chains[: row["keep"]] + row["new"]
        want = _from_scratch(["[]", prefix.system, *(m.serialize() for m in msgs)], 16)
        assert chains == want
