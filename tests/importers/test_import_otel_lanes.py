"""Issue 57 item 5 (hostile round five): overlapping requests of one session. 40,000 of
them hung the import (the lane search scanned every lane per request: quadratic);
9,000 became 9,000 parallel streams labelled "peak 1 session in flight". The lane
search is n log n, a session's streams in flight at once are bounded (refused in one
line, not capped), and the summary gives the true peaks of sessions and streams."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.errors import InputError
from simulator.importers import team
from simulator.importers.otel_events import TeamLog, TeamRequest
from tests.otel_export import DAY0, _iso, dumps_attrs

_reads = [0]


class _Counted(TeamRequest):
    """A request that counts every read of its fields: the lane search's work."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        _reads[0] += 1
        return object.__getattribute__(self, name)


def _overlapping(n: int, cls: type[TeamRequest] = TeamRequest,
                 session: str = "s") -> list[TeamRequest]:
    """`n` requests of one session and query source, each started before any reply."""
    return [cls(session, "agent", 1000.0 + i * 1e-3, 600.0, 5, 9000 + i, 100, 50, "m",
                f"r{i}") for i in range(n)]


def test_lane_search_work_grows_as_n_log_n() -> None:
    """Doubling the overlapping requests doubles the lane search's reads (a scan of
    every lane per request quadrupled them)."""
    work = []
    for n in (1000, 2000):
        reqs = _overlapping(n, _Counted)
        _reads[0] = 0
        got = team.lanes(reqs)
        work.append(_reads[0])
        assert len(got) == n
    assert work[1] < 2.5 * work[0], work


def _scan(reqs: list[TeamRequest]) -> list[list[TeamRequest]]:
    """The lane search as a scan of every lane (the reference the heap must equal)."""
    out: list[list[TeamRequest]] = []
    for r in reqs:
        free = [ln for ln in out
                if ln[-1].start_s + (ln[-1].api_s or 0.0) <= r.start_s + team.LANE_SLACK_S]
        if free:
            min(free, key=lambda ln: abs(ln[-1].prompt - r.cache_read)).append(r)
        else:
            out.append([r])
    return out


def test_heap_lanes_equal_the_scan() -> None:
    rng = random.Random(57)
    for _ in range(300):
        reqs = sorted((TeamRequest("s", "", round(rng.uniform(0, 60), 1),
                                   rng.choice([None, rng.uniform(0, 20)]), 1,
                                   rng.choice([0, 100, 200, 300]), rng.choice([0, 100]), 1,
                                   None, f"r{i}") for i in range(rng.randint(1, 40))),
                      key=lambda r: (r.start_s, r.where))
        assert team.lanes(reqs) == _scan(reqs)


@pytest.mark.timeout(120)
def test_40000_overlapping_requests_of_one_session_are_refused_at_once() -> None:
    with pytest.raises(InputError) as exc:
        team.streams(TeamLog(requests=_overlapping(40_000)))
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("r256: ") and "session 's'" in msg, msg
    assert "40,000 requests or streams in flight at once" in msg and "at most 256" in msg
    assert "not capped" in msg


@pytest.mark.timeout(120)
def test_40000_overlapping_requests_import_in_bounded_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a bound raised past them, the 40,000 lanes are built (n log n) and the
    true peak is 40,000 streams of 1 session."""
    monkeypatch.setattr(team, "MAX_STREAMS_PER_SESSION", 10**6)
    ss = team.streams(TeamLog(requests=_overlapping(40_000)))
    assert len(ss) == 40_000
    assert team.peak_at_once((s.start_s, s.end_s) for s in ss)[0] == 40_000
    assert team.peak_at_once(team.session_spans(ss).values())[0] == 1


def test_peak_at_once() -> None:
    assert team.peak_at_once([]) == (0, 0.0)
    assert team.peak_at_once([(0, 1), (1, 2), (3, 4)]) == (2, 1)   # touching overlaps
    assert team.peak_at_once([(0, 10), (2, 3), (2, 5), (6, 7)]) == (3, 2)
    rng = random.Random(5)
    for _ in range(200):
        spans = [(a, a + rng.choice([0, rng.uniform(0, 30)]))
                 for a in (round(rng.uniform(0, 100)) for _ in range(rng.randint(1, 20)))]
        naive = max(sum(1 for a, b in spans if a <= t <= b) for t, _ in spans)
        assert team.peak_at_once(spans)[0] == naive


def _file(path: Path, parallel: int, others: int = 1) -> Path:
    """One session `s` with `parallel` requests at once (one query source), and
    `others` sessions of one request beside them."""
    recs: list[dict[str, Any]] = []
    for i in range(parallel + others):
        end = DAY0 + 36_000 + 60 + i * 1e-3
        a = {"event.name": "api_request", "event.timestamp": _iso(end), "model": "m",
             "duration_ms": 60_000, "input_tokens": 10, "output_tokens": 100,
             "cache_read_tokens": 18_000, "cache_creation_tokens": 400,
             "session.id": "s" if i < parallel else f"o{i}", "query_source": "agent"}
        recs.append({"timeUnixNano": str(int(end * 1e9)),
                     "body": {"stringValue": "claude_code.api_request"},
                     "attributes": dumps_attrs(a)})
    path.write_text(json.dumps({"resourceLogs": [{"resource": {}, "scopeLogs": [
        {"scope": {}, "logRecords": recs}]}]}) + "\n")
    return path


def test_the_summary_gives_the_true_peaks(tmp_path: Path) -> None:
    p = _file(tmp_path / "par.jsonl", 100, others=2)
    r = CliRunner().invoke(main, ["import", "claude-code-otel", str(p), "-o",
                                  str(tmp_path / "o.yaml")])
    assert r.exit_code == 0, r.output
    assert "102 requests in 102 stream(s) of 3 session(s)" in r.output, r.output
    assert "peak 3 session(s) and 102 stream(s) in flight at once" in r.output, r.output


def test_too_many_parallel_requests_of_one_session_are_refused(tmp_path: Path) -> None:
    p = _file(tmp_path / "par.jsonl", 300)
    r = CliRunner().invoke(main, ["import", "claude-code-otel", str(p), "-o",
                                  str(tmp_path / "o.yaml")])
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert str(p) in lines[0] and "line 1, record 256" in lines[0], lines[0]
    assert "300 requests or streams in flight at once (at most 256 per session)" in lines[0]
    assert not (tmp_path / "o.yaml").exists()
