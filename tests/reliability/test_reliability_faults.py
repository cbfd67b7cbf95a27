"""Faults at run level: retries per the scenario policy, failed sessions, the failure
threshold, context overflow → compaction, and endpoints that are not (usable) Anthropic APIs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.endpoints.base import EndpointError, ErrorType, LLMRequest, LLMResponse
from simulator.endpoints.fake import FakeEndpoint
from tests.conftest import run_scenario, small_scenario, turns_of
from tests.reliability_twin import TwinThread, canned, soak_scenario, write_yaml

RETRY = {"max_attempts": 4, "backoff_s": 2.0, "backoff_max_s": 30.0, "jitter": 0.2}


def _gaps(df: pd.DataFrame) -> list[float]:
    """Idle seconds between the end of each failed attempt and the next attempt."""
    t = df.sort_values("started_mono_s")
    return [float(b.started_mono_s - (a.started_mono_s + a.e2e_s))
            for (_, a), (_, b) in zip(t.iloc[:-1].iterrows(), t.iloc[1:].iterrows(), strict=True)
            if not a.ok]


@pytest.mark.parametrize("fault", [ErrorType.RATE_LIMITED, ErrorType.OVERLOADED,
                                   ErrorType.SERVER, ErrorType.PROXY_CUTOFF, ErrorType.TIMEOUT,
                                   ErrorType.CONNECTION, ErrorType.DISCONNECT,
                                   ErrorType.STREAM_ERROR, ErrorType.MALFORMED])
def test_retryable_faults_are_retried_and_every_attempt_recorded(write_scenario, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                 fault: ErrorType) -> None:
    path = write_scenario(small_scenario(turns=3, retry=RETRY))
    df = turns_of(run_scenario(path, tmp_path, endpoint=FakeEndpoint(faults=[fault, fault])))
    assert list(df.attempt) == [1, 2, 3, 1, 1] and list(df.ok) == [False, False, True, True, True]
    assert set(df[~df.ok].error_type) == {fault.value} and df.e2e_s.notna().all()
    # Backoff doubles from backoff_s, within ± jitter.
    first, second = _gaps(df)
    assert 2.0 * 0.8 <= first <= 2.0 * 1.2 and 4.0 * 0.8 <= second <= 4.0 * 1.2


def test_retry_after_is_honoured(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(small_scenario(turns=2, retry={**RETRY, "backoff_s": 0.1}))
    ep = FakeEndpoint(faults=[ErrorType.RATE_LIMITED], retry_after_s=7.0)
    df = turns_of(run_scenario(path, tmp_path, endpoint=ep))
    assert _gaps(df)[0] >= 7.0


class _FailOne(FakeEndpoint):
    """Every request of one session fails with a 500; the others are served."""

    async def send(self, request: LLMRequest) -> LLMResponse:
        if request.session_id == "s0001":
            raise EndpointError(ErrorType.SERVER, "HTTP 500: boom", status=500)
        return await super().send(request)


def test_a_session_that_exhausts_its_retries_fails_alone(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(small_scenario(sessions=3, turns=5, retry={**RETRY, "backoff_s": 0.1}))
    res = run_scenario(path, tmp_path, endpoint=_FailOne())
    assert res.status == "completed" and res.outcome.failed_sessions == ["s0001"]
    df = turns_of(res)
    bad = df[df.session_id == "s0001"]
    assert list(bad.attempt) == [1, 2, 3, 4] and not bad.ok.any()
    assert df[df.session_id != "s0001"].ok.sum() == 10
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    assert manifest["failed_sessions"] == ["s0001"]


def test_too_many_failed_sessions_stop_the_run_with_exit_1(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "s.yaml", soak_scenario(
        sessions=4, turns=20, retry={"max_attempts": 2, "backoff_s": 0.01},
        limits={"max_failed_sessions_frac": 0.25}))
    with TwinThread(faults="500:1.0") as twin:
        r = CliRunner().invoke(main, ["run", str(path), "--endpoint", twin.url,
                                      "--out", str(tmp_path / "r"), "--quiet"])
    assert r.exit_code == 1, r.output
    assert "sessions failed (limit 25%)" in r.output and "server_error" in r.output
    run_dir = Path(r.output.strip().splitlines()[-1])
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "failed"


def test_context_overflow_triggers_compaction_not_failure(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "s.yaml", soak_scenario(
        sessions=1, turns=40, compaction={"kind": "none"}, context_window_tokens=2400))
    with TwinThread(context_window=1500) as twin:
        r = CliRunner().invoke(main, ["run", str(path), "--endpoint", twin.url,
                                      "--out", str(tmp_path / "r"), "--quiet"])
    assert r.exit_code == 0, r.output
    df = pd.read_parquet(Path(r.output.strip().splitlines()[-1]) / "turns.parquet")
    over = df[df.error_type == "context_overflow"]
    assert len(over) >= 1 and df[df.ok].turn_index.nunique() == 40
    after = df.loc[df.index.isin(over.index + 1)]
    assert (after.compaction == "overflow:none").all() and after.ok.all()


@pytest.mark.parametrize(("status", "body", "ctype", "expect"), [
    (401, '{"type":"error","error":{"type":"authentication_error","message":"bad key"}}',
     "application/json", "auth"),
    (404, "<html><body>Not Found</body></html>", "text/html", "not_found"),
    (200, "<html><body>Welcome to nginx!</body></html>", "text/html", ""),
])
def test_not_an_anthropic_endpoint_fails_fast_with_one_line(tmp_path: Path, status: int,
                                                            body: str, ctype: str,
                                                            expect: str) -> None:
    path = write_yaml(tmp_path / "s.yaml", soak_scenario(sessions=2, turns=5,
                                                         retry={"max_attempts": 2, "backoff_s": 0.01}))
    with TwinThread(app=canned(status, body, ctype)) as srv:
        r = CliRunner().invoke(main, ["run", str(path), "--endpoint", srv.url,
                                      "--out", str(tmp_path / "r"), "--quiet"])
        sent = srv.messages
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and "status: failed" in r.output and expect in r.output
    run_dir = Path(r.output.strip().splitlines()[-1])
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "failed"
    assert len(pd.read_parquet(run_dir / "turns.parquet")) == sent <= 4


def test_unreachable_endpoint_fails_before_any_results_dir(tmp_path: Path) -> None:
    import socket
    path = write_yaml(tmp_path / "s.yaml", soak_scenario(sessions=1, turns=2))
    with socket.socket() as s:          # bound, never listening: refused, and ours meanwhile
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        r = CliRunner().invoke(main, ["run", str(path), "--endpoint", f"http://127.0.0.1:{port}",
                                      "--out", str(tmp_path / "r")])
    assert r.exit_code == 1 and "unreachable" in r.output and f"127.0.0.1:{port}" in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
