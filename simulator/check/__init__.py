"""`endurance check`: does an endpoint speak the Anthropic Messages API the way a
coding agent needs it (streaming grammar, usage, cache fields, tools, errors, metrics)?

`run_check(url)` returns a `CheckReport` of pass / warn / fail lines; the CLI prints it.
"""

from simulator.check.report import CheckReport, CheckResult, Status
from simulator.check.runner import run_check, run_check_async, validate_base_url

__all__ = ["CheckReport", "CheckResult", "Status", "run_check", "run_check_async",
           "validate_base_url"]
