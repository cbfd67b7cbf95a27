"""Closed-loop twin runs for "should I turn speculation on?": N sessions of agentic turns
on one simulated engine, with the twin's own content (code edits that copy the prompt,
or fresh text), reporting per-session decode rate and the speculation telemetry.

Used by `benchmarks/spec_whatif.py` (the what-if table) and engine tests. Calibration
no longer runs on it: its points and rows are `endurance run`s of scenarios
(`simulator/sweep/calibration.py`), whose content and records are the product's. Pure
simulation: no I/O, deterministic in its arguments.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from simulator.twin.core.config import engine_config
from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import EngineRequest
from simulator.twin.model.perf_model import RooflinePerfModel
from simulator.twin.serve import textgen
from simulator.util import tokens as tok


@dataclass(frozen=True, slots=True)
class WhatIf:
    """Per-session decode rate (tok/s, tokens after the first ÷ time after the first,
    mean over sessions) and speculation telemetry of one closed-loop run."""

    per_session_tok_s: float
    sessions: int
    tokens_per_pass: float          # tokens emitted per forward pass, per sequence
    drafts_per_token: float         # drafts proposed per emitted token
    accepted_per_draft: float       # vLLM's mean accepted length − 1
    acceptance: float               # accepted ÷ draft tokens
    accepted_per_pos: tuple[int, ...]
    throughput_tok_s: float = 0.0   # all output tokens ÷ simulated time (queueing included)
    steps: int = 0                  # engine steps (forward passes of the batch)

    @property
    def aggregate_tok_s(self) -> float:
        """N × per-session rate: the calibration's published 'aggregate'."""
        return self.per_session_tok_s * self.sessions


def _fresh(rng: random.Random, n: int) -> list[int]:
    text = textgen._assemble(rng, n, [], 0.0)
    ids: list[int] = tok.encoding().encode_ordinary(text)
    return ids[:n]


def run_sessions(pm: RooflinePerfModel, sessions: int, *, turns: int = 3,
                 code_edit: bool = True, repeat_fraction: float = 0.9,
                 system_tokens: int = 2500, tool_tokens: int = 1500,
                 reply_tokens: int = 900, seed: int = 1) -> WhatIf:
    """`sessions` sessions back to back (no think time): each turn appends a tool result
    (fresh code, the file the reply edits) and the twin's reply to the history."""
    rng = random.Random(seed)
    engine = TwinEngine(pm, engine_config(pm))
    system = _fresh(random.Random(seed ^ 0x5EED), system_tokens)
    prompts = {s: list(system) for s in range(sessions)}
    done = dict.fromkeys(range(sessions), 0)
    toks = dict.fromkeys(range(sessions), 0)
    secs = dict.fromkeys(range(sessions), 0.0)
    passes = emitted = 0

    def submit(s: int) -> None:
        prompts[s] += _fresh(random.Random(rng.random()), tool_tokens)
        _, ids = textgen.plan_reply(prompts[s], reply_tokens, seed=rng.randrange(1 << 30),
                                    natural_tokens=reply_tokens, code_edit=code_edit,
                                    repeat_fraction=repeat_fraction)
        engine.submit(EngineRequest(f"s{s}t{done[s]}", tuple(prompts[s]), tuple(ids),
                                    engine.now))
        prompts[s] += ids

    for s in range(sessions):
        submit(s)
    while not engine.is_idle():
        for rid in engine.run_until(engine.now + 3600.0):
            r = engine.pop_result(rid)
            s = int(rid[1:].split("t")[0])
            if len(r.token_times) > 1:
                toks[s] += len(r.token_times) - 1
                secs[s] += r.token_times[-1] - r.token_times[0]
            passes += r.decode_steps
            emitted += len(r.token_times)
            done[s] += 1
            if done[s] < turns:
                submit(s)
    c = engine.counters
    rate = sum(toks[s] / secs[s] for s in range(sessions) if secs[s] > 0) / sessions
    return WhatIf(rate, sessions, emitted / max(passes, 1),
                  c.spec_drafts / max(c.generation_tokens, 1),
                  c.spec_accepted_tokens / max(c.spec_drafts, 1),
                  c.spec_accepted_tokens / max(c.spec_draft_tokens, 1),
                  tuple(c.spec_accepted_per_pos),
                  c.generation_tokens / engine.now if engine.now > 0 else 0.0, c.steps)
