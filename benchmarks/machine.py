"""A one-line description of the machine, printed by every benchmark next to its figures."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def machine() -> str:
    """Host, OS, CPU model, core count, Python and the load average at the time."""
    model = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return (f"{platform.node()} | {platform.platform()} | {model} | {os.cpu_count()} cpus | "
            f"Python {platform.python_version()} | load average {load}")
