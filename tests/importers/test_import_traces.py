"""cc-traces (weka) and Mooncake import, replay on the twin, export and round trip."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.importers import trace_stream
from simulator.importers.trace_import import import_mooncake, import_weka
from simulator.importers.weka import read_trace
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario.load import load_scenario
from tests.trace_fixtures import make_trace, write_trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _run(path: Path, tmp: Path, *overrides: str) -> Path:
    res = execute(RunSpec(str(path), ["replay.timing=none", *overrides], out_dir=tmp / "runs",
                          show_progress=False), echo=lambda _: None)
    assert res.status == "completed"
    return res.run_dir


def _import(tmp: Path, trace: Path, name: str = "replay.yaml") -> Path:
    out = tmp / name
    r = CliRunner().invoke(main, ["import", "weka", str(trace), "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def _turns(run_dir: Path) -> pd.DataFrame:
    df = pd.read_parquet(run_dir / "turns.parquet")
    return df[(df.request_kind == "turn") & df.ok]


# ---------------------------------------------------------------- streaming reader
@pytest.mark.parametrize("chunk", [13, 256, 1 << 20])
def test_stream_reader_matches_json_load(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(trace_stream, "CHUNK", chunk)
    doc = make_trace(6, compact_at=None, clear_at=None)
    doc["after"] = {"x": [1.5, -2e3, True, None, "a\"b"]}
    text = json.dumps(doc, indent=1)
    got: dict[str, object] = {}
    items: list[object] = []
    for k, v in trace_stream.iter_object(io.StringIO(text), "requests"):
        if k == "requests":
            if v is not trace_stream.ITEMS:
                items.append(v)
        else:
            got[k] = v
    assert items == doc["requests"]
    assert got == {k: v for k, v in doc.items() if k != "requests"}


def test_streaming_holds_one_request_not_the_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace far bigger than one request is read in memory of about one request
    (plus the read buffer: 64 KiB here, 1 MiB by default)."""
    monkeypatch.setattr(trace_stream, "CHUNK", 1 << 16)
    path = tmp_path / "big.json"
    doc = make_trace(70, subagent=False, compact_at=None, clear_at=None)
    path.write_text(json.dumps(doc))
    size = path.stat().st_size
    assert size > 600_000
    tracemalloc.start()
    sessions, _ = read_trace(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(sessions[0].requests) == 70
    tracemalloc.start()
    with path.open() as fh:
        json.load(fh)
    _, whole = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < whole / 4, (peak, whole, size)


# ---------------------------------------------------------------- import
def test_import_keeps_sizes_timings_subagents_and_drops(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json", requests=40)
    res = import_weka([trace], out_path=tmp_path / "s.yaml")
    spec = res.data["replay"]
    main_s, sub = spec["sessions"]
    doc = make_trace(40)
    recorded = [r for r in doc["requests"] if r["type"] != "subagent"]
    assert [c["usage"]["input_tokens"] + c["usage"]["cache_read_tokens"]
            for c in main_s["calls"]] == [r["in"] for r in recorded]
    assert [c["usage"]["output_tokens"] for c in main_s["calls"]] == [r["out"] for r in recorded]
    assert [c["stop_reason"] for c in main_s["calls"]] == [r["stop"] for r in recorded]
    assert [c["model_s"] for c in main_s["calls"]] == [r["api_time"] for r in recorded]
    assert [c["wait_s"] for c in main_s["calls"][1:]] == [r["think_time"] for r in recorded[1:]]
    assert main_s["calls"][0]["model"] == "claude-sonnet-4-20250514"
    # the sub-agent: its own session, started by the parent call before its recorded start
    assert sub["parent"] == 0 and sub["parent_call"] == 40 // 3
    assert sub["start_offset_s"] > 0 and sub["calls"][0]["model"].startswith("claude-haiku")
    assert main_s["calls"][40 // 3]["spawns"] == [1]
    # the two recorded drops, of the inferred kinds
    points = {i: c["compaction"] for i, c in enumerate(main_s["calls"]) if "compaction" in c}
    assert {i: p["inferred"] for i, p in points.items()} == {25: "summarize",
                                                             33: "clear_tool_results"}
    assert points[25]["keep_messages"] == 0 and points[33]["keep_messages"] > 0
    assert res.summary["drops"] == {"clear_tool_results": 1, "summarize": 1}
    assert res.summary["requests"] == 48 and res.summary["subagents"] == 1


def test_public_fixtures_import() -> None:
    """Two real traces from kv-cache-tester (Apache-2.0, see fixtures/traces/NOTICE.md)."""
    res = import_weka([FIXTURES], out_path=FIXTURES / "x.yaml")
    assert res.summary["files"] == 2 and res.summary["requests"] == 6
    share = res.summary["implied_cache_read_share"]
    assert share is not None and 0.5 < share < 0.8


# ---------------------------------------------------------------- replay on the twin
def test_twin_reproduces_sizes_and_hash_implied_reuse(tmp_path: Path) -> None:
    path = _import(tmp_path, write_trace(tmp_path / "t.json", requests=40))
    s, _ = load_scenario(path, [])
    assert s.replay is not None
    df = _turns(_run(path, tmp_path))
    for i, script in enumerate(s.replay.sessions):
        got = df[df.session_id == f"s{i:04d}"].sort_values("turn_index").prompt_tokens
        rec = np.array([c.usage.prompt_tokens for c in script.calls if c.usage])
        assert len(got) == len(rec)
        assert float(np.max(np.abs(got.to_numpy() - rec) / rec)) < 0.02
    implied = import_weka([tmp_path / "t.json"], out_path=path).summary[
        "implied_cache_read_share"]
    server = df.cache_read_tokens.sum() / df.prompt_tokens.sum()
    assert abs(server - implied) < 0.05, (server, implied)
    assert (df.compaction == "recorded").sum() == 2


def test_live_policy_replaces_recorded_drops(tmp_path: Path) -> None:
    path = _import(tmp_path, write_trace(tmp_path / "t.json", requests=40))
    df = _turns(_run(path, tmp_path, "compaction.kind=block",
                     "compaction.high_water_tokens=60000", "compaction.low_water_tokens=30000"))
    assert (df.compaction == "block").any() and not (df.compaction == "recorded").any()
    assert df.prompt_tokens.max() < 60000 + 5000


# ---------------------------------------------------------------- export and round trip
def test_export_import_round_trip(tmp_path: Path) -> None:
    path = _import(tmp_path, write_trace(tmp_path / "t.json", requests=20, compact_at=12, clear_at=None))
    run = _run(path, tmp_path)
    cli = CliRunner()
    r = cli.invoke(main, ["export", "weka", str(run), "-o", str(tmp_path / "rt.json")])
    assert r.exit_code == 0, r.output
    r = cli.invoke(main, ["export", "mooncake", str(run), "-o", str(tmp_path / "rt.jsonl")])
    assert r.exit_code == 0, r.output
    df = _turns(run)
    want = {sid: (g.sort_values("turn_index").prompt_tokens.tolist(),
                  g.sort_values("turn_index").output_tokens.tolist())
            for sid, g in df.groupby("session_id")}
    back = import_weka([tmp_path / "rt.json"], out_path=tmp_path / "rt.yaml")
    moon = import_mooncake(tmp_path / "rt.jsonl", out_path=tmp_path / "rtm.yaml")
    for res in (back, moon):
        sessions = res.data["replay"]["sessions"]
        got = sorted(([c["usage"]["input_tokens"] + c["usage"]["cache_read_tokens"]
                       for c in s["calls"]], [c["usage"]["output_tokens"] for c in s["calls"]])
                     for s in sessions)
        assert got == sorted(want.values())
    # hash-implied reuse of the exported run = what the run's server read from cache
    server = df.cache_read_tokens.sum() / df.prompt_tokens.sum()
    for res in (back, moon):
        assert abs(res.summary["implied_cache_read_share"] - server) < 0.015, (res.summary,
                                                                                  server)
    # and the re-imported trace replays to the same per-request sizes
    df2 = _turns(_run(_import(tmp_path, tmp_path / "rt.json", "rt2.yaml"), tmp_path))
    a = df.sort_values(["session_id", "turn_index"]).prompt_tokens.to_numpy()
    b = df2.sort_values(["session_id", "turn_index"]).prompt_tokens.to_numpy()
    assert len(a) == len(b) and float(np.max(np.abs(a - b) / a)) < 0.02


def test_export_needs_block_journal(tmp_path: Path) -> None:
    path = _import(tmp_path, write_trace(tmp_path / "t.json", requests=5, subagent=False,
                                         compact_at=None, clear_at=None))
    run = _run(path, tmp_path, "record_blocks=false")
    r = CliRunner().invoke(main, ["export", "weka", str(run), "-o", str(tmp_path / "o.json")])
    assert r.exit_code == 2 and "record_blocks=true" in r.output


# ---------------------------------------------------------------- hostile input
@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d["requests"][3].update({"in": "lots"}), "field 'in'"),
    (lambda d: d["requests"][3].pop("hash_ids"), "field 'hash_ids': missing"),
    (lambda d: d["requests"][3].update({"type": "x"}), "field 'type'"),
    (lambda d: d["requests"][3].update({"think_time": -1}), "field 'think_time'"),
])
def test_bad_request_is_one_line_naming_file_index_field(tmp_path: Path, mutate: object,
                                                         field: str) -> None:
    doc = make_trace(6, subagent=False, compact_at=None, clear_at=None)
    mutate(doc)  # type: ignore[operator]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = CliRunner().invoke(main, ["import", "weka", str(bad), "-o", str(tmp_path / "o.yaml")])
    assert r.exit_code == 2
    line = r.output.strip()
    assert "\n" not in line and str(bad) in line and "request 3" in line and field in line, line


def test_truncated_file_and_directory_goes_on(tmp_path: Path) -> None:
    d = tmp_path / "traces"
    d.mkdir()
    write_trace(d / "a.json", requests=6, subagent=False, compact_at=None, clear_at=None)
    (d / "b.json").write_text(json.dumps(make_trace(6))[:-500])
    r = CliRunner().invoke(main, ["import", "weka", str(d / "b.json"), "-o", str(tmp_path / "x")])
    assert r.exit_code == 2 and "b.json" in r.output and len(r.output.strip().splitlines()) == 1
    r = CliRunner().invoke(main, ["import", "weka", str(d), "-o", str(tmp_path / "o.yaml")])
    assert r.exit_code == 0, r.output
    assert "skipped:" in r.output and "b.json" in r.output and "1 weka file(s)" in r.output


def test_mooncake_bad_row_and_sessions(tmp_path: Path) -> None:
    rows = [{"timestamp": 0, "input_length": 1500, "output_length": 20, "hash_ids": [0, 1, 2]},
            {"timestamp": 10, "session_id": "a", "input_length": 1100, "output_length": 5,
             "hash_ids": [0, 1, 3]},
            {"timestamp": 900, "session_id": "a", "delay": 300, "input_length": 1700,
             "output_length": 9, "hash_ids": [0, 1, 3, 4]}]
    p = tmp_path / "m.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    res = import_mooncake(p, out_path=tmp_path / "m.yaml")
    assert res.summary["sessions"] == 2 and res.summary["requests"] == 3
    a = res.data["replay"]["sessions"][1]
    assert a["start_offset_s"] == 0.01 and a["calls"][1]["wait_s"] == 0.3
    rows[2]["output_length"] = -4
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    r = CliRunner().invoke(main, ["import", "mooncake", str(p), "-o", str(tmp_path / "o.yaml")])
    assert r.exit_code == 2 and "request 2" in r.output and "output_length" in r.output


@pytest.mark.parametrize(("fmt", "body", "why"), [
    ("weka", b"[1, 2]", "expected '{'"),
    ("weka", b'{"requests":' + b"[" * 50_000 + b"]" * 50_000 + b"}", "nested deeper than 64"),
    ("weka", b'{"block_size": 64}', "field 'requests': missing"),
    ("mooncake", b"\xff\xfe{}\n", "not UTF-8"),
    ("mooncake", b'{"timestamp": 1}\n', "field 'hash_ids': missing"),
])
def test_hostile_files_one_line_exit_2(tmp_path: Path, fmt: str, body: bytes, why: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(body)
    r = CliRunner().invoke(main, ["import", fmt, str(bad), "-o", str(tmp_path / "o.yaml")])
    assert r.exit_code == 2 and why in r.output and len(r.output.strip().splitlines()) == 1, \
        r.output
    assert not (tmp_path / "o.yaml").exists()


def test_mooncake_prefix_tree_replays_its_implied_reuse(tmp_path: Path) -> None:
    """Independent requests (FAST'25 style) share text wherever their hash ids agree,
    so the twin's cache reads what the ids imply."""
    from tests.trace_fixtures import make_mooncake_tree
    p = tmp_path / "tree.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in make_mooncake_tree()))
    out = tmp_path / "tree.yaml"
    r = CliRunner().invoke(main, ["import", "mooncake", str(p), "-o", str(out)])
    assert r.exit_code == 0, r.output
    implied = import_mooncake(p, out_path=out).summary["implied_cache_read_share"]
    res = execute(RunSpec(str(out), [], out_dir=tmp_path / "runs", show_progress=False),
                  echo=lambda _: None)
    assert res.status == "completed"
    df = _turns(res.run_dir)
    assert len(df) == 60
    s, _ = load_scenario(out, [])
    assert s.replay is not None
    rec = np.array([c.calls[0].usage.prompt_tokens for c in s.replay.sessions if c.calls[0].usage])
    got = df.sort_values("session_id").prompt_tokens.to_numpy()
    assert float(np.max(np.abs(got - rec) / rec)) < 0.02
    server = df.cache_read_tokens.sum() / df.prompt_tokens.sum()
    assert implied > 0.4 and abs(server - implied) < 0.05, (server, implied)
