"""`endurance size --interval` ended by Ctrl-C (issue 58), in a bounded subprocess: the
intervals judged so far are printed marked INTERRUPTED, never as the answer (exit 130).

The day sizes in about a second, so the test does not race it: the child is frozen
(SIGSTOP) on its first progress line, its progress file must show intervals still to
judge, and only then does it get Ctrl-C and run on. A machine so busy that the child
finished before it was frozen is tried again, a bounded number of times."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.sweep.team_hours import PROGRESS
from tests.sweep.test_team_hours_ray import _day

TRIES = 5


def _frozen_mid_day(cmd: list[str], res: Path) -> subprocess.Popen[str] | None:
    """The child stopped after its first progress line with intervals left; None if it
    got to the end first (it is then reaped)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    assert p.stderr is not None
    for line in p.stderr:                     # ends at the child's exit: bounded
        if "intervals judged" in line:
            p.send_signal(signal.SIGSTOP)
            try:                              # frozen mid-write: judge it again
                state = json.loads(next(res.glob(f"size-*/{PROGRESS}")).read_text())
            except ValueError:
                break
            if state["done"] < state["total"]:
                return p
            break
    p.send_signal(signal.SIGCONT)
    p.communicate(timeout=120)
    return None


@pytest.mark.slow
def test_ctrl_c_gives_the_intervals_judged_so_far(tmp_path: Path) -> None:
    scenario = _day(tmp_path)
    for i in range(TRIES):
        res = tmp_path / f"res{i}"
        cmd = [sys.executable, "-m", "simulator", "size", str(scenario), "--slo",
               "ttft_p95_s<=3", "--interval", "1h", "--out", str(res)]
        p = _frozen_mid_day(cmd, res)
        if p is not None:
            break
    else:
        pytest.fail(f"the day was sized before its first progress line, {TRIES} times")
    p.send_signal(signal.SIGINT)
    p.send_signal(signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (out, err[-2000:])
    assert "INTERRUPTED" in out and "NOT the answer" in out
    assert "card-hours per day" not in out        # no cost figures from a cut day
