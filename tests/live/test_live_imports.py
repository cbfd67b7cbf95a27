"""The live view loads only when it draws (issue 50, item 7).

A run that draws nothing (`--progress off`, `bar`, `--quiet`, a library call) loads no
`simulator.live` module; `--progress plain` loads the view and its figures (it prints a
status line) but neither the dashboard's rich `Live` nor the exporter
(prometheus_client's registry, only with --metrics-port) nor a sharded run's follower.
Each check runs in a fresh interpreter (this one has imported everything), bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, small_scenario

# what a fresh interpreter holds of the live view after the code below ran
PROBE = textwrap.dedent("""
    import json, sys
    def loaded():
        return sorted(m for m in sys.modules
                      if m.startswith("simulator.live") or m == "rich.live")
""")

# the modules `endurance run` and `endurance sweep` import, and nothing run
IMPORTS = PROBE + textwrap.dedent("""
    import simulator.cli, simulator.cli.run, simulator.cli.sweep
    import simulator.run.execute, simulator.run.drive, simulator.run.shards
    print(json.dumps(loaded()))
""")

# `endurance run SCENARIO --out OUT --progress MODE` through the CLI's own entry point
RUN = PROBE + textwrap.dedent("""
    from simulator.cli import main
    scenario, out, mode = sys.argv[1:4]
    try:
        main(["run", scenario, "--out", out, "--progress", mode])
    except SystemExit as exc:
        code = exc.code
    print(json.dumps({"code": code, "loaded": loaded()}))
""")


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT)


def test_importing_run_and_sweep_loads_no_live_module() -> None:
    r = _python(IMPORTS)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.splitlines()[-1]) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["off", "bar", "plain"])
def test_a_run_loads_the_live_view_only_when_it_draws(tmp_path: Path, mode: str) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(small_scenario(sessions=1, turns=3)))
    r = _python(RUN, str(scenario), str(tmp_path / "out"), mode)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["code"] in (0, None), r.stderr[-3000:]
    (run_dir,) = (tmp_path / "out").iterdir()
    assert (run_dir / "summary.json").exists()
    if mode == "plain":     # a status line is drawn: the view, its figures, no more
        assert "[endurance] run: requests" in r.stderr, r.stderr[-3000:]
        assert "simulator.live.view" in got["loaded"]
        for absent in ("rich.live", "simulator.live.exporter", "simulator.live.follow",
                       "simulator.live.watch"):
            assert absent not in got["loaded"]
    else:                   # nothing drawn by the live view: nothing of it loaded
        assert got["loaded"] == []
