"""A deterministic multi-turn agent workload driven straight into a `TwinEngine`.

Sessions share a system prompt; each turn's prompt extends the previous turn's prompt
and reply, and the next turn arrives a think/tool gap after the reply ends — the shape
whose idle KV a host tier keeps. Used by the tier tests and the tier-off golden test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import EngineRequest, RequestResult


@dataclass(frozen=True)
class Workload:
    sessions: int = 12
    turns: int = 5
    system_tokens: int = 3000
    first_user_tokens: int = 4000
    turn_tokens: int = 1500          # tool output + user text added per turn
    reply_tokens: int = 60
    gap_s: float = 20.0              # tool call / think time between turns
    stagger_s: float = 0.5           # session start offsets
    seed: int = 7


@dataclass(frozen=True)
class Turn:
    session: int
    turn: int
    arrival: float
    gap_before_s: float              # idle time since the session's previous reply
    result: RequestResult


def _toks(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(1, 50_000) for _ in range(n)]


def run_workload(eng: TwinEngine, w: Workload, step_limit: int = 2_000_000) -> list[Turn]:
    """Run every session's turns to completion; returns one `Turn` per request."""
    rng = random.Random(w.seed)
    system = _toks(rng, w.system_tokens)
    prompts = [system + _toks(rng, w.first_user_tokens) for _ in range(w.sessions)]
    meta: dict[str, tuple[int, int, float, float, list[int]]] = {}

    def submit(sess: int, turn: int, t: float, gap: float) -> None:
        rid, plan = f"s{sess}-t{turn}", _toks(rng, w.reply_tokens)
        meta[rid] = (sess, turn, t, gap, plan)
        eng.submit(EngineRequest(rid, prompts[sess], plan, t))

    for i in range(w.sessions):
        submit(i, 0, i * w.stagger_s, 0.0)
    out: list[Turn] = []
    for _ in range(step_limit):
        if eng.is_idle():
            return out
        for rid in eng.run_until(float("inf")):
            sess, turn, arrival, gap, plan = meta.pop(rid)
            res = eng.pop_result(rid)
            out.append(Turn(sess, turn, arrival, gap, res))
            if turn + 1 < w.turns:
                prompts[sess] = prompts[sess] + plan + _toks(rng, w.turn_tokens)
                submit(sess, turn + 1, (res.finished or eng.now) + w.gap_s, w.gap_s)
    raise AssertionError("workload did not drain")
