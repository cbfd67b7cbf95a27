"""Issue 57 item 7: `run --resume` of a manifest whose `run_spec.twin` does not name a
twin blamed `--twin`, an option the user never gave; it names the manifest and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from tests.conftest import run_scenario, small_scenario
from tests.reliability.test_reliability_resume import cut


@pytest.mark.parametrize(("twin", "needle"), [
    ("bogus", "must look like HARDWARE/MODEL"),
    ("a40/nope", "unknown model 'nope'"),
    ("nocard/qwen3-coder-30b-a3b-awq", "nocard")])
def test_a_bad_manifest_twin_names_the_manifest(write_scenario,  # type: ignore[no-untyped-def]
                                                tmp_path: Path, twin: str,
                                                needle: str) -> None:
    res = run_scenario(write_scenario(small_scenario(turns=3)), tmp_path / "a")
    cut(res.run_dir, 1)
    mf = res.run_dir / "manifest.json"
    m = json.loads(mf.read_text())
    m["run_spec"] = {**(m.get("run_spec") or {}), "twin": twin}
    mf.write_text(json.dumps(m))
    r = CliRunner().invoke(main, ["run", "--resume", str(res.run_dir), "--quiet"])
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert lines[0].startswith(f"error: {mf}: run_spec.twin") and needle in lines[0], lines[0]
    assert "--twin" not in lines[0]
