"""A run writes its typed manifest and every reader takes it back: what `execute`
returns is what the file holds, an older results directory still reports and
compares, and a hostile manifest is one line through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from simulator.cli import main
from simulator.records.manifest import parse_manifest, read_manifest
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from tests.conftest import small_scenario
from tests.reliability_twin import write_yaml

pytestmark = pytest.mark.timeout(120)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "manifests"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("manifest")
    scen = write_yaml(tmp / "s.yaml", small_scenario(turns=3, sessions=2))
    res = execute(RunSpec(str(scen), ["goodput.ttft_s=7"], out_dir=tmp / "runs",
                          show_progress=False), echo=lambda _: None)
    assert res.status == "completed"
    # the value the run returns is what its file holds, read back
    assert read_manifest(res.run_dir) == res.manifest
    return Path(res.run_dir)


def test_a_run_writes_every_fact_it_opened_with(finished: Path) -> None:
    raw = json.loads((finished / "manifest.json").read_text())
    m = parse_manifest(raw, "m")
    assert m.scenario == "small" and m.sessions == 2 and m.turns == 3 and m.simulated
    assert m.status == "completed" and m.rows == raw["rows"] and m.failed_sessions == ()
    assert m.scenario_resolved is not None and m.scenario_resolved.goodput is not None
    assert m.scenario_resolved.goodput.ttft_s == 7.0
    assert m.run_spec is not None and m.endpoint.kind == "twin-inprocess"
    assert m.to_json() == raw               # nothing lost or added on the way back
    summary = json.loads((finished / "summary.json").read_text())
    assert summary["goodput_slo"]["ttft_s"] == 7.0   # the run's SLO, passed as a value


def _one_line(r: Result) -> str:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


def _with_manifest(finished: Path, tmp_path: Path, data: object) -> Path:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    (run / "manifest.json").write_text(json.dumps(data))
    return run


def test_a_run_with_the_first_manifest_shape_is_read_summarised_and_paired(
        finished: Path, tmp_path: Path) -> None:
    from simulator.analysis.load import load_run, run_label, workload_identity
    from simulator.analysis.summary import summarize_run
    from simulator.analysis.target import describe_target
    old = json.loads((FIXTURES / "first_shape.json").read_text())
    run = _with_manifest(finished, tmp_path, old)
    manifest, turns, server = load_run(run)
    summary = summarize_run(manifest, turns, server)
    assert summary["simulated"] is True and summary["steady_state"] is not None
    assert summary["goodput_slo"] == {"ttft_s": 15.0, "output_tok_s": 30.0}   # the default
    assert run_label(manifest, run) == old["run_id"]
    assert describe_target(manifest).startswith("hardware a40, model qwen3-coder-30b-a3b")
    assert workload_identity(manifest) is not None


@pytest.mark.slow        # a report draws its plots (~4 s)
def test_a_run_with_the_first_manifest_shape_still_reports(finished: Path,
                                                           tmp_path: Path) -> None:
    old = json.loads((FIXTURES / "first_shape.json").read_text())
    run = _with_manifest(finished, tmp_path, old)
    r = CliRunner().invoke(main, ["report", str(run)])
    assert r.exit_code == 0, r.output
    page = (run / "report.html").read_text()
    assert "small (compaction: block)" in page and "SIMULATED" in page


@pytest.mark.parametrize(("change", "needle"), [
    ({"seed": "three"}, "field 'seed': expected an integer, got str"),
    ({"endpoint": ["x"]}, "field 'endpoint': expected an object, got list"),
    ({"scenario_resolved": {"load": {"warmup_s": -5}}}, "scenario_resolved.load: warmup_s"),
])
def test_a_hostile_manifest_is_one_line_to_report_and_watch(
        finished: Path, tmp_path: Path, change: dict[str, object], needle: str) -> None:
    raw = json.loads((finished / "manifest.json").read_text())
    run = _with_manifest(finished, tmp_path, {**raw, **change})
    assert needle in _one_line(CliRunner().invoke(main, ["report", str(run)]))
    r = CliRunner().invoke(main, ["watch", str(run), "--progress", "plain", "--speed", "0"])
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and needle in lines[0], r.output


def test_a_manifest_with_keys_missing_still_summarises(finished: Path, tmp_path: Path) -> None:
    from simulator.analysis.load import load_run
    from simulator.analysis.summary import summarize_run
    raw = json.loads((finished / "manifest.json").read_text())
    kept = {k: v for k, v in raw.items() if k in ("run_id", "status", "simulated")}
    manifest, turns, server = load_run(_with_manifest(finished, tmp_path, kept))
    assert summarize_run(manifest, turns, server)["usd_per_mtok"] is None   # no price
