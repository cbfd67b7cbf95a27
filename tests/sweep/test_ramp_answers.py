"""A ramp's answer stays true when the run is cut short (issue 49): an interrupted
`size --ramp` exits 130 with no answer line and a size.json labelled interrupted, no
probe search runs after it, `run --resume` rewrites the size folder's answer; goodput
follows the SLOs that name its quantities and says what it counted; a window no
request's first token fell in is never steady."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.analysis.goodput import GoodputSlo, goodput_label, goodput_of_slos
from simulator.analysis.ramp import Tier, verdict
from simulator.analysis.run_summary import RunSummary
from simulator.analysis.slo import parse_slo
from simulator.analysis.steady import Window
from simulator.cli import main
from simulator.cli.sweep_show import show_ramp as _show_ramp
from simulator.report.console import format_ramp
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import PointBase
from simulator.sweep.step_ramp import RampProfile, answer_of, refresh_size_answer, step_ramp

TIER = {"name": "SLOs", "slos": ["per_session_tok_s>=20"], "goodput": None, "sessions": 2,
        "complete": False, "binding": "per_session_tok_s>=20", "binding_kind": "throughput",
        "margin": 0.1, "confirmed": None}


def _ramp(n_steps: int, sessions: int = 2) -> dict[str, Any]:
    steps = [{"index": i, "sessions": 2 ** i, "phase": "ramp", "started_s": 60.0 * i,
              "steady": True, "passed": [True], "figures": {}} for i in range(n_steps)]
    return {"plan": {"steps": [1, 2, 4, 8], "hold_s": 60.0}, "steps": steps,
            "tiers": [{**TIER, "sessions": sessions}]}


def _result(status: str, ramp: dict[str, Any], run_dir: str = "/r") -> PointResult:
    point = Point("s.yaml", (), "/out", "ramp")
    summary = RunSummary.from_json({"ramp": ramp, "wall_window_s": 600.0, "simulated": True})
    return PointResult(point, run_dir, status, "", summary, 0.0, 1.0)


def _answer(status: str, ramp: dict[str, Any]) -> Any:
    plan = RampProfile(PointBase("s.yaml", (), Path("/out"), 1), step_ramp((1, 2), 60.0, 600.0,
                                                                         [])).plan(1)
    (point,) = next(plan)
    assert "load.duration_s=null" in point.overrides      # the ramp has its own length
    with pytest.raises(StopIteration) as done:
        plan.send([_result(status, ramp)])
    return done.value.value


def test_an_interrupted_ramp_is_no_answer(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    answer = _answer("interrupted", _ramp(2))
    assert answer.interrupted and answer.judged == 2
    assert _show_ramp(answer, tmp_path, as_json=False) == 130
    out, err = capsys.readouterr()
    assert out == ""                                  # no answer line to parse
    assert err.startswith("error: interrupted after 2 judged step(s): no answer")
    assert "run --resume /r" in err
    data = json.loads((tmp_path / "size.json").read_text())
    assert data["status"] == "interrupted" and data["interrupted"] is True
    (tier,) = data["ramp"]["tiers"]
    assert tier["sessions"] is None and tier["sessions_so_far"] == 2
    assert tier["binding"] is None and tier["complete"] is False


def test_an_interrupted_ramp_with_json_prints_the_labelled_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _show_ramp(_answer("interrupted", _ramp(0, 0)), tmp_path, as_json=True) == 130
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["status"] == "interrupted" and data["ramp"]["tiers"][0]["sessions"] is None
    assert "interrupted after 0 judged step(s)" in err


def test_a_completed_ramp_still_answers(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert _show_ramp(_answer("completed", _ramp(4)), tmp_path, as_json=False) == 0
    assert "SLOs: 2 session(s) meet" in capsys.readouterr().out
    assert json.loads((tmp_path / "size.json").read_text())["status"] == "completed"


def test_ctrl_c_during_the_ramp_runs_no_probe_search_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from simulator.sweep import pipeline
    ran: list[str] = []

    def fake(profile: Any, executor: Any, on_done: Any = None, runner: Any = None) -> Any:
        ran.append(type(profile).__name__)
        return answer_of({"ramp": _ramp(1), "wall_window_s": 60.0}, "/r", True)
    monkeypatch.setattr(pipeline, "run_profile", fake)
    scen = Path(__file__).resolve().parents[2] / "scenarios" / "claude-code-team.yaml"
    r = CliRunner().invoke(main, ["size", str(scen), "--slo", "per_session_tok_s>=20",
                                  "--ramp", "1,2", "--out", str(tmp_path)])
    assert r.exit_code == 130 and ran == ["RampProfile"], r.output
    assert "meet" not in r.stdout


def test_run_resume_rewrites_the_size_folders_answer(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "size-x" / "run-1"
    run_dir.mkdir(parents=True)
    (run_dir / "manifest.json").write_text("{}")
    first = answer_of({"ramp": _ramp(2)}, str(run_dir), True).to_dict()
    first["compared"] = [{"name": "probe search on the twin", "sessions": 8}]
    (run_dir.parent / "size.json").write_text(json.dumps(first))
    done = _ramp(4, sessions=8) | {"tiers": [{**TIER, "sessions": 8, "complete": True}]}
    from simulator.run import execute as ex
    monkeypatch.setattr(ex, "execute", lambda *a, **k: SimpleNamespace(
        run_dir=run_dir, summary={"ramp": done}, status="completed",
        manifest=SimpleNamespace(scenario_resolved=None)))     # not a team replay
    r = CliRunner().invoke(main, ["run", "--resume", str(run_dir)])
    assert r.exit_code == 0, r.output
    assert "ramp answer rewritten" in r.stderr
    data = json.loads((run_dir.parent / "size.json").read_text())
    assert data["status"] == "completed" and data["ramp"]["tiers"][0]["sessions"] == 8
    assert data["judged_steps"] == 4 and data["compared"] == first["compared"]


def test_refresh_leaves_other_folders_alone(tmp_path: Path) -> None:
    run_dir = tmp_path / "run-1"
    run_dir.mkdir()
    assert refresh_size_answer(run_dir, {"ramp": _ramp(1)}, "completed") is None
    (tmp_path / "size.json").write_text(json.dumps({"ramp": {}, "run_dir": "/elsewhere"}))
    assert refresh_size_answer(run_dir, {"ramp": _ramp(1)}, "completed") is None
    (tmp_path / "size.json").write_text("not json")
    assert refresh_size_answer(run_dir, {"ramp": _ramp(1)}, "completed") is None


def test_goodput_follows_the_slos_that_name_its_quantities() -> None:
    slos = [parse_slo("per_session_tok_s>=20"), parse_slo("ttft_p95_s<=5"),
            parse_slo("window_ttft_p50_s<=8")]
    assert goodput_of_slos(slos) == GoodputSlo(ttft_s=5.0, output_tok_s=20.0)
    assert goodput_of_slos([parse_slo("per_session_tok_s>=20")]) == \
        GoodputSlo(ttft_s=15.0, output_tok_s=20.0)
    assert goodput_of_slos([parse_slo("window_goodput_share>=0.9")]) is None
    assert goodput_label({"ttft_s": 5.0, "output_tok_s": 20.0}) == \
        "goodput (TTFT ≤ 5 s, ≥ 20 tok/s)"


def test_the_ramp_table_prints_goodputs_thresholds() -> None:
    ramp = _ramp(1) | {"goodput_slo": {"ttft_s": 15.0, "output_tok_s": 20.0}}
    assert "goodput (TTFT ≤ 15 s, ≥ 20 tok/s)" in format_ramp(ramp, True)


def test_size_gives_goodput_the_slos_thresholds_unless_the_scenario_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from simulator.sweep import api
    seen: list[tuple[str, ...]] = []
    def fake(base: Any, *_: Any, **__: Any) -> Any:
        seen.append(base.overrides)
        return answer_of({"ramp": _ramp(1)}, "/r", True)
    monkeypatch.setattr(api, "ramp", fake)
    scen = Path(__file__).resolve().parents[2] / "scenarios" / "claude-code-team.yaml"
    args = ["size", str(scen), "--slo", "per_session_tok_s>=20", "--ramp", "1,2",
            "--out", str(tmp_path)]
    CliRunner().invoke(main, args)
    CliRunner().invoke(main, [*args, "--set", "goodput.output_tok_s=30"])
    assert "goodput.output_tok_s=20.0" in seen[0] and "goodput.ttft_s=15.0" in seen[0]
    assert not any(o.startswith("goodput.ttft_s") for o in seen[1])


def test_a_window_no_request_fell_in_is_not_steady() -> None:
    figures = {"achieved_sessions": 2.0, "saturated": False, "window_requests": 0}
    v = verdict(0, 2, "ramp", 0.0, Window(10.0, 10.0005), figures, None,
                (Tier("SLOs", (parse_slo("ttft_p95_s<=5"),)),), pd.DataFrame())
    assert v.steady is False and v.passed == (False,)
    assert "no request's first token" in str(v.reason)


def test_an_interrupted_point_ends_a_search_with_no_answer(tmp_path: Path) -> None:
    from simulator.analysis.slo import parse_slo as slo
    from simulator.errors import Interrupted
    from simulator.sweep.card_size import SizeProfile
    from simulator.sweep.fanout import Serial
    from simulator.sweep.pipeline import run_profile
    ran: list[str] = []

    def runner(p: Point) -> PointResult:
        ran.append(p.label)
        return PointResult(p, "/r", "interrupted", "stopped by signal",
                           RunSummary.from_json({"steady_state": True}), 0.0, 1.0)
    profile = SizeProfile(PointBase("s.yaml", (), tmp_path, 1), (slo("ttft_p95_s<=5"),), 64)
    with pytest.raises(Interrupted, match="no answer") as exc:
        run_profile(profile, Serial(), runner=runner)
    assert exc.value.exit_code == 130 and len(ran) == 1     # no probe after the Ctrl-C


def test_the_summary_table_prints_goodputs_thresholds() -> None:
    from simulator.analysis.metrics_registry import table_rows
    rows = dict(table_rows({"goodput_slo": {"ttft_s": 5.0, "output_tok_s": 20.0},
                            "goodput_share": 0.5}))
    assert "goodput (TTFT ≤ 5 s, ≥ 20 tok/s): share / tok/s" in rows
    assert "goodput: share / tok/s" in dict(table_rows({"goodput_share": 0.5}))


def test_ctrl_c_in_the_probe_search_after_the_ramp_keeps_the_ramps_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from simulator.errors import Interrupted
    from simulator.sweep import pipeline

    def fake(profile: Any, executor: Any, on_done: Any = None, runner: Any = None) -> Any:
        if type(profile).__name__ == "RampProfile":
            return answer_of({"ramp": _ramp(4), "wall_window_s": 60.0}, "/r", False)
        raise Interrupted("interrupted at 4 sessions (/p): no answer")
    monkeypatch.setattr(pipeline, "run_profile", fake)
    scen = Path(__file__).resolve().parents[2] / "scenarios" / "claude-code-team.yaml"
    r = CliRunner().invoke(main, ["size", str(scen), "--slo", "per_session_tok_s>=20",
                                  "--ramp", "1,2", "--out", str(tmp_path)])
    assert r.exit_code == 130 and "SLOs: 2 session(s) meet" in r.stdout, r.output
    assert "its answer stands" in r.stderr
    (size_json,) = tmp_path.glob("size-*/size.json")
    data = json.loads(size_json.read_text())
    assert data["status"] == "completed" and "no answer" in data["compare_interrupted"]
