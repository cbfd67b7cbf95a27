"""Run `endurance …` in a child process bounded in time and memory (issue 29): a hostile
input must end in one line with the right exit code within `timeout_s`, inside an
address-space cap, or the helper says which bound it broke. `timeout_s` is wall time, a
hang guard with room for a loaded machine; a test that bounds the work itself asserts
the child's own CPU (`Outcome.cpu_s`)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEMORY_CAP_BYTES = 3 * 2**30      # address space of the child (Python + the twin)


@dataclass(frozen=True)
class Outcome:
    rc: int
    lines: list[str]
    seconds: float
    cpu_s: float = 0.0     # the child's own CPU (user + system): what a busy machine leaves alone

    @property
    def one_error_line(self) -> str:
        """The single `error: …` line, or AssertionError showing what came instead."""
        text = "\n".join(self.lines)
        assert "Traceback" not in text, text[-3000:]
        errors = [ln for ln in self.lines if ln.startswith("error: ")]
        assert len(errors) == 1 and len(self.lines) <= 2, text[-3000:]
        return errors[0]


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def endurance(*args: str, timeout_s: float = 30.0, cwd: Path | None = None) -> Outcome:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run([sys.executable, "-m", "simulator", *args], capture_output=True,
                           text=True, timeout=timeout_s, preexec_fn=_cap, env=env,
                           cwd=cwd or ROOT, errors="replace")
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"endurance {' '.join(args)[:200]}: still running after "
                             f"{timeout_s} s") from exc
    out = (p.stdout + p.stderr).strip()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Outcome(p.returncode, out.splitlines(), time.monotonic() - t0, cpu)
