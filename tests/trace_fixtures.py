"""Synthetic cc-traces in the spec's shape (agentic-coding-analysis TRACE_FORMAT.md).

A conversation grows by a reply and a user addition per request; ids are handed out
per trace in order of first appearance, so requests that re-send a prefix repeat its
ids. Optional: a sub-agent (own prefix, own ids), a compaction (the history after the
prefix replaced by a summary) and a micro-compaction (a head kept, the rest cleared).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

BS = 64


class _Ids:
    def __init__(self) -> None:
        self.next = 1

    def fresh(self, n: int) -> list[int]:
        out = list(range(self.next, self.next + n))
        self.next += n
        return out


def _requests(ids: _Ids, rng: random.Random, n: int, prefix: int, *, t0: float = 0.0,
              compact_at: int | None = None, clear_at: int | None = None,
              model: str = "claude-sonnet-4-20250514") -> list[dict[str, Any]]:
    """`n` requests of one context: hash ids cover full blocks of the prompt."""
    reqs: list[dict[str, Any]] = []
    tokens = prefix + rng.randint(800, 3000)
    chain = ids.fresh(tokens // BS)
    t = t0
    for k in range(n):
        if k:
            if k == compact_at:                       # summary replaces the history
                keep = prefix // BS
                tokens = keep * BS + rng.randint(2000, 4000)
                chain = chain[:keep] + ids.fresh(tokens // BS - keep)
            elif k == clear_at:                       # a head kept, the rest cleared
                keep = len(chain) * 2 // 3
                tokens = keep * BS + rng.randint(200, 600)
                chain = chain[:keep] + ids.fresh(tokens // BS - keep)
            else:
                grow = reqs[-1]["out"] + rng.randint(100, 4000)
                tokens += grow
                # the last block changes (cache_control moves), then new blocks follow
                chain = chain[:-1] + ids.fresh(tokens // BS - len(chain) + 1)
        out = rng.randint(50, 900)
        api = round(0.5 + out / 60, 2)
        stop = "tool_use" if k < n - 1 else "end_turn"
        reqs.append({"t": round(t, 3), "type": "s", "model": model, "in": tokens, "out": out,
                     "hash_ids": list(chain),
                     "input_types": ["text"] if k == 0 else ["tool_result"],
                     "output_types": ["text", "tool_use"], "stop": stop, "api_time": api,
                     "ttft": 0.4, "think_time": 0.0 if k == 0 else round(rng.uniform(0.5, 4), 2)})
        t += api + rng.uniform(0.5, 4)
    return reqs


def make_trace(requests: int = 40, *, seed: int = 1, subagent: bool = True,
               compact_at: int | None = 25, clear_at: int | None = 33) -> dict[str, Any]:
    rng = random.Random(seed)
    ids = _Ids()
    tool, system = 11_000, 3_000
    reqs = _requests(ids, rng, requests, tool + system, compact_at=compact_at,
                     clear_at=clear_at)
    if subagent:
        at = requests // 3
        sub = _requests(ids, rng, 8, 7_800 + 900, model="claude-haiku-4-5-20251001")
        reqs.insert(at + 1, {"t": reqs[at]["t"] + 1.0, "type": "subagent",
                             "agent_id": "agent_001", "subagent_type": "Explore",
                             "status": "completed", "models": ["claude-haiku-4-5-20251001"],
                             "tool_tokens": 7_800, "system_tokens": 900, "requests": sub})
    return {"id": f"synthetic_{seed}", "models": ["claude-sonnet-4-20250514"],
            "block_size": BS, "hash_id_scope": "local", "tool_tokens": tool,
            "system_tokens": system, "requests": reqs}


def write_trace(path: Path, **kw: Any) -> Path:
    path.write_text(json.dumps(make_trace(**kw)), encoding="utf-8")
    return path


def make_mooncake_tree(rows: int = 60, *, seed: int = 2, bs: int = 512) -> list[dict[str, Any]]:
    """Independent Mooncake requests (no session_id) whose prompts share prefixes as a
    tree: one of 4 system prompts (6 blocks), then maybe one of 5 shared documents
    (4 blocks), then a unique question (1–4 blocks and a partial one). Ids are chained:
    the same content after a different prefix gets a different id."""
    rng = random.Random(seed)
    table: dict[tuple[int, str], int] = {}

    def nid(parent: int, label: str) -> int:
        return table.setdefault((parent, label), len(table))

    out = []
    for i in range(rows):
        ids: list[int] = []
        sysp = rng.randrange(4)
        for b in range(6):
            ids.append(nid(ids[-1] if ids else -1, f"sys{sysp}.{b}"))
        if rng.random() < 0.6:
            doc = rng.randrange(5)
            for b in range(4):
                ids.append(nid(ids[-1], f"doc{doc}.{b}"))
        for b in range(rng.randint(1, 4)):
            ids.append(nid(ids[-1], f"q{i}.{b}"))
        partial = rng.randint(20, bs - 20)
        ids.append(nid(ids[-1], f"q{i}.tail"))
        out.append({"timestamp": i * 3000, "input_length": (len(ids) - 1) * bs + partial,
                    "output_length": rng.randint(20, 300), "hash_ids": ids})
    return out
