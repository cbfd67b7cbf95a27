"""The typed manifest (`records.manifest`): older shapes read and upgraded, unknown keys
written back as they were, a field of the wrong type one line naming it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from simulator.errors import InputError
from simulator.records.manifest import (
    Manifest,
    ResolvedScenario,
    RunSettings,
    parse_manifest,
    read_manifest,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "manifests"


def _run_dir(tmp_path: Path, fixture: str) -> Path:
    run = tmp_path / fixture.removesuffix(".json")
    run.mkdir()
    shutil.copy(FIXTURES / fixture, run / "manifest.json")
    return run


def test_the_first_shape_reads_with_defaults_for_what_it_lacks(tmp_path: Path) -> None:
    m = read_manifest(_run_dir(tmp_path, "first_shape.json"))
    assert (m.run_id, m.scenario, m.seed, m.sessions, m.compaction) == (
        "20250101-120000-small-ab12", "small", 3, 2, "block")
    assert m.simulated is True and m.price_per_hour == 0.44 and m.status == "completed"
    assert m.endpoint.kind == "twin-inprocess" and m.endpoint.hardware == "a40"
    # written before there was a load section, sampling, run_spec or verbatim flag
    assert m.load is None and m.sampling is None and m.run_spec is None
    assert m.contains_verbatim_content is False
    assert m.scenario_resolved is not None and m.scenario_resolved.sessions == 2
    assert m.scenario_resolved.load.ramp is None and m.scenario_resolved.goodput is None
    assert m.scenario_base_dir == "scenarios"        # the scenario file's folder
    assert m.endurance_version == "0.1.0" and not m.was_resumed


def test_older_variants_are_upgraded(tmp_path: Path) -> None:
    m = read_manifest(_run_dir(tmp_path, "legacy_variants.json"))
    assert m.scenario == "small" and m.scenario_hash == "h-legacy"   # {name, hash}
    assert m.overrides == ("turns=3",)                               # one string
    assert m.simulated is True                                       # an HTTP twin
    assert m.http_twin_hardware == "h100" and m.time_scale == 20.0
    assert m.scenario_base_dir == "/data/scenarios"
    assert m.was_resumed                                             # resumed_from
    assert m.extra["an_unknown_key"] == {"kept": [1, 2]}


def test_a_shards_session_range_is_upgraded_and_kept() -> None:
    m = parse_manifest({"run_id": "r", "worker": 1, "sessions": [2, 4], "pid": 7}, "m")
    assert (m.worker, m.session_range, m.pid, m.sessions) == (1, (2, 4), 7, None)
    assert parse_manifest(m.to_json(), "m") == m


def test_unknown_keys_round_trip_and_known_ones_keep_their_values(tmp_path: Path) -> None:
    for fixture in ("first_shape.json", "legacy_variants.json"):
        m = read_manifest(_run_dir(tmp_path, fixture))
        again = parse_manifest(json.loads(json.dumps(m.to_json())), "again")
        assert again == m
        raw = json.loads((FIXTURES / fixture).read_text())
        written = m.to_json()
        for key in ("run_id", "seed", "status", "endpoint", "versions", "an_unknown_key",
                    "resumed_from", "ended_at", "rows"):
            if key in raw:
                assert written[key] == raw[key], key


def test_a_full_manifest_round_trips() -> None:
    m = Manifest(run_id="r", label="l", scenario="s", scenario_hash="h", overrides=("a=1",),
                 seed=1, sessions=2, turns=3, simulated=True, price_per_hour=1.5,
                 run_spec=RunSettings(endpoint_url="http://h", stop_grace_s=2.0),
                 time_scale=2.0, http_twin={"hardware": "a40"}, server_max_model_len=4096,
                 workers=2, executor="local", status="failed", status_reason="why",
                 failed_sessions=("s0001",), telemetry=({"source": "dcgm"},),
                 resumes=({"at": 1.0},), clock_alignment={"max_error_s": 0.1},
                 started_at=1.0, ended_at=2.0, rows=4, extra={"later": True})
    assert parse_manifest(json.loads(json.dumps(m.to_json())), "m") == m


def test_a_missing_key_takes_its_default() -> None:
    m = parse_manifest({}, "m")
    assert m == Manifest()
    assert m.overrides == () and m.endpoint.url is None and m.status is None


@pytest.mark.parametrize(("data", "needle"), [
    ({"seed": "3"}, "field 'seed': expected an integer, got str"),
    ({"seed": True}, "field 'seed': expected an integer, got bool"),
    ({"simulated": "yes"}, "field 'simulated': expected true or false, got str"),
    ({"price_per_hour": "0.44"}, "field 'price_per_hour': expected a number, got str"),
    ({"endpoint": "http://x"}, "field 'endpoint': expected an object, got str"),
    ({"overrides": [1]}, "field 'overrides': expected a list of strings"),
    ({"scenario_resolved": []}, "field 'scenario_resolved': expected an object, got list"),
    ({"scenario_resolved": {"load": 5}}, "scenario_resolved.load: expected an object"),
    ({"scenario_resolved": {"load": {"duration_s": -1}}}, "scenario_resolved.load: duration_s"),
    ({"scenario_resolved": {"goodput": {"ttft_s": "x"}}}, "scenario_resolved.goodput: ttft_s"),
    ({"run_spec": {"stop_grace_s": "2"}}, "run_spec: field 'stop_grace_s'"),
    ({"telemetry": {"a": 1}}, "field 'telemetry': expected a list, got dict"),
    ({"load": {"cooldown_s": "x"}}, "RUN/manifest.json: load: cooldown_s"),
])
def test_a_field_of_the_wrong_type_is_one_line_naming_it(data: dict[str, Any],
                                                          needle: str) -> None:
    with pytest.raises(InputError) as got:
        parse_manifest(data, "RUN/manifest.json")
    line = str(got.value)
    assert line.startswith("RUN/manifest.json") and needle in line and "\n" not in line


@pytest.mark.parametrize(("content", "needle"), [
    ("{torn", "manifest.json:1: corrupted JSON"),
    ("[1, 2]", "manifest.json: expected a JSON object, got list"),
    (b"\xff\xfe", "manifest.json: unreadable"),
])
def test_a_file_that_is_no_manifest_is_one_line(tmp_path: Path, content: str | bytes,
                                                 needle: str) -> None:
    path = tmp_path / "manifest.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(InputError, match=needle.replace("[", r"\[")):
        read_manifest(tmp_path)


def test_a_missing_or_fifo_manifest_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="manifest.json: missing"):
        read_manifest(tmp_path)
    os.mkfifo(tmp_path / "manifest.json")
    with pytest.raises(InputError, match="not a regular file"):
        read_manifest(tmp_path)


def test_the_ramp_plan_is_typed() -> None:
    ramp = {"steps": [1, 2, 4], "hold_s": 60.0, "max_step_s": 600.0,
            "tiers": [{"name": "t", "slos": ["ttft_p95_s <= 5"]}]}
    m = parse_manifest({"scenario_resolved": {"load": {"ramp": ramp},
                                              "goodput": {"ttft_s": 5.0}}}, "m")
    assert m.scenario_resolved is not None
    plan = m.scenario_resolved.load.ramp
    assert plan is not None and plan.steps == [1, 2, 4] and plan.hold_s == 60.0
    assert plan.tiers[0].slos == ["ttft_p95_s <= 5"]
    goodput = m.scenario_resolved.goodput
    assert goodput is not None and (goodput.ttft_s, goodput.output_tok_s) == (5.0, 30.0)


def test_a_team_replays_manifest_reads_back_whatever_its_size(tmp_path: Path) -> None:
    """A manifest embeds its resolved scenario, and an imported day's interval holds
    tens of thousands of requests: the 100,000-request day's peak-hour probe wrote a
    35 MB manifest and then refused to read it back (more than 16 MiB) in a traceback."""
    from simulator.records.recorder import write_manifest
    day = {"requests": [{"at_s": float(i), "text": "x" * 400} for i in range(50_000)]}
    m = Manifest(run_id="r", scenario="day", scenario_resolved=ResolvedScenario(raw=day),
                 rows=50_000)
    write_manifest(tmp_path, m)
    assert (tmp_path / "manifest.json").stat().st_size > 16 * 2**20
    back = read_manifest(tmp_path)
    assert back.scenario_resolved is not None and back.scenario_resolved.raw == day
    assert back.rows == 50_000


def test_the_manifest_bound_holds_the_largest_scenario_a_run_accepts() -> None:
    from simulator.records.manifest import MAX_MANIFEST
    from simulator.scenario.load import MAX_FILE_BYTES
    assert MAX_MANIFEST >= 2 * MAX_FILE_BYTES
