"""`endurance size --interval` ended by Ctrl-C (issue 58), in a bounded subprocess: the
intervals judged so far are printed marked INTERRUPTED, never as the answer (exit 130)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.sweep.test_team_hours_ray import _day


@pytest.mark.slow
def test_ctrl_c_gives_the_intervals_judged_so_far(tmp_path: Path) -> None:
    scenario = _day(tmp_path)
    cmd = [sys.executable, "-m", "simulator", "size", str(scenario), "--slo",
           "ttft_p95_s<=3", "--interval", "1h", "--out", str(tmp_path / "res")]
    with (tmp_path / "err.txt").open("w") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                             env={**os.environ, "PYTHONPATH": str(Path.cwd())})
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and "intervals judged" not in \
                (tmp_path / "err.txt").read_text():
            time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, (out, (tmp_path / "err.txt").read_text()[-2000:])
    assert "INTERRUPTED" in out and "NOT the answer" in out
    assert "card-hours per day" not in out        # no cost figures from a cut day
