"""The load generator's Prometheus series from rows (`live/exporter.py`), and reading a
run directory while it is written (`live/follow.py`): torn lines, shard journals put on
the run's timeline, rows counted once across the merge."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from simulator.live.exporter import MetricsServer, RunMetrics, parse_bind
from simulator.live.follow import JournalTail, RunFollower
from simulator.live.view import LiveView, resolve_mode
from simulator.records.rows import TurnRecord


def _row(sid: str, turn: int, t0: float, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(output_tokens=100, ttft_s=0.2, e2e_s=2.2,
                                prompt_tokens=5000, cache_read_tokens=4000)
    base.update(kw)
    return TurnRecord("r1", sid, turn, base.pop("request_kind", "turn"),
                      base.pop("attempt", 1), 1e9 + t0, t0, 5000, 4500, 512, "t", 0.0,
                      **base).to_row()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, keyed by name and labels (prometheus_client's parser)."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def total(found: dict[tuple[str, Any], float], name: str, **labels: str) -> float:
    return sum(v for (n, lab), v in found.items() if n == name
               and all(dict(lab).get(k) == x for k, x in labels.items()))


def test_counters_equal_the_rows_and_carry_run_and_scenario() -> None:
    m = RunMetrics("r1", "claude-code-endurance", simulated=True, target="twin")
    rows = [_row("s0000", 0, 0.0), _row("s0000", 1, 3.0, compaction="block"),
            _row("s0000", 1, 6.0, compaction="block", attempt=2),          # a retry
            _row("s0001", 0, 1.0, ok=False, error_type="timeout", output_tokens=None,
                 e2e_s=30.0, ttft_s=None),
            _row("s0001", 0, 2.0, request_kind="summary", output_tokens=300),
            _row("s0001", 0, 2.0, request_kind="probe", probe_correct=True, fact_id="f"),
            _row("s0001", 0, 2.0, request_kind="probe", probe_correct=False, fact_id="g")]
    for r in rows:
        m.observe(r)
    m.set_gauges(2, 1)
    from prometheus_client import generate_latest
    found = samples(generate_latest(m.registry).decode())
    assert total(found, "endurance:requests_total") == len(rows)
    assert total(found, "endurance:requests_total", outcome="timeout") == 1
    ok = [r for r in rows if r["ok"]]
    assert total(found, "endurance:generation_tokens_total") == sum(
        r["output_tokens"] for r in ok)
    assert total(found, "endurance:prompt_tokens_total") == sum(r["prompt_tokens"] for r in ok)
    assert total(found, "endurance:cache_read_tokens_total") == sum(
        r["cache_read_tokens"] for r in ok)
    assert total(found, "endurance:compactions_total", kind="block") == 1   # once per turn
    assert total(found, "endurance:probes_total", outcome="correct") == 1
    assert total(found, "endurance:probes_total", outcome="wrong") == 1
    turns_ok = [r for r in ok if r["request_kind"] == "turn"]
    assert total(found, "endurance:time_to_first_token_seconds_count") == len(turns_ok)
    assert total(found, "endurance:time_to_first_token_seconds_sum") == pytest.approx(
        sum(r["ttft_s"] for r in turns_ok))
    assert total(found, "endurance:request_inter_token_latency_seconds_sum") == \
        pytest.approx(sum((r["e2e_s"] - r["ttft_s"]) / 99 for r in turns_ok))
    assert total(found, "endurance:sessions_active") == 2
    info = [lab for (n, lab) in found if n == "endurance:run_info"]
    assert dict(info[0]) == {"run": "r1", "scenario": "claude-code-endurance",
                             "simulated": "true", "target": "twin"}
    for (name, lab), _ in found.items():
        assert dict(lab).get("run") == "r1", name


def test_the_server_serves_the_registry_on_127_0_0_1_and_stops() -> None:
    m = RunMetrics("r2", "s")
    m.observe(_row("s0000", 0, 0.0))
    server = MetricsServer(m, 0)
    try:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url, timeout=5) as resp:
            found = samples(resp.read().decode())
        assert total(found, "endurance:requests_total") == 1
    finally:
        server.close()


@pytest.mark.parametrize(("value", "want"), [("9400", ("127.0.0.1", 9400)),
                                             ("0.0.0.0:0", ("0.0.0.0", 0)),
                                             ("[::1]:80", ("::1", 80))])
def test_parse_bind(value: str, want: tuple[str, int]) -> None:
    assert parse_bind(value) == want


@pytest.mark.parametrize("bad", ["x", "70000", "host:"])
def test_parse_bind_refuses(bad: str) -> None:
    with pytest.raises(ValueError, match="--metrics-port"):
        parse_bind(bad)


def test_the_dashboard_is_never_drawn_on_a_pipe() -> None:
    assert resolve_mode("auto", True) == "dashboard"
    assert resolve_mode("auto", False) == "plain"
    assert resolve_mode("dashboard", False) == "plain"
    assert resolve_mode("bar", False) == "off"
    import io
    out = io.StringIO()
    view = LiveView("dashboard", stream=out, every_s=0.0)
    assert view.mode == "plain"
    view.start()
    view.row(_row("s0000", 0, 0.0))
    view.refresh(3.0, force=True)
    view.close(3.0)
    text = out.getvalue()
    assert "\x1b" not in text and text.count("\n") == 2 and "requests 1" in text


def test_a_journal_tail_waits_for_the_newline_and_skips_garbage(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    tail = JournalTail(path)
    assert tail.read() == []                       # not there yet
    path.write_text('{"a": 1}\n{"b": ')
    assert tail.read() == [{"a": 1}]
    with path.open("a") as f:
        f.write('2}\nnot json\n[1]\n{"c": 3}\n')
    assert tail.read() == [{"b": 2}, {"c": 3}]
    assert tail.read() == []


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def test_shard_rows_land_on_the_run_timeline_once(tmp_path: Path) -> None:
    """Shard rows (loop clock from the shard's start, rate 1) are moved by wall clock
    and scaled to simulated time; the merged copy of a row is not counted again."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({
        "run_id": "r1", "status": "running", "started_at": 1000.0, "time_scale": 10.0}))
    # shard 1 started 2 wall seconds after the run; its row at 0.5 s on its own clock
    shard = {**_row("s0003", 0, 0.5, e2e_s=1.0, ttft_s=0.1), "started_at": 1002.5}
    _write(run / "workers" / "w1" / "turns.jsonl", [shard])
    f = RunFollower(run)
    got = f.poll().rows
    assert len(got) == 1
    assert got[0]["started_mono_s"] == pytest.approx(25.0)     # (2 + 0.5) × 10
    assert got[0]["e2e_s"] == pytest.approx(10.0) and got[0]["ttft_s"] == pytest.approx(1.0)
    # the parent merges: the same row (its merged copy) in the run's journal
    _write(run / "turns.jsonl", [{**shard, "started_mono_s": 25.0, "e2e_s": 10.0}])
    _write(run / "turns.jsonl", [_row("s0000", 0, 3.0)])
    assert [r["session_id"] for r in f.poll().rows] == ["s0000"]
    assert f.status() == "running" and not f.finished()
    (run / "manifest.json").write_text(json.dumps({"run_id": "r1", "status": "completed"}))
    (run / "summary.json").write_text("{}")
    assert f.finished()
