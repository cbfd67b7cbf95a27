"""No import on a background thread (issue 23, item 5; issue 29's notebook case).

`prewarm_finalize` used to import pandas and the summary in a thread while the main
thread imported the same modules: Python's module-lock deadlock detection then hands
one thread a partially initialised module (`ImportError: cannot import name
'format_summary' from partially initialized module`), and the run stays `running`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, small_scenario

# Records every import made off the main thread, then runs the scenario via
# `simulator.run.execute.execute()` exactly as a script or notebook would: nothing from
# `simulator.analysis` imported first.
SCRIPT = textwrap.dedent("""
    import sys, threading
    off_main = []

    class Spy:
        def find_spec(self, name, path=None, target=None):
            if threading.current_thread() is not threading.main_thread():
                off_main.append((name, threading.current_thread().name))
            return None

    sys.meta_path.insert(0, Spy())
    from pathlib import Path
    from simulator.run.execute import execute
    from simulator.run.spec import RunSpec
    res = execute(RunSpec(sys.argv[1], out_dir=Path(sys.argv[2]),
                          show_progress=False), echo=lambda _line: None)
    assert "simulator.analysis.summary" in sys.modules
    print(res.status, sorted({n for n, _ in off_main if n.split(".")[0] in
                              ("simulator", "pandas", "pyarrow")}))
""")


def _scenario(tmp_path: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(small_scenario(sessions=2, turns=3)))
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.slow
def test_execute_from_a_fresh_interpreter_imports_nothing_off_the_main_thread(
        tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(_scenario(tmp_path)),
                        str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=120, env=_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["completed", "[]"], r.stdout


@pytest.mark.slow
def test_the_cli_on_the_twin_completes_every_time(tmp_path: Path) -> None:
    """The race struck 2 of 87 CLI runs: run the CLI repeatedly; each must complete
    with its summary written and no ImportError."""
    path = _scenario(tmp_path)
    for i in range(6):
        out = tmp_path / f"out{i}"
        r = subprocess.run([sys.executable, "-m", "simulator", "run", str(path), "--out",
                            str(out), "--quiet"], capture_output=True, text=True,
                           timeout=120, env=_env(), cwd=ROOT)
        assert r.returncode == 0 and "ImportError" not in r.stderr, r.stderr[-3000:]
        (run_dir,) = out.iterdir()
        assert (run_dir / "summary.json").exists()
