"""A stepped ramp in one run, end to end on the twin and on scripted servers: steps held
and judged, the summary's recomputation equal to the live verdicts, a step that never
steadies, a server that degrades mid-ramp, Ctrl-C and resume, SLOs that pass at the
bound, and the options that cannot combine."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from simulator.analysis.slo import parse_slo
from simulator.cli import main
from simulator.endpoints.base import LLMRequest, LLMResponse
from simulator.endpoints.fake import FakeEndpoint
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.sweep.step_ramp import step_ramp
from simulator.sweep.tiers import ramp_tiers
from tests.size_refusals import RAMP_COMBINATIONS

ROOT = Path(__file__).resolve().parents[2]
TEAM = str(ROOT / "scenarios" / "claude-code-team.yaml")


def _events(run_dir: Path) -> list[dict[str, Any]]:
    """The judged steps (a live view's `ramp_hold` events, one per step held, apart)."""
    rows = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e for e in rows if e.get("event") == "ramp_step"]


def _summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return data


@pytest.mark.slow
def test_run_ramp_holds_each_step_and_the_summary_recomputes_the_live_verdicts(
        tmp_path: Path) -> None:
    plan = step_ramp((1, 2, 4), 40.0, 600.0,
                     ramp_tiers((parse_slo("per_session_tok_s>=45"),), ()))
    res = execute(RunSpec(TEAM, ["turns=4"], out_dir=tmp_path, show_progress=False,
                          ramp=plan), echo=lambda _: None)
    assert res.status == "completed", res.outcome.reason
    live = _events(res.run_dir)
    steps = res.summary["ramp"]["steps"]
    assert [s["sessions"] for s in steps] == [e["sessions"] for e in live]
    for e, s in zip(live, steps, strict=True):
        assert s["passed"] == e["passed"] and s["steady"] is True
        assert s["window_end_s"] - s["window_start_s"] == pytest.approx(40.0)
        assert s["window_start_s"] >= s["started_s"]
        for key in ("window_per_session_tok_s", "window_ttft_p95_s", "achieved_sessions"):
            assert s["figures"][key] == pytest.approx(e["figures"][key], rel=1e-9)
        assert s["figures"]["achieved_sessions"] == pytest.approx(s["sessions"], rel=0.1)
    # windows follow one another: each step starts after the last one was judged
    starts = [s["started_s"] for s in steps]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    tier = res.summary["ramp"]["tiers"][0]
    assert tier["sessions"] in {0, 1, 2, 4} and tier["name"] == "SLOs"
    assert "requested_sessions" not in res.summary    # a ramp has no whole-run window


@pytest.mark.slow
def test_size_ramp_writes_its_answer(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["size", TEAM, "--turns", "4", "--ramp", "1,2,4",
                                    "--hold", "30s", "--slo", "per_session_tok_s>=45",
                                    "--no-compare", "--json", "--out", str(tmp_path)])
    assert res.exit_code in (0, 1), res.output
    data = json.loads(res.stdout)
    tier = data["ramp"]["tiers"][0]
    assert res.exit_code == (0 if tier["sessions"] > 0 else 1)
    assert data["simulated"] is True and data["seconds"] > 0 and data["compared"] == []
    (folder,) = tmp_path.glob("size-*")
    assert json.loads((folder / "size.json").read_text())["ramp"]["tiers"] == \
        data["ramp"]["tiers"]


def test_ramp_options_that_cannot_combine_are_refused_in_one_line(tmp_path: Path) -> None:
    for case in RAMP_COMBINATIONS:              # each with --slo ttft_p95_s<=5
        r = CliRunner().invoke(main, ["size", TEAM, *case.args, "--out", str(tmp_path / "bad")])
        assert r.exit_code == 2 and case.needles[0] in r.stderr \
            and "Traceback" not in r.output, (case.args, r.output)
    assert not (tmp_path / "bad").exists()
    r = CliRunner().invoke(main, ["run", TEAM, "--ramp", "1,2", "--workers", "2",
                                  "--endpoint", "http://127.0.0.1:9", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "one process" in r.stderr


class Degrading(FakeEndpoint):
    """Fast until `at_s` (loop time), then ten times slower: a server that degrades."""

    def __init__(self, at_s: float) -> None:
        super().__init__(ttft_s=0.2, tok_s=200.0)
        self.at_s = at_s

    async def send(self, request: LLMRequest) -> LLMResponse:
        if asyncio.get_running_loop().time() >= self.at_s:
            self.tok_s, self.ttft_s = 20.0, 2.0
        return await super().send(request)


def _fake_ramp(tmp_path: Path, endpoint: Any, steps: tuple[int, ...], slo: str,
               hold_s: float = 30.0, max_step_s: float = 600.0) -> Any:
    plan = step_ramp(steps, hold_s, max_step_s, ramp_tiers((parse_slo(slo),), ()))
    return execute(RunSpec(TEAM, ["turns=4"], out_dir=tmp_path, show_progress=False,
                           ramp=plan), echo=lambda _: None, endpoint=endpoint)


@pytest.mark.slow
def test_a_server_that_degrades_mid_ramp_fails_the_steps_after_and_keeps_every_row(
        tmp_path: Path) -> None:
    res = _fake_ramp(tmp_path, Degrading(at_s=150.0), (1, 2, 4, 8), "window_itl_p50_s<=0.02")
    assert res.status == "completed", res.outcome.reason
    steps = res.summary["ramp"]["steps"]
    fast = [s for s in steps if s["window_end_s"] and s["window_end_s"] < 150.0]
    slow = [s for s in steps if s["window_start_s"] and s["window_start_s"] >= 150.0]
    assert fast and slow and all(s["passed"] == [True] for s in fast)
    assert all(s["passed"] == [False] for s in slow)
    tier = res.summary["ramp"]["tiers"][0]
    assert tier["sessions"] < max(s["sessions"] for s in fast) or tier["confirmed"] is False
    journal = (res.run_dir / "turns.jsonl").read_text().splitlines()
    assert res.summary["requests"] == len(journal)      # every attempt kept


def test_a_step_that_never_steadies_is_reported_and_never_passes(tmp_path: Path) -> None:
    # replies take minutes: the step's transient cannot end within max_step_s
    slow = FakeEndpoint(ttft_s=400.0, tok_s=100.0)
    res = _fake_ramp(tmp_path, slow, (1, 2), "ttft_p95_s<=1000", hold_s=60.0,
                     max_step_s=300.0)
    assert res.status == "completed", res.outcome.reason
    first = res.summary["ramp"]["steps"][0]
    assert first["steady"] is False and first["passed"] == [False]
    assert "no steady window within 300 s" in first["reason"]
    assert res.summary["ramp"]["tiers"][0]["sessions"] == 0


@pytest.mark.slow
def test_slos_that_pass_at_the_bound_answer_the_bound(tmp_path: Path) -> None:
    res = _fake_ramp(tmp_path, FakeEndpoint(ttft_s=0.1, tok_s=500.0), (1, 2, 3),
                     "window_ttft_p95_s<=5")
    tier = res.summary["ramp"]["tiers"][0]
    assert tier["sessions"] == 3 and tier["binding_kind"] == "max_sessions"
    assert tier["confirmed"] is True
    assert [s["phase"] for s in res.summary["ramp"]["steps"]] == ["ramp", "ramp", "ramp",
                                                                  "confirm"]


class InterruptAfter(FakeEndpoint):
    """Sends this process SIGINT (Ctrl-C) once `n` requests have been made."""

    def __init__(self, n: int) -> None:
        super().__init__(ttft_s=0.2, tok_s=200.0)
        self.n = n

    async def send(self, request: LLMRequest) -> LLMResponse:
        if len(self.requests) + 1 == self.n:
            os.kill(os.getpid(), signal.SIGINT)
        return await super().send(request)


@pytest.mark.slow
def test_ctrl_c_mid_ramp_keeps_the_judged_steps_and_resume_continues(tmp_path: Path) -> None:
    first = _fake_ramp(tmp_path, InterruptAfter(60), (1, 2, 4, 8), "window_ttft_p95_s<=5")
    assert first.status == "interrupted"
    judged = _events(first.run_dir)
    assert judged, "steps judged before the interrupt are journaled"
    # the interrupted run's summary reports the steps judged so far
    assert [s["sessions"] for s in first.summary["ramp"]["steps"]] == \
        [e["sessions"] for e in judged]
    rows_before = len((first.run_dir / "turns.jsonl").read_text().splitlines())
    again = execute(RunSpec("", resume_dir=first.run_dir, show_progress=False),
                    echo=lambda _: None, endpoint=FakeEndpoint(ttft_s=0.2, tok_s=200.0))
    assert again.status == "completed", again.outcome.reason
    steps = again.summary["ramp"]["steps"]
    assert [s["sessions"] for s in steps[:len(judged)]] == [e["sessions"] for e in judged]
    assert [s["sessions"] for s in steps if s["phase"] == "ramp"] == [1, 2, 4, 8]
    assert len((first.run_dir / "turns.jsonl").read_text().splitlines()) > rows_before
    assert again.summary["ramp"]["tiers"][0]["sessions"] == 8
