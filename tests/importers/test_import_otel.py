"""Telemetry imports (issue 52): a synthetic OTLP export of several sessions with known
sizes and times — Claude Code's events as JSON lines and as protobuf, GenAI spans as
both — imports to the same replay, every request's sizes and start times back; the
replay on the twin gives them back within 1% and 1 s (simulated); slices and scaling
keep what they promise; prompt texts are never kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from simulator.analysis.replay_fidelity import compare
from simulator.cli import main
from simulator.importers import team
from simulator.importers.team_import import import_team, parse_window
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario.load import load_scenario
from simulator.scenario.replay import ReplaySpec
from tests.otel_export import (
    DAY0,
    Day,
    team_day,
    write_genai,
    write_json_logs,
    write_proto_logs,
)


def _day() -> Day:
    return team_day(seed=7, sessions=5, requests=(4, 9), subagents=0.5)


def _expected(day: Day) -> dict[str, list[tuple[float, int, int, int, int]]]:
    """stream label → [(start Unix s, input, cache read, cache write, output)] by start."""
    out: dict[str, list[tuple[float, int, int, int, int]]] = {}
    for r in day.requests:
        label = r.session + (f"/{r.source}" if r.source else "")
        out.setdefault(label, []).append((r.start_s, r.input, r.cache_read, r.cache_write,
                                          r.output))
    return {k: sorted(v) for k, v in out.items()}


def _replay(tmp: Path, src: Path, source: str = "claude-code-otel", **kw: Any) -> ReplaySpec:
    out = tmp / f"{src.stem}-{source}.yaml"
    res = import_team([src], source, out_path=out, **kw)  # type: ignore[arg-type]
    return ReplaySpec.model_validate(res.data["replay"])


def _check_exact(spec: ReplaySpec, day: Day) -> None:
    want = _expected(day)
    assert spec.team is not None and spec.timing == "arrivals"
    t0 = DAY0 + spec.team.replay_start_s
    assert sorted(s.id for s in spec.sessions) == sorted(want)
    for s in spec.sessions:
        rows = want[s.id]
        assert len(s.calls) == len(rows)
        for call, (start, inp, read, write, out) in zip(s.calls, rows, strict=True):
            u = call.usage
            assert u is not None
            assert (u.input_tokens, u.cache_read_tokens, u.cache_creation_tokens,
                    u.output_tokens) == (inp, read, write, out)
            assert call.at_s is not None
            assert abs(t0 + s.start_offset_s + call.at_s - start) < 2e-3


def test_json_and_protobuf_exports_give_every_request_back(tmp_path: Path) -> None:
    day = _day()
    a = _replay(tmp_path, write_json_logs(tmp_path / "day.jsonl", day))
    b = _replay(tmp_path, write_proto_logs(tmp_path / "day.pb", day))
    _check_exact(a, day)
    assert a == b                       # one replay whatever the encoding


def test_genai_spans_json_and_protobuf(tmp_path: Path) -> None:
    day = _day()
    a = _replay(tmp_path, write_genai(tmp_path / "g.jsonl", day), "otel-genai")
    b = _replay(tmp_path, write_genai(tmp_path / "g.pb", day, proto=True), "otel-genai")
    _check_exact(a, day)
    assert a.sessions == b.sessions


def test_sub_agent_streams_are_their_own_sessions(tmp_path: Path) -> None:
    day = _day()
    assert any(r.source for r in day.requests)
    spec = _replay(tmp_path, write_json_logs(tmp_path / "d.jsonl", day))
    side = [s for s in spec.sessions if "/" in s.id]
    assert side and all(s.parent is None for s in side)
    assert spec.team is not None and spec.team.sessions == 5 and len(spec.sessions) > 5


def test_prompt_texts_are_dropped(tmp_path: Path) -> None:
    src = write_json_logs(tmp_path / "d.jsonl", _day(), prompt_text=True)
    out = tmp_path / "t.yaml"
    r = CliRunner().invoke(main, ["import", "claude-code-otel", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "prompt text(s) in the telemetry: dropped" in r.output
    assert "SECRET-PROMPT-TEXT" not in out.read_text()


@pytest.mark.slow
def test_replay_gives_sizes_within_1pct_and_arrivals_within_1s(tmp_path: Path) -> None:
    """The fidelity table's promise, measured on the in-process twin."""
    src = write_json_logs(tmp_path / "d.jsonl", _day())
    out = tmp_path / "team.yaml"
    r = CliRunner().invoke(main, ["import", "claude-code-otel", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    s, _ = load_scenario(out, [])
    assert s.replay is not None
    res = execute(RunSpec(str(out), [], out_dir=tmp_path / "runs", show_progress=False),
                  echo=lambda _: None)
    assert res.status == "completed"
    rows = pd.read_parquet(res.run_dir / "turns.parquet").to_dict("records")
    fid = compare(s.replay, rows)  # type: ignore[arg-type]
    f = fid.figures()
    assert f["requests_replayed"] == f["requests_recorded"] == len(_day().requests)
    assert f["prompt_error_max"] <= 0.01 and f["output_error_max"] <= 0.01
    assert f["arrival_error_max_s"] <= 1.0 and f["within_tolerance"]
    # this twin keeps the recorded pace: every request at its recorded start
    assert f["arrivals_held"] == 0
    assert all(e is not None and abs(e) <= 1.0 for e in (r.arrival_error_s for r in fid.requests))



@pytest.mark.slow
def test_a_team_run_prints_and_reports_its_fidelity(tmp_path: Path) -> None:
    src = write_json_logs(tmp_path / "d.jsonl", _day())
    out = tmp_path / "team.yaml"
    assert CliRunner().invoke(main, ["import", "claude-code-otel", str(src), "-o",
                                     str(out)]).exit_code == 0
    r = CliRunner().invoke(main, ["run", str(out), "--out", str(tmp_path / "runs")])
    assert r.exit_code == 0, r.output
    assert "replay fidelity" in r.output and "sessions in flight" in r.output
    run_dir = Path(r.output.strip().splitlines()[-1])
    r = CliRunner().invoke(main, ["report", str(run_dir)])
    assert r.exit_code == 0, r.output
    md = (run_dir / "report.md").read_text()
    assert "fidelity: within 1% and 1 s | yes" in md and "team_profile.png" in md


def test_window_busiest_and_scale(tmp_path: Path) -> None:
    day = team_day(seed=3, sessions=30, requests=(3, 6))
    src = write_json_logs(tmp_path / "d.jsonl", day)
    full = _replay(tmp_path, src)
    assert full.team is not None and full.team.day_sessions == 30
    w = _replay(tmp_path, src, window="10:00-11:00")
    assert w.team is not None and w.team.window == "10:00-11:00"
    starts = [DAY0 + w.team.replay_start_s + s.start_offset_s + (c.at_s or 0)
              for s in w.sessions for c in s.calls]
    assert starts and all(DAY0 + 36_000 <= t < DAY0 + 39_600 for t in starts)
    n_in = sum(DAY0 + 36_000 <= r.start_s < DAY0 + 39_600 for r in day.requests)
    assert len(starts) == n_in
    b = _replay(tmp_path, src, busiest_s=3600.0)
    n_b = sum(len(s.calls) for s in b.sessions)
    assert n_b >= n_in                   # the busiest hour holds at least any other's
    x2 = _replay(tmp_path, src, scale=2.0, seed=1)
    assert x2.team is not None and x2.team.day_sessions == 60
    again = _replay(tmp_path, src, scale=2.0, seed=1)
    assert again == x2                   # seeded
    assert _replay(tmp_path, src, scale=2.0, seed=2) != x2
    # resampled sessions: sizes of a source session, start moved, text not copied
    spans = x2.span_tokens
    assert len(spans) > len(full.span_tokens)


def test_parse_window_and_profile() -> None:
    assert parse_window("10:00-11:30") == (36_000.0, 41_400.0)
    for bad in ("10-11", "11:00-10:00", "25:00-26:00", "10:61-11:00"):
        with pytest.raises(Exception, match="--window"):
            parse_window(bad)
    day = team_day(seed=1, sessions=6, requests=(3, 4))
    from simulator.importers.otel_events import TeamLog, TeamRequest
    log = TeamLog(requests=[TeamRequest(r.session, r.source, r.start_s, r.api_s, r.input,
                                        r.cache_read, r.cache_write, r.output, None, "x")
                            for r in day.requests])
    ss = team.streams(log)
    prof = team.profile(ss, team.day_start(ss))
    assert max(prof) >= 1 and sum(prof) > 0
    assert len(prof) <= 24 * 3600 // team.PROFILE_STEP_S + 1


def test_cli_team_yaml_loads(tmp_path: Path) -> None:
    src = write_proto_logs(tmp_path / "d.pb", _day())
    out = tmp_path / "t.yaml"
    r = CliRunner().invoke(main, ["import", "claude-code-otel", str(src), "-o", str(out),
                                  "--busiest", "1h"])
    assert r.exit_code == 0, r.output
    assert "busiest 1h" in r.output
    data = yaml.safe_load(out.read_text())
    assert data["replay"]["timing"] == "arrivals" and data["replay"]["team"]["window"]


def test_in_flight_counts_each_overlapped_step() -> None:
    import random
    rng = random.Random(4)
    for _ in range(200):
        spans = [(a, a + rng.uniform(0, 4000)) for a in
                 (rng.uniform(0, 20_000) for _ in range(rng.randint(1, 30)))]
        got = team.in_flight(spans, 0.0, 300.0)
        naive = [sum(1 for a, b in spans if a // 300 <= i <= b // 300) for i in range(len(got))]
        assert got == naive and len(got) == int(max(b for _, b in spans) // 300) + 1


def test_overlapping_requests_of_one_stream_become_lanes() -> None:
    from simulator.importers.otel_events import TeamRequest

    def req(t: float, api: float, read: int, write: int) -> TeamRequest:
        return TeamRequest("s", "agent", t, api, 5, read, write, 50, None, f"r{t}")
    # two parallel sub-agents (same query source): A at 0 and 10, B at 1 and 11
    got = team.lanes([req(0, 5, 9000, 1000), req(1, 5, 9000, 2000),
                      req(10, 5, 10_005, 500), req(11, 5, 11_005, 500)])
    assert [[r.start_s for r in ln] for ln in got] == [[0, 10], [1, 11]]
    from simulator.importers.otel_events import TeamLog
    ss = team.streams(TeamLog(requests=[req(0, 5, 9000, 1000), req(1, 5, 9000, 2000)]))
    assert sorted(s.label for s in ss) == ["s/agent", "s/agent#2"]
