"""Resume under faults: a run whose server fails requests, cut and resumed, sends the very
same bytes for every remaining request as the uninterrupted run with the same faults.

Retries draw back-off jitter from their own stream, so they cannot shift the content or
tool arguments a resumed run regenerates without them (issue 15, item 1).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from pathlib import Path

import pandas as pd
import pytest

from simulator.endpoints.base import EndpointError, ErrorType, LLMRequest, LLMResponse, Timing, Usage
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario import content
from simulator.scenario.model import RetryPolicy
from simulator.session.agent import backoff_delay
from simulator.session.conversation import TextBlock
from tests.conftest import run_scenario, small_scenario, turns_of
from tests.reliability.test_reliability_resume import SAME, cut

FAULTS = (ErrorType.RATE_LIMITED, ErrorType.OVERLOADED, ErrorType.SERVER, ErrorType.DISCONNECT)


class KeyedFaults:
    """A server whose answers depend only on the request bytes: the first time it sees a
    request it fails it with probability `p` (kind and reply text seeded by the bytes), so
    an interrupted and a resumed run meet the same faults. Records what was sent."""

    name = "keyed-faults"
    simulated = True

    def __init__(self, p: float = 0.3) -> None:
        self.p = p
        self.seen: set[str] = set()
        self.sent: dict[str, list[str]] = {}      # session → bodies of successful requests
        self.failed = 0

    def describe(self) -> dict[str, object]:
        return {"kind": self.name, "simulated": True}

    async def aclose(self) -> None:
        return None

    async def send(self, request: LLMRequest) -> LLMResponse:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        body = json.dumps(request.to_api_kwargs(), sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(body.encode()).hexdigest()
        rng = random.Random(digest)
        await asyncio.sleep(0.05)
        if digest not in self.seen:
            self.seen.add(digest)
            if rng.random() < self.p:
                self.failed += 1
                kind = rng.choice(FAULTS)
                raise EndpointError(kind, f"injected {kind.value}", timing=Timing(t0, done=loop.time()))
        self.sent.setdefault(request.session_id, []).append(body)
        n = request.max_tokens
        text = content.synth_text("code", n, rng)
        await asyncio.sleep(n / 200)
        t1 = loop.time()
        return LLMResponse((TextBlock(text, n),), "max_tokens", Usage(n, n, 0, 0),
                           Timing(t0, t0 + 0.05, t1, t1, n), n)


RETRY = {"max_attempts": 8, "backoff_s": 0.5, "backoff_max_s": 4.0, "jitter": 0.5}


@pytest.mark.parametrize("history", ["live", "scripted"])
def test_resume_under_faults_sends_identical_histories(write_scenario, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                       history: str) -> None:
    path = write_scenario(small_scenario(sessions=2, turns=24, history=history, retry=RETRY))
    full_ep = KeyedFaults()
    full = turns_of(run_scenario(path, tmp_path / "a", endpoint=full_ep))
    assert full_ep.failed >= 5 and (~full.ok).sum() == full_ep.failed

    part = run_scenario(path, tmp_path / "b", endpoint=KeyedFaults())
    n = len(full)
    cut(part.run_dir, n // 2)
    resumed_ep = KeyedFaults()
    res = execute(RunSpec("", out_dir=tmp_path / "b", show_progress=False,
                          resume_dir=part.run_dir), echo=lambda s: None, endpoint=resumed_ep)
    assert res.status == "completed"
    merged = turns_of(res)

    # Every request the resumed part sent is byte-identical to the uninterrupted run's
    # request at the same place (the tail of each session's sequence).
    compared = 0
    for sid, bodies in resumed_ep.sent.items():
        want = full_ep.sent[sid]
        assert bodies == want[len(want) - len(bodies):]
        compared += len(bodies)
    assert compared >= 10
    ok_full = full[full.ok][SAME].sort_values(SAME[:3]).reset_index(drop=True)
    ok_merged = merged[merged.ok][SAME].sort_values(SAME[:3]).reset_index(drop=True)
    pd.testing.assert_frame_equal(ok_full, ok_merged)
    assert not merged.duplicated([*SAME[:3], "attempt"]).any()


def test_backoff_delay_is_pure_and_bounded() -> None:
    p = RetryPolicy(max_attempts=10, backoff_s=1.0, backoff_max_s=8.0, jitter=0.25)
    assert backoff_delay(p, 1, 0.5) == 1.0
    assert backoff_delay(p, 3, 0.5) == 4.0
    assert backoff_delay(p, 9, 0.5) == 8.0                 # capped
    assert backoff_delay(p, 10_000, 0.5) == 8.0            # no overflow
    assert backoff_delay(p, 1, 0.0) == 0.75 and backoff_delay(p, 1, 1.0) == 1.25
    assert backoff_delay(p, 1, 0.5, retry_after_s=30.0) == 30.0


@pytest.mark.slow
def test_resume_under_the_twins_fault_injector(tmp_path: Path) -> None:
    """The same over HTTP against the twin's own fault injector (429, 529, 500, streams
    cut mid-way): the faults differ between the runs (drawn in arrival order), yet every
    turn's context and reply are the same in the uninterrupted and the resumed run."""
    from tests.reliability_twin import TwinThread, soak_scenario, write_yaml
    path = write_yaml(tmp_path / "s.yaml", soak_scenario(sessions=3, turns=40))
    faults = "429:0.05,529:0.05,500:0.05,disconnect:0.05"
    with TwinThread(faults=faults) as twin:
        full = turns_of(run_scenario(path, tmp_path / "a", endpoint_url=twin.url))
        part = run_scenario(path, tmp_path / "b", endpoint_url=twin.url)
        cut(part.run_dir, len(full) // 2)
        res = execute(RunSpec("", out_dir=tmp_path / "b", show_progress=False,
                              resume_dir=part.run_dir), echo=lambda s: None)
    assert res.status == "completed" and (~full.ok).sum() >= 5
    merged = turns_of(res)
    # (The compaction marker sits on a turn's first attempt, so it moves with the faults.)
    cols = [c for c in SAME if not c.startswith("compaction")]
    a = full[full.ok][cols].sort_values(cols[:3]).reset_index(drop=True)
    b = merged[merged.ok][cols].sort_values(cols[:3]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)

    def replies(run_dir: Path) -> dict[tuple[str, int, str], object]:
        rows = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
        return {(r["session"], r["turn"], r["kind"]): r["content"] for r in rows if "turn" in r}

    assert replies(tmp_path / "a" / full_dir(tmp_path / "a")) == replies(part.run_dir)


def full_dir(out: Path) -> str:
    return next(out.iterdir()).name
