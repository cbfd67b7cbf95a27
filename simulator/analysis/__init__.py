"""Analysis of finished runs: summary maths, report, compare, sweep and sizing.

The maths (`summary`, `compare`, `sizing`) is pure pandas/numpy so notebooks call the
same functions as the CLI; `plots` and `render` draw and write files. Importing this
package does not import matplotlib.
"""

from __future__ import annotations

from simulator.analysis.load import load_run
from simulator.analysis.summary import format_summary, summarize, summarize_run

__all__ = ["format_summary", "load_run", "summarize", "summarize_run"]
